// Test helpers for the scheduler: a recording sink (ledger of terminals), a small
// policy, a fixed 2-CPU topology, a deterministic fake engine (for pure scheduling
// logic) and a stories260K GGUF written to a temp dir (for the real engine).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qos/scheduler.h"
#include "runtime/convert/llama2c_import.h"
#include "runtime/core/mapped_file.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model.h"
#include "tests/common/test_util.h"

namespace ari::qos::testing {

struct RecordingSink : ChunkSink {
  struct Term {
    TerminalStatus status;
    std::string message;
    TerminalEvent ev;
  };
  std::mutex mu;
  std::map<uint64_t, std::string> text;
  std::map<uint64_t, std::vector<runtime::TokenId>> tokens;
  std::map<uint64_t, std::vector<uint32_t>> seqs;
  std::map<uint64_t, std::vector<Term>> terminals;
  std::vector<StepInfo> steps;
  std::vector<std::string> decisions;
  std::vector<Decision> decision_log;

  void OnChunk(const ChunkEvent& c) override {
    std::lock_guard lk(mu);
    text[c.id] += c.text;
    tokens[c.id].insert(tokens[c.id].end(), c.tokens.begin(), c.tokens.end());
    seqs[c.id].push_back(c.seq);
  }
  void OnTerminal(const TerminalEvent& t) override {
    std::lock_guard lk(mu);
    terminals[t.id].push_back(Term{t.status, std::string(t.message), t});
  }
  void OnDecision(const Decision& d, int64_t) override {
    std::lock_guard lk(mu);
    decisions.emplace_back(d.Reason());
    decision_log.push_back(d);
  }
  void OnStep(const StepInfo& s) override {
    std::lock_guard lk(mu);
    steps.push_back(s);
  }
  // Exactly one terminal for `id`, with this status.
  bool EndedOnce(uint64_t id, TerminalStatus st) {
    std::lock_guard lk(mu);
    auto it = terminals.find(id);
    return it != terminals.end() && it->second.size() == 1 && it->second[0].status == st;
  }
  size_t TerminalCount(uint64_t id) {
    std::lock_guard lk(mu);
    auto it = terminals.find(id);
    return it == terminals.end() ? 0 : it->second.size();
  }
};

inline Knobs MakeKnobs(CoreClass c, uint32_t threads, WeightPrecision p, uint32_t prefill,
                       uint32_t decode, uint32_t pause_ms = 0) {
  Knobs k;
  k.core_class = c;
  k.threads = threads;
  k.precision = p;
  k.prefill_chunk = prefill;
  k.decode_tokens_per_chunk = decode;
  k.pause_ms = pause_ms;
  return k;
}

// One thermal band; CRITICAL/HIGH on the performance CPU, NORMAL on the efficiency
// CPU, BACKGROUND on any. No default deadlines; BACKGROUND/NORMAL age.
inline Policy TestPolicy(uint32_t prefill = 16, uint32_t decode = 4) {
  Policy p;
  p.name = "test";
  for (Urgency u : kAllUrgencies) {
    ClassConfig& c = p.classes[Rank(u)];
    c.queue_capacity = 4;
    c.default_deadline_ms = 0;
    c.aging_step_ms = u == Urgency::kCritical ? 0 : 100;
    c.deadline_miss = DeadlineMissAction::kStop;
  }
  p.aging_ceiling = Urgency::kCritical;
  p.thermal_bands.push_back(ThermalBand{"normal", -1e300, -1e300, 0});
  std::array<Knobs, kNumUrgencies> k;
  k[0] = MakeKnobs(CoreClass::kPerformance, 1, WeightPrecision::kW8A16, prefill, decode);
  k[1] = k[0];
  k[2] = MakeKnobs(CoreClass::kEfficiency, 1, WeightPrecision::kW4A8, prefill, decode);
  k[3] = MakeKnobs(CoreClass::kAny, 2, WeightPrecision::kW4A8, prefill, decode);
  p.knobs.push_back(k);
  p.conservative = k;
  return p;
}

// CPU 0 = performance, CPU 1 = efficiency (the machine has two equal cores).
inline thermal::CpuTopology TwoCpuTopology() {
  thermal::CpuTopology t;
  t.cpus = {thermal::CpuInfo{0, thermal::CoreClass::kPerformance, 0, 0},
            thermal::CpuInfo{1, thermal::CoreClass::kEfficiency, 0, 0}};
  t.performance = {0};
  t.efficiency = {1};
  t.basis = thermal::TopologyBasis::kConfig;
  return t;
}

// Deterministic engine: prefill consumes prompt tokens, decode emits token ids
// 100 + position % 300 with text "<id> ". compute_ns = 1000 per token.
class FakeEngine final : public runtime::Engine {
 public:
  // `park_areas` > 0: ParkSlot/ResumeParked move a slot's whole state to/from a park area.
  explicit FakeEngine(int slots, int park_areas = 0)
      : slots_(static_cast<size_t>(slots)), parks_(static_cast<size_t>(park_areas)) {}
  const runtime::Model& model() const override { return *model_; }
  bool has_pack() const override { return true; }
  const std::filesystem::path& loaded_path() const override { return path_; }
  const runtime::MemoryPlan& memory_plan() const override { return plan_; }
  int32_t num_slots() const override { return static_cast<int32_t>(slots_.size()); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& turn) override {
    S& s = slots_[static_cast<size_t>(slot)];
    if (!turn.keep_context) s.pos = 0;
    s.prompt_left = static_cast<int32_t>(turn.prompt.size());
    s.max = turn.max_tokens;
    s.gen = 0;
    ++starts;
    last_keep_context = turn.keep_context;
    return {};
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    S& s = slots_[static_cast<size_t>(slot)];
    knobs_log.push_back(k);
    runtime::ChunkResult r;
    r.precision = k.precision;
    if (s.prompt_left > 0) {
      const int32_t n = std::min(s.prompt_left, k.prefill_tokens);
      s.prompt_left -= n;
      s.pos += n;
      r.phase = runtime::ChunkPhase::kPrefill;
      r.prompt_tokens = n;
      r.prompt_remaining = s.prompt_left;
      r.compute_ns = int64_t{1000} * n;
      return r;
    }
    r.phase = runtime::ChunkPhase::kDecode;
    s.out.clear();
    s.text.clear();
    const int32_t n = std::min(k.decode_tokens, s.max - s.gen);
    for (int32_t i = 0; i < n; ++i) {
      const runtime::TokenId t = 100 + (s.pos % 300);
      s.out.push_back(t);
      s.text += std::to_string(t) + " ";
      ++s.pos;
      ++s.gen;
    }
    r.tokens = s.out;
    r.text = s.text;
    r.finished = s.gen >= s.max;
    r.compute_ns = int64_t{1000} * n;
    return r;
  }
  void ResetSlot(int32_t slot) override { slots_[static_cast<size_t>(slot)].pos = 0; }
  int32_t num_park_areas() const override { return static_cast<int32_t>(parks_.size()); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t slot) override {
    if (parks_.empty()) return FakeEngine::ChunkRunner::ParkSlot(slot);
    S& s = slots_[static_cast<size_t>(slot)];
    if (s.prompt_left == 0 && s.gen >= s.max) {
      return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "fake: no turn in slot");
    }
    for (size_t i = 0; i < parks_.size(); ++i) {
      if (parks_[i].used) continue;
      parks_[i] = Park{true, s};
      s = S{};
      ++parks;
      return static_cast<runtime::ParkId>(i);
    }
    return runtime::MakeError(runtime::ErrorCode::kOutOfMemory, "fake: park areas full");
  }
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t slot) override {
    if (id < 0 || static_cast<size_t>(id) >= parks_.size() || !parks_[id].used) {
      return runtime::MakeError(runtime::ErrorCode::kInvalidArgument, "fake: park id");
    }
    slots_[static_cast<size_t>(slot)] = parks_[id].state;
    parks_[id].used = false;
    ++resumes;
    return {};
  }
  void DropParked(runtime::ParkId id) override {
    if (id >= 0 && static_cast<size_t>(id) < parks_.size()) parks_[id].used = false;
  }
  int ParkedNow() const {
    int n = 0;
    for (const Park& p : parks_) n += p.used ? 1 : 0;
    return n;
  }
  int32_t SlotPosition(int32_t slot) const override {
    return slots_[static_cast<size_t>(slot)].pos;
  }
  runtime::PinningReport Pinning() const override { return {}; }
  uint64_t WeightBytesPerToken(runtime::Precision) const override { return 0; }

  std::vector<runtime::ChunkKnobs> knobs_log;
  int starts = 0;
  int parks = 0, resumes = 0;
  bool last_keep_context = false;

 private:
  struct S {
    int32_t pos = 0, prompt_left = 0, max = 0, gen = 0;
    std::vector<runtime::TokenId> out;
    std::string text;
  };
  std::vector<S> slots_;
  struct Park {
    bool used = false;
    S state;
  };
  std::vector<Park> parks_;
  std::unique_ptr<runtime::Model> model_;
  runtime::MemoryPlan plan_;
  std::filesystem::path path_ = "fake.pack.gguf";
};

