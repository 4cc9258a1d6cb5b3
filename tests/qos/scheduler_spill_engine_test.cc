// Parked sessions on disk through the scheduler with the REAL engine (stories260K, one
// slot): session 7's conversation is evicted by another request, spilled to the folder
// (the file appears), restored on its next turn, and that turn's answer equals the one a
// never-evicted session gives (two slots), token for token (F16 and INT8 KV). Without the
// spill folder the same sequence restarts the session fresh and the answer differs (so
// the comparison can fail). A corrupt file makes the turn restart fresh, reported.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "qos/scheduler.h"
#include "runtime/model/pack_file.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

namespace fs = std::filesystem;
using testing::MakeRequest;
constexpr int64_t kMs = thermal::kNsPerMs;

struct ParkSink : testing::RecordingSink {
  std::vector<ParkEventKind> parks;
  std::vector<std::string> messages;
  void OnPark(const ParkEvent& e) override {
    parks.push_back(e.kind);
    messages.emplace_back(e.message);
  }
};

fs::path StoriesPack() {
  static const fs::path pack = [] {
    const auto dir = ari::testing::TempDir("sched_spill_engine");
    const auto plain = testing::WriteStoriesGguf(dir);
    if (plain.empty()) return fs::path();
    auto p = dir / "stories260K.pack.gguf";
    return runtime::WritePack(plain, p) ? p : fs::path();
  }();
  return pack;
}

