// ari-ppl: perplexity of a model on a text, and top-1 agreement with the fp32 reference.
//
//   ari-ppl -m MODEL.gguf -f TEXT.txt [--precision w8a16|w4a8|reference | --reference]
//           [--drop K | --table K] [--ref PLAIN.gguf] [--kv f16|f32|int8] [--threads N]
//           [--window N] [--calibrate CAL.txt] [--json OUT.json]
//
// A pack (ari-pack) runs through the engine's packed forward pass (runtime/eval/
// packed_scorer.h) at W8A16 (default) or W4A8, with the KV type given, and drops blocks in
// the order of the importance stored in the pack. Top-1 agreement is against the fp32
// reference path on --ref PLAIN.gguf (the pack's source), else against the pack's own
// W8A16 at drop 0. --table K: a markdown row per precision (W8A16, W4A8) and drop level
// 0..K; --json writes the same rows (format ari-quality-table-1, read by ari-tune
// --quality). A plain GGUF runs the fp32 reference path (the specification;
// --precision reference is its default) with importance from --calibrate (default: the
// evaluated text). A pack with --reference, or a plain GGUF with a packed precision, is a
// usage error: a file is never read as what it is not.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "runtime/eval/layer_calibration.h"
#include "runtime/eval/packed_scorer.h"
#include "runtime/eval/perplexity.h"
#include "runtime/eval/quality_table.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"

namespace {

using ari::runtime::KvType;
using ari::runtime::Precision;
using ari::runtime::TokenId;

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-ppl -m MODEL.gguf -f TEXT.txt [--precision w8a16|w4a8|reference]\n"
               "               [--reference] [--drop K | --table K] [--ref PLAIN.gguf]\n"
               "               [--kv f16|f32|int8] [--threads N] [--window N]\n"
               "               [--calibrate CAL.txt] [--json OUT.json]\n"
               "  a pack runs the packed path (default w8a16); a plain GGUF the fp32\n"
               "  reference path; --ref: the plain GGUF that top-1 agreement is measured\n"
               "  against; --table K: every precision x drop level 0..K; --json: those rows\n"
               "  for ari-tune --quality\n");
}

int Fail(const std::string& m, int rc = 1) {
  std::fprintf(stderr, "ari-ppl: %s\n", m.c_str());
  return rc;
}

bool ReadTokens(const ari::runtime::Model& m, const std::string& path, std::vector<TokenId>& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Fail("cannot read " + path), false;
  std::stringstream ss;
  ss << f.rdbuf();
  auto ids = m.tokenizer()->Encode(ss.str(), {});
  if (!ids) return Fail(ids.error().ToString()), false;
  out = std::move(*ids);
  return true;
}

std::string Join(std::span<const int32_t> v, const char* none = "-") {
  if (v.empty()) return none;
  std::string s;
  for (int32_t x : v) {
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(x));
  }
  return s;
}

struct PplArgs {
  std::string model_path, text_path, calib_path, ref_path, json_path;
  std::optional<Precision> precision;
  KvType kv = KvType::kF16;
  bool kv_given = false;
  int drop = 0, table = -1, window = 256, threads = 1;
};

bool ParsePrecision(std::string_view v, PplArgs& o) {
  if (v == "w8a16")
    o.precision = Precision::kW8A16;
  else if (v == "w4a8")
    o.precision = Precision::kW4A8;
  else if (v == "reference")
    o.precision = Precision::kReference;
  else
    return false;
  return true;
}

bool ParseKv(std::string_view v, PplArgs& o) {
  o.kv_given = true;
  if (v == "f16")
    o.kv = KvType::kF16;
  else if (v == "f32")
    o.kv = KvType::kF32;
  else if (v == "int8")
    o.kv = KvType::kInt8;
  else
    return false;
  return true;
}

// One flag with a value; false when unknown or its value is bad.
bool ParseValue(std::string_view a, const char* v, PplArgs& o) {
  if (a == "-m")
    o.model_path = v;
  else if (a == "-f")
    o.text_path = v;
  else if (a == "--calibrate")
    o.calib_path = v;
  else if (a == "--ref")
    o.ref_path = v;
  else if (a == "--json")
    o.json_path = v;
  else if (a == "--precision")
    return ParsePrecision(v, o);
  else if (a == "--kv")
    return ParseKv(v, o);
  else if (a == "--drop")
    o.drop = std::atoi(v);
  else if (a == "--table")
    o.table = std::atoi(v);
  else if (a == "--window")
    o.window = std::atoi(v);
  else if (a == "--threads")
    o.threads = std::atoi(v);
  else
    return false;
  return true;
}

// The exit code when the tool stops here (--help: 0, bad usage: 2); nullopt to go on.
std::optional<int> ParseArgs(int argc, char** argv, PplArgs& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") return Usage(stdout), 0;
    if (a == "--reference") {
      o.precision = Precision::kReference;
      continue;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v || !ParseValue(a, v, o)) {
      std::fprintf(stderr, "ari-ppl: unknown, incomplete or bad argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
    ++i;
  }
  if (o.model_path.empty() || o.text_path.empty() || o.drop < 0 || o.window < 2 || o.threads < 1) {
    Usage(stderr);
    return 2;
  }
  return std::nullopt;
}

// ---- plain GGUF: the fp32 reference path ----

// Perplexity and top-1 agreement with the full model per drop level (--drop K: K only;
// --table K: a markdown row per level 0..K). Returns the exit code.
int PrintReferenceLevels(const PplArgs& a, const ari::runtime::Model& model,
                         const std::vector<TokenId>& text, const std::vector<float>& imp) {
  ari::runtime::PerplexityOptions base;
  base.window = a.window;
  auto full = ari::runtime::ComputePerplexity(model, text, base);
  if (!full) return Fail(full.error().ToString());
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
    if (!r) return Fail(r.error().ToString());
    const double agree = ari::runtime::Top1Agreement(full->top1, r->top1);
    if (a.table >= 0) {
      std::printf("| %d | %s | %.3f | %.1f%% |\n", k, Join(o.skip_layers).c_str(), r->perplexity,
                  100.0 * agree);
    } else {
      std::printf(
          "reference fp32, drop %d (blocks skipped: %s): perplexity %.4f over %lld predictions "
          "(%.4f nats/token), top-1 agreement with the full model %.2f%%\n",
          k, Join(o.skip_layers).c_str(), r->perplexity, static_cast<long long>(r->predictions),
          r->mean_nll, 100.0 * agree);
    }
  }
  return 0;
}

