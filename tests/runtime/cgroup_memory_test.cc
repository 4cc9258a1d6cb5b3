// Generation inside a real memory cgroup whose limit is far below the model file: a forked
// child joins a fresh cgroup (v2 memory.max, else v1 memory.limit_in_bytes), loads a
// ~120 MB synthetic model, warms up, sets the limit to its non-file usage + a small
// headroom, then generates. It must finish without an OOM kill while the mapping is only
// partly resident (mincore sampled in the child). Needs root and a writable cgroup fs;
// skips with a clear message otherwise. The cgroup is removed at the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/engine/paging.h"
#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"
#include "tests/runtime/paging_fixture.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kHeadroom = 24ull << 20;  // limit = non-file usage after warm-up + this

std::string ReadText(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool WriteText(const fs::path& p, const std::string& s) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  ::close(fd);
  return ok;
}

// "key value" lines (memory.stat, memory.events, memory.oom_control).
uint64_t StatValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// A memory cgroup created for this test, removed (rmdir) by the destructor.
struct Cgroup {
  fs::path dir;
  bool v2 = false;
  ~Cgroup() {
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
  fs::path Procs() const { return dir / "cgroup.procs"; }
  fs::path Limit() const { return dir / (v2 ? "memory.max" : "memory.limit_in_bytes"); }
  uint64_t Usage() const {
    return std::stoull(ReadText(dir / (v2 ? "memory.current" : "memory.usage_in_bytes")));
  }
  uint64_t FileBytes() const {
    return StatValue(ReadText(dir / "memory.stat"), v2 ? "file" : "cache");
  }
  uint64_t OomKills() const {
    return v2 ? StatValue(ReadText(dir / "memory.events"), "oom_kill")
              : StatValue(ReadText(dir / "memory.oom_control"), "oom_kill");
  }
};

// Our own memory cgroup's path (v1 "N:memory:/path" or v2 "0::/path").
std::string OwnCgroupPath(bool v2) {
  std::istringstream in(ReadText("/proc/self/cgroup"));
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1);
    if ((v2 && ctrl.empty()) || (!v2 && ctrl.find("memory") != std::string::npos)) {
      return line.substr(b + 1);
    }
  }
  return "/";
}

// v2 when the unified hierarchy has the memory controller, else v1; nested under our own
// cgroup when possible, else at the hierarchy's root. Empty dir + reason on failure.
Cgroup MakeCgroup(std::string& why) {
  Cgroup cg;
  const std::string name = "ari_cgroup_test_" + std::to_string(getpid());
  std::vector<std::pair<fs::path, bool>> bases;
  if (ReadText("/sys/fs/cgroup/cgroup.controllers").find("memory") != std::string::npos) {
    bases.push_back({"/sys/fs/cgroup", true});
  }
  if (fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
    bases.push_back({fs::path("/sys/fs/cgroup/memory") / OwnCgroupPath(false).substr(1), false});
    bases.push_back({"/sys/fs/cgroup/memory", false});
  }
  if (bases.empty()) why = "no cgroup memory controller (v2 or v1) is mounted";
  for (const auto& [base, v2] : bases) {
    const fs::path dir = base / name;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      why = "cannot create " + dir.string() + ": " + std::strerror(errno);
      continue;
    }
    cg.dir = dir;
    cg.v2 = v2;
    if (fs::exists(cg.Limit())) return cg;
    ::rmdir(dir.c_str());
    cg.dir.clear();
    why = dir.string() + " has no memory limit file";
  }
  return cg;
}

struct ChildReport {
  int stage = 0;  // 0 = done; else the step that failed
  int32_t tokens = 0;
  uint64_t limit = 0, non_file = 0, file_size = 0;
  uint64_t resident_min = ~0ull, resident_max = 0, samples = 0;
  uint64_t usage_peak = 0;
};