std::unique_ptr<runtime::Engine> MakeEngine(int slots, runtime::KvType kv, const fs::path& dir) {
  runtime::EngineOptions o;
  o.model_path = StoriesPack();
  o.slots = slots;
  o.context_length = 512;
  o.max_chunk = 64;
  o.max_output = 128;
  o.threads = 1;
  o.kv_type = kv;
  o.spill.dir = dir;
  auto e = runtime::Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

SchedRequest Req(uint64_t id, uint64_t session, int prompt_len) {
  SchedRequest r = MakeRequest(id, Urgency::kNormal, prompt_len, 24, session);
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 40;
  r.sampling.seed = 100 + id;
  return r;
}

// Session 7's turn (id 1), another session's turn (id 2), session 7's next turn (id 3),
// one after the other. `corrupt` flips a byte of every spill file before turn 3.
std::vector<runtime::TokenId> RunStory(runtime::Engine& e, ParkSink& sink, const fs::path& dir,
                                       bool corrupt) {
  const Policy p = testing::TestPolicy();
  thermal::ManualClock clock;
  SchedulerOptions o;
  o.policy = &p;
  o.engine = &e;
  o.clock = &clock;
  o.sink = &sink;
  o.topology = testing::TwoCpuTopology();
  o.max_prefill_chunk = 64;
  auto s = Scheduler::Create(o);
  EXPECT_TRUE(s.has_value());
  if (!s) return {};
  const SchedRequest reqs[] = {Req(1, 7, 12), Req(2, 8, 9), Req(3, 7, 5)};
  for (const SchedRequest& r : reqs) {
    if (r.id == 3 && corrupt) {
      std::error_code ec;
      for (const auto& f : fs::directory_iterator(dir, ec)) {
        fs::resize_file(f.path(), fs::file_size(f.path()) - 3);
      }
    }
    EXPECT_EQ((*s)->Submit(r), SubmitStatus::kAdmitted);
    for (int i = 0; i < 5000 && sink.TerminalCount(r.id) == 0; ++i) {
      StepResult st = (*s)->Step();
      if (st.next_step_ns != INT64_MAX && st.next_step_ns > clock.NowNs()) {
        clock.SetNs(st.next_step_ns);
      }
      clock.AdvanceNs(kMs);
    }
    EXPECT_TRUE(sink.EndedOnce(r.id, TerminalStatus::kDone)) << r.id;
    if (r.id == 2 && !dir.empty()) {  // session 7 was evicted: its file is there
      std::error_code ec;
      EXPECT_EQ(std::distance(fs::directory_iterator(dir, ec), fs::directory_iterator{}), 1);
    }
  }
  return sink.tokens[3];
}

TEST(SchedulerSpillEngine, EvictedSessionIsRestoredTokenForToken) {
  if (StoriesPack().empty()) {
    GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  }
  for (runtime::KvType kv : {runtime::KvType::kF16, runtime::KvType::kInt8}) {
    SCOPED_TRACE(kv == runtime::KvType::kF16 ? "F16" : "INT8");
    const fs::path base =
        ari::testing::TempDir("sched_spill") / (kv == runtime::KvType::kF16 ? "f16" : "int8");
    std::error_code ec;
    fs::remove_all(base, ec);
    ParkSink ref_sink, spill_sink, lost_sink, bad_sink;
    auto ref = MakeEngine(2, kv, {});  // never evicted
    ASSERT_TRUE(ref);
    const auto want = RunStory(*ref, ref_sink, {}, false);
    ASSERT_GT(want.size(), 4u);
    EXPECT_TRUE(ref_sink.parks.empty());

    auto spill = MakeEngine(1, kv, base / "on");
    ASSERT_TRUE(spill);
    EXPECT_EQ(RunStory(*spill, spill_sink, base / "on", false), want);
    EXPECT_EQ(spill_sink.parks,
              (std::vector<ParkEventKind>{ParkEventKind::kSpilled, ParkEventKind::kSpilled,
                                          ParkEventKind::kRestored}));
    EXPECT_EQ(spill->Counters().restores, 1u);

    auto lost = MakeEngine(1, kv, {});  // no folder: the session restarts fresh
    ASSERT_TRUE(lost);
    EXPECT_NE(RunStory(*lost, lost_sink, {}, false), want);
    EXPECT_TRUE(lost_sink.parks.empty());

    auto bad = MakeEngine(1, kv, base / "bad");
    ASSERT_TRUE(bad);
    EXPECT_EQ(RunStory(*bad, bad_sink, base / "bad", true), lost_sink.tokens[3]);
    ASSERT_EQ(bad_sink.parks.size(), 3u);
    EXPECT_EQ(bad_sink.parks[2], ParkEventKind::kSpillRejected);
    EXPECT_NE(bad_sink.messages[2].find("truncated"), std::string::npos) << bad_sink.messages[2];
  }
}

// Resident anonymous memory of this process (kB of /proc/self/status RssAnon).
uint64_t RssAnonBytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  uint64_t kb = 0;
  while (f >> key) {
    if (key == "RssAnon:") {
      f >> kb;
      return kb * 1024;
    }
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

// The memory ladder's spill_idle_sessions, as it ran: memory is forced low (a band with the
// action is entered), session 7's idle conversation goes to its file, the slot's KV pages
// are released (the process's resident anonymous memory drops by about the slot's KV), and
// the session's next turn, once memory is back, is restored token for token.
TEST(SchedulerSpillEngine, MemoryBandSpillsIdleSessionsAndReleasesTheirPages) {
  if (StoriesPack().empty()) {
    GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  }
  const fs::path dir = ari::testing::TempDir("sched_spill") / "band";
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Never spilled: two turns of session 7 on their own.
  auto ref = MakeEngine(1, runtime::KvType::kF16, {});
  ASSERT_TRUE(ref);
  Policy p = testing::TestPolicy();
  MemoryBand band;
  band.name = "spill";
  band.enter_below_bytes = 512ull << 20;
  band.exit_above_bytes = 1024ull << 20;
  band.actions.spill_idle_sessions = true;
  p.memory_bands = {band};
  uint64_t avail = 4ull << 30;
  auto run = [&](runtime::Engine& e, ParkSink& sink, bool squeeze) {
    thermal::ManualClock clock;
    SchedulerOptions o;
    o.policy = &p;
    o.engine = &e;
    o.clock = &clock;
    o.sink = &sink;
    o.topology = testing::TwoCpuTopology();
    o.max_prefill_chunk = 64;
    o.memory = [&]() -> std::optional<thermal::MemoryReading> {
      thermal::MemoryReading m;
      m.available_bytes = m.system_available_bytes = avail;
      m.system_total_bytes = 8ull << 30;
      return m;
    };
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.has_value());
    uint64_t rss_before = 0, rss_after = 0;
    for (const SchedRequest& r : {Req(1, 7, 12), Req(3, 7, 5)}) {
      if (r.id == 3 && squeeze) {
        rss_before = RssAnonBytes();
        avail = 100ull << 20;  // pressure: the band is entered on the next step
        for (int i = 0; i < 3; ++i) (*s)->Step();
        rss_after = RssAnonBytes();
        EXPECT_TRUE(fs::exists(dir / "0000000000000007.kvspill"));  // the session's file
        avail = 4ull << 30;                                         // relieved
      }
      EXPECT_EQ((*s)->Submit(r), SubmitStatus::kAdmitted);
      for (int i = 0; i < 5000 && sink.TerminalCount(r.id) == 0; ++i) {
        StepResult st = (*s)->Step();
        if (st.next_step_ns != INT64_MAX && st.next_step_ns > clock.NowNs()) {
          clock.SetNs(st.next_step_ns);
        }
        clock.AdvanceNs(kMs);
      }
      EXPECT_TRUE(sink.EndedOnce(r.id, TerminalStatus::kDone)) << r.id;
    }
    return std::pair{rss_before, rss_after};
  };
  ParkSink ref_sink, sink;
  run(*ref, ref_sink, false);
  const auto want = ref_sink.tokens[3];
  ASSERT_GT(want.size(), 4u);

  auto e = MakeEngine(1, runtime::KvType::kF16, dir);
  ASSERT_TRUE(e);
  const auto [before, after] = run(*e, sink, true);
  ASSERT_GE(sink.parks.size(), 2u);
  EXPECT_EQ(sink.parks[0], ParkEventKind::kSpilled);  // by the memory band, not an eviction
  EXPECT_EQ(sink.parks.back(), ParkEventKind::kRestored);
  EXPECT_EQ(e->Counters().spills, 1u);
  EXPECT_EQ(sink.tokens[3], want);
  // One F16 slot of stories260K (5 layers, KV width 32) at 512 positions: K and V halves.
  const uint64_t slot_kv = 2ull * 5 * 512 * 32 * 2;
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine and shadow pages grow RssAnon by more than the ~160 kB released:
  // the page release is checked in the Release build only.
  std::printf("RssAnon %llu -> %llu, slot KV %llu (not checked under ASan)\n",
              static_cast<unsigned long long>(before), static_cast<unsigned long long>(after),
              static_cast<unsigned long long>(slot_kv));
#else
  EXPECT_LT(after + slot_kv / 2, before) << "RssAnon " << before << " -> " << after;
#endif
}

}  // namespace
}  // namespace ari::qos

