// ari-run: load a GGUF model, generate from a prompt, stream the text to stdout and print
// prompt / generation speed and what ran on stderr.
//
//   ari-run -m model.gguf -p "Once upon a time" -n 64 [--temp T] [--top-p P] [--top-k K]
//           [--min-p M] [--repeat-penalty R] [--seed S]
//           [--chat [--system TEXT] [--turn user:TEXT|assistant:TEXT]...]
//           [--stop STR]... [--ctx N] [--batch N] [--info] [-t N]
//           [--precision auto|w8a16|w4a8] [--pack-cache DIR] [--reference]
//           [--memory-plan [--slots N] [--kv f16|int8] [--prefetch auto|on|off]
//            [--huge-pages auto|on|off]]
//           [--schema FILE.json | --grammar FILE.gbnf]
//
// Generation runs through the Engine (runtime/engine/engine.h), the path ari-node runs: a
// pack directly, a plain GGUF through its automatic pack (built once into the pack cache,
// runtime/model/pack_cache.h). --reference runs a plain GGUF on the fp32 reference forward
// pass instead (the specification; slow). --memory-plan prints the engine's arena plan
// (without -p it exits after printing). --chat renders system, turns and -p (the last user
// turn) with the model's chat format (EncodeChat in runtime/tokenizer/chat_template.h, as
// ari-node does for chat-form requests). --schema / --grammar constrain the output to a JSON
// Schema subset or a grammar (runtime/grammar, docs/structured_output.md); the stop reason
// "grammar_done" says the output is complete and valid, "max_tokens" that it is not.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/generate/stop_strings.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"
#include "runtime/tokenizer/chat_template.h"

namespace {

namespace rt = ari::runtime;

constexpr int32_t kDefaultCtxCap = 4096;

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-run -m MODEL.gguf [-p PROMPT] [-n N_TOKENS]\n"
               "  --temp T (0.8; 0 = greedy)  --top-p P (0.9)  --top-k K (0 = off)\n"
               "  --min-p M (0 = off)  --repeat-penalty R (1 = off)  --seed S (time)\n"
               "  --chat (the model's chat template; plain format without one)\n"
               "  --system TEXT, --turn user:TEXT|assistant:TEXT (repeatable; with --chat;\n"
               "    -p is the last user turn)\n"
               "  --stop STR (repeatable)  --ctx N (context; default min(model's, 4096))\n"
               "  --batch N (prefill chunk, 32)  -t N (threads; default all online CPUs)\n"
               "  --precision auto|w8a16|w4a8 (auto: w4a8 for a 4/5-bit source, else w8a16)\n"
               "  --pack-cache DIR (where a plain GGUF's automatic pack is kept; default\n"
               "    $ARI_PACK_CACHE, else ~/.cache/ari/packs)\n"
               "  --reference (plain GGUF only: the fp32 reference forward pass, slow)\n"
               "  --info (print the model config)\n"
               "  --memory-plan (print the engine's arena plan; exit unless -p is given)\n"
               "  --slots N (2)  --kv f16|int8 (f16)\n"
               "  --prefetch auto|on|off (auto: next-layer MADV_WILLNEED)\n"
               "  --huge-pages auto|on|off (the arena's pages; auto: off where the kernel\n"
               "    reports free memory to a hypervisor, docs/memory.md)\n"
               "  --schema FILE (JSON Schema subset) | --grammar FILE (GBNF-like): constrain\n"
               "    the output (docs/structured_output.md)\n");
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

enum class PrecisionArg : uint8_t { kAuto, kW8A16, kW4A8 };

struct EngineRun {
  bool print_plan = false;
  bool reference = false;
  int32_t slots = 2;
  int32_t threads = 0;
  PrecisionArg precision = PrecisionArg::kAuto;
  std::string pack_cache;
  rt::KvType kv = rt::KvType::kF16;
  rt::LayerPrefetch prefetch = rt::LayerPrefetch::kAuto;
  rt::HugePages huge_pages = rt::HugePages::kAuto;
};

// --schema / --grammar (at most one).
struct ConstraintArgs {
  std::string schema_path, grammar_path;
};

