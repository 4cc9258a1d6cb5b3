// Internal to runtime/grammar: the mutable rule set the parser fills, its checks
// (undefined and duplicate rules, left recursion, empty language) and the flattening into
// a CompiledGrammar.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace ari::runtime {

class GrammarBuilder {
 public:
  using Element = CompiledGrammar::Element;
  using Kind = CompiledGrammar::Kind;
  using Range = CompiledGrammar::Range;
  using Seq = std::vector<Element>;
  struct Rule {
    std::string name;
    std::vector<Seq> alts;
    bool defined = false;
    size_t pos = 0;  // byte offset of its definition (or first use while undefined)
  };

  GrammarBuilder(std::string_view text, const GrammarLimits& limits)
      : text_(text), limits_(limits) {}

  // The rule named `name` (created undefined on first use, at byte offset `pos`).
  Result<uint32_t> RuleId(std::string_view name, size_t pos);
  // Marks `name` defined at `pos` and gives it `alts` (error if already defined).
  Result<void> Define(uint32_t id, size_t pos, std::vector<Seq> alts);
  // A new rule for a group or repetition, named after its parent.
  Result<uint32_t> NewRule(size_t pos, std::vector<Seq> alts);
  // Replaces the alternatives of a rule made by NewRule (for self-reference).
  void SetAlts(uint32_t id, std::vector<Seq> alts) { rules_[id].alts = std::move(alts); }
  Result<Element> Class(const std::vector<Range>& ranges, bool negated, size_t pos);
  Result<void> CountElements(size_t n, size_t pos);

  // Checks everything and flattens (root = the rule named `root`).
  Result<std::shared_ptr<const CompiledGrammar>> Finish();

  // "line L, column C" of byte offset `pos` (columns count bytes from 1).
  std::string Where(size_t pos) const;
  std::unexpected<Error> Fail(size_t pos, const std::string& what) const;

 private:
  Result<void> CheckLeftRecursion(const std::vector<uint8_t>& nullable) const;
  bool ClassEmpty(uint32_t cls) const;

  std::string_view text_;
  GrammarLimits limits_;
  std::vector<Rule> rules_;
  std::map<std::string, uint32_t, std::less<>> by_name_;
  std::vector<CompiledGrammar::CharClass> classes_;
  std::vector<Range> ranges_;
  std::map<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, bool>, uint32_t> class_ids_;
  size_t elements_ = 0;
};

}  // namespace ari::runtime
