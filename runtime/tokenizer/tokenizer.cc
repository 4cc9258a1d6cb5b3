// Tokenizer factory (GGUF metadata -> VocabSpec -> SPM/BPE) and the vocabulary base shared
// by both tokenizers (special tokens, attributes, piece cache, special-token partitioning).
// Decoding (whole sequence and streaming) is in tokenizer_decode.cc.
#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer_impl.h"

namespace ari::runtime {

namespace tok {

namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

uint16_t BitsFromType(int32_t type) {
  switch (static_cast<TokenAttr>(type)) {
    case TokenAttr::kNormal: return kBitNormal;
    case TokenAttr::kUnknown: return kBitUnknown;
    case TokenAttr::kControl: return kBitControl;
    case TokenAttr::kUserDefined: return kBitUserDefined;
    case TokenAttr::kUnused: return kBitUnused;
    case TokenAttr::kByte: return kBitByte;
    case TokenAttr::kUndefined: return 0;
  }
  return 0;
}

// The sizes of the spec's arrays agree.
Result<void> CheckSpec(const VocabSpec& spec, std::span<const std::string_view> tokens) {
  const size_t n = tokens.size();
  if (n == 0) return MakeError(ErrorCode::kFormat, "tokenizer: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX) / 2) {
    return MakeError(ErrorCode::kFormat, "tokenizer: vocabulary too large");
  }
  // The texts (an empty one becomes "[EMPTY_<id>]") must fit the packed tables' 32-bit
  // offsets, with room to spare; a piece is never longer than its text.
  size_t chars = 0;
  for (std::string_view t : tokens) chars += t.size() + 16;
  if (chars > PackedStrings::kMaxChars / 3) {
    return MakeError(ErrorCode::kFormat,
                     "tokenizer: token texts too large (" + std::to_string(chars) + " bytes)");
  }
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return MakeError(ErrorCode::kFormat, "tokenizer: " + std::to_string(spec.scores.size()) +
                                             " scores for " + std::to_string(n) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return MakeError(ErrorCode::kFormat, "tokenizer: " + std::to_string(spec.token_types.size()) +
                                             " token types for " + std::to_string(n) + " tokens");
  }
  return {};
}

}  // namespace

Result<void> VocabTokenizer::InitCommon(VocabSpec& spec, std::span<const std::string_view> tokens,
                                        TokenId def_bos, TokenId def_eos, TokenId def_unk,
                                        bool def_add_bos, bool def_add_space_prefix) {
  if (auto r = CheckSpec(spec, tokens); !r) return r;
  TakeVocabulary(spec, tokens);
  PickSpecialTokens(spec, def_bos, def_eos, def_unk, def_add_bos, def_add_space_prefix);
  FindEndOfGeneration();
  BuildSpecialCache();
  SetStripBits(spec.name);
  return {};
}

void VocabTokenizer::TakeVocabulary(VocabSpec& spec, std::span<const std::string_view> tokens) {
  const size_t n = tokens.size();
  model_ = spec.model;
  pre_ = spec.pre.empty() ? std::string("default") : spec.pre;
  size_t chars = 0;
  for (std::string_view t : tokens) chars += t.size();
  tokens_.Reserve(n, chars);
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i].empty()) {
      tokens_.Append("[EMPTY_" + std::to_string(i) + "]");  // as llama.cpp
    } else {
      tokens_.Append(tokens[i]);
    }
  }
  scores_ = spec.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(spec.scores);
  types_ = spec.token_types.empty()
               ? std::vector<int32_t>(n, static_cast<int32_t>(TokenAttr::kNormal))
               : std::move(spec.token_types);
  bits_.resize(n);
  for (size_t i = 0; i < n; ++i) bits_[i] = BitsFromType(types_[i]);
  token_to_id_.Build(tokens_);  // a repeated text: the last id wins
}

