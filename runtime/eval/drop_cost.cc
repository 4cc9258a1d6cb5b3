#include "runtime/eval/drop_cost.h"

#include <algorithm>
#include <cstdio>

#include "runtime/engine/engine.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Sample {
  double prefill_ms_per_token = 0, decode_ms_per_token = 0;
};

// One fresh turn at drop level `drop`: its prefill chunk and one decode chunk.
Result<Sample> RunOnce(Engine& e, const DropCostOptions& o, const std::vector<TokenId>& prompt,
                       int32_t drop) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = o.n_gen + 1;
  t.keep_context = false;
  // Sampled (seeded), not greedy: a greedy stream of a heavily dropped model soon hits an
  // end-of-generation token and would end the decode chunk early.
  t.sampling.temperature = 1.0f;
  t.sampling.seed = 7;
  if (auto s = e.StartTurn(0, t); !s) return std::unexpected(s.error());
  ChunkKnobs k;
  k.precision = o.precision;
  k.threads = o.threads;
  k.prefill_tokens = o.prompt_tokens;
  k.decode_tokens = o.n_gen;
  k.layer_drop = drop;
  Sample s;
  auto pre = e.RunChunk(0, k);
  if (!pre) return std::unexpected(pre.error());
  if (pre->layers_dropped != drop) {
    return MakeError(ErrorCode::kUnsupported,
                     "drop cost: the engine dropped " + std::to_string(pre->layers_dropped) +
                         " blocks at level " + std::to_string(drop) +
                         " (a pack with layer importance is needed: ari-pack --calibrate)");
  }
  s.prefill_ms_per_token = static_cast<double>(pre->compute_ns) * 1e-6 / pre->prompt_tokens;
  if (pre->finished) return s;
  auto dec = e.RunChunk(0, k);
  if (!dec) return std::unexpected(dec.error());
  if (dec->tokens.empty()) return s;
  s.decode_ms_per_token =
      static_cast<double>(dec->compute_ns) * 1e-6 / static_cast<double>(dec->tokens.size());
  return s;
}

// Least squares through (0, 1): slope = sum k (1 - f_k) / sum k^2.
void FitSlopes(DropCostResult& r) {
  double kk = 0, kp = 0, kd = 0;
  for (const DropCostLevel& l : r.levels) {
    kk += static_cast<double>(l.drop) * l.drop;
    kp += l.drop * (1.0 - l.prefill_factor);
    kd += l.drop * (1.0 - l.decode_factor);
  }
  r.prefill_slope = kk > 0 ? kp / kk : 0;
  r.decode_slope = kk > 0 ? kd / kk : 0;
  for (DropCostLevel& l : r.levels) {
    l.prefill_fit = std::max(0.05, 1.0 - r.prefill_slope * l.drop);
    l.decode_fit = std::max(0.05, 1.0 - r.decode_slope * l.drop);
  }
}

}  // namespace

