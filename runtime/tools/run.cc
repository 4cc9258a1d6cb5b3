// ari-run: load a GGUF model, generate from a prompt, stream the text to stdout and print
// prompt / generation speed on stderr.
//
//   ari-run -m model.gguf -p "Once upon a time" -n 64 [--temp T] [--top-p P] [--top-k K]
//           [--min-p M] [--repeat-penalty R] [--seed S] [--chat] [--system TEXT]
//           [--stop STR]... [--ctx N] [--batch N] [--info]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat_template.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace {

namespace rt = ari::runtime;

constexpr int32_t kDefaultCtxCap = 4096;

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-run -m MODEL.gguf [-p PROMPT] [-n N_TOKENS]\n"
               "  --temp T (0.8; 0 = greedy)  --top-p P (0.9)  --top-k K (0 = off)\n"
               "  --min-p M (0 = off)  --repeat-penalty R (1 = off)  --seed S (time)\n"
               "  --chat (apply the model's chat template)  --system TEXT (with --chat)\n"
               "  --stop STR (repeatable)  --ctx N (context; default min(model's, 4096))\n"
               "  --batch N (prefill chunk, 32)\n"
               "  --info (print the model config)\n");
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ari-run: %s\n", msg.c_str());
  return 1;
}

bool ParseNumber(const char* s, double& out) {
  char* end = nullptr;
  out = std::strtod(s, &end);
  return end != s && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, prompt, system;
  rt::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_p = 0.9f;
  sp.seed = static_cast<uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count());
  rt::GenerateOptions gen;
  gen.max_tokens = 64;
  rt::SessionOptions so;
  bool chat = false, info = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    double num = 0;
    auto number = [&]() {
      if (!has_value || !ParseNumber(argv[i + 1], num)) return false;
      ++i;
      return true;
    };
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    } else if (a == "-m" && has_value) {
      model_path = argv[++i];
    } else if (a == "-p" && has_value) {
      prompt = argv[++i];
    } else if (a == "--system" && has_value) {
      system = argv[++i];
    } else if (a == "--stop" && has_value) {
      gen.stop_strings.emplace_back(argv[++i]);
    } else if (a == "-n" && number()) {
      gen.max_tokens = static_cast<int32_t>(num);
    } else if (a == "--temp" && number()) {
      sp.temperature = static_cast<float>(num);
    } else if (a == "--top-p" && number()) {
      sp.top_p = static_cast<float>(num);
    } else if (a == "--top-k" && number()) {
      sp.top_k = static_cast<int32_t>(num);
    } else if (a == "--min-p" && number()) {
      sp.min_p = static_cast<float>(num);
    } else if (a == "--repeat-penalty" && number()) {
      sp.repeat_penalty = static_cast<float>(num);
    } else if (a == "--seed" && number()) {
      sp.seed = static_cast<uint64_t>(num);
    } else if (a == "--ctx" && number()) {
      so.context_length = static_cast<int32_t>(num);
    } else if (a == "--batch" && number()) {
      so.max_batch = static_cast<int32_t>(num);
    } else if (a == "--chat") {
      chat = true;
    } else if (a == "--info") {
      info = true;
    } else {
      Usage(stderr);
      return Fail("unknown argument or missing/bad value: '" + std::string(a) + "'");
    }
  }
  if (model_path.empty()) {
    Usage(stderr);
    return Fail("-m MODEL.gguf is required");
  }
  if (gen.max_tokens < 0) return Fail("-n must be >= 0");

  auto model = rt::Model::Load(model_path);
  if (!model) return Fail(model.error().ToString());
  const rt::ModelConfig& cfg = (*model)->config();
  if (info) std::fprintf(stderr, "ari-run: %s\n", cfg.ToString().c_str());

  rt::EncodeOptions enc;
  std::string text = prompt;
  if (chat) {
    auto kind = rt::DetectChatTemplate((*model)->file());
    if (!kind) return Fail("--chat: " + kind.error().ToString());
    std::vector<rt::ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    auto rendered = rt::ApplyChatTemplate(*kind, msgs, /*add_assistant_prefix=*/true);
    if (!rendered) return Fail("--chat: " + rendered.error().ToString());
    text = std::move(*rendered);
    enc.parse_special = true;
  }
  // fp32 KV cache: cap the default context so long-context models fit in memory.
  if (so.context_length == 0) so.context_length = std::min(cfg.context_length, kDefaultCtxCap);
  auto session = rt::Session::Create(**model, so);
  if (!session) return Fail(session.error().ToString());
  rt::Sampler sampler(cfg.vocab_size, sp);

  if (!chat) {  // echo the prompt, as llama2.c and llama.cpp do
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto res = rt::GenerateFromText(**session, sampler, text, enc, gen, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!res) return Fail(res.error().ToString());
  std::fprintf(stderr,
               "ari-run: prompt %d tokens in %.3f s (%.1f tokens/s); generation %zu tokens in "
               "%.3f s (%.1f tokens/s); stop: %s\n",
               res->prompt_tokens, res->prompt_seconds, res->PromptTokensPerSecond(),
               res->tokens.size(), res->gen_seconds, res->GenTokensPerSecond(),
               std::string(rt::StopReasonName(res->stop_reason)).c_str());
  return 0;
}
