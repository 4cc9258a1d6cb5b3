// The engine's memory is backed before the chunk loop needs it and can be locked in RAM:
//  - prefault (EngineOptions::prefault, on by default): after a warm-up turn on slot 0, a
//    first turn on slot 1 with a park and a resume in the middle takes ~0 minor page faults
//    (getrusage RUSAGE_THREAD; threads = 1, so the chunk runs on this thread), and clearly
//    more with prefault off (first touch of slot 1's KV, history, output and text pages and
//    of the park area);
//  - LockMemory() locks the arena, the park areas and the slot buffers (VmLck), and under a
//    low RLIMIT_MEMLOCK without CAP_IPC_LOCK (a forked child) it refuses with a message
//    naming the limit and the bytes asked, leaving nothing locked.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

// ASan turns mlock/munlock into no-ops (it must not lock its shadow memory) and its shadow
// and quarantine add page faults of their own.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

std::unique_ptr<Engine> Make(bool prefault, HugePages huge_pages = HugePages::kAuto) {
  const auto& mp = testing::Stories260K();
  if (!mp.ok) return nullptr;
  EngineOptions o;
  o.model_path = mp.pack;
  o.slots = 2;
  o.context_length = 512;
  o.max_output = 256;
  o.threads = 1;
  o.park_areas = 1;
  o.prefault = prefault;
  o.huge_pages = huge_pages;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << e.error().ToString();
  return e ? std::move(*e) : nullptr;
}

long ThreadMinorFaults() {
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return -1;
  return ru.ru_minflt;  // NOLINT(cppcoreguidelines-pro-type-union-access): glibc's layout
}

void StartTurn(Engine& e, int32_t slot) {
  auto ids = e.model().tokenizer()->Encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the park with her friends and her dog.",
      EncodeOptions{});
  ASSERT_TRUE(ids.has_value());
  TurnSpec t;
  t.prompt = *ids;
  t.max_tokens = 200;
  t.keep_context = false;
  ASSERT_TRUE(e.StartTurn(slot, t).has_value());
}

void RunToEnd(Engine& e, int32_t slot) {
  ChunkKnobs k;
  k.threads = 1;
  k.decode_tokens = 8;
  for (int i = 0; i < 1000; ++i) {
    auto r = e.RunChunk(slot, k);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    if (r->finished) return;
  }
  FAIL() << "turn did not finish";
}

// Minor faults of slot 1's first turn (with a park and a resume), after a warm-up on slot 0.
long FirstUseFaults(Engine& e) {
  StartTurn(e, 0);
  RunToEnd(e, 0);
  const long before = ThreadMinorFaults();
  StartTurn(e, 1);
  ChunkKnobs k;
  k.threads = 1;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(e.RunChunk(1, k).has_value());
  auto id = e.ParkSlot(1);
  EXPECT_TRUE(id.has_value()) << id.error().ToString();
  if (id) {
    EXPECT_TRUE(e.ResumeParked(*id, 1).has_value());
  }
  RunToEnd(e, 1);
  return ThreadMinorFaults() - before;
}

TEST(EnginePrefault, PrefaultLeavesNoFirstTouchFaultsInTheLoop) {
  if (!testing::Stories260K().ok)
    GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
  auto cold = Make(false);
  auto warm = Make(true);
  ASSERT_TRUE(cold && warm);
  const long cold_faults = FirstUseFaults(*cold);
  const long warm_faults = FirstUseFaults(*warm);
  std::printf("slot 1 first turn (+ park/resume): %ld minor faults prefaulted, %ld without\n",
              warm_faults, cold_faults);
  if (!kAsan) {
    EXPECT_LE(warm_faults, 2);
  }
  EXPECT_GE(cold_faults, warm_faults + 8) << "the test no longer sees first-touch faults";
}

