#include "runtime/generate/generate.h"

#include <algorithm>
#include <chrono>

#include "runtime/generate/sampler.h"
#include "runtime/generate/stop_strings.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"

namespace ari::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Result<void> CheckArgs(const Session& session, const Sampler& sampler,
                       std::span<const TokenId> prompt, const GenerateOptions& opts) {
  const Model& model = session.model();
  if (prompt.empty()) return MakeError(ErrorCode::kInvalidArgument, "generate: empty prompt");
  if (opts.max_tokens < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "generate: max_tokens must be >= 0");
  }
  if (sampler.vocab_size() != model.config().vocab_size) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "generate: sampler vocab size " + std::to_string(sampler.vocab_size()) +
                         " != model vocab size " + std::to_string(model.config().vocab_size));
  }
  return {};
}

// The decoder's held-back bytes, after the last token; a stop string may still match.
void FlushText(StreamDecoder& decoder, StopStringFilter& filter, std::string& piece,
               GenerateResult& res) {
  bool by_callback = false;
  piece.clear();
  decoder.Flush(piece);
  res.text += piece;
  if (!filter.Update(&by_callback)) {
    res.stop_reason = by_callback ? StopReason::kCallback : StopReason::kStopString;
  } else {
    filter.Finish(&by_callback);
  }
}

// The stop a constrained sampler asks for after drawing `next` (nullopt: none).
std::optional<StopReason> GrammarStop(const Sampler& sampler, TokenId next) {
  const TokenConstraint* c = sampler.params().constraint;
  if (c == nullptr || (next >= 0 && !c->Finished())) return std::nullopt;
  return next >= 0 && c->Complete() ? StopReason::kGrammarDone : StopReason::kGrammarDeadEnd;
}

}  // namespace

double GenerateResult::PromptTokensPerSecond() const {
  return prompt_seconds > 0 ? prompt_tokens / prompt_seconds : 0.0;
}
double GenerateResult::GenTokensPerSecond() const {
  return gen_seconds > 0 ? static_cast<double>(tokens.size()) / gen_seconds : 0.0;
}

Result<GenerateResult> Generate(Session& session, Sampler& sampler, std::span<const TokenId> prompt,
                                const GenerateOptions& opts, const TextCallback& on_text) {
  const Tokenizer* tok = session.model().tokenizer();
  if (auto r = CheckArgs(session, sampler, prompt, opts); !r) return std::unexpected(r.error());
  GenerateResult res;
  res.prompt_tokens = static_cast<int32_t>(prompt.size());
  const size_t budget = static_cast<size_t>(opts.max_tokens);
  res.tokens.reserve(budget);
  res.text.reserve(budget * 8 + 64);
  std::vector<TokenId> history(prompt.begin(), prompt.end());
  history.reserve(prompt.size() + budget);
  std::string piece;
  piece.reserve(256);

  const auto t0 = Clock::now();
  auto logits = Forward(session, prompt);
  if (!logits) return std::unexpected(logits.error());
  const auto t1 = Clock::now();
  res.prompt_seconds = Seconds(t0, t1);

  StopStringFilter filter(opts.stop_strings, res.text, on_text);
  std::optional<StreamDecoder> decoder;
  if (tok != nullptr) {
    decoder.emplace(*tok, opts.render_special);
    decoder->Reset(prompt);  // the text continues the prompt (its leading space kept)
  }
  bool by_callback = false;
  bool stopped = false;
  std::optional<StopReason> grammar_end;
  while (res.tokens.size() < budget) {
    const TokenId next = sampler.Sample(session.mutable_last_logits(), history);
    grammar_end = GrammarStop(sampler, next);
    if (next < 0 && !grammar_end)
      return MakeError(ErrorCode::kInternal, "generate: sampler failed");
    if (next < 0) break;  // no token continues the grammar (kGrammarDeadEnd below)
    res.tokens.push_back(next);
    history.push_back(next);
    if (tok != nullptr && tok->IsEog(next)) {
      res.stop_reason = StopReason::kEndOfGen;
      stopped = true;
      break;
    }
    if (opts.stop_on_bos && tok != nullptr && next == tok->Bos()) {
      res.stop_reason = StopReason::kBos;
      stopped = true;
      break;
    }
    if (decoder) {
      piece.clear();
      decoder->Push(next, piece);
      res.text += piece;
      if (!piece.empty() && !filter.Update(&by_callback)) {
        res.stop_reason = by_callback ? StopReason::kCallback : StopReason::kStopString;
        stopped = true;
        break;
      }
    }
    if (grammar_end) break;  // the output is complete (or stuck): reason set below
    if (res.tokens.size() == budget) break;
    if (session.position() >= session.context_length()) {
      res.stop_reason = StopReason::kContextFull;
      stopped = true;
      break;
    }
    auto r = Forward(session, std::span<const TokenId>(&next, 1));
    if (!r) return std::unexpected(r.error());
  }
  if (!stopped) res.stop_reason = StopReason::kMaxTokens;
  if (grammar_end && res.stop_reason != StopReason::kStopString &&
      res.stop_reason != StopReason::kCallback) {
    res.stop_reason = *grammar_end;  // an EOG that ended a complete grammar: kGrammarDone
  }
  if (decoder && res.stop_reason != StopReason::kStopString &&
      res.stop_reason != StopReason::kCallback) {
    FlushText(*decoder, filter, piece, res);
  }
  res.gen_seconds = Seconds(t1, Clock::now());
  return res;
}

Result<GenerateResult> GenerateFromText(Session& session, Sampler& sampler, std::string_view prompt,
                                        const EncodeOptions& encode, const GenerateOptions& opts,
                                        const TextCallback& on_text) {
  const Tokenizer* tok = session.model().tokenizer();
  if (tok == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "generate: the model has no tokenizer");
  }
  auto ids = tok->Encode(prompt, encode);
  if (!ids) return std::unexpected(ids.error());
  if (ids->empty()) {
    if (tok->Bos() < 0) return MakeError(ErrorCode::kInvalidArgument, "generate: empty prompt");
    ids->push_back(tok->Bos());
  }
  return Generate(session, sampler, *ids, opts, on_text);
}

}  // namespace ari::runtime
