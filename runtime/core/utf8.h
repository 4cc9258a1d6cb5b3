// UTF-8, written once: strict validation and decoding (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF, the same rules as protobuf's and ICU's checks),
// encoding, boundary-safe truncation, and the lenient sequence length of llama.cpp's
// tokenizers. Used by the tokenizers (runtime/tokenizer), request validation and
// streaming (component/node), and drive-log checks (sim). No allocation but AppendUtf8's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ari::runtime {

// Length of the sequence a lead byte starts (1-4), 0 when it cannot start one
// (continuation bytes, C0/C1, F5-FF).
size_t Utf8LeadLength(uint8_t lead);

// Whether `b` may be continuation byte number `index` (1, 2 or 3) of a sequence that
// starts with `lead`. The second byte's range depends on the lead (E0: A0-BF no overlong,
// ED: 80-9F no surrogates, F0: 90-BF no overlong, F4: 80-8F at most U+10FFFF).
bool Utf8ValidContinuation(uint8_t lead, size_t index, uint8_t b);

struct Utf8Decoded {
  uint32_t code_point = 0;
  size_t length = 1;  // bytes consumed; 1 for an invalid byte
  bool valid = false;
};
// Decodes the code point starting at text[i] (i < text.size()), strictly.
Utf8Decoded DecodeUtf8At(std::string_view text, size_t i);

bool IsValidUtf8(std::string_view text);

// Longest prefix of at most `max` bytes that does not end inside a multi-byte sequence
// (never 0 for max > 3: a cut that would leave nothing keeps `max` bytes).
size_t Utf8Prefix(std::string_view text, size_t max);

// Appends the UTF-8 form of `cp` (< 0x110000).
void AppendUtf8(uint32_t cp, std::string& out);

// Byte length of the sequence that starts with `c`, judged by its high bits only (as
// llama.cpp's unicode_len_utf8: continuation and invalid bytes count as 1). For
// splitting text into characters the way the reference tokenizers do, not validation.
inline size_t Utf8SeqLen(char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(c) >> 4];
}

}  // namespace ari::runtime