// EngineOptions::huge_pages is resolved and noted in the plan, next to the arena's prefault
// (units and the slowest one's time). PoolBuffer's pages themselves: runtime.engine_pool.
TEST(EnginePrefault, PlanNotesThePoolsPagesAndThePrefault) {
  if (!testing::Stories260K().ok)
    GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
  for (const HugePages hp : {HugePages::kOff, HugePages::kOn}) {
    auto e = Make(true, hp);
    ASSERT_TRUE(e);
    const std::vector<std::string>& notes = e->memory_plan().notes;
    const std::string pages = hp == HugePages::kOff ? "pools in 4 kB pages (huge pages off)"
                                                    : "pools advised transparent huge pages";
    EXPECT_NE(std::find(notes.begin(), notes.end(), pages), notes.end()) << pages;
    const auto prefault = std::find_if(notes.begin(), notes.end(), [](const std::string& n) {
      return n.starts_with("arena prefaulted: ");
    });
    ASSERT_NE(prefault, notes.end());
    std::printf("%s\n", prefault->c_str());
  }
  auto lazy = Make(false, HugePages::kOff);
  ASSERT_TRUE(lazy);
  for (const std::string& n : lazy->memory_plan().notes)
    EXPECT_FALSE(n.starts_with("arena prefaulted"));
}

// The user's path: ari-run --memory-plan --huge-pages off|on prints the engine's plan, whose
// note says which pages the pools got (skipped when ari-run is not built).
TEST(EnginePrefault, AriRunHugePagesFlagReachesThePlan) {
  const auto& mp = testing::Stories260K();
  if (!mp.ok) GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
  const char* bin = std::getenv("ARI_BINARY_DIR");
  const auto run = bin ? std::filesystem::path(bin) / "runtime" / "ari-run" : "";
  if (run.empty() || !std::filesystem::exists(run)) GTEST_SKIP() << "ari-run not built";
  const auto out = std::filesystem::temp_directory_path() /
                   ("ari_hugepages_" + std::to_string(::getpid()) + ".txt");
  for (const auto& [mode, want] : {std::pair{"off", "pools in 4 kB pages (huge pages off)"},
                                   std::pair{"on", "pools advised transparent huge pages"}}) {
    const std::string cmd = run.string() + " -m " + mp.pack.string() +
                            " --memory-plan --huge-pages " + mode + " >" + out.string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(got.find(std::string("note: ") + want), std::string::npos) << got;
    EXPECT_NE(got.find("note: arena prefaulted: "), std::string::npos) << got;
  }
  std::filesystem::remove(out);
}

long VmLckKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmLck:")) return std::atol(line.c_str() + 6);
  }
  return -1;
}

TEST(EnginePrefault, LockMemoryLocksArenaParkAreasAndSlotBuffers) {
  if (kAsan) GTEST_SKIP() << "ASan intercepts mlock (a no-op): nothing to observe";
  if (!testing::Stories260K().ok)
    GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
  auto e = Make(true);
  ASSERT_TRUE(e);
  const long before_kb = VmLckKb();
  auto locked = e->LockMemory();
  if (!locked) GTEST_SKIP() << "this machine refuses the lock: " << locked.error().message;
  EXPECT_GE(*locked, e->memory_plan().total_bytes);
  EXPECT_EQ(e->locked_bytes(), *locked);
  EXPECT_GE(VmLckKb() - before_kb, static_cast<long>(e->memory_plan().total_bytes / 1024));
  e.reset();  // unlocked at destruction
  EXPECT_LE(VmLckKb(), before_kb);
}

// Drops CAP_IPC_LOCK from this process's effective set (mlock then obeys RLIMIT_MEMLOCK).
bool DropIpcLock() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
  return syscall(SYS_capset, &hdr, data) == 0;
}

TEST(EnginePrefault, LockRefusedByRlimitSaysSo) {
  if (kAsan) GTEST_SKIP() << "ASan intercepts mlock (a no-op that never refuses)";
  if (!testing::Stories260K().ok)
    GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    const rlimit low{rlim_t{64} * 1024, rlim_t{64} * 1024};
    if (!DropIpcLock() || setrlimit(RLIMIT_MEMLOCK, &low) != 0) _exit(3);
    auto e = Make(true);
    if (!e) _exit(4);
    auto r = e->LockMemory();
    if (r) _exit(5);  // locked despite the limit
    const std::string msg = r.error().message + (e->locked_bytes() == 0 ? "" : " LEFT LOCKED");
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(6);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n = 0; (n = read(fds[0], buf, sizeof buf)) > 0;)
    msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "child failed at step " << WEXITSTATUS(status);
  EXPECT_NE(msg.find("mlock of "), std::string::npos) << msg;
  EXPECT_NE(msg.find("RLIMIT_MEMLOCK is 65536 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LimitMEMLOCK="), std::string::npos) << msg;
  EXPECT_EQ(msg.find("LEFT LOCKED"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ari::runtime
