// ari-dropcost: what layer drop saves, per drop level of a pack (runtime/eval/drop_cost.h).
//
//   ari-dropcost -m PACK.gguf [--precision w8a16|w4a8] [-t 2] [-p 64] [-n 32] [-r 3]
//                [--max-level K] [--json [--raw]]
//
// Prints prefill and decode ms/token per level with the factor against drop 0, and the
// ideal factor if a dropped block cost nothing ((layers - k) / layers). --json prints the
// "layer_drop_cost" object of the simulator's cost model (sim/cost_model.h) instead: the
// least-squares line over the levels (robust on a loaded machine), or with --raw the
// per-level medians (the table then goes to stderr).
// Timing: quick figures on a shared machine are labelled as such; re-measure on quiet cores.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/eval/drop_cost.h"

namespace {
void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-dropcost -m PACK.gguf [--precision w8a16|w4a8] [-t 2] [-p 64]\n"
               "                    [-n 32] [-r 3] [--max-level K] [--json [--raw]]\n");
}
}  // namespace

int main(int argc, char** argv) {
  using namespace ari::runtime;
  DropCostOptions o;
  bool json = false, raw = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") return Usage(stdout), 0;
    if (a == "--json" || a == "--raw") {
      (a == "--json" ? json : raw) = true;
      continue;
    }
    const char* v = i + 1 < argc ? argv[++i] : nullptr;
    if (!v) return std::fprintf(stderr, "ari-dropcost: %s needs a value\n", argv[i]), 2;
    if (a == "-m")
      o.model = v;
    else if (a == "--precision" && std::string_view(v) == "w8a16")
      o.precision = Precision::kW8A16;
    else if (a == "--precision" && std::string_view(v) == "w4a8")
      o.precision = Precision::kW4A8;
    else if (a == "-t")
      o.threads = std::atoi(v);
    else if (a == "-p")
      o.prompt_tokens = std::atoi(v);
    else if (a == "-n")
      o.n_gen = std::atoi(v);
    else if (a == "-r")
      o.reps = std::atoi(v);
    else if (a == "--max-level")
      o.max_level = std::atoi(v);
    else
      return std::fprintf(stderr, "ari-dropcost: bad argument %s\n", argv[i - 1]), Usage(stderr), 2;
  }
  if (o.model.empty()) return Usage(stderr), 2;
  auto r = MeasureDropCost(o);
  if (!r) return std::fprintf(stderr, "ari-dropcost: %s\n", r.error().ToString().c_str()), 1;
  if (json) std::fprintf(stderr, "%s", r->ToTable().c_str());  // the figures behind the JSON
  std::printf("%s\n", json ? r->ToCostJson(raw).c_str() : r->ToTable().c_str());
  return 0;
}
