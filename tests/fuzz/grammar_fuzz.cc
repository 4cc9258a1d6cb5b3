// libFuzzer target: the grammar parser and the JSON Schema converter on arbitrary text,
// then the matcher and the vocabulary mask over what compiled.
//
// Input layout: byte 0 = mode (even: grammar text, odd: JSON Schema); then the text up
// to the first '\x1e' (record separator); the bytes after it are fed to a matcher, and a
// small fixed vocabulary's mask is computed along the way.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"

namespace {

using namespace ari::runtime;

const std::shared_ptr<const TokenTrie>& Trie() {
  static const std::shared_ptr<const TokenTrie> t = [] {
    std::vector<std::string> pieces = {
        "{",    "}", "\"", ":",        ",",    " ",        "\n",   "true", "false",
        "null", "[", "]",  "\xE2\x82", "\xAC", "\xC3\xA9", "a",    "ab",   "0",
        "12",   "-", ".",  "e",        "\\",   "u00",      "<eos>"};
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    auto r = TokenTrie::FromPieces(pieces, {24});
    return r ? *r : nullptr;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t sep = all.find('\x1e');
  const std::string_view text = all.substr(0, sep);
  const std::string_view input = sep == std::string_view::npos ? "" : all.substr(sep + 1);
  GrammarLimits limits;
  limits.max_text_bytes = 4096;
  limits.max_rules = 512;
  limits.max_elements = 1 << 14;
  limits.max_repeat = 64;
  auto g = (data[0] & 1) ? CompileJsonSchema(text, limits) : CompiledGrammar::Parse(text, limits);
  if (!g) return 0;
  MatcherLimits ml;
  ml.max_nodes = 1 << 12;
  ml.max_tops = 1 << 10;
  GrammarMatcher m(*g, ml);
  if ((*g)->ToString().empty()) __builtin_trap();  // a compiled grammar has rules
  for (char c : input) {
    const int32_t frames = m.frames();
    if (!m.PushByte(static_cast<uint8_t>(c))) {
      if (m.frames() != frames) __builtin_trap();  // a refused byte leaves the state alone
      break;
    }
    if (m.frames() > 8) m.Commit();
  }
  if (!Trie()) return 0;
  TokenConstraint c(*g, Trie(), ml);
  for (char ch : input) {
    if (c.ComputeMask() == 0 || c.Finished()) break;
    const auto id = static_cast<TokenId>(static_cast<uint8_t>(ch) % Trie()->vocab_size());
    if (c.allowed()[static_cast<size_t>(id)] != 0 && !c.Accept(id)) __builtin_trap();
  }
  return 0;
}