namespace ari::qos {
namespace {

// The memory ladder's park_to_disk, as it ran: one slot, memory forced low (a band with the
// action), a NORMAL turn in progress, then a CRITICAL request: the NORMAL turn is parked
// (RAM), the CRITICAL one runs, and at that step's end the parked turn's KV goes to its
// ".kvpark" file (the file is there while CRITICAL runs). The NORMAL turn then resumes from
// disk and its whole answer equals an undisturbed run's, token for token (F16 and INT8).
TEST(SchedulerSpillEngine, MemoryBandParksTurnsToDiskAndTheyResumeTokenForToken) {
  if (StoriesPack().empty()) {
    GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  }
  for (runtime::KvType kv : {runtime::KvType::kF16, runtime::KvType::kInt8}) {
    SCOPED_TRACE(kv == runtime::KvType::kF16 ? "F16" : "INT8");
    const fs::path dir =
        ari::testing::TempDir("sched_park_disk") / (kv == runtime::KvType::kF16 ? "f16" : "int8");
    std::error_code ec;
    fs::remove_all(dir, ec);
    Policy p = testing::TestPolicy();
    p.critical_reserved_slots = 0;
    MemoryBand band;
    band.name = "tight";
    band.enter_below_bytes = 512ull << 20;
    band.exit_above_bytes = 1024ull << 20;
    band.actions.park_to_disk = true;
    p.memory_bands = {band};
    auto run = [&](runtime::Engine& e, ParkSink& sink, bool critical, bool* file_seen) {
      thermal::ManualClock clock;
      SchedulerOptions o;
      o.policy = &p;
      o.engine = &e;
      o.clock = &clock;
      o.sink = &sink;
      o.topology = testing::TwoCpuTopology();
      o.max_prefill_chunk = 64;
      o.memory = []() -> std::optional<thermal::MemoryReading> {
        thermal::MemoryReading m;
        m.available_bytes = m.system_available_bytes = 100ull << 20;
        m.system_total_bytes = 8ull << 30;
        return m;
      };
      auto s = Scheduler::Create(o);
      EXPECT_TRUE(s.has_value());
      if (!s) return;
      SchedRequest normal = Req(1, 0, 12);
      normal.max_tokens = 60;
      EXPECT_EQ((*s)->Submit(normal), SubmitStatus::kAdmitted);
      for (int i = 0; i < 6; ++i) (*s)->Step();  // mid-turn
      if (critical) {
        SchedRequest c = Req(2, 0, 6);
        c.urgency = Urgency::kCritical;
        EXPECT_EQ((*s)->Submit(c), SubmitStatus::kAdmitted);
      }
      for (int i = 0; i < 5000 && (*s)->live_requests() > 0; ++i) {
        (*s)->Step();
        if (critical && sink.TerminalCount(2) == 0) {
          for (const auto& f : fs::directory_iterator(dir, ec)) {
            *file_seen |= f.path().extension() == ".kvpark";
          }
        }
        clock.AdvanceNs(kMs);
      }
      EXPECT_TRUE(sink.EndedOnce(1, TerminalStatus::kDone));
      if (critical) {
        EXPECT_TRUE(sink.EndedOnce(2, TerminalStatus::kDone));
      }
    };
    auto ref = MakeEngine(1, kv, {});
    ASSERT_TRUE(ref);
    ParkSink ref_sink, sink;
    bool unused = false;
    run(*ref, ref_sink, false, &unused);
    const auto want = ref_sink.tokens[1];
    ASSERT_GT(want.size(), 20u);

    auto e = MakeEngine(1, kv, dir);
    ASSERT_TRUE(e);
    bool file_seen = false;
    run(*e, sink, true, &file_seen);
    EXPECT_TRUE(file_seen) << "no .kvpark file while the CRITICAL request ran";
    EXPECT_EQ(sink.parks,
              (std::vector<ParkEventKind>{ParkEventKind::kParked, ParkEventKind::kOffloaded,
                                          ParkEventKind::kResumed}));
    EXPECT_EQ(e->Counters().parks_offloaded, 1u);
    EXPECT_EQ(e->Counters().parks_reloaded, 1u);
    EXPECT_EQ(sink.tokens[1], want);
  }
}

}  // namespace
}  // namespace ari::qos