// The constraint for the turn (nullptr without --schema / --grammar). Built once per run:
// the compiled grammar, the tokenizer's trie, the matcher and mask buffers.
rt::Result<std::unique_ptr<rt::TokenConstraint>> MakeConstraint(const ConstraintArgs& c,
                                                                const rt::Tokenizer& tok) {
  if (!c.schema_path.empty() && !c.grammar_path.empty()) {
    return rt::MakeError(rt::ErrorCode::kInvalidArgument,
                         "--schema and --grammar exclude each other");
  }
  const std::string& path = c.schema_path.empty() ? c.grammar_path : c.schema_path;
  if (path.empty()) return std::unique_ptr<rt::TokenConstraint>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return rt::MakeError(rt::ErrorCode::kIo, "cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto g = c.schema_path.empty() ? rt::CompiledGrammar::Parse(text.str())
                                 : rt::CompileJsonSchema(text.str());
  if (!g) return rt::MakeError(g.error().code, path + ": " + g.error().message);
  auto trie = rt::TokenTrie::Build(tok);
  if (!trie) return std::unexpected(trie.error());
  return std::make_unique<rt::TokenConstraint>(*g, *trie);
}

struct ChatArgs {
  bool enabled = false;
  std::string system;
  std::vector<rt::ChatMessage> turns;  // --turn, in order
};

// The prompt ids: -p as is, or (--chat) system, turns and -p as a user turn through the
// model's chat format. An empty plain prompt is BOS alone.
rt::Result<std::vector<rt::TokenId>> EncodePrompt(const rt::GgufFile& file,
                                                  const rt::Tokenizer& tok,
                                                  const std::string& prompt, const ChatArgs& chat) {
  if (!chat.enabled) {
    auto ids = tok.Encode(prompt, rt::EncodeOptions{});
    if (ids && ids->empty() && tok.Bos() >= 0) ids->push_back(tok.Bos());
    return ids;
  }
  auto kind = rt::ModelChatTemplate(file);
  if (!kind) return rt::MakeError(kind.error().code, "--chat: " + kind.error().message);
  std::vector<rt::ChatMessage> msgs;
  if (!chat.system.empty()) msgs.push_back({"system", chat.system});
  msgs.insert(msgs.end(), chat.turns.begin(), chat.turns.end());
  if (!prompt.empty()) msgs.push_back({"user", prompt});
  return rt::EncodeChat(tok, *kind, msgs);
}

// "user:TEXT" / "assistant:TEXT" -> message; false for another form.
bool ParseTurn(std::string_view arg, std::vector<rt::ChatMessage>& turns) {
  for (std::string_view role : {"user", "assistant"}) {
    if (arg.size() > role.size() && arg.starts_with(role) && arg[role.size()] == ':') {
      turns.push_back({std::string(role), std::string(arg.substr(role.size() + 1))});
      return true;
    }
  }
  return false;
}

// --precision auto: the packed precision closest to the source's weights (general.file_type,
// llama_ftype numbering: 4- and 5-bit files run W4A8, everything else W8A16).
rt::Precision ChoosePrecision(const rt::Model& model, PrecisionArg arg) {
  if (arg == PrecisionArg::kW8A16) return rt::Precision::kW8A16;
  if (arg == PrecisionArg::kW4A8) return rt::Precision::kW4A8;
  auto ft = model.file().GetUint("general.file_type");
  if (!ft) return rt::Precision::kW8A16;
  switch (*ft) {
    case 2:
    case 3:
    case 8:
    case 9:  // Q4_0, Q4_1, Q5_0, Q5_1
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
    case 17:  // Q3_K_L, Q4_K_S/M, Q5_K_S/M
      return rt::Precision::kW4A8;
    default: return rt::Precision::kW8A16;
  }
}

struct RunStats {
  int64_t prompt_ns = 0, gen_ns = 0;
  int64_t mask_ns = 0;     // part of gen_ns spent on the --schema / --grammar mask
  int64_t masked = 0;      // tokens sampled under it
  int64_t tile_gemms = 0;  // GEMM calls that ran on AMX tiles (ChunkResult::tile_gemms)
  uint32_t gemv_tiers = 0, gemm_tiers = 0;  // the kernels' tiers (ChunkResult::gemv_tiers)
  int64_t layer_prefetches = 0;             // ChunkResult::layer_prefetches
  int64_t chunks = 0, prefetching_chunks = 0;
  size_t generated = 0;
  rt::StopReason stop = rt::StopReason::kMaxTokens;
  rt::ChunkResult last;  // what the last chunk ran
};

// Runs the turn in slot 0 chunk by chunk, streaming text through the stop-string filter.
ari::runtime::Result<RunStats> RunTurn(rt::Engine& e, const rt::ChunkKnobs& knobs,
                                       const std::vector<std::string>& stops) {
  RunStats st;
  std::string text;
  const rt::TextCallback print = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  rt::StopStringFilter filter(stops, text, print);
  bool by_callback = false;
  while (true) {
    auto r = e.RunChunk(0, knobs);
    if (!r) return std::unexpected(r.error());
    (r->phase == rt::ChunkPhase::kPrefill ? st.prompt_ns : st.gen_ns) += r->compute_ns;
    st.generated += r->tokens.size();
    st.mask_ns += r->mask_ns;
    st.masked += r->masked_tokens;
    st.tile_gemms += r->tile_gemms;
    st.gemv_tiers |= r->gemv_tiers;
    st.gemm_tiers |= r->gemm_tiers;
    st.layer_prefetches += r->layer_prefetches;
    st.chunks += 1;
    st.prefetching_chunks += r->layer_prefetches > 0 ? 1 : 0;
    st.last = *r;
    text.append(r->text);
    if (!filter.Update(&by_callback)) {
      st.stop = rt::StopReason::kStopString;
      return st;
    }
    if (r->finished) {
      st.stop = r->stop_reason;
      filter.Finish(&by_callback);
      return st;
    }
  }
}

rt::EngineOptions EngineOptionsFrom(const std::string& model_path, const EngineRun& er,
                                    const rt::SessionOptions& so, int32_t max_tokens,
                                    bool need_tokenizer) {
  rt::EngineOptions eo;
  eo.model_path = model_path;
  eo.plain_gguf = er.reference ? rt::PlainGguf::kReference : rt::PlainGguf::kAutoPack;
  eo.pack_cache.dir = er.pack_cache;
  eo.slots = er.slots;
  eo.context_length = so.context_length > 0 ? so.context_length : kDefaultCtxCap;
  eo.max_chunk = so.max_batch;
  eo.max_output = std::max(max_tokens, 1);
  eo.kv_type = er.kv;
  eo.layer_prefetch = er.prefetch;
  eo.huge_pages = er.huge_pages;
  eo.threads = er.threads;
  eo.require_tokenizer = need_tokenizer;
  return eo;
}

// Generation through the engine (packed path; see the file comment).
int RunWithEngine(const std::string& model_path, const EngineRun& er, const rt::SessionOptions& so,
                  const rt::SamplingParams& sp, const rt::GenerateOptions& gen,
                  const std::string& prompt, const ChatArgs& chat, const ConstraintArgs& ca) {
  const bool generate = !prompt.empty() || !chat.turns.empty() || !er.print_plan;
  auto engine = rt::Engine::Create(EngineOptionsFrom(model_path, er, so, gen.max_tokens, generate));
  if (!engine) return Fail(engine.error().ToString());
  rt::Engine& e = **engine;
  if (er.print_plan) {
    FILE* out = generate ? stderr : stdout;  // stdout stays the generated text
    std::fprintf(out, "ari-run: memory plan (%s, %s, %d slots, KV %s)\n%s", model_path.c_str(),
                 e.has_pack() ? "pack" : "plain GGUF", er.slots,
                 std::string(rt::KvTypeName(er.kv)).c_str(), e.memory_plan().ToString().c_str());
    if (!generate) return 0;
  }
  const rt::Tokenizer* tok = e.model().tokenizer();
  if (tok == nullptr) return Fail("the model has no tokenizer");
  auto ids = EncodePrompt(e.model().file(), *tok, prompt, chat);
  if (!ids) return Fail(ids.error().ToString());
  auto constraint = MakeConstraint(ca, *tok);
  if (!constraint) return Fail(constraint.error().ToString());
  if (!chat.enabled) std::fwrite(prompt.data(), 1, prompt.size(), stdout);  // as llama.cpp
  rt::TurnSpec turn;
  turn.prompt = *ids;
  turn.sampling = sp;
  turn.sampling.constraint = constraint->get();
  turn.max_tokens = gen.max_tokens;
  turn.keep_context = false;
  if (gen.max_tokens == 0) return 0;
  if (auto st = e.StartTurn(0, turn); !st) return Fail(st.error().ToString());
  rt::ChunkKnobs knobs;
  knobs.precision = ChoosePrecision(e.model(), er.precision);
  knobs.kv_type = er.kv;
  knobs.prefill_tokens = so.max_batch;
  knobs.decode_tokens = 16;
  auto st = RunTurn(e, knobs, gen.stop_strings);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!st) return Fail(st.error().ToString());
  std::fprintf(stderr,
               "ari-run: prompt %zu tokens in %.3f s (%.1f tokens/s); generation %zu tokens in "
               "%.3f s (%.1f tokens/s); stop: %s\n",
               ids->size(), st->prompt_ns * 1e-9,
               st->prompt_ns > 0 ? static_cast<double>(ids->size()) / (st->prompt_ns * 1e-9) : 0.0,
               st->generated, st->gen_ns * 1e-9,
               st->gen_ns > 0 ? static_cast<double>(st->generated) / (st->gen_ns * 1e-9) : 0.0,
               std::string(rt::StopReasonName(st->stop)).c_str());
  if (st->masked > 0) {
    std::fprintf(stderr,
                 "ari-run: constrained decoding: %lld tokens masked, %.1f us/token mask "
                 "(%.1f%% of generation time)\n",
                 static_cast<long long>(st->masked),
                 static_cast<double>(st->mask_ns) * 1e-3 / static_cast<double>(st->masked),
                 st->gen_ns > 0
                     ? 100.0 * static_cast<double>(st->mask_ns) / static_cast<double>(st->gen_ns)
                     : 0.0);
  }
  std::fprintf(stderr,
               "ari-run: ran %s, %s (GEMV kernels %s, GEMM kernels %s), %d threads, KV %s, %lld "
               "GEMM calls on AMX tiles (%s)\n",
               std::string(rt::PrecisionName(st->last.precision)).c_str(),
               std::string(rt::kernels::IsaTierName(st->last.isa)).c_str(),
               rt::kernels::IsaTiersText(st->gemv_tiers).c_str(),
               rt::kernels::IsaTiersText(st->gemm_tiers).c_str(), st->last.threads,
               std::string(rt::KvTypeName(st->last.kv_type)).c_str(),
               static_cast<long long>(st->tile_gemms), e.loaded_path().c_str());
  const rt::EngineCounters c = e.Counters();
  std::fprintf(stderr,
               "ari-run: layer prefetch: %lld next-layer MADV_WILLNEED calls in %lld of %lld "
               "chunks (the last chunk: %s); %llu residency rechecks, %llu switches\n",
               static_cast<long long>(st->layer_prefetches),
               static_cast<long long>(st->prefetching_chunks), static_cast<long long>(st->chunks),
               st->last.layer_prefetches > 0 ? "on" : "off",
               static_cast<unsigned long long>(c.prefetch_rechecks),
               static_cast<unsigned long long>(c.prefetch_switches));
  return 0;
}

