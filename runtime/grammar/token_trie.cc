#include "runtime/grammar/token_trie.h"

#include <algorithm>

#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {

std::string_view TokenTrie::Piece(TokenId id) const {
  if (id < 0 || id >= vocab_size_) return {};
  const auto i = static_cast<size_t>(id);
  return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
}

Result<std::shared_ptr<const TokenTrie>> TokenTrie::Build(const Tokenizer& tok) {
  const int32_t n = tok.VocabSize();
  if (n <= 0) return MakeError(ErrorCode::kInvalidArgument, "token trie: empty vocabulary");
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<TokenId> eog;
  for (TokenId id = 0; id < n; ++id) {
    if (tok.IsEog(id)) {
      eog.push_back(id);
      continue;
    }
    pieces[static_cast<size_t>(id)] = std::string(tok.Piece(id, false));
  }
  return FromPieces(pieces, eog);
}

namespace {

// Characters of `s` when it is whole UTF-8 characters, all plain; else -1.
int32_t PlainChars(std::string_view s) {
  int32_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t len = b < 0x80                   ? 1
                       : (b >= 0xC2 && b <= 0xDF) ? 2
                       : (b >= 0xE0 && b <= 0xEF) ? 3
                       : (b >= 0xF0 && b <= 0xF4) ? 4
                                                  : 0;
    if (len == 0 || i + len > s.size()) return -1;
    uint32_t cp = len == 1 ? b : b & (0x7Fu >> len);
    for (size_t j = 1; j < len; ++j) {
      const auto c = static_cast<uint8_t>(s[i + j]);
      if ((c & 0xC0) != 0x80) return -1;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || !TokenTrie::IsPlainCodePoint(cp)) return -1;
    i += len;
  }
  return s.empty() ? -1 : n;
}

}  // namespace

Result<std::shared_ptr<const TokenTrie>> TokenTrie::FromPieces(
    const std::vector<std::string>& pieces, const std::vector<TokenId>& eog, bool split_plain) {
  auto t = std::make_shared<TokenTrie>();
  t->vocab_size_ = static_cast<int32_t>(pieces.size());
  t->is_eog_.assign(pieces.size(), 0);
  for (TokenId id : eog) {
    if (id < 0 || id >= t->vocab_size_) {
      return MakeError(ErrorCode::kInvalidArgument, "token trie: EOG id out of range");
    }
    t->is_eog_[static_cast<size_t>(id)] = 1;
    t->eog_.push_back(id);
  }
  t->offsets_.reserve(pieces.size() + 1);
  std::vector<TokenId> sorted;
  for (size_t i = 0; i < pieces.size(); ++i) {
    t->offsets_.push_back(static_cast<uint32_t>(t->bytes_.size()));
    if (t->is_eog_[i] || pieces[i].empty()) continue;
    t->bytes_ += pieces[i];
    sorted.push_back(static_cast<TokenId>(i));
    t->max_depth_ = std::max(t->max_depth_, static_cast<int32_t>(pieces[i].size()));
  }
  t->offsets_.push_back(static_cast<uint32_t>(t->bytes_.size()));
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](TokenId a, TokenId b) { return t->Piece(a) < t->Piece(b); });
  t->nodes_.push_back(Node{});
  t->BuildNode(0, sorted, 0, sorted.size(), 0);
  if (split_plain) {
    std::vector<std::pair<int32_t, TokenId>> plain;
    std::vector<std::string> rest(pieces.size());
    for (TokenId id : sorted) {
      const int32_t n = PlainChars(t->Piece(id));
      if (n > 0) {
        plain.emplace_back(n, id);
      } else {
        rest[static_cast<size_t>(id)] = std::string(t->Piece(id));
      }
    }
    std::stable_sort(plain.begin(), plain.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    t->max_plain_chars_ = plain.empty() ? 0 : plain.back().first;
    t->plain_upto_.assign(static_cast<size_t>(t->max_plain_chars_) + 1, 0);
    for (const auto& [n, id] : plain) {
      t->plain_.push_back(id);
      ++t->plain_upto_[static_cast<size_t>(n)];
    }
    for (size_t k = 1; k < t->plain_upto_.size(); ++k) t->plain_upto_[k] += t->plain_upto_[k - 1];
    auto others = FromPieces(rest, {}, false);
    if (!others) return std::unexpected(others.error());
    t->others_ = *others;
  }
  return std::shared_ptr<const TokenTrie>(std::move(t));
}

// sorted[lo, hi) share their first `depth` bytes (the path to `node`).
void TokenTrie::BuildNode(uint32_t node, const std::vector<TokenId>& sorted, size_t lo, size_t hi,
                          size_t depth) {
  size_t i = lo;
  nodes_[node].token_begin = static_cast<uint32_t>(tokens_.size());
  while (i < hi && Piece(sorted[i]).size() == depth) tokens_.push_back(sorted[i++]);
  nodes_[node].token_end = static_cast<uint32_t>(tokens_.size());
  // Children: one per distinct next byte, allocated together, then filled one by one.
  std::vector<std::pair<size_t, size_t>> groups;
  while (i < hi) {
    const auto b = static_cast<uint8_t>(Piece(sorted[i])[depth]);
    size_t j = i;
    while (j < hi && static_cast<uint8_t>(Piece(sorted[j])[depth]) == b) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  const auto first = static_cast<uint32_t>(nodes_.size());
  nodes_[node].child_begin = first;
  nodes_[node].child_end = first + static_cast<uint32_t>(groups.size());
  for (const auto& [a, b] : groups) {
    Node c;
    c.byte = static_cast<uint8_t>(Piece(sorted[a])[depth]);
    nodes_.push_back(c);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    BuildNode(first + static_cast<uint32_t>(g), sorted, groups[g].first, groups[g].second,
              depth + 1);
  }
}

}  // namespace ari::runtime