// Runs in the forked child: never returns.
[[noreturn]] void Child(const Cgroup& cg, const fs::path& model_path, int out_fd) {
  ChildReport rep;
  auto finish = [&](int stage) {
    rep.stage = stage;
    (void)!::write(out_fd, &rep, sizeof(rep));
    ::_exit(stage == 0 ? 0 : 100 + stage);
  };
  if (!WriteText(cg.Procs(), std::to_string(getpid()))) finish(1);
  auto model = Model::Load(model_path);
  if (!model) finish(2);
  const auto bytes = (*model)->file().bytes();
  rep.file_size = bytes.size();
  PagingAdvisor advisor((*model)->file());
  (void)advisor.AdviseEmbedding();
  auto session = Session::Create(**model, {.context_length = 64, .max_batch = 16});
  if (!session) finish(3);
  Sampler sampler((*model)->config().vocab_size, SamplingParams{});
  GenerateOptions warm;
  warm.max_tokens = 1;
  if (!GenerateFromText(**session, sampler, "Hello", EncodeOptions{}, warm)) finish(4);
  // Limit = what is not file cache (anon, kernel) + headroom: far below the file size.
  rep.non_file = cg.Usage() - std::min(cg.Usage(), cg.FileBytes());
  rep.limit = (rep.non_file + kHeadroom + 4095) / 4096 * 4096;
  if (!WriteText(cg.Limit(), std::to_string(rep.limit))) finish(5);
  (*session)->Reset();
  auto sample = [&](std::string_view) {
    auto r = ResidentBytes(bytes.data(), bytes.size());
    if (r) {
      rep.resident_min = std::min(rep.resident_min, *r);
      rep.resident_max = std::max(rep.resident_max, *r);
      ++rep.samples;
    }
    rep.usage_peak = std::max(rep.usage_peak, cg.Usage());
    return true;
  };
  GenerateOptions go;
  go.max_tokens = 12;
  go.stop_on_bos = false;
  auto r = GenerateFromText(**session, sampler, "Once upon a time", EncodeOptions{}, go, sample);
  if (!r) finish(6);
  sample("");
  rep.tokens = static_cast<int32_t>(r->tokens.size());
  finish(0);
  ::_exit(0);
}

TEST(CgroupMemoryTest, GenerationCompletesBelowFileSizeWithoutOomKill) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root: cannot create a memory cgroup";
  const auto vocab = testing::Vocab32k();
  if (vocab.empty())
    GTEST_SKIP() << "vocab/ggml-vocab-llama-spm.gguf not found under " << testing::ModelsDir();
  std::string why;
  Cgroup cg = MakeCgroup(why);
  if (cg.dir.empty()) GTEST_SKIP() << "no writable memory cgroup: " << why;

  const auto dir = testing::DiskTempDir("cgroup");
  const auto path = dir / "big.gguf";
  SynthOptions so;
  so.preset = testing::CustomPreset(/*dim=*/768, /*ffn=*/1536, /*layers=*/2, 12, 4);
  so.type = TensorType::kF16;
  auto sum = WriteSynthModel(so, vocab, path);
  ASSERT_TRUE(sum) << sum.error().ToString();
  ASSERT_TRUE(testing::DropFileCache(path));  // faults are charged to the new cgroup

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    Child(cg, path, fds[1]);
  }
  ::close(fds[1]);
  ChildReport rep;
  const bool got = ::read(fds[0], &rep, sizeof(rep)) == static_cast<ssize_t>(sizeof(rep));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const uint64_t oom_kills = cg.OomKills();
  const uint64_t failcnt = cg.v2 ? StatValue(ReadText(cg.dir / "memory.events"), "max")
                                 : std::stoull(ReadText(cg.dir / "memory.failcnt"));
  std::printf(
      "cgroup %s (%s): file %llu bytes, non-file usage after warm-up %llu, limit %llu; "
      "%d tokens; resident file bytes min %llu max %llu over %llu samples; peak usage "
      "%llu; limit hits %llu; oom_kill %llu\n",
      cg.dir.c_str(), cg.v2 ? "v2" : "v1", static_cast<unsigned long long>(rep.file_size),
      static_cast<unsigned long long>(rep.non_file), static_cast<unsigned long long>(rep.limit),
      rep.tokens, static_cast<unsigned long long>(rep.resident_min),
      static_cast<unsigned long long>(rep.resident_max),
      static_cast<unsigned long long>(rep.samples), static_cast<unsigned long long>(rep.usage_peak),
      static_cast<unsigned long long>(failcnt), static_cast<unsigned long long>(oom_kills));
  EXPECT_FALSE(WIFSIGNALED(status)) << "child killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_TRUE(got) << "child sent no report";
  EXPECT_EQ(rep.stage, 0) << "child failed at step " << rep.stage;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(oom_kills, 0u);
  EXPECT_EQ(rep.tokens, 12);
  EXPECT_LT(rep.limit, rep.file_size) << "the limit must be below the mapped file";
  EXPECT_GT(rep.samples, 0u);
  EXPECT_LT(rep.resident_max, rep.file_size) << "the mapping was never partly evicted";
  EXPECT_LE(rep.usage_peak, rep.limit);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