struct RunArgs {
  std::string model_path, prompt;
  rt::SamplingParams sp;
  rt::GenerateOptions gen;
  rt::SessionOptions so;
  ChatArgs chat;
  ConstraintArgs constraint;
  bool info = false;
  EngineRun er;
};

// The engine's flags (--memory-plan, --reference, -t, --pack-cache, --precision, --slots,
// --kv, --prefetch, --huge-pages); true when `a` is one with a good value (i then past its value).
bool ParseEngineFlag(std::string_view a, int argc, char** argv, int& i, EngineRun& er) {
  const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
  const std::string_view val = v != nullptr ? v : "";
  double num = 0;
  const bool number = v != nullptr && ParseNumber(v, num);
  if (a == "--memory-plan") {
    er.print_plan = true;
    return true;
  }
  if (a == "--reference") {
    er.reference = true;
    return true;
  }
  if ((a == "-t" || a == "--threads") && number && num >= 1) {
    er.threads = static_cast<int32_t>(num);
  } else if (a == "--slots" && number) {
    er.slots = static_cast<int32_t>(num);
  } else if (a == "--pack-cache" && v != nullptr) {
    er.pack_cache = v;
  } else if (a == "--precision" && (val == "auto" || val == "w8a16" || val == "w4a8")) {
    er.precision = val == "w8a16"  ? PrecisionArg::kW8A16
                   : val == "w4a8" ? PrecisionArg::kW4A8
                                   : PrecisionArg::kAuto;
  } else if (a == "--kv" && (val == "f16" || val == "int8")) {
    er.kv = val == "int8" ? rt::KvType::kInt8 : rt::KvType::kF16;
  } else if (a == "--prefetch" && (val == "auto" || val == "on" || val == "off")) {
    er.prefetch = val == "on"    ? rt::LayerPrefetch::kOn
                  : val == "off" ? rt::LayerPrefetch::kOff
                                 : rt::LayerPrefetch::kAuto;
  } else if (a == "--huge-pages" && (val == "auto" || val == "on" || val == "off")) {
    er.huge_pages = val == "on"    ? rt::HugePages::kOn
                    : val == "off" ? rt::HugePages::kOff
                                   : rt::HugePages::kAuto;
  } else {
    return false;
  }
  ++i;
  return true;
}

