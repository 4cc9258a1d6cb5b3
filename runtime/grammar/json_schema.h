// A JSON Schema subset compiled to a grammar (grammar.h) whose sentences are exactly JSON
// texts valid against the schema (docs/structured_output.md lists the subset):
//   type: object (properties in their declared order, required; no other properties),
//         array (items, minItems, maxItems), string (minLength, maxLength), integer and
//         number (minimum, maximum; integer also exclusiveMinimum/exclusiveMaximum),
//         boolean, null, or a list of these types; enum, const, anyOf / oneOf.
//   {} or true: any JSON value (nesting bounded by MatcherLimits::max_depth at run time).
// Refused with kInvalidArgument naming the JSON pointer of the offending keyword:
// pattern, format, $ref, allOf, not, if/then/else, multipleOf, uniqueItems and other
// constraining keywords the grammar would not enforce; empty ranges; malformed JSON (with
// line and column). Annotations (title, description, default, examples, $schema, $id,
// $comment) and additionalProperties are ignored (no additional property is ever produced).
//
// Bounds: integers are matched by an exact range automaton (digit-by-digit alternatives,
// no leading zeros), |n| <= 10^15 - 1 when a side is unbounded. A bounded number has no
// exponent and at most kFractionDigits fraction digits; its bounds are rounded inward to
// integers (minimum 15.5 admits 16.0 and up): the grammar admits a subset of the valid
// numbers, never a number outside the range. An unbounded number is a full JSON number
// with at most 15 integer digits.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/core/error.h"
#include "runtime/grammar/grammar.h"

namespace ari::runtime {

inline constexpr int kFractionDigits = 6;
inline constexpr int kUnboundedDigits = 15;

// The grammar text (the syntax of grammar.h) for `schema_json`.
Result<std::string> JsonSchemaToGrammar(std::string_view schema_json,
                                        const GrammarLimits& limits = {});
// JsonSchemaToGrammar + CompiledGrammar::Parse.
Result<std::shared_ptr<const CompiledGrammar>> CompileJsonSchema(std::string_view schema_json,
                                                                 const GrammarLimits& limits = {});

namespace schema_internal {
// Grammar expression for the integers in [lo, hi] (lo <= hi).
std::string IntegerRange(int64_t lo, int64_t hi);
// Grammar expression for the decimals in [lo, hi] (integers, lo <= hi), no exponent.
std::string DecimalRange(int64_t lo, int64_t hi);
}  // namespace schema_internal

}  // namespace ari::runtime
