// Tokenizers built from GGUF metadata (tokenizer.ggml.*):
//  - "llama": SentencePiece-style BPE with scores, byte fallback, leading space.
//  - "gpt2":  byte-level BPE with merges and a pre-tokenizer chosen by tokenizer.ggml.pre.
// Results match llama.cpp's tokenizer test vectors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.h"

namespace ari::runtime {

class GgufFile;

using TokenId = int32_t;

enum class TokenAttr : uint8_t {  // tokenizer.ggml.token_type values
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
  kByte = 6,
};

struct EncodeOptions {
  bool add_bos = true;        // prepend BOS when the vocab says so (tokenizer.ggml.add_bos_token)
  bool add_eos = false;
  bool parse_special = false; // recognise control/user-defined token texts inside the input
};

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);
  virtual ~Tokenizer() = default;

  virtual Result<std::vector<TokenId>> Encode(std::string_view text,
                                              const EncodeOptions& opts) const = 0;
  // The bytes a token stands for when it follows `prev` (SPM strips the leading space
  // after BOS; byte tokens give their raw byte). Not necessarily valid UTF-8 alone.
  virtual std::string TokenToPiece(TokenId id, bool special = false) const = 0;
  // Whole-sequence decode (valid UTF-8 is the caller's concern; bytes are exact).
  std::string Decode(const std::vector<TokenId>& ids, bool special = false) const;

  virtual int32_t VocabSize() const = 0;
  virtual TokenId Bos() const = 0;   // -1 when none
  virtual TokenId Eos() const = 0;   // -1 when none
  virtual TokenId Eot() const { return -1; }  // end-of-turn (e.g. <|eot_id|>, <|im_end|>)
  virtual bool IsEog(TokenId id) const = 0;   // end of generation (EOS, EOT, ...)
  virtual TokenAttr Attr(TokenId id) const = 0;
  virtual bool AddBosByDefault() const = 0;
  virtual std::string_view Model() const = 0;  // "llama" / "gpt2"
  virtual std::string_view Pre() const = 0;    // pre-tokenizer name ("default", "llama-bpe"...)
};

// Incremental, UTF-8 safe detokenizer for streaming: Push() returns only the complete
// UTF-8 characters available so far; Flush() returns what is left (invalid bytes are
// replaced by U+FFFD). Never allocates after Reserve() in steady state.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false);
  // Appends the text of `id` to `out` (only complete characters).
  void Push(TokenId id, std::string& out);
  void Flush(std::string& out);
  void Reset();

 private:
  const Tokenizer* tok_;
  bool special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace ari::runtime
