// SentencePiece-style BPE ("llama" vocab): merge the adjacent pair whose merged text is the
// highest-scoring vocabulary entry, until no pair merges; characters that never formed a
// token fall back to <0xXX> byte tokens. Behaves as llama.cpp's llm_tokenizer_spm.
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/tokenizer_impl.h"

namespace ari::runtime::tok {

namespace {

struct Symbol {
  int prev;
  int next;
  size_t off;  // into the escaped text
  size_t n;    // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Highest score first; on equal scores the leftmost pair first.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmTokenizer final : public VocabTokenizer {
 public:
  Result<void> Init(VocabSpec& spec, std::span<const std::string_view> tokens) {
    if (auto r = InitCommon(spec, tokens, /*def_bos=*/1, /*def_eos=*/2, /*def_unk=*/0,
                            /*def_add_bos=*/true,
                            /*def_add_space_prefix=*/true);
        !r) {
      return r;
    }
    for (int b = 0; b < 256; ++b) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const char hex[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      TokenId id = FindToken(std::string_view(hex, 6));
      if (id < 0) {
        const char one = static_cast<char>(b);
        id = FindToken(std::string_view(&one, 1));
      }
      if (id < 0) id = Unk();
      byte_to_token_[b] = id;
    }
    BuildPieces();
    return {};
  }

 protected:
  Result<void> EncodeText(std::string_view raw, bool after_special,
                          std::vector<TokenId>& out) const override {
    // Escape spaces as U+2581, with a leading one at the start / after a special token.
    std::string text;
    text.reserve(raw.size() * 3 + 3);
    constexpr std::string_view kSpace = "\xE2\x96\x81";
    if (AddSpacePrefix() && after_special) text.append(kSpace);
    for (char c : raw) {
      if (c == ' ') {
        text.append(kSpace);
      } else {
        text.push_back(c);
      }
    }

    // One symbol per UTF-8 character.
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
      const size_t n = std::min(Utf8SeqLen(text[off]), text.size() - off);
      const int index = static_cast<int>(symbols.size());
      symbols.push_back(Symbol{index - 1, off + n == text.size() ? -1 : index + 1, off, n});
      off += n;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = symbols[static_cast<size_t>(left)];
      const Symbol& r = symbols[static_cast<size_t>(right)];
      const std::string_view merged(text.data() + l.off, l.n + r.n);
      const TokenId id = FindToken(merged);
      if (id < 0) return;
      queue.push(Bigram{left, right, Score(id), merged.size()});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram bg = queue.top();
      queue.pop();
      Symbol& l = symbols[static_cast<size_t>(bg.left)];
      Symbol& r = symbols[static_cast<size_t>(bg.right)];
      if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // outdated
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = bg.left;
      try_add(l.prev, bg.left);
      try_add(bg.left, l.next);
    }

    if (symbols.empty()) return {};
    for (int i = 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
      const Symbol& s = symbols[static_cast<size_t>(i)];
      const std::string_view piece(text.data() + s.off, s.n);
      const TokenId id = FindToken(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {  // byte fallback
        const TokenId b = byte_to_token_[static_cast<uint8_t>(c)];
        if (b >= 0) out.push_back(b);
      }
    }
    return {};
  }

  std::string NormalPiece(TokenId id) const override {
    const uint16_t b = Bits(id);
    const std::string_view text = TokenText(id);
    if (b & kBitNormal) {
      std::string r;
      r.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
          r.push_back(' ');
          i += 3;
        } else {
          r.push_back(text[i++]);
        }
      }
      return r;
    }
    if (b & kBitByte) {
      // "<0xXX>" -> the byte (llama.cpp reads the two hex digits at offset 3).
      if (text.size() >= 6) {
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        const int hi = hex(text[3]);
        const int lo = hex(text[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
      }
      return std::string(text);  // malformed byte token: its text
    }
    return {};  // unused / undefined tokens render as nothing
  }

 private:
  TokenId byte_to_token_[256] = {};
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> MakeSpm(VocabSpec spec,
                                           std::span<const std::string_view> tokens) {
  auto t = std::make_unique<SpmTokenizer>();
  if (auto r = t->Init(spec, tokens); !r) return std::unexpected(std::move(r.error()));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace ari::runtime::tok
