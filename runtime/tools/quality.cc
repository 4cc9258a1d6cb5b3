// ari-quality: quality of the packed precisions against the fp32 reference forward pass,
// teacher forced over one token sequence (one token per step, as in decoding).
//
//   ari-quality --ref plain.gguf --pack plain.pack.gguf [-f text.txt | --ids a,b,c]
//               [-n 256] [--threads 1] [--kv f16|f32|int8] [--drop K] [--greedy N]
//               [--alt other.gguf]
//
// --ref must be a plain GGUF (the fp32 reference path reads its weights) and --pack a pack
// (ari-pack): either the other way round is refused, never read as garbage. --drop K runs
// the packed paths at layer drop level K (the pack's drop order); the fp32 row stays the
// full model, so agreement then measures precision and drop together.
//
// The sequence: the tokenized text (BOS first when the tokenizer has one), or the given
// ids, or (neither) a deterministic pseudo-random id sequence (random-weight models). It is
// cut to n tokens. Per precision (fp32 reference, W8A16, W4A8) it prints perplexity of the
// sequence (every token after the first predicted once, mean NLL in nats), and for the
// packed precisions the logits NMSE (sum (p - r)^2 / sum r^2 per position; mean and max
// over positions) and top-1 agreement with the reference at every position.
// --alt adds a row for another plain GGUF run by the reference path (e.g. the same model
// with Q8_0-rounded weights: fp32 activations, quantized weights).
// --greedy N: instead, free-running greedy generation of N tokens from the sequence's
// first token (BOS) by every path; prints each sequence's first divergence from fp32.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <expected>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/thread_pool.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/eval/layer_calibration.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"