// The exit code when the tool stops here (--help: 0, bad usage: 1); nullopt to go on.
std::optional<int> ParseArgs(int argc, char** argv, RunArgs& o) {
  rt::SamplingParams& sp = o.sp;
  sp.temperature = 0.8f;
  sp.top_p = 0.9f;
  sp.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  o.gen.max_tokens = 64;
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
      o.model_path = argv[++i];
    } else if (a == "-p" && has_value) {
      o.prompt = argv[++i];
    } else if (a == "--system" && has_value) {
      o.chat.system = argv[++i];
    } else if (a == "--turn" && has_value && ParseTurn(argv[i + 1], o.chat.turns)) {
      ++i;
    } else if (a == "--stop" && has_value) {
      o.gen.stop_strings.emplace_back(argv[++i]);
    } else if (a == "-n" && number()) {
      o.gen.max_tokens = static_cast<int32_t>(num);
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
      o.so.context_length = static_cast<int32_t>(num);
    } else if (a == "--batch" && number()) {
      o.so.max_batch = static_cast<int32_t>(num);
    } else if ((a == "--schema" || a == "--grammar") && has_value) {
      (a == "--schema" ? o.constraint.schema_path : o.constraint.grammar_path) = argv[++i];
    } else if (a == "--chat") {
      o.chat.enabled = true;
    } else if (a == "--info") {
      o.info = true;
    } else if (ParseEngineFlag(a, argc, argv, i, o.er)) {
      continue;
    } else {
      Usage(stderr);
      return Fail("unknown argument or missing/bad value: '" + std::string(a) + "'");
    }
  }
  if (o.model_path.empty()) {
    Usage(stderr);
    return Fail("-m MODEL.gguf is required");
  }
  if (o.gen.max_tokens < 0) return Fail("-n must be >= 0");
  if (!o.chat.enabled && (!o.chat.system.empty() || !o.chat.turns.empty())) {
    return Fail("--system and --turn need --chat");
  }
  return std::nullopt;
}

