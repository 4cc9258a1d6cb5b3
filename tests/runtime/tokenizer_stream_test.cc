// StreamDecoder: incremental UTF-8 safe detokenization. Multi-byte characters split over
// byte tokens (SPM byte fallback, GPT-2 byte-level pieces) come out whole, the stream equals
// the whole-sequence decode, invalid bytes become U+FFFD, and Push() does not allocate.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/counting_allocator.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

// Independent strict UTF-8 check.
bool ValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::unique_ptr<Tokenizer> Load(const std::filesystem::path& p) {
  auto file = GgufFile::Open(p);
  if (!file) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  return tok ? std::move(*tok) : nullptr;
}

const char* kText =
    "Hello \xF0\x9F\xA6\x99 world \xF0\x9F\x98\x81 \xD0\xBD\xD0\xB5\xD1\x89\xD0\xBE "
    "\xE6\x88\x91\xE6\x83\xB3\xE5\x9C\xA8"
    "apple \xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B "
    "\xF0\x9F\x9A\x80 (normal) \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F";

// Streams `ids`; every chunk must be valid UTF-8 and the whole must equal Decode(ids).
void CheckStream(const Tokenizer& tok, const std::vector<TokenId>& ids, int& held_back) {
  StreamDecoder dec(tok);
  std::string all;
  for (TokenId id : ids) {
    std::string chunk;
    dec.Push(id, chunk);
    EXPECT_TRUE(ValidUtf8(chunk)) << "broken UTF-8 after token " << id;
    if (chunk.empty() && !tok.Piece(id).empty()) ++held_back;
    all += chunk;
  }
  std::string rest;
  dec.Flush(rest);
  EXPECT_EQ(rest, "");
  EXPECT_EQ(all, tok.Decode(ids));
}

class StreamVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamVocab, SplitCharactersComeOutWholeAndEqualDecode) {
  const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
  ARI_REQUIRE_MODEL(path, rel);
  auto tok = Load(path);
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode(kText, EncodeOptions{});
  ASSERT_TRUE(ids.has_value());
  int held_back = 0;
  CheckStream(*tok, *ids, held_back);
  EXPECT_GT(held_back, 0) << "the text should split some characters over several tokens";
  EXPECT_EQ(tok->Decode(*ids), kText);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, StreamVocab, ::testing::Values("llama-spm", "gpt-2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  ARI_REQUIRE_MODEL(path, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(path);
  ASSERT_NE(tok, nullptr);
  auto byte = [&](int b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    return tok->FindToken(buf);
  };
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder dec(*tok);
  std::string out;
  dec.Push(byte(0xF0), out);  // lead of a 4-byte sequence...
  EXPECT_EQ(out, "");
  dec.Push(byte(0x41), out);  // ...broken by 'A'
  EXPECT_EQ(out, fffd + "A");
  out.clear();
  dec.Push(byte(0x80), out);  // lone continuation byte
  EXPECT_EQ(out, fffd);
  out.clear();
  dec.Push(byte(0xE2), out);
  dec.Push(byte(0x82), out);
  EXPECT_EQ(out, "");
  dec.Flush(out);  // truncated at the end
  EXPECT_EQ(out, fffd);
  out.clear();
  dec.Push(byte(0xED), out);  // surrogate range: invalid second byte
  dec.Push(byte(0xA0), out);
  EXPECT_EQ(out, fffd + fffd);
  out.clear();
  dec.Push(byte(0xE2), out);  // € split over three byte tokens
  dec.Push(byte(0x82), out);
  EXPECT_EQ(out, "");
  dec.Push(byte(0xAC), out);
  EXPECT_EQ(out, "\xE2\x82\xAC");
}

TEST(StreamDecoder, LeadingSpaceAfterBosAndReset) {
  ARI_REQUIRE_MODEL(path, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(path);
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode("Hello world", EncodeOptions{});
  ASSERT_TRUE(ids.has_value());
  ASSERT_EQ(ids->front(), tok->Bos());
  StreamDecoder dec(*tok);
  std::string out;
  for (TokenId id : *ids) dec.Push(id, out);
  EXPECT_EQ(out, "Hello world");
  dec.Reset();
  out.clear();
  for (TokenId id : *ids) dec.Push(id, out);
  EXPECT_EQ(out, "Hello world");
  StreamDecoder special(*tok, /*special=*/true);
  out.clear();
  for (TokenId id : *ids) special.Push(id, out);
  EXPECT_EQ(out, "<s>Hello world");
}

TEST(StreamDecoder, PushDoesNotAllocate) {
  ARI_REQUIRE_MODEL(path, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(path);
  ASSERT_NE(tok, nullptr);
  auto ids = tok->Encode(kText, EncodeOptions{});
  ASSERT_TRUE(ids.has_value());
  StreamDecoder dec(*tok);
  std::string out;
  out.reserve(size_t{64} * 1024);
  {
    testing::CountAllocations probe;
    ::operator delete(::operator new(16));  // the counter itself works
    EXPECT_EQ(probe.count(), 1);
  }
  testing::CountAllocations allocations;
  for (int rep = 0; rep < 50; ++rep) {
    for (TokenId id : *ids) dec.Push(id, out);
    dec.Flush(out);
  }
  EXPECT_EQ(allocations.count(), 0);
  EXPECT_LT(out.size(), out.capacity() + 1);
}

}  // namespace
}  // namespace ari::runtime