namespace {

using namespace ari::runtime;

struct Aligned {
  std::byte* p = nullptr;
  explicit Aligned(uint64_t n)
      : p(static_cast<std::byte*>(::operator new(n, std::align_val_t(128)))) {}
  ~Aligned() { ::operator delete(p, std::align_val_t(128)); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

double Nll(const float* logits, int vocab, TokenId target) {
  const float mx = *std::max_element(logits, logits + vocab);
  double s = 0;
  for (int i = 0; i < vocab; ++i) s += std::exp(static_cast<double>(logits[i]) - mx);
  return std::log(s) + mx - logits[target];
}

int Argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

struct Stats {
  double nll = 0, nmse_sum = 0, nmse_max = 0;
  int top1 = 0, positions = 0, predictions = 0;
};

int Fail(const std::string& m) {
  std::fprintf(stderr, "ari-quality: %s\n", m.c_str());
  return 1;
}

const char* const kNames[4] = {"fp32 (reference)", "W8A16", "W4A8", "alt (reference path)"};

// A tool step's failure: the message Fail() prints.
template <class T>
using Checked = std::expected<T, std::string>;

struct QualityArgs {
  std::string ref_path, pack_path, text_path, ids_arg, alt_path;
  int n = 256, threads = 1, greedy = 0, drop = 0;
  KvType kvt = KvType::kF16;
};

constexpr const char* kUsage =
    "usage: ari-quality --ref PLAIN.gguf --pack PACK.gguf [-f TEXT | --ids a,b,c] [-n 256]\n"
    "                   [--threads 1] [--kv f16|f32|int8] [--drop K] [--greedy N]\n"
    "                   [--alt OTHER.gguf]\n";

Checked<QualityArgs> ParseArgs(int argc, char** argv) {
  QualityArgs o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") return std::unexpected(std::string("help"));
    if (!v) {
      return std::unexpected(std::string(a) +
                             " needs a value (see the header of runtime/tools/quality.cc)");
    }
    ++i;
    if (a == "--ref")
      o.ref_path = v;
    else if (a == "--pack")
      o.pack_path = v;
    else if (a == "-f")
      o.text_path = v;
    else if (a == "--ids")
      o.ids_arg = v;
    else if (a == "-n")
      o.n = std::atoi(v);
    else if (a == "--greedy")
      o.greedy = std::atoi(v);
    else if (a == "--alt")
      o.alt_path = v;
    else if (a == "--threads")
      o.threads = std::max(1, std::atoi(v));
    else if (a == "--drop")
      o.drop = std::max(0, std::atoi(v));
    else if (a == "--kv" && std::string_view(v) == "f32")
      o.kvt = KvType::kF32;
    else if (a == "--kv" && std::string_view(v) == "f16")
      o.kvt = KvType::kF16;
    else if (a == "--kv" && std::string_view(v) == "int8")
      o.kvt = KvType::kInt8;
    else
      return std::unexpected("unknown flag " + std::string(a));
  }
  if (o.ref_path.empty() || o.pack_path.empty()) {
    return std::unexpected(std::string(kUsage));
  }
  return o;
}

// The tokenized text, the given ids, or a pseudo-random sequence; cut to n tokens.
Checked<std::vector<TokenId>> MakeSequence(const QualityArgs& o, const Model& ref, int vocab) {
  std::vector<TokenId> seq;
  if (!o.text_path.empty()) {
    const Tokenizer* tok = ref.tokenizer();
    if (!tok) return std::unexpected("the reference model has no tokenizer");
    std::ifstream f(o.text_path, std::ios::binary);
    if (!f) return std::unexpected("cannot read " + o.text_path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto ids = tok->Encode(ss.str(), {});
    if (!ids) return std::unexpected(ids.error().ToString());
    seq = std::move(*ids);
  } else if (!o.ids_arg.empty()) {
    std::stringstream ss(o.ids_arg);
    for (std::string x; std::getline(ss, x, ',');) seq.push_back(std::atoi(x.c_str()));
  } else {
    uint32_t s = 12345;
    for (int i = 0; i < o.n; ++i) {
      s = s * 1664525u + 1013904223u;
      seq.push_back(static_cast<TokenId>((s >> 8) % static_cast<uint32_t>(vocab)));
    }
  }
  if (static_cast<int>(seq.size()) > o.n) seq.resize(static_cast<size_t>(o.n));
  return seq;
}

// The logits of one step by each path, stepped together: 0 fp32 reference, 1 W8A16,
// 2 W4A8, 3 alt (reference path on --alt).
class Paths {
 public:
  static Checked<std::unique_ptr<Paths>> Open(const QualityArgs& o, const Model& ref,
                                              const Model& pm, int ctx, const ModelLoadOptions& lo);
  int count() const { return alt_sess_ ? 4 : 3; }
  Result<const float*> Step(int path, TokenId tok, int32_t pos) {
    const std::span<const TokenId> one(&tok, 1);
    if (path == 0 || path == 3) {
      auto r = Forward(path == 0 ? *sess_ : *alt_sess_, one);
      if (!r) return std::unexpected(r.error());
      return r->data();
    }
    return ff_[path - 1].Run(one, pos, kv_[path - 1], kPrecs[path - 1], drop_mask_.data(), *pool_,
                             threads_);
  }

 private:
  static constexpr kernels::PackedPrecision kPrecs[2] = {kernels::PackedPrecision::kW8,
                                                         kernels::PackedPrecision::kW4};
  int threads_ = 1;
  std::vector<uint8_t> drop_mask_;  // [n_layers], 1 = block dropped (packed paths)
  std::optional<PackedWeights> packed_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Session> sess_;
  std::unique_ptr<Aligned> ws_[2], kvm_[2];
  FastForward ff_[2];
  KvCacheView kv_[2];
  std::unique_ptr<Model> alt_model_;
  std::unique_ptr<Session> alt_sess_;
};

Checked<std::unique_ptr<Paths>> Paths::Open(const QualityArgs& o, const Model& ref, const Model& pm,
                                            int ctx, const ModelLoadOptions& lo) {
  auto ps = std::make_unique<Paths>();
  const ModelConfig& c = pm.config();
  const int threads = o.threads;
  ps->threads_ = threads;
  auto packed = BindPack(pm.file(), c);
  if (!packed) return std::unexpected(packed.error().ToString());
  ps->packed_ = std::move(*packed);
  ps->drop_mask_.assign(static_cast<size_t>(c.n_layers), 0);
  if (o.drop > 0) {
    if (ps->packed_->layer_importance.empty()) {
      return std::unexpected("--drop needs a pack with layer importance (ari-pack --calibrate)");
    }
    for (int32_t l : DropOrder(ps->packed_->layer_importance, o.drop)) {
      ps->drop_mask_[static_cast<size_t>(l)] = 1;
    }
  }
  auto pool = ThreadPool::Create(threads);
  if (!pool) return std::unexpected(pool.error().ToString());
  ps->pool_ = std::move(*pool);
  SessionOptions so;
  so.context_length = ctx;
  auto sess = Session::Create(ref, so);
  if (!sess) return std::unexpected(sess.error().ToString());
  ps->sess_ = std::move(*sess);
  // One FastForward + KV per packed precision, stepped together.
  const uint64_t ws_bytes = FastForward::WorkspaceBytes(c, 1, ctx, threads, 128);
  const uint64_t kv_bytes = KvCacheView::Bytes(c, o.kvt, ctx);
  for (auto& w : ps->ws_) w = std::make_unique<Aligned>(ws_bytes);
  for (auto& k : ps->kvm_) k = std::make_unique<Aligned>(kv_bytes);
  for (int p = 0; p < 2; ++p) {
    if (auto r = ps->ff_[p].Init(pm, *ps->packed_, ps->ws_[p]->p, ws_bytes, 1, ctx, threads, 128);
        !r) {
      return std::unexpected(r.error().ToString());
    }
    ps->kv_[p] = KvCacheView{o.kvt, ps->kvm_[p]->p, ps->kvm_[p]->p + kv_bytes / 2, ctx};
  }
  if (!o.alt_path.empty()) {
    auto am = Model::Load(o.alt_path, lo);
    if (!am) return std::unexpected(am.error().ToString());
    if (IsPack((*am)->file())) {
      return std::unexpected("--alt " + o.alt_path + " is a pack: it runs the reference path");
    }
    ps->alt_model_ = std::move(*am);
    if (ps->alt_model_->config().vocab_size != c.vocab_size) {
      return std::unexpected("alt: vocab size differs");
    }
    auto as = Session::Create(*ps->alt_model_, so);
    if (!as) return std::unexpected(as.error().ToString());
    ps->alt_sess_ = std::move(*as);
  }
  return ps;
}

// --greedy: free-running greedy generation by every path; each one's first divergence.
int RunGreedy(Paths& paths, const std::vector<TokenId>& seq, int greedy, int ctx, int vocab) {
  const int n_paths = paths.count();
  const int np = static_cast<int>(seq.size());
  const int steps = std::min(greedy, ctx - np);
  std::vector<std::vector<TokenId>> out(static_cast<size_t>(n_paths));
  for (int p = 0; p < n_paths; ++p) {
    TokenId tok = seq[0];
    for (int i = 0; i + 1 < np + steps; ++i) {
      auto l = paths.Step(p, tok, i);
      if (!l) return Fail(l.error().ToString());
      tok = i + 1 < np ? seq[static_cast<size_t>(i) + 1] : Argmax(*l, vocab);
      if (i + 1 >= np) out[static_cast<size_t>(p)].push_back(tok);
    }
  }
  std::printf(
      "greedy after a %d-token prompt, %d steps: first divergence from fp32 (index "
      "of the generated token; %d = none)\n",
      np, steps - 1, steps - 1);
  const int gen = steps - 1;
  for (int p = 1; p < n_paths; ++p) {
    int d = 0;
    while (d < gen &&
           out[static_cast<size_t>(p)][static_cast<size_t>(d)] == out[0][static_cast<size_t>(d)])
      ++d;
    int dw = 0;  // and from W8A16
    while (dw < gen &&
           out[static_cast<size_t>(p)][static_cast<size_t>(dw)] == out[1][static_cast<size_t>(dw)])
      ++dw;
    std::printf("  %-22s %d   (from W8A16: %d)\n", kNames[p], d, dw);
  }
  return 0;
}

// Teacher forced over the sequence: every path's NLL, and the packed paths' logits
// NMSE and top-1 agreement against the reference.
Checked<void> TeacherForce(Paths& paths, const std::vector<TokenId>& seq, int vocab,
                           Stats (&st)[4]) {
  std::vector<float> ref_logits(static_cast<size_t>(vocab));
  for (size_t i = 0; i < seq.size(); ++i) {
    auto want = paths.Step(0, seq[i], static_cast<int32_t>(i));
    if (!want) return std::unexpected(want.error().ToString());
    std::copy_n(*want, vocab, ref_logits.data());
    const bool predict = i + 1 < seq.size();
    if (predict) {
      st[0].nll += Nll(ref_logits.data(), vocab, seq[i + 1]);
      ++st[0].predictions;
    }
    double den = 0;
    for (int v = 0; v < vocab; ++v) den += static_cast<double>(ref_logits[v]) * ref_logits[v];
    const int ref_top = Argmax(ref_logits.data(), vocab);
    for (int p = 1; p < paths.count(); ++p) {
      auto got = paths.Step(p, seq[i], static_cast<int32_t>(i));
      if (!got) return std::unexpected(got.error().ToString());
      const float* g = *got;
      double num = 0;
      for (int v = 0; v < vocab; ++v) {
        const double d = static_cast<double>(g[v]) - ref_logits[v];
        num += d * d;
      }
      Stats& s = st[p];
      const double e = den > 0 ? num / den : num;
      s.nmse_sum += e;
      s.nmse_max = std::max(s.nmse_max, e);
      s.top1 += Argmax(g, vocab) == ref_top;
      ++s.positions;
      if (predict) {
        s.nll += Nll(g, vocab, seq[i + 1]);
        ++s.predictions;
      }
    }
  }
  return {};
}

void PrintTable(const QualityArgs& o, size_t tokens, const Stats (&st)[4], int n_paths) {
  std::printf("model %s (pack %s), %zu tokens, KV %s, threads %d, packed paths at drop %d\n",
              o.ref_path.c_str(), o.pack_path.c_str(), tokens,
              std::string(KvTypeName(o.kvt)).c_str(), o.threads, o.drop);
  std::printf(
      "| precision | perplexity | mean NLL (nats) | logits NMSE mean | NMSE max | top-1 agreement "
      "|\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int p = 0; p < n_paths; ++p) {
    const Stats& s = st[p];
    const double mean_nll = s.nll / std::max(1, s.predictions);
    if (p == 0) {
      std::printf("| %s | %.4f | %.4f | - | - | - |\n", kNames[p], std::exp(mean_nll), mean_nll);
    } else {
      std::printf("| %s | %.4f | %.4f | %.3g | %.3g | %d/%d (%.3f) |\n", kNames[p],
                  std::exp(mean_nll), mean_nll, s.nmse_sum / s.positions, s.nmse_max, s.top1,
                  s.positions, static_cast<double>(s.top1) / s.positions);
    }
  }
}

}  // namespace

// --ref must be a plain GGUF and --pack a pack (never one read as the other).
Checked<void> CheckKinds(const QualityArgs& o, const Model& ref, const Model& pm) {
  if (IsPack(ref.file())) {
    return std::unexpected("--ref " + o.ref_path +
                           " is a pack: the fp32 reference path needs the plain GGUF it was "
                           "made from");
  }
  if (!IsPack(pm.file())) {
    return std::unexpected("--pack " + o.pack_path + " is a plain GGUF, not a pack (ari-pack " +
                           o.pack_path + " OUT.pack.gguf)");
  }
  return {};
}

int main(int argc, char** argv) {
  const auto args = ParseArgs(argc, argv);
  if (!args && args.error() == "help") return std::fputs(kUsage, stdout), 0;
  if (!args) return Fail(args.error());
  ModelLoadOptions lo;
  lo.require_tokenizer = false;
  auto ref = Model::Load(args->ref_path, lo);
  if (!ref) return Fail(ref.error().ToString());
  auto pm = Model::Load(args->pack_path, lo);
  if (!pm) return Fail(pm.error().ToString());
  if (auto k = CheckKinds(*args, **ref, **pm); !k) return Fail(k.error());
  const ModelConfig& c = (*pm)->config();
  const int vocab = c.vocab_size;
  if ((*ref)->config().vocab_size != vocab) return Fail("vocab sizes differ");
  auto seq = MakeSequence(*args, **ref, vocab);
  if (!seq) return Fail(seq.error());
  const int ctx =
      std::min<int>(c.context_length, std::max(static_cast<int>(seq->size()), args->greedy) + 1);
  if (seq->empty() || (args->greedy == 0 && seq->size() < 2)) return Fail("need at least 2 tokens");
  for (TokenId t : *seq) {
    if (t < 0 || t >= vocab) return Fail("token id out of range");
  }
  auto paths = Paths::Open(*args, **ref, **pm, ctx, lo);
  if (!paths) return Fail(paths.error());
  if (args->greedy > 0) return RunGreedy(**paths, *seq, args->greedy, ctx, vocab);
  Stats st[4];
  if (auto r = TeacherForce(**paths, *seq, vocab, st); !r) return Fail(r.error());
  PrintTable(*args, seq->size(), st, (*paths)->count());
  return 0;
}
