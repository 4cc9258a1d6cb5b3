// ari-pack: writes a dual-precision pack (W8 + W4 in the kernels' layouts) of a GGUF.
//   ari-pack in.gguf out.gguf [--calibrate text.txt] [-v]
// --calibrate measures per-layer importance on a text (runtime/eval/layer_calibration.h)
// and stores it in the pack (PackOptions::layer_importance) for layer drop.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "runtime/eval/layer_calibration.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"

int main(int argc, char** argv) {
  std::string in, out, calib;
  ari::runtime::PackOptions opts;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--calibrate" && i + 1 < argc) {
      calib = argv[++i];
    } else if (a == "-v") {
      opts.verbose = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: ari-pack in.gguf out.gguf [--calibrate text.txt] [-v]\n");
      return 0;
    } else if (in.empty()) {
      in = a;
    } else if (out.empty()) {
      out = a;
    } else {
      std::fprintf(stderr, "ari-pack: unexpected argument %s\n", argv[i]);
      return 2;
    }
  }
  if (in.empty() || out.empty()) {
    std::fprintf(stderr, "usage: ari-pack in.gguf out.gguf [--calibrate text.txt] [-v]\n");
    return 2;
  }
  if (!calib.empty()) {
    auto model = ari::runtime::Model::Load(in);
    if (!model) {
      std::fprintf(stderr, "ari-pack: %s\n", model.error().ToString().c_str());
      return 1;
    }
    std::ifstream f(calib, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (!f) {
      std::fprintf(stderr, "ari-pack: cannot read %s\n", calib.c_str());
      return 1;
    }
    auto ids = (*model)->tokenizer()->Encode(ss.str(), {});
    if (!ids) {
      std::fprintf(stderr, "ari-pack: %s\n", ids.error().ToString().c_str());
      return 1;
    }
    auto imp = ari::runtime::CalibrateLayerImportance(**model, *ids);
    if (!imp) {
      std::fprintf(stderr, "ari-pack: calibration: %s\n", imp.error().ToString().c_str());
      return 1;
    }
    opts.layer_importance = std::move(*imp);
  }
  auto r = ari::runtime::WritePack(in, out, opts);
  if (!r) {
    std::fprintf(stderr, "ari-pack: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::printf("ari-pack: wrote %s: %d matrices x 2 precisions, %.1f MiB in %.1f s\n", out.c_str(),
              r->matrices, static_cast<double>(r->bytes_written) / 1048576.0, r->seconds);
  return 0;
}
