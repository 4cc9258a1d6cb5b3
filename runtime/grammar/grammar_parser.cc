// The GBNF-like text syntax (grammar.h) -> GrammarBuilder -> CompiledGrammar.
#include <string>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "runtime/grammar/grammar_builder.h"

namespace ari::runtime {

namespace {

using Seq = GrammarBuilder::Seq;
using Range = CompiledGrammar::Range;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

class Parser {
 public:
  Parser(std::string_view text, GrammarBuilder& b, const GrammarLimits& limits)
      : s_(text), b_(b), limits_(limits) {}

  Result<void> ParseAll() {
    SkipSpace();
    if (pos_ >= s_.size()) return b_.Fail(pos_, "the grammar is empty (no rules)");
    while (pos_ < s_.size()) {
      const size_t at = pos_;
      const std::string_view name = ParseName();
      if (name.empty()) return b_.Fail(pos_, "expected a rule name");
      SkipSpace();
      if (s_.substr(pos_, 3) != "::=") return b_.Fail(pos_, "expected '::=' after the rule name");
      pos_ += 3;
      auto id = b_.RuleId(name, at);
      if (!id) return std::unexpected(id.error());
      auto alts = ParseAlternatives(0);
      if (!alts) return std::unexpected(alts.error());
      if (auto d = b_.Define(*id, at, std::move(*alts)); !d) return d;
      SkipSpace();
    }
    return {};
  }

 private:
  void SkipSpace() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (pos_ < s_.size() && IsNameChar(s_[pos_])) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  // At a top-level "name ::=" (the next rule begins)?
  bool AtRuleStart() const {
    size_t p = pos_;
    while (p < s_.size() && IsNameChar(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  Result<std::vector<Seq>> ParseAlternatives(int depth) {
    std::vector<Seq> alts;
    while (true) {
      auto seq = ParseSequence(depth);
      if (!seq) return std::unexpected(seq.error());
      alts.push_back(std::move(*seq));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return alts;
    }
  }

  Result<Seq> ParseSequence(int depth) {
    Seq seq;
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '|' || c == ')') break;
      if (depth == 0 && AtRuleStart()) break;
      const size_t at = pos_;
      auto item = ParseItem(depth);
      if (!item) return std::unexpected(item.error());
      auto rep = ParsePostfix(at, std::move(*item));
      if (!rep) return std::unexpected(rep.error());
      if (auto n = b_.CountElements(rep->size(), at); !n) return std::unexpected(n.error());
      seq.insert(seq.end(), rep->begin(), rep->end());
    }
    return seq;
  }

  Result<Seq> ParseItem(int depth) {
    const size_t at = pos_;
    const char c = s_[pos_];
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      auto e = b_.Class({}, true, at);
      if (!e) return std::unexpected(e.error());
      return Seq{*e};
    }
    if (c == '(') {
      if (depth + 1 > limits_.max_nesting) {
        return b_.Fail(at, "groups nested deeper than " + std::to_string(limits_.max_nesting));
      }
      ++pos_;
      auto alts = ParseAlternatives(depth + 1);
      if (!alts) return std::unexpected(alts.error());
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ')') return b_.Fail(at, "unclosed '('");
      ++pos_;
      if (alts->size() == 1) return std::move((*alts)[0]);
      auto id = b_.NewRule(at, std::move(*alts));
      if (!id) return std::unexpected(id.error());
      return Seq{{CompiledGrammar::Kind::kRule, *id}};
    }
    const std::string_view name = ParseName();
    if (name.empty()) return b_.Fail(at, std::string("unexpected character '") + c + "'");
    auto id = b_.RuleId(name, at);
    if (!id) return std::unexpected(id.error());
    return Seq{{CompiledGrammar::Kind::kRule, *id}};
  }

