// Grammars for constrained decoding: a GBNF-like text syntax compiled into an immutable
// CompiledGrammar that GrammarMatcher (grammar_matcher.h) runs byte by byte.
//
// Syntax (docs/structured_output.md has the full description):
//   # comment to end of line
//   name ::= alternative ( "|" alternative )*      rule names: [A-Za-z0-9_-]+
//   a sequence is made of items, each optionally followed by ?, *, +, {m}, {m,}, {m,n}:
//     "literal"   with escapes \n \r \t \\ \" \' \[ \] \xHH \uXXXX \UXXXXXXXX
//     [a-z0-9_]   character class: single characters and ranges, [^...] negated
//     .           any character (one Unicode scalar value)
//     name        a rule reference (defined before or after its use)
//     ( ... )     a group (may hold alternatives)
// A rule's body may span lines; the next rule starts at "name ::=". Matching starts at
// `root`. Characters are Unicode scalar values matched against UTF-8 input.
//
// Compile-time checks, each refused with kInvalidArgument naming line:column: syntax,
// undefined rule, duplicate rule, missing root, left recursion (the matcher expands rules
// eagerly), the limits below, and an empty language (root derives no finite string).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"

namespace ari::runtime {

struct GrammarLimits {
  size_t max_text_bytes = size_t{256} * 1024;  // grammar or schema text
  int32_t max_rules = 8192;                    // after expanding groups and repetitions
  int32_t max_elements = 1 << 20;              // compiled elements (characters, references)
  int32_t max_nesting = 64;                    // ( ... ) nesting / schema nesting depth
  int32_t max_repeat = 4096;                   // m and n of {m,n}
};

// The compiled form. A rule has alternatives; an alternative is a run of elements in
// `elements` ending with a kEnd element. Every element is a character class or a rule
// reference. Immutable once built: share one between any number of matchers/threads.
class CompiledGrammar {
 public:
  enum class Kind : uint8_t { kEnd, kClass, kRule };
  struct Element {
    Kind kind = Kind::kEnd;
    uint32_t value = 0;  // class index (kClass) or rule index (kRule)
  };
  struct CharClass {
    uint32_t range_begin = 0, range_end = 0;  // into ranges(): [lo, hi] pairs
    bool negated = false;
  };
  struct Range {
    uint32_t lo = 0, hi = 0;  // inclusive code points
  };

  // Parses and checks `text`; the root rule is `root`.
  static Result<std::shared_ptr<const CompiledGrammar>> Parse(std::string_view text,
                                                              const GrammarLimits& limits = {});

  uint32_t root() const { return root_; }
  size_t rule_count() const { return rule_alts_.size(); }
  const std::vector<Element>& elements() const { return elements_; }
  // Alternatives of rule r: alt_starts()[rule_alts()[r].first .. second) are element indices.
  const std::vector<std::pair<uint32_t, uint32_t>>& rule_alts() const { return rule_alts_; }
  const std::vector<uint32_t>& alt_starts() const { return alt_starts_; }
  const std::vector<CharClass>& classes() const { return classes_; }
  const std::vector<Range>& ranges() const { return ranges_; }
  const std::string& rule_name(uint32_t r) const { return rule_names_[r]; }

  bool ClassMatches(uint32_t cls, uint32_t cp) const;
  // Whether class `cls` holds any code point in [lo, hi] (prunes partial UTF-8).
  bool ClassIntersects(uint32_t cls, uint32_t lo, uint32_t hi) const;
  // Whether class `cls` holds every code point of [lo, hi].
  bool ClassCovers(uint32_t cls, uint32_t lo, uint32_t hi) const;

  // Text form of the compiled grammar (one line per rule; for tests and debugging).
  std::string ToString() const;

 private:
  friend class GrammarBuilder;
  uint32_t root_ = 0;
  std::vector<Element> elements_;
  std::vector<std::pair<uint32_t, uint32_t>> rule_alts_;
  std::vector<uint32_t> alt_starts_;
  std::vector<CharClass> classes_;
  std::vector<Range> ranges_;
  std::vector<std::string> rule_names_;
};

}  // namespace ari::runtime
