// ari-quality: quality of the packed precisions against the fp32 reference forward pass,
// teacher forced over one token sequence (one token per step, as in decoding).
//
//   ari-quality --ref plain.gguf --pack plain.pack.gguf [-f text.txt | --ids a,b,c]
//               [-n 256] [--threads 1] [--kv f16|f32] [--greedy N] [--alt other.gguf]
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
#include <fstream>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine/fast_forward.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"
#include "runtime/core/thread_pool.h"

namespace {

using namespace ari::runtime;

struct Aligned {
  std::byte* p = nullptr;
  explicit Aligned(uint64_t n) : p(static_cast<std::byte*>(::operator new(n, std::align_val_t(128)))) {}
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

}  // namespace

int main(int argc, char** argv) {
  std::string ref_path, pack_path, text_path, ids_arg, alt_path;
  int n = 256, threads = 1, greedy = 0;
  KvType kvt = KvType::kF16;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return Fail(std::string(a) + " needs a value (see the header of runtime/tools/quality.cc)");
    ++i;
    if (a == "--ref") ref_path = v;
    else if (a == "--pack") pack_path = v;
    else if (a == "-f") text_path = v;
    else if (a == "--ids") ids_arg = v;
    else if (a == "-n") n = std::atoi(v);
    else if (a == "--greedy") greedy = std::atoi(v);
    else if (a == "--alt") alt_path = v;
    else if (a == "--threads") threads = std::max(1, std::atoi(v));
    else if (a == "--kv") kvt = std::string_view(v) == "f32" ? KvType::kF32 : KvType::kF16;
    else return Fail("unknown flag " + std::string(a));
  }
  if (ref_path.empty() || pack_path.empty()) {
    return Fail("usage: ari-quality --ref plain.gguf --pack pack.gguf [-f text | --ids ..] [-n 256]");
  }
  ModelLoadOptions lo;
  lo.require_tokenizer = false;
  auto ref = Model::Load(ref_path, lo);
  if (!ref) return Fail(ref.error().ToString());
  auto pm = Model::Load(pack_path, lo);
  if (!pm) return Fail(pm.error().ToString());
  const ModelConfig& c = (*pm)->config();
  const int vocab = c.vocab_size;
  if ((*ref)->config().vocab_size != vocab) return Fail("vocab sizes differ");
  std::vector<TokenId> seq;
  if (!text_path.empty()) {
    const Tokenizer* tok = (*ref)->tokenizer();
    if (!tok) return Fail("the reference model has no tokenizer");
    std::ifstream f(text_path, std::ios::binary);
    if (!f) return Fail("cannot read " + text_path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto ids = tok->Encode(ss.str(), {});
    if (!ids) return Fail(ids.error().ToString());
    seq = std::move(*ids);
  } else if (!ids_arg.empty()) {
    std::stringstream ss(ids_arg);
    for (std::string x; std::getline(ss, x, ',');) seq.push_back(std::atoi(x.c_str()));
  } else {
    uint32_t s = 12345;
    for (int i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      seq.push_back(static_cast<TokenId>((s >> 8) % static_cast<uint32_t>(vocab)));
    }
  }
  if (static_cast<int>(seq.size()) > n) seq.resize(static_cast<size_t>(n));
  const int ctx = std::min<int>(c.context_length,
                                std::max(static_cast<int>(seq.size()), greedy) + 1);
  if (seq.empty() || (greedy == 0 && seq.size() < 2)) return Fail("need at least 2 tokens");
  for (TokenId t : seq) {
    if (t < 0 || t >= vocab) return Fail("token id out of range");
  }
  auto packed = BindPack((*pm)->file(), c);
  if (!packed) return Fail(packed.error().ToString());
  auto pool = ThreadPool::Create(threads);
  if (!pool) return Fail(pool.error().ToString());
  SessionOptions so;
  so.context_length = ctx;
  auto sess = Session::Create(**ref, so);
  if (!sess) return Fail(sess.error().ToString());
  // One FastForward + KV per packed precision, stepped together.
  const uint64_t ws_bytes = FastForward::WorkspaceBytes(c, 1, ctx, threads, 128);
  const uint64_t kv_bytes = KvCacheView::Bytes(c, kvt, ctx);
  Aligned ws[2] = {Aligned(ws_bytes), Aligned(ws_bytes)};
  Aligned kvm[2] = {Aligned(kv_bytes), Aligned(kv_bytes)};
  FastForward ff[2];
  KvCacheView kv[2];
  for (int p = 0; p < 2; ++p) {
    if (auto r = ff[p].Init(**pm, *packed, ws[p].p, ws_bytes, 1, ctx, threads, 128); !r) {
      return Fail(r.error().ToString());
    }
    kv[p] = KvCacheView{kvt, kvm[p].p, kvm[p].p + kv_bytes / 2, ctx};
  }
  const kernels::PackedPrecision precs[2] = {kernels::PackedPrecision::kW8,
                                             kernels::PackedPrecision::kW4};
  std::unique_ptr<Model> alt_model;
  std::unique_ptr<Session> alt_sess;
  if (!alt_path.empty()) {
    auto am = Model::Load(alt_path, lo);
    if (!am) return Fail(am.error().ToString());
    alt_model = std::move(*am);
    if (alt_model->config().vocab_size != vocab) return Fail("alt: vocab size differs");
    auto as = Session::Create(*alt_model, so);
    if (!as) return Fail(as.error().ToString());
    alt_sess = std::move(*as);
  }
  // Paths: 0 fp32 reference, 1 W8A16, 2 W4A8, 3 alt (reference path on --alt).
  const int n_paths = alt_sess ? 4 : 3;
  auto step = [&](int path, TokenId tok, int32_t pos) -> Result<const float*> {
    const std::span<const TokenId> one(&tok, 1);
    if (path == 0 || path == 3) {
      auto r = Forward(path == 0 ? **sess : *alt_sess, one);
      if (!r) return std::unexpected(r.error());
      return r->data();
    }
    return ff[path - 1].Run(one, pos, kv[path - 1], precs[path - 1], nullptr, **pool, threads);
  };
  const char* names[4] = {"fp32 (reference)", "W8A16", "W4A8", "alt (reference path)"};
  if (greedy > 0) {
    const int np = static_cast<int>(seq.size());
    const int steps = std::min(greedy, ctx - np);
    std::vector<std::vector<TokenId>> out(static_cast<size_t>(n_paths));
    for (int p = 0; p < n_paths; ++p) {
      TokenId tok = seq[0];
      for (int i = 0; i + 1 < np + steps; ++i) {
        auto l = step(p, tok, i);
        if (!l) return Fail(l.error().ToString());
        tok = i + 1 < np ? seq[static_cast<size_t>(i + 1)] : Argmax(*l, vocab);
        if (i + 1 >= np) out[static_cast<size_t>(p)].push_back(tok);
      }
    }
    std::printf("greedy after a %d-token prompt, %d steps: first divergence from fp32 (index "
                "of the generated token; %d = none)\n", np, steps - 1, steps - 1);
    const int gen = steps - 1;
    for (int p = 1; p < n_paths; ++p) {
      int d = 0;
      while (d < gen && out[static_cast<size_t>(p)][static_cast<size_t>(d)] == out[0][static_cast<size_t>(d)]) ++d;
      int dw = 0;  // and from W8A16
      while (dw < gen && out[static_cast<size_t>(p)][static_cast<size_t>(dw)] == out[1][static_cast<size_t>(dw)]) ++dw;
      std::printf("  %-22s %d   (from W8A16: %d)\n", names[p], d, dw);
    }
    return 0;
  }
  Stats st[4];
  std::vector<float> ref_logits(static_cast<size_t>(vocab));
  for (size_t i = 0; i < seq.size(); ++i) {
    auto want = step(0, seq[i], static_cast<int32_t>(i));
    if (!want) return Fail(want.error().ToString());
    std::copy_n(*want, vocab, ref_logits.data());
    const bool predict = i + 1 < seq.size();
    if (predict) {
      st[0].nll += Nll(ref_logits.data(), vocab, seq[i + 1]);
      ++st[0].predictions;
    }
    double den = 0;
    for (int v = 0; v < vocab; ++v) den += static_cast<double>(ref_logits[v]) * ref_logits[v];
    const int ref_top = Argmax(ref_logits.data(), vocab);
    for (int p = 1; p < n_paths; ++p) {
      auto got = step(p, seq[i], static_cast<int32_t>(i));
      if (!got) return Fail(got.error().ToString());
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
  std::printf("model %s (pack %s), %zu tokens, KV %s, threads %d\n", ref_path.c_str(),
              pack_path.c_str(), seq.size(), std::string(KvTypeName(kvt)).c_str(), threads);
  std::printf("| precision | perplexity | mean NLL (nats) | logits NMSE mean | NMSE max | top-1 agreement |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int p = 0; p < n_paths; ++p) {
    const Stats& s = st[p];
    const double mean_nll = s.nll / std::max(1, s.predictions);
    if (p == 0) {
      std::printf("| %s | %.4f | %.4f | - | - | - |\n", names[p], std::exp(mean_nll), mean_nll);
    } else {
      std::printf("| %s | %.4f | %.4f | %.3g | %.3g | %d/%d (%.3f) |\n", names[p],
                  std::exp(mean_nll), mean_nll, s.nmse_sum / s.positions, s.nmse_max, s.top1,
                  s.positions, static_cast<double>(s.top1) / s.positions);
    }
  }
  return 0;
}
