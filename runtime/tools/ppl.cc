// ari-ppl: perplexity of a plain GGUF on a text (reference fp32 path), optionally with
// layer drop, and top-1 agreement of the dropped model with the full one.
//
//   ari-ppl -m model.gguf -f text.txt [--drop K | --table K] [--calibrate cal.txt]
//           [--window N]
//
// Block importance comes from --calibrate (default: the evaluated text itself); drop level
// k skips DropOrder(importance, k). --table K prints a markdown row per level 0..K.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "runtime/eval/layer_calibration.h"
#include "runtime/eval/perplexity.h"
#include "runtime/model/model.h"

namespace {

using ari::runtime::TokenId;

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-ppl -m MODEL.gguf -f TEXT.txt [--drop K | --table K]\n"
               "               [--calibrate CAL.txt] [--window N]\n");
}

bool ReadTokens(const ari::runtime::Model& m, const std::string& path, std::vector<TokenId>& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "ari-ppl: cannot read %s\n", path.c_str());
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto ids = m.tokenizer()->Encode(ss.str(), {});
  if (!ids) {
    std::fprintf(stderr, "ari-ppl: %s\n", ids.error().ToString().c_str());
    return false;
  }
  out = std::move(*ids);
  return true;
}

std::string Join(const std::vector<int32_t>& v) {
  if (v.empty()) return "-";
  std::string s;
  for (int32_t x : v) {
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(x));
  }
  return s;
}

struct PplArgs {
  std::string model_path, text_path, calib_path;
  int drop = 0, table = -1, window = 256;
};

// The exit code when the tool stops here (--help: 0, bad usage: 2); nullopt to go on.
std::optional<int> ParseArgs(int argc, char** argv, PplArgs& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    } else if (a == "-m" && v) {
      o.model_path = argv[++i];
    } else if (a == "-f" && v) {
      o.text_path = argv[++i];
    } else if (a == "--calibrate" && v) {
      o.calib_path = argv[++i];
    } else if (a == "--drop" && v) {
      o.drop = std::atoi(argv[++i]);
    } else if (a == "--table" && v) {
      o.table = std::atoi(argv[++i]);
    } else if (a == "--window" && v) {
      o.window = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "ari-ppl: unknown or incomplete argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  if (o.model_path.empty() || o.text_path.empty() || o.drop < 0 || o.window < 2) {
    Usage(stderr);
    return 2;
  }
  return std::nullopt;
}

// Perplexity and top-1 agreement with the full model per drop level (--drop K: K only;
// --table K: a markdown row per level 0..K). Returns the exit code.
int PrintLevels(const PplArgs& a, const ari::runtime::Model& model,
                const std::vector<TokenId>& text, const std::vector<float>& imp) {
  ari::runtime::PerplexityOptions base;
  base.window = a.window;
  auto full = ari::runtime::ComputePerplexity(model, text, base);
  if (!full) {
    std::fprintf(stderr, "ari-ppl: %s\n", full.error().ToString().c_str());
    return 1;
  }
  const int first = a.table >= 0 ? 0 : a.drop;
  const int last = a.table >= 0 ? a.table : a.drop;
  if (a.table >= 0) {
    std::printf(
        "| drop level | blocks skipped | perplexity | top-1 agreement with full |\n"
        "|---|---|---|---|\n");
  }
  for (int k = first; k <= last; ++k) {
    ari::runtime::PerplexityOptions o = base;
    o.skip_layers = ari::runtime::DropOrder(imp, k);
    auto r = k == 0 ? full : ari::runtime::ComputePerplexity(model, text, o);
    if (!r) {
      std::fprintf(stderr, "ari-ppl: %s\n", r.error().ToString().c_str());
      return 1;
    }
    const double agree = ari::runtime::Top1Agreement(full->top1, r->top1);
    if (a.table >= 0) {
      std::printf("| %d | %s | %.3f | %.1f%% |\n", k, Join(o.skip_layers).c_str(), r->perplexity,
                  100.0 * agree);
    } else {
      std::printf(
          "drop %d (blocks skipped: %s): perplexity %.4f over %lld predictions "
          "(%.4f nats/token), top-1 agreement with the full model %.2f%%\n",
          k, Join(o.skip_layers).c_str(), r->perplexity, static_cast<long long>(r->predictions),
          r->mean_nll, 100.0 * agree);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  PplArgs a;
  if (const std::optional<int> rc = ParseArgs(argc, argv, a)) return *rc;
  auto model = ari::runtime::Model::Load(a.model_path);
  if (!model) {
    std::fprintf(stderr, "ari-ppl: %s\n", model.error().ToString().c_str());
    return 1;
  }
  std::vector<TokenId> text, calib;
  if (!ReadTokens(**model, a.text_path, text)) return 1;
  if (a.calib_path.empty()) {
    calib = text;
  } else if (!ReadTokens(**model, a.calib_path, calib)) {
    return 1;
  }
  auto imp = ari::runtime::CalibrateLayerImportance(**model, calib, {.window = a.window});
  if (!imp) {
    std::fprintf(stderr, "ari-ppl: calibration: %s\n", imp.error().ToString().c_str());
    return 1;
  }
  std::printf("model %s: %d blocks; text %zu tokens; window %d\nimportance:", a.model_path.c_str(),
              (*model)->config().n_layers, text.size(), a.window);
  for (float x : *imp) std::printf(" %.4f", x);
  std::printf("\n");
  return PrintLevels(a, **model, text, *imp);
}
