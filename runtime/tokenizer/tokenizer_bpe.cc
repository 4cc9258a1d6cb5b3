// GPT-2 style byte-level BPE ("gpt2" vocab): the pre-tokenizer splits text into words, each
// word's bytes are mapped to printable code points (GPT-2's byte encoder), then adjacent
// symbols are merged lowest merge rank first. Behaves as llama.cpp's llm_tokenizer_bpe.
#include <algorithm>
#include <array>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/tokenizer/tokenizer_impl.h"

namespace ari::runtime::tok {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in byte order.
struct ByteMap {
  std::array<std::array<char, 2>, 256> utf8{};  // UTF-8 of the code point for each byte
  std::array<uint8_t, 256> utf8_len{};
  std::array<int16_t, 0x144> cp_to_byte{};  // inverse, -1 when not a mapped code point

  ByteMap() {
    cp_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const int cp = printable ? b : 256 + extra++;
      std::string s;
      AppendUtf8(static_cast<uint32_t>(cp), s);
      utf8_len[static_cast<size_t>(b)] = static_cast<uint8_t>(s.size());
      for (size_t i = 0; i < s.size(); ++i) utf8[static_cast<size_t>(b)][i] = s[i];
      cp_to_byte[static_cast<size_t>(cp)] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& Bytes() {
  static const ByteMap map;
  return map;
}

struct PairHash {
  size_t operator()(const std::pair<std::string_view, std::string_view>& p) const {
    const size_t a = std::hash<std::string_view>{}(p.first);
    const size_t b = std::hash<std::string_view>{}(p.second);
    return a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  }
};

struct Symbol {
  int prev;
  int next;
  size_t off;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  int rank;
  size_t size;
};

// Lowest rank first; on equal ranks the leftmost pair first.
struct BigramGreater {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

class BpeTokenizer final : public VocabTokenizer {
 public:
  Result<void> Init(VocabSpec& spec, std::span<const std::string_view> tokens) {
    PreInfo info;
    const std::string pre = spec.pre.empty() ? std::string("default") : spec.pre;
    if (!LookupPre(pre, info)) {
      return MakeError(ErrorCode::kUnsupported,
                       "tokenizer: unknown pre-tokenizer tokenizer.ggml.pre='" + pre + "'");
    }
    auto pt = PreTokenizer::Create(pre);
    if (!pt) return std::unexpected(std::move(pt.error()));
    pretok_ = std::move(*pt);
    ignore_merges_ = info.ignore_merges;
    if (spec.merges.empty()) {
      return MakeError(ErrorCode::kFormat,
                       "tokenizer: gpt2 vocabulary without tokenizer.ggml.merges");
    }
    merges_ = std::move(spec.merges);
    ranks_.reserve(merges_.size());
    for (size_t i = 0; i < merges_.size(); ++i) {
      const std::string_view m = merges_[i];
      const size_t pos = m.find(' ', 1);
      if (pos == std::string_view::npos) continue;  // malformed: never matches
      ranks_.try_emplace(std::make_pair(m.substr(0, pos), m.substr(pos + 1)),
                         static_cast<int>(std::min<size_t>(i, INT32_MAX)));
    }
    if (auto r =
            InitCommon(spec, tokens, /*def_bos=*/11, /*def_eos=*/11, /*def_unk=*/-1, info.add_bos,
                       /*def_add_space_prefix=*/false);
        !r) {
      return r;
    }
    BuildPieces();
    return {};
  }

 protected:
  Result<void> EncodeText(std::string_view raw, bool /*after_special*/,
                          std::vector<TokenId>& out) const override {
    std::vector<std::pair<size_t, size_t>> words;
    if (auto r = pretok_->Split(raw, words); !r) return r;
    const ByteMap& bm = Bytes();
    std::string word;
    std::vector<Symbol> symbols;
    std::priority_queue<Bigram, std::vector<Bigram>, BigramGreater> queue;
    for (const auto& [begin, end] : words) {
      word.clear();
      for (size_t i = begin; i < end; ++i) {
        const auto b = static_cast<uint8_t>(raw[i]);
        word.append(bm.utf8[b].data(), bm.utf8_len[b]);
      }
      if (word.empty()) continue;
      if (ignore_merges_) {
        if (TokenId id = FindToken(word); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      symbols.clear();
      for (size_t off = 0; off < word.size();) {
        const size_t n = std::min(Utf8SeqLen(word[off]), word.size() - off);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back(Symbol{index - 1, off + n == word.size() ? -1 : index + 1, off, n});
        off += n;
      }
      auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        auto it = ranks_.find(std::make_pair(std::string_view(word).substr(l.off, l.n),
                                             std::string_view(word).substr(r.off, r.n)));
        if (it == ranks_.end()) return;
        queue.push(Bigram{left, right, it->second, l.n + r.n});
      };
      for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
      while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<size_t>(bg.left)];
        Symbol& r = symbols[static_cast<size_t>(bg.right)];
        // Symbols only grow to the right and stay contiguous, so an unchanged total size
        // means an unchanged text.
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
      }
      for (int i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view piece = std::string_view(word).substr(s.off, s.n);
        if (TokenId id = FindToken(piece); id >= 0) {
          out.push_back(id);
          continue;
        }
        for (size_t k = 0; k < piece.size(); ++k) {  // llama.cpp: single-byte entries only
          if (TokenId id = FindToken(piece.substr(k, 1)); id >= 0) out.push_back(id);
        }
      }
    }
    return {};
  }

  std::string NormalPiece(TokenId id) const override {
    if ((Bits(id) & kBitNormal) == 0) return {};
    const std::string_view text = TokenText(id);
    const ByteMap& bm = Bytes();
    std::string r;
    r.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const auto c0 = static_cast<uint8_t>(text[i]);
      uint32_t cp = c0;
      size_t n = 1;
      if (c0 >= 0xC0 && c0 < 0xE0 && i + 1 < text.size()) {
        cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3Fu);
        n = 2;
      } else if (c0 >= 0x80) {
        n = std::min(Utf8SeqLen(text[i]), text.size() - i);
        cp = 0xFFFFFFFF;  // outside the byte map
      }
      if (cp < bm.cp_to_byte.size() && bm.cp_to_byte[cp] >= 0) {
        r.push_back(static_cast<char>(bm.cp_to_byte[cp]));
      } else {
        r.append(text.substr(i, n));  // not a byte-encoded character: keep it as is
      }
      i += n;
    }
    return r;
  }

 private:
  std::unique_ptr<PreTokenizer> pretok_;
  bool ignore_merges_ = false;
  std::vector<std::string> merges_;
  std::unordered_map<std::pair<std::string_view, std::string_view>, int, PairHash> ranks_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> MakeBpe(VocabSpec spec,
                                           std::span<const std::string_view> tokens) {
  auto t = std::make_unique<BpeTokenizer>();
  if (auto r = t->Init(spec, tokens); !r) return std::unexpected(std::move(r.error()));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace ari::runtime::tok
