// libFuzzer target: tokenizer encode/decode with the real vocabularies (llama-spm: SPM,
// gpt-2: byte-level BPE) from the models dir (env ARI_MODELS_DIR, else the configured
// one). The tokenizers are built once; without the vocab files every input is a no-op.
//
// Checks per input: ids in range; Decode(Encode(s)) == s for valid UTF-8 text without
// parse_special (SPM: text without U+2581, which SPM uses for the space); StreamDecoder
// output == the UTF-8-sanitised Decode (one U+FFFD per maximal invalid subpart), both for
// the encoded ids and for arbitrary in-range ids derived from the input bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

#ifndef ARI_FUZZ_MODELS_DIR
#define ARI_FUZZ_MODELS_DIR ""
#endif

namespace {

using namespace ari::runtime;

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  bool spm = false;
};

std::vector<Vocab> LoadVocabs() {
  const char* env = std::getenv("ARI_MODELS_DIR");
  const std::filesystem::path dir = (env != nullptr && *env != '\0') ? env : ARI_FUZZ_MODELS_DIR;
  std::vector<Vocab> out;
  for (const char* name : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"}) {
    auto file = GgufFile::Open(dir / name);
    if (!file) continue;
    auto tok = Tokenizer::FromGguf(*file);
    if (!tok) __builtin_trap();  // a shipped vocabulary must load
    const bool spm = (*tok)->Model() == "llama";
    out.push_back(Vocab{std::move(*tok), spm});
  }
  std::fprintf(stderr, "tokenizer_fuzz: %zu vocabularies from %s%s\n", out.size(), dir.c_str(),
               out.empty() ? " (none found: every input is a no-op)" : "");
  return out;
}

// Length of the maximal well-formed prefix of a UTF-8 sequence at s[i] (Unicode 15, table
// 3-7), or 0 when s[i..] starts a sequence that is complete and valid: returns the valid
// length via *len, and whether it is valid.
// An independent oracle on purpose, not runtime/core/utf8.h: the decoders built on that
// file are checked against the Unicode table here, not against themselves.
bool NextUtf8(std::string_view s, size_t i, size_t* len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *len = 1;
    return true;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *len = 1;
    return false;
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) break;
    const uint8_t x = b(k);
    if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF)) break;
  }
  *len = k;
  return k == need + 1;
}

std::string Sanitise(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (NextUtf8(s, i, &len))
      out.append(s.substr(i, len));
    else
      out.append("\xEF\xBF\xBD");
    i += len;
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (!NextUtf8(s, i, &len)) return false;
    i += len;
  }
  return true;
}

void CheckDecoders(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  for (bool special : {false, true}) {
    const std::string whole = tok.Decode(ids, special);
    StreamDecoder stream(tok, special);
    std::string streamed;
    for (TokenId id : ids) stream.Push(id, streamed);
    stream.Flush(streamed);
    if (streamed != Sanitise(whole)) __builtin_trap();
  }
}

void FuzzOne(const Vocab& v, std::string_view text, uint8_t flags) {
  const Tokenizer& tok = *v.tok;
  const int32_t n_vocab = tok.VocabSize();
  for (bool parse_special : {false, true}) {
    EncodeOptions opts;
    opts.parse_special = parse_special;
    opts.add_bos = !parse_special && (flags & 1) != 0;
    opts.add_eos = parse_special && (flags & 2) != 0;
    auto ids = tok.Encode(text, opts);
    if (!ids) continue;  // a clear error is fine
    for (TokenId id : *ids) {
      if (id < 0 || id >= n_vocab) __builtin_trap();
    }
    if (!parse_special && !opts.add_bos && IsValidUtf8(text) &&
        (!v.spm || text.find("\xE2\x96\x81") == std::string_view::npos)) {
      if (tok.Decode(*ids) != text) __builtin_trap();
    }
    CheckDecoders(tok, *ids);
  }
  // Arbitrary in-range id sequences from the input bytes (2 bytes per id).
  std::vector<TokenId> ids;
  for (size_t i = 0; i + 1 < text.size() && ids.size() < 512; i += 2) {
    const uint32_t raw = static_cast<uint8_t>(text[i]) | (static_cast<uint8_t>(text[i + 1]) << 8);
    const TokenId id = static_cast<TokenId>(raw % static_cast<uint32_t>(n_vocab));
    ids.push_back(id);
    (void)tok.TokenToPiece(id, true);
    (void)tok.Attr(id);
    (void)tok.IsEog(id);
    if (tok.FindToken(tok.TokenText(id)) < 0) __builtin_trap();
  }
  CheckDecoders(tok, ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Vocab> vocabs = LoadVocabs();
  if (vocabs.empty()) return 0;
  // The whole input is the text (seeds are plain text); options come from its length.
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Vocab& v : vocabs) FuzzOne(v, text, static_cast<uint8_t>(size & 3));
  return 0;
}