Result<DropCostResult> MeasureDropCost(const DropCostOptions& o) {
  if (o.prompt_tokens < 1 || o.n_gen < 1 || o.reps < 1 || o.threads < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "drop cost: prompt, n_gen, reps, threads >= 1");
  }
  EngineOptions eo;
  eo.model_path = o.model;
  eo.slots = 1;
  eo.context_length = o.prompt_tokens + o.n_gen + 8;
  eo.max_chunk = o.prompt_tokens;
  eo.max_output = o.n_gen + 1;
  eo.threads = o.threads;
  auto eng = Engine::Create(eo);
  if (!eng) return std::unexpected(eng.error());
  Engine& e = **eng;
  if (!e.has_pack()) {
    return MakeError(ErrorCode::kFormat, "drop cost: " + o.model.string() + " is not a pack");
  }
  DropCostResult r;
  r.model = o.model.string();
  r.precision = std::string(PrecisionName(o.precision));
  r.layers = e.model().config().n_layers;
  r.threads = o.threads;
  r.prompt_tokens = o.prompt_tokens;
  r.n_gen = o.n_gen;
  r.reps = o.reps;
  const int32_t max_level = std::max(0, r.layers - 2);
  const int32_t last = o.max_level < 0 ? max_level : std::min(o.max_level, max_level);
  std::vector<TokenId> prompt(static_cast<size_t>(o.prompt_tokens), 1);
  std::vector<std::vector<double>> pre(static_cast<size_t>(last) + 1), dec(pre.size());
  if (auto w = RunOnce(e, o, prompt, 0); !w) return std::unexpected(w.error());  // warm-up
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int32_t d = 0; d <= last; ++d) {
      auto s = RunOnce(e, o, prompt, d);
      if (!s) return std::unexpected(s.error());
      pre[static_cast<size_t>(d)].push_back(s->prefill_ms_per_token);
      if (s->decode_ms_per_token > 0) dec[static_cast<size_t>(d)].push_back(s->decode_ms_per_token);
    }
  }
  for (int32_t d = 0; d <= last; ++d) {
    DropCostLevel l;
    l.drop = d;
    l.prefill_ms_per_token = Median(pre[static_cast<size_t>(d)]);
    l.decode_ms_per_token = Median(dec[static_cast<size_t>(d)]);
    if (!r.levels.empty()) {
      const DropCostLevel& z = r.levels.front();
      l.prefill_factor =
          z.prefill_ms_per_token > 0 ? l.prefill_ms_per_token / z.prefill_ms_per_token : 1;
      l.decode_factor =
          z.decode_ms_per_token > 0 ? l.decode_ms_per_token / z.decode_ms_per_token : 1;
    }
    r.levels.push_back(l);
  }
  FitSlopes(r);
  return r;
}

std::string DropCostResult::ToTable() const {
  char b[256];
  std::snprintf(b, sizeof(b),
                "model %s  precision %s  threads %d  blocks %d  prompt %d  decode %d  reps %d\n",
                model.c_str(), precision.c_str(), threads, layers, prompt_tokens, n_gen, reps);
  std::string s = b;
  s += "| drop level | prefill ms/token | factor | fit | decode ms/token | factor | fit | "
       "ideal (whole blocks) |\n|---|---|---|---|---|---|---|---|\n";
  for (const DropCostLevel& l : levels) {
    std::snprintf(b, sizeof(b), "| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", l.drop,
                  l.prefill_ms_per_token, l.prefill_factor, l.prefill_fit, l.decode_ms_per_token,
                  l.decode_factor, l.decode_fit, static_cast<double>(layers - l.drop) / layers);
    s += b;
  }
  std::snprintf(b, sizeof(b),
                "saved per dropped block (fit): prefill %.2f%%, decode %.2f%% of drop-0 time "
                "(a whole block's share: %.2f%%)\n",
                100 * prefill_slope, 100 * decode_slope, 100.0 / layers);
  return s + b;
}

std::string DropCostResult::ToCostJson(bool raw) const {
  char b[256];
  std::snprintf(b, sizeof(b),
                "{\"layers\": %d, \"source\": \"ari-dropcost -m %s --precision %s -t %d -p %d -n "
                "%d -r %d --max-level %d (%s)\", ",
                layers, model.c_str(), precision.c_str(), threads, prompt_tokens, n_gen, reps,
                levels.empty() ? 0 : levels.back().drop,
                raw ? "per-level medians" : "least-squares line over the levels");
  std::string s = b;
  auto list = [&](bool prefill) {
    std::string v = "[";
    for (const DropCostLevel& l : levels) {
      std::snprintf(b, sizeof(b), "%s%.4g", v.size() > 1 ? ", " : "",
                    prefill ? (raw ? l.prefill_factor : l.prefill_fit)
                            : (raw ? l.decode_factor : l.decode_fit));
      v += b;
    }
    return v + "]";
  };
  return s + "\"prefill\": " + list(true) + ", \"decode\": " + list(false) + "}";
}

}  // namespace ari::runtime