  // One code point of the text (UTF-8), with escapes when `escapes`.
  Result<uint32_t> ParseChar() {
    const size_t at = pos_;
    const auto b0 = static_cast<unsigned char>(s_[pos_]);
    if (b0 == '\\') return ParseEscape();
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > s_.size()) {
      return b_.Fail(at, "invalid UTF-8");
    }
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) return b_.Fail(at, "invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return b_.Fail(at, "invalid UTF-8");
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  Result<uint32_t> ParseEscape() {
    const size_t at = pos_;
    if (pos_ + 1 >= s_.size()) return b_.Fail(at, "unfinished escape");
    const char e = s_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^': return static_cast<uint32_t>(static_cast<unsigned char>(e));
      default: break;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) return b_.Fail(at, std::string("unknown escape '\\") + e + "'");
    uint32_t cp = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char h = pos_ < s_.size() ? s_[pos_] : '\0';
      const int v = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (v < 0) return b_.Fail(at, "escape needs " + std::to_string(digits) + " hex digits");
      cp = cp * 16 + static_cast<uint32_t>(v);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return b_.Fail(at, "escape is not a Unicode scalar value");
    }
    return cp;
  }

  Result<Seq> ParseLiteral() {
    const size_t at = pos_++;
    Seq seq;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') return b_.Fail(at, "unterminated string literal");
      if (s_[pos_] == '"') break;
      auto cp = ParseChar();
      if (!cp) return std::unexpected(cp.error());
      auto e = b_.Class({Range{*cp, *cp}}, false, at);
      if (!e) return std::unexpected(e.error());
      seq.push_back(*e);
    }
    ++pos_;
    return seq;
  }

  Result<Seq> ParseClass() {
    const size_t at = pos_++;
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<Range> ranges;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') return b_.Fail(at, "unterminated '['");
      if (s_[pos_] == ']') break;
      const size_t item_at = pos_;
      auto lo = ParseChar();
      if (!lo) return std::unexpected(lo.error());
      uint32_t hi = *lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        auto h = ParseChar();
        if (!h) return std::unexpected(h.error());
        hi = *h;
      }
      if (hi < *lo) return b_.Fail(item_at, "character range with its start after its end");
      ranges.push_back(Range{*lo, hi});
    }
    ++pos_;
    auto e = b_.Class(ranges, negated, at);
    if (!e) return std::unexpected(e.error());
    return Seq{*e};
  }

  Result<int32_t> ParseCount(size_t at) {
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > limits_.max_repeat) {
        return b_.Fail(at, "repetition count above " + std::to_string(limits_.max_repeat));
      }
    }
    if (pos_ == start) return -1;
    return static_cast<int32_t>(v);
  }

  // X? X* X+ X{m} X{m,} X{m,n} -> the elements that replace X.
  Result<Seq> ParsePostfix(size_t at, Seq x) {
    if (pos_ >= s_.size()) return x;
    const char c = s_[pos_];
    int32_t m = 1, n = 1;  // n < 0: unbounded
    if (c == '?' || c == '*' || c == '+') {
      ++pos_;
      m = c == '+' ? 1 : 0;
      n = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++pos_;
      auto lo = ParseCount(at);
      if (!lo) return std::unexpected(lo.error());
      if (*lo < 0) return b_.Fail(at, "expected a number after '{'");
      m = n = *lo;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        auto hi = ParseCount(at);
        if (!hi) return std::unexpected(hi.error());
        n = *hi;
        if (n >= 0 && n < m) return b_.Fail(at, "repetition {m,n} with n < m");
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') return b_.Fail(at, "expected '}'");
      ++pos_;
    } else {
      return x;
    }
    return Repeat(at, x, m, n);
  }

  Result<Seq> Repeat(size_t at, const Seq& x, int32_t m, int32_t n) {
    if (auto c = b_.CountElements(x.size() * static_cast<size_t>(std::max(m, n) + 1), at); !c) {
      return std::unexpected(c.error());
    }
    Seq out;
    for (int32_t i = 0; i < m; ++i) out.insert(out.end(), x.begin(), x.end());
    if (n == m) return out;
    using K = CompiledGrammar::Kind;
    if (n < 0) {  // star ::= x star | ""
      auto id = b_.NewRule(at, {});
      if (!id) return std::unexpected(id.error());
      Seq rec = x;
      rec.push_back({K::kRule, *id});
      b_.SetAlts(*id, {std::move(rec), Seq{}});
      out.push_back({K::kRule, *id});
      return out;
    }
    // opt_k ::= x opt_{k-1} | "" ; opt_1 ::= x | ""
    uint32_t prev = 0;
    for (int32_t k = 1; k <= n - m; ++k) {
      Seq alt = x;
      if (k > 1) alt.push_back({K::kRule, prev});
      auto id = b_.NewRule(at, {alt, Seq{}});
      if (!id) return std::unexpected(id.error());
      prev = *id;
    }
    out.push_back({K::kRule, prev});
    return out;
  }

  std::string_view s_;
  GrammarBuilder& b_;
  GrammarLimits limits_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Parse(std::string_view text,
                                                                      const GrammarLimits& limits) {
  if (text.size() > limits.max_text_bytes) {
    return MakeError(ErrorCode::kInvalidArgument, "grammar: " + std::to_string(text.size()) +
                                                      " bytes, more than the limit of " +
                                                      std::to_string(limits.max_text_bytes));
  }
  GrammarBuilder b(text, limits);
  Parser p(text, b, limits);
  if (auto r = p.ParseAll(); !r) return std::unexpected(r.error());
  return b.Finish();
}

}  // namespace ari::runtime