int RunReference(const PplArgs& a, const ari::runtime::Model& model) {
  if (a.precision && *a.precision != Precision::kReference) {
    return Fail(a.model_path + " is a plain GGUF: W8A16/W4A8 run on a pack (ari-pack " +
                    a.model_path +
                    " OUT.pack.gguf --calibrate TEXT); --reference scores the plain file",
                2);
  }
  if (a.kv_given || !a.ref_path.empty() || !a.json_path.empty()) {
    return Fail("--kv, --ref and --json apply to a pack (the packed path)", 2);
  }
  std::vector<TokenId> text, calib;
  if (!ReadTokens(model, a.text_path, text)) return 1;
  if (a.calib_path.empty()) {
    calib = text;
  } else if (!ReadTokens(model, a.calib_path, calib)) {
    return 1;
  }
  auto imp = ari::runtime::CalibrateLayerImportance(model, calib, {.window = a.window});
  if (!imp) return Fail("calibration: " + imp.error().ToString());
  std::printf(
      "model %s (plain GGUF, fp32 reference path): %d blocks; text %zu tokens; window "
      "%d\nimportance:",
      a.model_path.c_str(), model.config().n_layers, text.size(), a.window);
  for (float x : *imp) std::printf(" %.4f", x);
  std::printf("\n");
  return PrintReferenceLevels(a, model, text, *imp);
}

// ---- a pack: the packed forward pass ----

int CheckPackedArgs(const PplArgs& a) {
  if (a.precision == Precision::kReference) {
    return Fail(a.model_path +
                    " is a pack: it does not keep the fp32 weights; --reference needs the plain "
                    "GGUF it was made from (or pass that file as --ref for agreement)",
                2);
  }
  if (!a.calib_path.empty()) {
    return Fail(
        "a pack carries its own layer importance (ari-pack --calibrate); --calibrate "
        "applies to a plain GGUF",
        2);
  }
  return 0;
}

int RunPacked(const PplArgs& a, const ari::runtime::Model& model) {
  if (const int rc = CheckPackedArgs(a); rc != 0) return rc;
  std::unique_ptr<ari::runtime::Model> ref;
  if (!a.ref_path.empty()) {
    auto r = ari::runtime::Model::Load(a.ref_path);
    if (!r) return Fail("--ref: " + r.error().ToString());
    if (ari::runtime::IsPack((*r)->file())) {
      return Fail("--ref " + a.ref_path + " is a pack; the fp32 reference needs the plain GGUF", 2);
    }
    ref = std::move(*r);
  }
  std::vector<TokenId> text;
  if (!ReadTokens(model, a.text_path, text)) return 1;
  ari::runtime::QualityTableOptions o;
  if (a.table < 0) o.precisions = {a.precision.value_or(Precision::kW8A16)};
  o.first_drop = a.table >= 0 ? 0 : a.drop;
  o.last_drop = a.table >= 0 ? a.table : a.drop;
  o.scorer = {.window = a.window, .threads = a.threads, .kv_type = a.kv};
  o.reference = ref.get();
  auto t = ari::runtime::MeasureQualityTable(model, text, o);
  if (!t) return Fail(t.error().ToString());
  t->model = a.model_path;
  t->reference = a.ref_path;
  t->text = a.text_path;
  std::printf(
      "model %s (pack, packed forward pass): %d blocks; text %zu tokens (%lld "
      "predictions); window %d; KV %s; threads %d\n",
      a.model_path.c_str(), model.config().n_layers, text.size(),
      static_cast<long long>(t->predictions), t->window,
      std::string(ari::runtime::KvTypeName(a.kv)).c_str(), a.threads);
  if (a.table >= 0) {
    std::printf("%s", t->ToMarkdown().c_str());
  } else {
    const ari::runtime::QualityRow& r = t->rows.front();
    std::printf(
        "%s, drop %d (blocks skipped: %s): perplexity %.4f (%.4f nats/token), top-1 "
        "agreement with %s %.2f%%\n",
        std::string(ari::runtime::PrecisionName(r.precision)).c_str(), r.drop,
        Join(r.blocks).c_str(), r.perplexity, r.mean_nll,
        t->against_fp32 ? "the fp32 reference" : "W8A16 drop 0 (no --ref)",
        100.0 * r.top1_agreement);
    if (t->against_fp32)
      std::printf("fp32 reference (%s): perplexity %.4f\n", a.ref_path.c_str(),
                  t->reference_perplexity);
  }
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << t->ToJson();
    if (!f) return Fail("cannot write " + a.json_path);
    std::printf("wrote %s\n", a.json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  PplArgs a;
  if (const std::optional<int> rc = ParseArgs(argc, argv, a)) return *rc;
  auto model = ari::runtime::Model::Load(a.model_path);
  if (!model) return Fail(model.error().ToString());
  if (ari::runtime::IsPack((*model)->file())) return RunPacked(a, **model);
  return RunReference(a, **model);
}