void VocabTokenizer::PickSpecialTokens(const VocabSpec& spec, TokenId def_bos, TokenId def_eos,
                                       TokenId def_unk, bool def_add_bos,
                                       bool def_add_space_prefix) {
  const size_t n = tokens_.size();
  auto pick = [n](int64_t given, TokenId def) -> TokenId {
    if (given >= 0 && static_cast<uint64_t>(given) < n) return static_cast<TokenId>(given);
    return (def >= 0 && static_cast<size_t>(def) < n) ? def : -1;
  };
  bos_ = pick(spec.bos, def_bos);
  eos_ = pick(spec.eos, def_eos);
  unk_ = pick(spec.unk, def_unk);
  pad_ = pick(spec.pad, -1);
  eot_ = pick(spec.eot, -1);
  eom_ = pick(spec.eom, -1);
  add_bos_ = spec.add_bos >= 0 ? spec.add_bos != 0 : def_add_bos;
  add_eos_ = spec.add_eos >= 0 && spec.add_eos != 0;
  add_space_prefix_ =
      spec.add_space_prefix >= 0 ? spec.add_space_prefix != 0 : def_add_space_prefix;
}

void VocabTokenizer::FindEndOfGeneration() {
  // End-of-turn / end-of-generation tokens recognised by their text, as llama.cpp does;
  // such tokens become control tokens.
  auto force_control = [this](TokenId id) {
    if ((bits_[static_cast<size_t>(id)] & kBitControl) == 0)
      bits_[static_cast<size_t>(id)] = kBitControl;
  };
  auto find_first = [this](std::initializer_list<std::string_view> texts) -> TokenId {
    for (std::string_view t : texts) {
      if (TokenId id = FindToken(t); id >= 0) return id;
    }
    return -1;
  };
  if (eot_ < 0) {
    // The last is "<｜end▁of▁sentence｜>", split so that "\x9C" "e" is not read as "\x9Ce"
    // (parenthesised: the concatenation is intended).
    eot_ = find_first({"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                       "<EOT>",
                       ("<\xEF\xBD\x9C"
                        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")});
    if (eot_ >= 0) force_control(eot_);
  }
  if (eom_ < 0) {
    eom_ = find_first({"<|eom_id|>"});
    if (eom_ >= 0) force_control(eom_);
  }
  std::vector<TokenId> eog;
  for (TokenId id : {find_first({"<|fim_pad|>", "<fim-pad>", "<PAD>"}),
                     find_first({"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}),
                     find_first({"<|file_sep|>"})}) {
    if (id >= 0) eog.push_back(id);
  }
  for (std::string_view t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                             "<|endoftext|>", "<|eom_id|>", "<EOT>"}) {
    if (TokenId id = FindToken(t); id >= 0) {
      eog.push_back(id);
      force_control(id);
    }
  }
  for (TokenId id : {eos_, eot_, eom_}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  eog_ = std::move(eog);
}

void VocabTokenizer::BuildSpecialCache() {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (bits_[i] & (kBitControl | kBitUserDefined | kBitUnknown)) {
      special_cache_.push_back(static_cast<TokenId>(i));
    }
  }
  std::stable_sort(special_cache_.begin(), special_cache_.end(), [this](TokenId a, TokenId b) {
    return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
  });
}

void VocabTokenizer::SetStripBits(std::string_view spec_name) {
  // Per-token strip attributes llama.cpp derives from the model / pre-tokenizer name.
  const std::string name = Lower(spec_name);
  auto set_bit = [this](TokenId id, uint16_t bit, bool on) {
    if (id < 0) return;
    auto& b = bits_[static_cast<size_t>(id)];
    b = on ? static_cast<uint16_t>(b | bit) : static_cast<uint16_t>(b & ~bit);
  };
  if (pre_.find("jina-v2-de") != std::string::npos ||
      pre_.find("jina-v2-es") != std::string::npos ||
      pre_.find("jina-v2-code") != std::string::npos) {
    set_bit(FindToken("<mask>"), kBitLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (TokenId id : special_cache_) set_bit(id, kBitRstrip, true);
    set_bit(FindToken("</s>"), kBitRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      set_bit(FindToken(t), kBitRstrip, false);
    }
  }
}

void VocabTokenizer::BuildPieces() {
  pieces_.Clear();
  pieces_.Reserve(tokens_.size(), tokens_.chars());  // a piece is never longer than its text
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const uint16_t b = bits_[i];
    if (b & (kBitUnknown | kBitControl | kBitUserDefined)) {
      pieces_.Append(tokens_[i]);
    } else {
      pieces_.Append(NormalPiece(static_cast<TokenId>(i)));
    }
  }
}

bool VocabTokenizer::IsEog(TokenId id) const {
  return id >= 0 && std::binary_search(eog_.begin(), eog_.end(), id);
}

TokenAttr VocabTokenizer::Attr(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return TokenAttr::kUndefined;
  const uint16_t b = bits_[static_cast<size_t>(id)];
  if (b & kBitControl) return TokenAttr::kControl;  // also tokens promoted to control
  if (b & kBitUnknown) return TokenAttr::kUnknown;
  if (b & kBitUserDefined) return TokenAttr::kUserDefined;
  if (b & kBitByte) return TokenAttr::kByte;
  if (b & kBitUnused) return TokenAttr::kUnused;
  if (b & kBitNormal) return TokenAttr::kNormal;
  return TokenAttr::kUndefined;
}

std::string_view VocabTokenizer::TokenText(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return {};
  return tokens_[static_cast<size_t>(id)];
}

TokenId VocabTokenizer::FindToken(std::string_view text) const {
  return token_to_id_.Find(tokens_, text);
}

std::string_view VocabTokenizer::Piece(TokenId id, bool special) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return {};
  if (!special && (bits_[static_cast<size_t>(id)] & (kBitUnknown | kBitControl))) return {};
  return pieces_[static_cast<size_t>(id)];
}

std::string VocabTokenizer::TokenToPiece(TokenId id, bool special) const {
  return std::string(Piece(id, special));
}

// Mirrors llama.cpp's tokenizer_st_partition: for each special token, longest text first,
// split every raw fragment at each occurrence (leftmost first), honouring lstrip/rstrip.
void VocabTokenizer::Partition(std::string_view text, bool parse_special,
                               std::vector<Fragment>& frags) const {
  frags.clear();
  if (text.empty()) return;
  frags.push_back(Fragment{0, text.size(), -1});
  std::vector<Fragment> next;
  for (TokenId id : special_cache_) {
    const uint16_t b = bits_[static_cast<size_t>(id)];
    if (!parse_special && (b & (kBitControl | kBitUnknown))) continue;
    const std::string_view st = tokens_[static_cast<size_t>(id)];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t base = f.off;
      size_t len = f.len;
      while (len > 0) {
        const size_t pos = text.find(st, base);
        if (pos == std::string_view::npos || pos + st.size() > base + len) break;
        changed = true;
        size_t left = pos - base;
        if (b & kBitLstrip) {
          while (left > 0 && IsAsciiSpace(text[base + left - 1])) --left;
        }
        if (left > 0) next.push_back(Fragment{base, left, -1});
        next.push_back(Fragment{0, 0, id});
        size_t roff = pos + st.size();
        size_t rlen = base + len - roff;
        if (b & kBitRstrip) {
          while (rlen > 0 && IsAsciiSpace(text[roff])) {
            ++roff;
            --rlen;
          }
        }
        base = roff;
        len = rlen;
      }
      if (len > 0) next.push_back(Fragment{base, len, -1});
    }
    if (changed) frags.swap(next);
  }
}

Result<std::vector<TokenId>> VocabTokenizer::Encode(std::string_view text,
                                                    const EncodeOptions& opts) const {
  std::vector<Fragment> frags;
  Partition(text, opts.parse_special, frags);
  std::vector<TokenId> out;
  out.reserve(text.size() / 2 + 4);
  if (opts.add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
  bool after_special = true;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (auto r = EncodeText(text.substr(f.off, f.len), after_special, out); !r) {
      return std::unexpected(std::move(r.error()));
    }
    after_special = false;
  }
  if (opts.add_eos && eos_ >= 0) out.push_back(eos_);
  return out;
}

}  // namespace tok

namespace {

// The tokenizer.* keys of `file` but the token texts (see Tokenizer::SpecFromGguf).
Result<VocabSpec> SpecWithoutTokens(const GgufFile& file) {
  auto fail = [&file](const Error& e) {
    return MakeError(e.code, file.name() + ": tokenizer: " + e.message);
  };
  VocabSpec spec;
  auto model = file.GetString("tokenizer.ggml.model");
  if (!model) return fail(model.error());
  spec.model = std::string(*model);
  if (file.Has("tokenizer.ggml.pre")) {
    auto pre = file.GetString("tokenizer.ggml.pre");
    if (!pre) return fail(pre.error());
    spec.pre = std::string(*pre);
  }
  if (file.Has("general.name")) {
    auto name = file.GetString("general.name");
    if (name) spec.name = std::string(*name);
  }
  if (file.Has("tokenizer.ggml.scores")) {
    auto scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (!scores) return fail(scores.error());
    spec.scores = std::move(*scores);
  }
  if (file.Has("tokenizer.ggml.token_type")) {
    auto types = file.GetInt32Array("tokenizer.ggml.token_type");
    if (!types) return fail(types.error());
    spec.token_types = std::move(*types);
  }
  if (file.Has("tokenizer.ggml.merges")) {
    auto merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges) return fail(merges.error());
    spec.merges.reserve(merges->size());
    for (std::string_view m : *merges) spec.merges.emplace_back(m);
  }
  const std::pair<const char*, int64_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &spec.bos},
      {"tokenizer.ggml.eos_token_id", &spec.eos},
      {"tokenizer.ggml.unknown_token_id", &spec.unk},
      {"tokenizer.ggml.padding_token_id", &spec.pad},
      {"tokenizer.ggml.eot_token_id", &spec.eot},
      {"tokenizer.ggml.eom_token_id", &spec.eom},
  };
  for (const auto& [key, dst] : ids) {
    if (!file.Has(key)) continue;
    auto v = file.GetUint(key);
    if (!v) return fail(v.error());
    *dst = *v > static_cast<uint64_t>(INT32_MAX) ? INT64_MAX : static_cast<int64_t>(*v);
  }
  const std::pair<const char*, int*> flags[] = {
      {"tokenizer.ggml.add_bos_token", &spec.add_bos},
      {"tokenizer.ggml.add_eos_token", &spec.add_eos},
      {"tokenizer.ggml.add_space_prefix", &spec.add_space_prefix},
  };
  for (const auto& [key, dst] : flags) {
    if (!file.Has(key)) continue;
    auto v = file.GetBool(key);
    if (!v) return fail(v.error());
    *dst = *v ? 1 : 0;
  }
  return spec;
}

