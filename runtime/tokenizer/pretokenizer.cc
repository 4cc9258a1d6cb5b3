// Byte-level BPE pre-tokenizers: the regex lists llama.cpp (src/llama-vocab.cpp) uses for
// each tokenizer.ggml.pre, run with ICU. As in llama.cpp's unicode_regex_split, the regexes
// are applied one after the other; each splits every current fragment into its matches and
// the gaps between them, and lookarounds never see past the fragment's ends.
//
// Differences from llama.cpp, by design: `\s` / `\S` mean Unicode White_Space (llama.cpp's
// own table; ICU's plain \s would miss U+0085 and U+000B); bytes that are not valid UTF-8
// act as U+FFFD for matching but keep their original bytes (llama.cpp replaces them); the
// Unicode tables are ICU's, not llama.cpp's generated ones (they differ only on code points
// assigned in recent Unicode versions); tekken uses the regex from its tokenizer.json.
// Code points that Unicode normalisation would fold (U+1F7D, U+2126, U+212A...) are written
// as \x{...} escapes so that no editor or tool can silently change them.
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer_impl.h"

namespace ari::runtime::tok {

namespace {

constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kCjk = R"re([一-龥ࠀ-一가-퟿]+)re";
constexpr const char* kPoro = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";

struct PreEntry {
  const char* names;  // '|'-separated
  PreInfo info;
  std::vector<const char*> regexes;
};

const std::vector<PreEntry>& Table() {
  static const std::vector<PreEntry> table = {
      {"default", {}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"}},
      {"llama3|llama-v3|llama-bpe|falcon3", {true, true}, {kLlama3}},
      {"dbrx|smaug-bpe", {}, {kLlama3}},
      {"deepseek-llm",
       {},
       {R"re([\r\n])re",
        R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
        R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", kCjk, R"re(\p{N}+)re"}},
      {"deepseek-coder",
       {},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjk, R"re(\p{N})re"}},
      {"deepseek-v3",
       {},
       {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"falcon", {}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"}},
      {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
       {},
       {R"re(\p{N})re", kGpt2}},
      {"gpt-2|phi-2|mpt|olmo|jais|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|"
       "jina-v2-code|roberta-bpe",
       {},
       {kGpt2}},
      {"qwen2|stablelm2|megrez", {}, {kQwen2}},
      {"poro-chat|bloom|gpt3-finnish", {}, {kPoro}},
      {"viking", {}, {kPoro, R"re(\p{N})re"}},
      {"tekken",
       {true, true},
       {R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"}},
      {"chameleon",
       {false, true},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", R"re(([\t\n]|    |  ))re",
        R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2}},
  };
  return table;
}

const PreEntry* FindEntry(std::string_view pre) {
  for (const PreEntry& e : Table()) {
    std::string_view names = e.names;
    while (!names.empty()) {
      const size_t bar = names.find('|');
      if (names.substr(0, bar) == pre) return &e;
      if (bar == std::string_view::npos) break;
      names.remove_prefix(bar + 1);
    }
  }
  return nullptr;
}

// `\s` / `\S` -> Unicode White_Space (also inside sets); other escapes are kept as they are.
std::string RewriteWhitespace(std::string_view re) {
  std::string out;
  out.reserve(re.size() + 32);
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\' && i + 1 < re.size()) {
      const char c = re[i + 1];
      if (c == 's') {
        out += "\\p{White_Space}";
      } else if (c == 'S') {
        out += "\\P{White_Space}";
      } else {
        out.push_back('\\');
        out.push_back(c);
      }
      ++i;
      continue;
    }
    out.push_back(re[i]);
  }
  return out;
}

// Decodes one code point at `i` (strict UTF-8); invalid bytes give U+FFFD and length 1.
UChar32 DecodeAt(std::string_view s, size_t i, size_t& len) {
  const Utf8Decoded d = DecodeUtf8At(s, i);
  len = d.length;
  return d.valid ? static_cast<UChar32>(d.code_point) : 0xFFFD;
}

}  // namespace

bool LookupPre(std::string_view pre, PreInfo& info) {
  const PreEntry* e = FindEntry(pre);
  if (e == nullptr) return false;
  info = e->info;
  return true;
}

struct PreTokenizer::Impl {
  std::vector<std::string> patterns;  // as given (before the \s rewrite)
  std::vector<std::unique_ptr<icu::RegexPattern>> compiled;
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::~PreTokenizer() = default;

const std::vector<std::string>& PreTokenizer::patterns() const { return impl_->patterns; }

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre) {
  if (pre.empty()) pre = "default";
  const PreEntry* e = FindEntry(pre);
  if (e == nullptr) {
    return MakeError(ErrorCode::kUnsupported,
                     "tokenizer: unknown pre-tokenizer '" + std::string(pre) + "'");
  }
  auto impl = std::make_unique<Impl>();
  for (const char* re : e->regexes) {
    const std::string rewritten = RewriteWhitespace(re);
    UErrorCode status = U_ZERO_ERROR;
    UParseError perr{};
    std::unique_ptr<icu::RegexPattern> p(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(rewritten), 0, perr, status));
    if (U_FAILURE(status) || !p) {
      return MakeError(ErrorCode::kInternal, "tokenizer: pre-tokenizer '" + std::string(pre) +
                                                 "': ICU cannot compile regex '" + re +
                                                 "': " + u_errorName(status) + " at offset " +
                                                 std::to_string(perr.offset));
    }
    impl->patterns.emplace_back(re);
    impl->compiled.push_back(std::move(p));
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(impl)));
}

Result<void> PreTokenizer::Split(std::string_view text,
                                 std::vector<std::pair<size_t, size_t>>& words) const {
  if (text.empty()) return {};
  if (text.size() > static_cast<size_t>(INT32_MAX / 2)) {
    return MakeError(ErrorCode::kInvalidArgument, "tokenizer: text too long to pre-tokenize");
  }
  // UTF-16 copy for ICU, with the byte offset of every UTF-16 unit.
  icu::UnicodeString u;
  std::vector<uint32_t> byte_at;
  byte_at.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    const UChar32 cp = DecodeAt(text, i, len);
    const int32_t before = u.length();
    u.append(cp);
    for (int32_t k = before; k < u.length(); ++k) byte_at.push_back(static_cast<uint32_t>(i));
    i += len;
  }
  byte_at.push_back(static_cast<uint32_t>(text.size()));

