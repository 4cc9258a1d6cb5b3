// Tokenizers built from GGUF metadata (tokenizer.ggml.*):
//  - "llama": SentencePiece-style BPE with scores, byte fallback, leading space.
//  - "gpt2":  byte-level BPE with merges and a pre-tokenizer chosen by tokenizer.ggml.pre.
// Results match llama.cpp's tokenizer test vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

class GgufFile;

enum class TokenAttr : uint8_t {  // tokenizer.ggml.token_type values
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct EncodeOptions {
  bool add_bos = true;   // prepend BOS when the vocab says so (tokenizer.ggml.add_bos_token)
  bool add_eos = false;  // append EOS (explicit request; AddEosByDefault() tells the vocab's wish)
  // Recognise control/unknown token texts inside the input (longest first, as llama.cpp's
  // tokenizer_st_partition). User-defined tokens are always recognised, as in llama.cpp.
  bool parse_special = false;
};

// Everything a tokenizer is built from: what tokenizer.ggml.* holds in a GGUF, decoded.
// FromGguf() fills one of these; tests and converters may build one by hand.
struct VocabSpec {
  std::string model = "llama";  // "llama" (SPM) or "gpt2" (byte-level BPE)
  std::string pre;              // tokenizer.ggml.pre; empty -> "default"
  std::string name;             // general.name (llama.cpp keys some token attributes on it)
  std::vector<std::string> tokens;
  std::vector<float> scores;         // empty -> all 0
  std::vector<int32_t> token_types;  // TokenAttr values; empty -> all kNormal
  std::vector<std::string> merges;   // "left right", rank = index (gpt2 only)
  // Special ids; -1 keeps the model's default (SPM: bos 1, eos 2, unk 0; gpt2: bos/eos 11).
  int64_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1;
  int add_bos = -1, add_eos = -1, add_space_prefix = -1;  // -1: model default, 0/1: set
};

class Tokenizer {
 public:
  // kNotFound without tokenizer.ggml.model/tokens; kUnsupported for another model than
  // llama/gpt2 or an unknown tokenizer.ggml.pre (a missing pre means "default", as in
  // llama.cpp); kFormat for inconsistent arrays. Messages name the file.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  // Reads the tokenizer.* keys of `file` into a VocabSpec (no validation beyond types/sizes).
  static Result<VocabSpec> SpecFromGguf(const GgufFile& file);
  // Validates `spec` and builds the tokenizer (kFormat / kUnsupported on bad input).
  static Result<std::unique_ptr<Tokenizer>> FromSpec(VocabSpec spec);
  virtual ~Tokenizer() = default;

  virtual Result<std::vector<TokenId>> Encode(std::string_view text,
                                              const EncodeOptions& opts) const = 0;
  // The bytes a token stands for (byte tokens give their raw byte; no leading-space
  // handling: see Decode). Not necessarily valid UTF-8 alone.
  virtual std::string TokenToPiece(TokenId id, bool special = false) const = 0;
  // The same bytes without allocating: a view into a cache built at load time
  // (control/unknown tokens give "" unless `special`). Empty for out-of-range ids.
  virtual std::string_view Piece(TokenId id, bool special = false) const = 0;
  // Whole-sequence decode (valid UTF-8 is the caller's concern; bytes are exact).
  // SPM with add_space_prefix: the leading space of the first text piece is removed (a
  // leading BOS does not count as the first piece), so Decode(Encode(s)) == s.
  // No "clean spaces" post-processing is done (llama.cpp does it for some BPE vocabs).
  std::string Decode(const std::vector<TokenId>& ids, bool special = false) const;
  // Piece(id, special) with the leading-space rule above applied through `strip_pending`
  // (initialise it with AddSpacePrefix()). Used by Decode and StreamDecoder; no allocation.
  std::string_view NextPiece(TokenId id, bool special, bool& strip_pending) const;
  // Whether `id` is the piece the pending strip applies to (any id with text but BOS).
  bool TakesLeadingSpace(TokenId id, bool special) const;

  virtual int32_t VocabSize() const = 0;
  virtual TokenId Bos() const = 0;            // -1 when none
  virtual TokenId Eos() const = 0;            // -1 when none
  virtual TokenId Eot() const { return -1; }  // end-of-turn (e.g. <|eot_id|>, <|im_end|>)
  virtual bool IsEog(TokenId id) const = 0;   // end of generation (EOS, EOT, ...)
  virtual TokenAttr Attr(TokenId id) const = 0;
  virtual bool AddBosByDefault() const = 0;
  virtual std::string_view Model() const = 0;  // "llama" / "gpt2"
  virtual std::string_view Pre() const = 0;    // pre-tokenizer name ("default", "llama-bpe"...)

  virtual TokenId Unk() const = 0;  // -1 when none
  virtual TokenId Pad() const = 0;  // -1 when none
  virtual bool AddEosByDefault() const = 0;
  virtual bool AddSpacePrefix() const = 0;  // SPM: a space is put before the text
  // Raw vocabulary entry (as stored in tokenizer.ggml.tokens); "" when out of range.
  virtual std::string_view TokenText(TokenId id) const = 0;
  // Id of the vocabulary entry whose raw text is exactly `text`, or -1.
  virtual TokenId FindToken(std::string_view text) const = 0;
};

// Incremental, UTF-8 safe detokenizer for streaming: Push() appends only the complete
// UTF-8 characters available so far and holds back an incomplete trailing sequence;
// Flush() appends what is left. Bytes that can never form a valid character are replaced
// by U+FFFD (one per maximal invalid subpart) as soon as they are known to be invalid, so
// Push()...+Flush() == the UTF-8-sanitised Decode() of the same ids. Never allocates
// itself (at most 3 pending bytes, kept in the string's inline buffer); `out` grows only
// when the caller did not reserve it.
//
// Leading space (SPM with add_space_prefix): a decoder streams the continuation of the ids
// given to Reset(context), so Decode(context + ids) == Decode(context) + the streamed text.
// After a prompt with text the first generated piece keeps its space ("at the" + " park"),
// as llama.cpp streams it; only when nothing before it has text (a fresh decoder, or a
// context of BOS alone) is the space stripped, as llama2.c and SentencePiece decode do
// (llama.cpp keeps it there too: "<s> Once", where llama2.c prints "Once").
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false);
  // Appends the text of `id` to `out` (only complete characters).
  void Push(TokenId id, std::string& out);
  void Flush(std::string& out);
  // Starts a new stream that continues `context` (e.g. the prompt's ids; empty: a new
  // sequence). Drops held-back bytes; reads `context` only up to its first piece with text.
  void Reset(std::span<const TokenId> context = {});

 private:
  void Feed(std::string_view bytes, std::string& out);

  const Tokenizer* tok_;
  bool special_;
  bool first_ = true;    // leading-space strip still pending (see Tokenizer::NextPiece)
  std::string pending_;  // incomplete UTF-8 sequence, at most 3 bytes (fits SSO: no heap)
};

}  // namespace ari::runtime