Result<std::vector<std::string_view>> TokenTexts(const GgufFile& file) {
  auto tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens)
    return MakeError(tokens.error().code, file.name() + ": tokenizer: " + tokens.error().message);
  return tokens;
}

Result<std::unique_ptr<Tokenizer>> Make(VocabSpec spec, std::span<const std::string_view> tokens) {
  if (spec.model == "llama") return tok::MakeSpm(std::move(spec), tokens);
  if (spec.model == "gpt2") return tok::MakeBpe(std::move(spec), tokens);
  return MakeError(ErrorCode::kUnsupported, "tokenizer: unsupported tokenizer.ggml.model '" +
                                                spec.model + "' (supported: llama, gpt2)");
}

}  // namespace

Result<VocabSpec> Tokenizer::SpecFromGguf(const GgufFile& file) {
  auto spec = SpecWithoutTokens(file);
  if (!spec) return spec;
  auto tokens = TokenTexts(file);
  if (!tokens) return std::unexpected(std::move(tokens.error()));
  spec->tokens.assign(tokens->begin(), tokens->end());
  return spec;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(VocabSpec spec) {
  const std::vector<std::string_view> tokens(spec.tokens.begin(), spec.tokens.end());
  return Make(std::move(spec), tokens);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  // The token texts are read as views into the mapping and copied once, into the
  // tokenizer's packed table (no std::string per token in between).
  auto spec = SpecWithoutTokens(file);
  if (!spec) return std::unexpected(std::move(spec.error()));
  auto tokens = TokenTexts(file);
  if (!tokens) return std::unexpected(std::move(tokens.error()));
  auto tok = Make(std::move(*spec), *tokens);
  if (!tok) return MakeError(tok.error().code, file.name() + ": " + tok.error().message);
  return tok;
}

}  // namespace ari::runtime
