#include "runtime/core/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <vector>

namespace ari::runtime {
namespace {

struct Ctx {
  std::atomic<int> calls{0};
  std::vector<int> seen;
};

void Job(void* c, int i, int n) {
  auto* ctx = static_cast<Ctx*>(c);
  ctx->calls.fetch_add(1);
  ctx->seen[static_cast<size_t>(i)] = n;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> v;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) v.push_back(c);
  }
  return v;
}

TEST(ThreadPool, RunsEveryIndexOnce) {
  auto pool = ThreadPool::Create(3);
  ASSERT_TRUE(pool.has_value());
  Ctx ctx;
  ctx.seen.assign(3, 0);
  for (int rep = 0; rep < 200; ++rep) {
    const int n = 1 + rep % 3;
    ctx.calls = 0;
    (*pool)->Run(&Job, &ctx, n);
    EXPECT_EQ(ctx.calls.load(), n);
  }
}

struct UnitCtx {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> bad_who{0};
  int n = 1;
  explicit UnitCtx(size_t units) : hits(units) {}
};

void UnitJob(void* c, int64_t u, int who) {
  auto* ctx = static_cast<UnitCtx*>(c);
  ctx->hits[static_cast<size_t>(u)].fetch_add(1);
  if (who < 0 || who >= ctx->n) ctx->bad_who.fetch_add(1);
}

// RunUnits runs every unit exactly once, interleaved with static Runs (the generation word
// carries the mode), for unit counts below, at and above the participant count.
TEST(ThreadPool, RunUnitsRunsEveryUnitOnce) {
  auto pool = ThreadPool::Create(3);
  ASSERT_TRUE(pool.has_value());
  Ctx sctx;
  sctx.seen.assign(3, 0);
  for (int rep = 0; rep < 300; ++rep) {
    const int n = 1 + rep % 3;
    const int64_t units = 1 + (rep * 7) % 40;
    UnitCtx ctx(static_cast<size_t>(units));
    ctx.n = n;
    const uint64_t before = (*pool)->runs();
    (*pool)->RunUnits(&UnitJob, &ctx, units, n);
    EXPECT_EQ((*pool)->runs(), before + 1);
    for (int64_t u = 0; u < units; ++u) {
      ASSERT_EQ(ctx.hits[static_cast<size_t>(u)].load(), 1) << "rep " << rep << " unit " << u;
    }
    EXPECT_EQ(ctx.bad_who.load(), 0);
    if (rep % 5 == 0) {
      sctx.calls = 0;
      (*pool)->Run(&Job, &sctx, n);
      EXPECT_EQ(sctx.calls.load(), n);
    }
  }
}

TEST(ThreadPool, PinsAndRepinsWithoutNewThreads) {
  const auto cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  auto pool = ThreadPool::Create(3, std::vector<int>{cpus[0]});
  ASSERT_TRUE(pool.has_value());
  auto p1 = (*pool)->Pinning();
  ASSERT_EQ(p1.tids.size(), 2u);
  for (const auto& w : p1.worker_cpus) EXPECT_EQ(w, std::vector<int>{cpus[0]});
  EXPECT_TRUE(p1.failures.empty());
  ASSERT_TRUE((*pool)->SetCpus(cpus).has_value());
  auto p2 = (*pool)->Pinning();
  EXPECT_EQ(p2.tids, p1.tids);  // same threads
  for (const auto& w : p2.worker_cpus) EXPECT_EQ(w, cpus);
  Ctx ctx;
  ctx.seen.assign(3, 0);
  (*pool)->Run(&Job, &ctx, 3);
  EXPECT_EQ(ctx.calls.load(), 3);
}

TEST(ThreadPool, ReportsPinningFailures) {
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  EXPECT_FALSE((*pool)->SetCpus(std::vector<int>{}).has_value());
  EXPECT_FALSE((*pool)->SetCpus(std::vector<int>{-1}).has_value());
  // A CPU that is not online: the OS refuses, the failure is reported.
  auto r = (*pool)->SetCpus(std::vector<int>{1000});
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE((*pool)->Pinning().failures.empty());
  EXPECT_EQ((*pool)->pin_failures(), 1);
  EXPECT_FALSE((*pool)->PinCaller().has_value());     // the same refused set
  EXPECT_TRUE((*pool)->RestoreCaller().has_value());  // nothing was pinned: a no-op
}

void Spin(void*, int, int) {
  volatile unsigned x = 0;  // unsigned: the sum wraps, defined (UBSan)
  for (unsigned i = 0; i < 100000; ++i) x = x + i;
}
void SpinUnit(void*, int64_t, int) { Spin(nullptr, 0, 1); }

// Every participant notes the CPU it computed on; the caller is confined by PinCaller.
TEST(ThreadPool, ObservesTheCpusItsParticipantsRanOn) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2 || cpus[1] >= 63) GTEST_SKIP() << "needs 2 CPUs below 63";
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  ThreadPool& p = **pool;
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  for (int c : {cpus[0], cpus[1]}) {
    ASSERT_TRUE(p.SetCpus(std::vector<int>{c}).has_value());
    ASSERT_TRUE(p.PinCaller().has_value());
    EXPECT_EQ(p.TakeObserved().cpus, 0u);  // nothing ran yet
    for (int rep = 0; rep < 20; ++rep) {
      p.Run(&Spin, nullptr, 2);
      p.RunUnits(&SpinUnit, nullptr, 8, 2);
      p.Run(&Spin, nullptr, 1);
    }
    const ThreadPool::Observed o = p.TakeObserved();
    EXPECT_EQ(o.cpus, uint64_t{1} << c);
    EXPECT_EQ(o.participants, 2);  // the static Run waits for the worker: it always joins
    ASSERT_TRUE(p.RestoreCaller().has_value());
    cpu_set_t now;
    ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &now));
  }
  EXPECT_EQ(p.pin_failures(), 0);
}

}  // namespace
}  // namespace ari::runtime