  std::vector<std::pair<int32_t, int32_t>> frags{{0, u.length()}};
  std::vector<std::pair<int32_t, int32_t>> next;
  for (const auto& pattern : impl_->compiled) {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> m(pattern->matcher(u, status));
    if (U_FAILURE(status) || !m) {
      return MakeError(ErrorCode::kInternal,
                       std::string("tokenizer: ICU matcher failed: ") + u_errorName(status));
    }
    next.clear();
    for (const auto& [s, e] : frags) {
      m->region(s, e, status);
      int32_t last = s;
      while (m->find(status) && U_SUCCESS(status)) {
        const int32_t ms = m->start(status);
        const int32_t me = m->end(status);
        if (U_FAILURE(status) || me <= ms) continue;
        if (ms > last) next.emplace_back(last, ms);
        next.emplace_back(ms, me);
        last = me;
      }
      if (U_FAILURE(status)) {
        return MakeError(ErrorCode::kInternal,
                         std::string("tokenizer: ICU regex failed: ") + u_errorName(status));
      }
      if (last < e) next.emplace_back(last, e);
    }
    frags.swap(next);
  }
  words.reserve(words.size() + frags.size());
  for (const auto& [s, e] : frags) {
    words.emplace_back(byte_at[static_cast<size_t>(s)], byte_at[static_cast<size_t>(e)]);
  }
  return {};
}

}  // namespace ari::runtime::tok