inline SchedRequest MakeRequest(uint64_t id, Urgency u, int prompt_len, int max_tokens,
                                uint64_t session = 0, int64_t deadline_ns = 0) {
  SchedRequest r;
  r.id = id;
  r.urgency = u;
  r.prompt.assign(static_cast<size_t>(prompt_len), 0);
  for (int i = 0; i < prompt_len; ++i) r.prompt[static_cast<size_t>(i)] = 1 + (i * 37) % 400;
  r.max_tokens = max_tokens;
  r.session_id = session;
  r.deadline_ns = deadline_ns;
  return r;
}

// stories260K converted to a GGUF file under `dir` (empty path when the data is absent).
inline std::filesystem::path WriteStoriesGguf(const std::filesystem::path& dir) {
  auto ckp = ari::testing::ModelFile("llama2c/stories260K/stories260K.bin");
  auto tkp = ari::testing::ModelFile("llama2c/stories260K/tok512.bin");
  if (ckp.empty() || tkp.empty()) return {};
  auto ck = runtime::MappedFile::Open(ckp);
  auto tk = runtime::MappedFile::Open(tkp);
  if (!ck || !tk) return {};
  runtime::GgufWriter w;
  auto rep = runtime::ImportLlama2cCheckpoint(ck->bytes(), {}, w);
  if (!rep) return {};
  if (!runtime::ImportLlama2cTokenizer(tk->bytes(), rep->header.vocab_size, w)) return {};
  auto out = dir / "stories260K.gguf";
  if (!w.WriteFile(out)) return {};
  return out;
}

}  // namespace ari::qos::testing
