#include "runtime/grammar/grammar_builder.h"

#include <algorithm>
#include <functional>

namespace ari::runtime {

namespace {
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
}  // namespace

std::string GrammarBuilder::Where(size_t pos) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

std::unexpected<Error> GrammarBuilder::Fail(size_t pos, const std::string& what) const {
  return MakeError(ErrorCode::kInvalidArgument, "grammar: " + Where(pos) + ": " + what);
}

Result<uint32_t> GrammarBuilder::RuleId(std::string_view name, size_t pos) {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  if (static_cast<int64_t>(rules_.size()) >= limits_.max_rules) {
    return Fail(pos, "more than " + std::to_string(limits_.max_rules) + " rules");
  }
  const auto id = static_cast<uint32_t>(rules_.size());
  rules_.push_back(Rule{std::string(name), {}, false, pos});
  by_name_.emplace(std::string(name), id);
  return id;
}

Result<void> GrammarBuilder::Define(uint32_t id, size_t pos, std::vector<Seq> alts) {
  Rule& r = rules_[id];
  if (r.defined) return Fail(pos, "rule '" + r.name + "' is defined twice");
  r.defined = true;
  r.pos = pos;
  r.alts = std::move(alts);
  return {};
}

Result<uint32_t> GrammarBuilder::NewRule(size_t pos, std::vector<Seq> alts) {
  if (static_cast<int64_t>(rules_.size()) >= limits_.max_rules) {
    return Fail(pos, "more than " + std::to_string(limits_.max_rules) +
                         " rules (after expanding groups and repetitions)");
  }
  const auto id = static_cast<uint32_t>(rules_.size());
  std::string name = "@";
  name += std::to_string(id);
  rules_.push_back(Rule{std::move(name), std::move(alts), true, pos});
  return id;
}

Result<CompiledGrammar::Element> GrammarBuilder::Class(const std::vector<Range>& ranges,
                                                       bool negated, size_t pos) {
  std::vector<std::pair<uint32_t, uint32_t>> key;
  for (const Range& r : ranges) {
    if (r.lo > r.hi) return Fail(pos, "character range with its start after its end");
    if (r.hi > kMaxCodePoint) return Fail(pos, "code point above U+10FFFF");
    key.emplace_back(r.lo, r.hi);
  }
  std::sort(key.begin(), key.end());
  auto k = std::make_pair(key, negated);
  if (auto it = class_ids_.find(k); it != class_ids_.end())
    return Element{Kind::kClass, it->second};
  CompiledGrammar::CharClass c;
  c.range_begin = static_cast<uint32_t>(ranges_.size());
  for (auto [lo, hi] : key) ranges_.push_back(Range{lo, hi});
  c.range_end = static_cast<uint32_t>(ranges_.size());
  c.negated = negated;
  const auto id = static_cast<uint32_t>(classes_.size());
  classes_.push_back(c);
  class_ids_.emplace(std::move(k), id);
  return Element{Kind::kClass, id};
}

Result<void> GrammarBuilder::CountElements(size_t n, size_t pos) {
  elements_ += n;
  if (elements_ > static_cast<size_t>(limits_.max_elements)) {
    return Fail(pos, "more than " + std::to_string(limits_.max_elements) +
                         " grammar elements (after expanding repetitions)");
  }
  return {};
}

bool GrammarBuilder::ClassEmpty(uint32_t cls) const {
  const auto& c = classes_[cls];
  if (!c.negated) return c.range_begin == c.range_end;
  // Negated: empty when the ranges cover 0..U+10FFFF (they are sorted by lo).
  uint32_t next = 0;
  for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
    if (ranges_[i].lo > next) return false;
    next = std::max(next, ranges_[i].hi + 1);
  }
  return next > kMaxCodePoint;
}

