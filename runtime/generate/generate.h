// The generation loop: prompt -> prefill (one Forward call, chunked by the session) ->
// sample -> stream text pieces (UTF-8 safe, through StreamDecoder) -> decode the next token,
// until end-of-generation, a stop string, the token budget or a full context.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/generate/stop_strings.h"
#include "runtime/tokenizer/tokenizer.h"  // EncodeOptions

namespace ari::runtime {

class Sampler;
class Session;

struct GenerateOptions {
  int32_t max_tokens = 64;                // sampled tokens at most (a stop token counts)
  std::vector<std::string> stop_strings;  // text after (and including) a match is dropped
  bool stop_on_bos = true;                // a sampled BOS ends generation (as llama2.c)
  bool render_special = false;            // stream the text of control tokens too
};

struct GenerateResult {
  std::vector<TokenId> tokens;  // every sampled id, incl. the one that stopped generation
  std::string text;             // the streamed text (stop string and after excluded)
  StopReason stop_reason = StopReason::kMaxTokens;
  int32_t prompt_tokens = 0;
  double prompt_seconds = 0;  // prefill wall time
  double gen_seconds = 0;     // sampling + decode wall time after the prefill
  // The last sampled token is not in the KV cache yet (nothing needed its logits).
  double PromptTokensPerSecond() const;
  double GenTokensPerSecond() const;
};

// Receives text as it becomes final. Return false to stop generation.

// Prefills `prompt` at the session's current position, then samples. The session must have
// room for the prompt; generation stops with kContextFull when the cache fills up.
Result<GenerateResult> Generate(Session& session, Sampler& sampler, std::span<const TokenId> prompt,
                                const GenerateOptions& opts, const TextCallback& on_text = {});

// Encodes `prompt` with the model's tokenizer first (error if the model has none).
Result<GenerateResult> GenerateFromText(Session& session, Sampler& sampler, std::string_view prompt,
                                        const EncodeOptions& encode, const GenerateOptions& opts,
                                        const TextCallback& on_text = {});

}  // namespace ari::runtime