// --reference: the fp32 reference generation loop over a Session (the specification).
int RunWithSession(RunArgs& a) {
  auto model = rt::Model::Load(a.model_path);
  if (!model) return Fail(model.error().ToString());
  if (rt::IsPack((*model)->file())) {
    return Fail("--reference needs the plain GGUF: " + a.model_path +
                " is a pack (it keeps no fp32 weights)");
  }
  const rt::ModelConfig& cfg = (*model)->config();

  const rt::Tokenizer* tok = (*model)->tokenizer();
  if (tok == nullptr) return Fail("the model has no tokenizer");
  auto ids = EncodePrompt((*model)->file(), *tok, a.prompt, a.chat);
  if (!ids) return Fail(ids.error().ToString());
  // fp32 KV cache: cap the default context so long-context models fit in memory.
  rt::SessionOptions& so = a.so;
  if (so.context_length == 0) so.context_length = std::min(cfg.context_length, kDefaultCtxCap);
  auto session = rt::Session::Create(**model, so);
  if (!session) return Fail(session.error().ToString());
  auto constraint = MakeConstraint(a.constraint, *tok);
  if (!constraint) return Fail(constraint.error().ToString());
  rt::SamplingParams sp = a.sp;
  sp.constraint = constraint->get();
  rt::Sampler sampler(cfg.vocab_size, sp);

  if (!a.chat.enabled) {  // echo the prompt, as llama2.c and llama.cpp do
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto res = rt::Generate(**session, sampler, *ids, a.gen, [](std::string_view piece) {
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

}  // namespace

int main(int argc, char** argv) {
  RunArgs a;
  if (const std::optional<int> rc = ParseArgs(argc, argv, a)) return *rc;
  if (a.info) {
    auto model = rt::Model::Load(a.model_path);
    if (!model) return Fail(model.error().ToString());
    std::fprintf(stderr, "ari-run: %s\n", (*model)->config().ToString().c_str());
  }
  if (a.er.reference && !a.er.print_plan) return RunWithSession(a);
  return RunWithEngine(a.model_path, a.er, a.so, a.sp, a.gen, a.prompt, a.chat, a.constraint);
}