Result<void> GrammarBuilder::CheckLeftRecursion(const std::vector<uint8_t>& nullable) const {
  // Edge r -> s when s can be the first thing r expands to (all before it nullable).
  const size_t n = rules_.size();
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Seq& alt : rules_[r].alts) {
      for (const Element& e : alt) {
        if (e.kind != Kind::kRule) break;
        first[r].push_back(e.value);
        if (!nullable[e.value]) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    stack.emplace_back(start, 0);
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == first[r].size()) {
        color[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t s = first[r][i++];
      if (color[s] == 1) {
        return Fail(rules_[s].pos, "rule '" + rules_[s].name +
                                       "' is left-recursive (it can start with itself); "
                                       "rewrite it with a repetition");
      }
      if (color[s] == 0) {
        color[s] = 1;
        stack.emplace_back(s, 0);
      }
    }
  }
  return {};
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarBuilder::Finish() {
  for (const Rule& r : rules_) {
    if (!r.defined) return Fail(r.pos, "rule '" + r.name + "' is used but not defined");
  }
  auto root = by_name_.find("root");
  if (root == by_name_.end()) return Fail(0, "no rule named 'root'");
  const size_t n = rules_.size();
  // Nullable and productive rules, by fixpoint.
  std::vector<uint8_t> nullable(n, 0), productive(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      for (const Seq& alt : rules_[r].alts) {
        bool nul = true, prod = true;
        for (const Element& e : alt) {
          if (e.kind == Kind::kClass) {
            nul = false;
            prod = prod && !ClassEmpty(e.value);
          } else {
            nul = nul && nullable[e.value];
            prod = prod && productive[e.value];
          }
        }
        if (nul && !nullable[r]) nullable[r] = changed = true;
        if (prod && !productive[r]) productive[r] = changed = true;
      }
    }
  }
  if (auto lr = CheckLeftRecursion(nullable); !lr) return std::unexpected(lr.error());
  if (!productive[root->second]) {
    return Fail(rules_[root->second].pos,
                "empty language: rule 'root' derives no finite string (every alternative "
                "needs an empty character class or an endless recursion)");
  }
  auto g = std::make_shared<CompiledGrammar>();
  g->root_ = root->second;
  for (size_t r = 0; r < n; ++r) {
    const auto first_alt = static_cast<uint32_t>(g->alt_starts_.size());
    for (const Seq& alt : rules_[r].alts) {
      // Alternatives that can never match are dropped (the matcher never tries them).
      bool prod = true;
      for (const Element& e : alt) {
        prod = prod && (e.kind == Kind::kClass ? !ClassEmpty(e.value) : productive[e.value] != 0);
      }
      if (!prod) continue;
      g->alt_starts_.push_back(static_cast<uint32_t>(g->elements_.size()));
      g->elements_.insert(g->elements_.end(), alt.begin(), alt.end());
      g->elements_.push_back(Element{Kind::kEnd, 0});
    }
    g->rule_alts_.emplace_back(first_alt, static_cast<uint32_t>(g->alt_starts_.size()));
    g->rule_names_.push_back(rules_[r].name);
  }
  g->classes_ = classes_;
  g->ranges_ = ranges_;
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

bool CompiledGrammar::ClassMatches(uint32_t cls, uint32_t cp) const {
  const CharClass& c = classes_[cls];
  bool in = false;
  for (uint32_t i = c.range_begin; i < c.range_end && !in; ++i) {
    in = cp >= ranges_[i].lo && cp <= ranges_[i].hi;
  }
  return in != c.negated;
}

bool CompiledGrammar::ClassIntersects(uint32_t cls, uint32_t lo, uint32_t hi) const {
  const CharClass& c = classes_[cls];
  if (!c.negated) {
    for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
      if (ranges_[i].lo <= hi && ranges_[i].hi >= lo) return true;
    }
    return false;
  }
  // Negated: some point of [lo, hi] outside every range (ranges sorted by lo).
  uint32_t next = lo;
  for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
    if (ranges_[i].hi < next) continue;
    if (ranges_[i].lo > next) return true;
    next = ranges_[i].hi + 1;
    if (next > hi) return false;
  }
  return next <= hi;
}

bool CompiledGrammar::ClassCovers(uint32_t cls, uint32_t lo, uint32_t hi) const {
  const CharClass& c = classes_[cls];
  if (c.negated) {
    for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
      if (ranges_[i].lo <= hi && ranges_[i].hi >= lo) return false;
    }
    return true;
  }
  uint32_t next = lo;  // ranges sorted by lo: extend the covered prefix [lo, next)
  for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
    if (ranges_[i].lo > next) break;
    if (ranges_[i].hi >= next) next = ranges_[i].hi + 1;
    if (next > hi) return true;
  }
  return false;
}

std::string CompiledGrammar::ToString() const {
  std::string out;
  for (size_t r = 0; r < rule_alts_.size(); ++r) {
    out += rule_names_[r] + " ::=";
    for (uint32_t a = rule_alts_[r].first; a < rule_alts_[r].second; ++a) {
      if (a != rule_alts_[r].first) out += " |";
      for (uint32_t p = alt_starts_[a]; elements_[p].kind != Kind::kEnd; ++p) {
        if (elements_[p].kind == Kind::kRule) {
          out += ' ';
          out += rule_names_[elements_[p].value];
          continue;
        }
        const CharClass& c = classes_[elements_[p].value];
        out += c.negated ? " [^" : " [";
        for (uint32_t i = c.range_begin; i < c.range_end; ++i) {
          out += std::to_string(ranges_[i].lo);
          if (ranges_[i].hi != ranges_[i].lo) {
            out += '-';
            out += std::to_string(ranges_[i].hi);
          }
          if (i + 1 < c.range_end) out += ",";
        }
        out += "]";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace ari::runtime
