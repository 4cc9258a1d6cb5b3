// The bytes of every token of a vocabulary in one trie, built once per tokenizer: the
// vocabulary mask walks it with a GrammarMatcher, so tokens sharing a prefix share the
// matching work and a dead prefix skips its whole subtree.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

class Tokenizer;

class TokenTrie {
 public:
  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // children are contiguous in nodes()
    uint32_t token_begin = 0, token_end = 0;  // ids whose piece ends here, in tokens()
    uint8_t byte = 0;
  };

  // Pieces are Tokenizer::Piece(id) (no special tokens: a control token has no bytes and is
  // never allowed by a grammar); end-of-generation ids are kept apart (eog_tokens()).
  static Result<std::shared_ptr<const TokenTrie>> Build(const Tokenizer& tok);
  // The same from explicit pieces (tests); `eog` lists the end-of-generation ids.
  static Result<std::shared_ptr<const TokenTrie>> FromPieces(const std::vector<std::string>& pieces,
                                                             const std::vector<TokenId>& eog,
                                                             bool split_plain = true);

  const std::vector<Node>& nodes() const { return nodes_; }  // [0] is the root
  const std::vector<TokenId>& tokens() const { return tokens_; }
  const std::vector<TokenId>& eog_tokens() const { return eog_; }
  bool IsEog(TokenId id) const {
    return id >= 0 && id < vocab_size_ && is_eog_[static_cast<size_t>(id)] != 0;
  }
  std::string_view Piece(TokenId id) const;
  int32_t vocab_size() const { return vocab_size_; }
  int32_t max_depth() const { return max_depth_; }  // longest piece, bytes

  // Plain tokens: pieces of whole UTF-8 characters, all "plain" (kPlain*: not '"', '\',
  // a control character below U+0020 or a surrogate), the characters of JSON string
  // content. A grammar state that treats every plain character alike accepts a plain token
  // by its character count alone (TokenConstraint's fast path).
  static bool IsPlainCodePoint(uint32_t cp) {
    return cp >= 0x20 && cp != '"' && cp != '\\' && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
  }
  // Plain token ids sorted by character count; the first plain_upto(k) have <= k chars.
  const std::vector<TokenId>& plain_tokens() const { return plain_; }
  int32_t plain_upto(int32_t k) const {
    if (plain_upto_.empty() || k < 0) return 0;
    return plain_upto_[static_cast<size_t>(std::min<int32_t>(k, max_plain_chars_))];
  }
  int32_t max_plain_chars() const { return max_plain_chars_; }
  // The trie of every other (non-plain, non-EOG) token; nullptr inside that trie itself.
  const TokenTrie* others() const { return others_.get(); }

 private:
  void BuildNode(uint32_t node, const std::vector<TokenId>& sorted, size_t lo, size_t hi,
                 size_t depth);

  std::vector<Node> nodes_;
  std::vector<TokenId> tokens_;
  std::vector<TokenId> eog_;
  std::vector<uint8_t> is_eog_;
  std::string bytes_;              // all pieces
  std::vector<uint32_t> offsets_;  // piece of id i: bytes_[offsets_[i], offsets_[i+1])
  int32_t vocab_size_ = 0;
  int32_t max_depth_ = 0;
  std::vector<TokenId> plain_;
  std::vector<int32_t> plain_upto_;  // [k]: plain tokens with <= k characters
  int32_t max_plain_chars_ = 0;
  std::shared_ptr<const TokenTrie> others_;
};

}  // namespace ari::runtime
