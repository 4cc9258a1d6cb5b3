// Internal to the tokenizer files (tokenizer*.cc, pretokenizer.cc): the shared vocabulary
// base class and the two concrete tokenizers. Not part of the runtime's public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/core/utf8.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/vocab_store.h"

namespace ari::runtime::tok {

// llama.cpp-style attribute bits (a token may carry several, e.g. control + rstrip).
enum AttrBit : uint16_t {
  kBitUnknown = 1 << 0,
  kBitUnused = 1 << 1,
  kBitNormal = 1 << 2,
  kBitControl = 1 << 3,
  kBitUserDefined = 1 << 4,
  kBitByte = 1 << 5,
  kBitLstrip = 1 << 6,
  kBitRstrip = 1 << 7,
};

// UTF-8 helpers (Utf8SeqLen, AppendUtf8, DecodeUtf8At): runtime/core/utf8.h.

// One piece of input text during special-token partitioning: raw text [off, off+len) or
// an already recognised token.
struct Fragment {
  size_t off = 0;
  size_t len = 0;
  TokenId token = -1;  // >= 0: a special token
};

// Pre-tokenizer for byte-level BPE: the regex list llama.cpp uses for a given
// tokenizer.ggml.pre, applied one after the other, each splitting every fragment into its
// matches and the gaps between them. ICU regexes; ICU types stay inside pretokenizer.cc.
class PreTokenizer {
 public:
  struct Impl;
  // kUnsupported for an unknown name; "" means "default".
  static Result<std::unique_ptr<PreTokenizer>> Create(std::string_view pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;
  // Appends the words of `text` as [begin, end) byte ranges (they cover `text` exactly).
  Result<void> Split(std::string_view text, std::vector<std::pair<size_t, size_t>>& words) const;
  const std::vector<std::string>& patterns() const;

 private:
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Known pre-tokenizer names and the settings llama.cpp ties to them.
struct PreInfo {
  bool ignore_merges = false;  // whole word in vocab -> one token (llama3, tekken)
  bool add_bos = false;        // default for tokenizer.ggml.add_bos_token
};
// false for an unknown name.
bool LookupPre(std::string_view pre, PreInfo& info);

// Common part: vocabulary, attributes, special tokens, piece cache, special-token
// partitioning and the Encode skeleton. Subclasses tokenize one raw-text fragment.
class VocabTokenizer : public Tokenizer {
 public:
  Result<std::vector<TokenId>> Encode(std::string_view text,
                                      const EncodeOptions& opts) const override;
  std::string TokenToPiece(TokenId id, bool special = false) const override;
  std::string_view Piece(TokenId id, bool special = false) const override;

  int32_t VocabSize() const override { return static_cast<int32_t>(tokens_.size()); }
  TokenId Bos() const override { return bos_; }
  TokenId Eos() const override { return eos_; }
  TokenId Eot() const override { return eot_; }
  TokenId Unk() const override { return unk_; }
  TokenId Pad() const override { return pad_; }
  bool IsEog(TokenId id) const override;
  TokenAttr Attr(TokenId id) const override;
  bool AddBosByDefault() const override { return add_bos_; }
  bool AddEosByDefault() const override { return add_eos_; }
  bool AddSpacePrefix() const override { return add_space_prefix_; }
  std::string_view Model() const override { return model_; }
  std::string_view Pre() const override { return pre_; }
  std::string_view TokenText(TokenId id) const override;
  TokenId FindToken(std::string_view text) const override;

  uint16_t Bits(TokenId id) const { return bits_[static_cast<size_t>(id)]; }
  float Score(TokenId id) const { return scores_[static_cast<size_t>(id)]; }

 protected:
  // Takes the common fields of `spec` and the token texts `tokens` (spec.tokens, or views
  // into a GGUF file; copied); `defaults` are the model's default special ids.
  Result<void> InitCommon(VocabSpec& spec, std::span<const std::string_view> tokens,
                          TokenId def_bos, TokenId def_eos, TokenId def_unk, bool def_add_bos,
                          bool def_add_space_prefix);
  // Builds the piece cache (call after subclass init).
  void BuildPieces();
  // Tokenizes one raw fragment; `after_special` is true at the start and after a special
  // token (SPM then puts a space in front when add_space_prefix).
  virtual Result<void> EncodeText(std::string_view text, bool after_special,
                                  std::vector<TokenId>& out) const = 0;
  // The piece of a normal/byte token (special tokens are handled by the base).
  virtual std::string NormalPiece(TokenId id) const = 0;

  void Partition(std::string_view text, bool parse_special, std::vector<Fragment>& frags) const;

  std::string model_;
  std::string pre_;
  PackedStrings tokens_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;          // tokenizer.ggml.token_type as given (Attr())
  std::vector<uint16_t> bits_;          // AttrBit set per token
  TokenIndex token_to_id_;              // over tokens_
  std::vector<TokenId> special_cache_;  // control/user-defined/unknown, longest text first
  std::vector<TokenId> eog_;            // sorted
  PackedStrings pieces_;                // piece with special=true
  TokenId bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1, eot_ = -1, eom_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;

 private:
  // The steps of InitCommon(), in order.
  // tokens, scores, types, attribute bits, index
  void TakeVocabulary(VocabSpec& spec, std::span<const std::string_view> tokens);
  void PickSpecialTokens(const VocabSpec& spec, TokenId def_bos, TokenId def_eos, TokenId def_unk,
                         bool def_add_bos, bool def_add_space_prefix);
  void FindEndOfGeneration();  // EOT/EOM by their text, the end-of-generation set
  void BuildSpecialCache();
  void SetStripBits(std::string_view spec_name);  // lstrip/rstrip as llama.cpp names them
};

// `tokens`: the token texts (spec.tokens itself is not read; see InitCommon).
Result<std::unique_ptr<Tokenizer>> MakeSpm(VocabSpec spec,
                                           std::span<const std::string_view> tokens);
Result<std::unique_ptr<Tokenizer>> MakeBpe(VocabSpec spec,
                                           std::span<const std::string_view> tokens);

}  // namespace ari::runtime::tok
