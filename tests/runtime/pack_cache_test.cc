// The automatic pack cache (runtime/model/pack_cache.h): a plain GGUF is packed once,
// reused, and a stale, truncated or foreign cache file is rebuilt, never trusted; a cache
// folder that cannot be written or fills up gives an error naming it.
#include "runtime/model/pack_cache.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/pack_file.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;

struct CacheFixture {
  fs::path dir, plain, other;
};

CacheFixture Make(const std::string& tag) {
  CacheFixture f;
  testing::TinySpec s;
  s.tied = true;
  auto a = testing::TinyPair(s, tag + "_a");
  testing::TinySpec s2 = s;
  s2.seed = s.seed + 1;
  auto b = testing::TinyPair(s2, tag + "_b");
  EXPECT_TRUE(a.ok && b.ok);
  f.plain = a.plain;
  f.other = b.plain;
  f.dir = a.plain.parent_path() / (tag + "_cache");
  fs::remove_all(f.dir);
  return f;
}

PackCacheOptions Opts(const fs::path& dir) {
  PackCacheOptions o;
  o.dir = dir;
  o.progress = false;
  return o;
}

TEST(PackCache, BuildsOnceThenReusesAndTheEngineRunsIt) {
  const CacheFixture f = Make("reuse");
  auto first = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_TRUE(first->built);
  EXPECT_EQ(first->path.parent_path(), f.dir);
  auto second = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(second->built);
  EXPECT_EQ(second->path, first->path);
  // The cached pack is a pack of this source, keyed by its identity.
  auto g = GgufFile::Open(first->path);
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE(IsPack(*g));
  auto key = PackSourceKey(f.plain);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(std::string(*g->GetString("ari.pack.source_key")), *key);
  // No temp files left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(f.dir)) {
    ++files;
    EXPECT_TRUE(e.path().string().ends_with(".pack.gguf")) << e.path();
  }
  EXPECT_EQ(files, 1);
  EngineOptions eo;
  eo.model_path = f.plain;
  eo.pack_cache = Opts(f.dir);
  eo.threads = 1;
  auto e = Engine::Create(eo);
  ASSERT_TRUE(e.has_value()) << e.error().ToString();
  EXPECT_TRUE((*e)->has_pack());
  EXPECT_EQ((*e)->loaded_path(), first->path);
}

TEST(PackCache, ChangedSourceGetsANewPackAndTheOldOneIsRemoved) {
  const CacheFixture f = Make("stale");
  auto first = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(first.has_value());
  // Same path, different content (and modification time): a new key.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::copy_file(f.other, f.plain, fs::copy_options::overwrite_existing);
  auto second = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_TRUE(second->built);
  EXPECT_NE(second->path, first->path);
  EXPECT_FALSE(fs::exists(first->path)) << "superseded pack of the same source kept";
}

TEST(PackCache, ModelContentKeyIgnoresTheFileTimeButNotItsContent) {
  const CacheFixture f = Make("content");
  // A copy made later (another modification time, another name): the same content key,
  // another pack source key.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const fs::path copy = f.plain.parent_path() / "content_copy.gguf";
  fs::copy_file(f.plain, copy, fs::copy_options::overwrite_existing);
  auto k1 = ModelContentKey(f.plain), k2 = ModelContentKey(copy), k3 = ModelContentKey(f.other);
  ASSERT_TRUE(k1 && k2 && k3);
  EXPECT_EQ(*k1, *k2);
  EXPECT_NE(*k1, *k3);  // other weights
  EXPECT_NE(PackSourceKey(f.plain).value_or(""), PackSourceKey(copy).value_or(""));
  // One byte changed in the sampled header region: another key.
  {
    std::fstream io(copy, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(64);
    io.put('\x5a');
  }
  auto k4 = ModelContentKey(copy);
  ASSERT_TRUE(k4);
  EXPECT_NE(*k1, *k4);
  auto missing = ModelContentKey(f.plain.parent_path() / "no_such_model.gguf");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no_such_model.gguf"), std::string::npos);
}

TEST(PackCache, TruncatedOrForeignCacheFilesAreRebuiltNotTrusted) {
  const CacheFixture f = Make("bad");
  auto first = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(first.has_value());
  const auto size = fs::file_size(first->path);
  fs::resize_file(first->path, size / 2);  // truncated
  auto again = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_TRUE(again->built);
  EXPECT_FALSE(again->rebuilt_reason.empty());
  EXPECT_EQ(fs::file_size(again->path), size);
  // A foreign pack under this source's name (another model's pack).
  auto other = EnsurePack(f.other, Opts(f.dir / "elsewhere"));
  ASSERT_TRUE(other.has_value());
  fs::copy_file(other->path, first->path, fs::copy_options::overwrite_existing);
  auto third = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(third->built);
  EXPECT_NE(third->rebuilt_reason.find("source key"), std::string::npos) << third->rebuilt_reason;
  // Garbage under the name.
  std::ofstream(first->path, std::ios::trunc) << "not a gguf";
  auto fourth = EnsurePack(f.plain, Opts(f.dir));
  ASSERT_TRUE(fourth.has_value());
  EXPECT_TRUE(fourth->built);
}

TEST(PackCache, UnwritableFolderIsAClearErrorNamingIt) {
  const CacheFixture f = Make("ro");
  // A regular file where a folder should be: nothing can be created under it (even root).
  const fs::path blocker = f.dir.parent_path() / "ro_blocker";
  std::ofstream(blocker) << "x";
  const fs::path dir = blocker / "packs";
  auto r = EnsurePack(f.plain, Opts(dir));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find(dir.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("ARI_PACK_CACHE"), std::string::npos);
  // The engine reports the same error instead of running something else.
  EngineOptions eo;
  eo.model_path = f.plain;
  eo.pack_cache = Opts(dir);
  auto e = Engine::Create(eo);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message.find(dir.string()), std::string::npos);
}

TEST(PackCache, FolderThatFillsUpIsAClearErrorAndLeavesNoFile) {
  const CacheFixture f = Make("full");
  fs::create_directories(f.dir);
  // A child limited to 8 KiB per file: the pack write fails part-way, as on a full disk.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{8192, 8192};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    auto r = EnsurePack(f.plain, Opts(f.dir));
    const std::string msg = r ? std::string("ok") : r.error().message;
    const ssize_t w = ::write(fds[1], msg.data(), msg.size());
    ::_exit(w >= 0 ? 0 : 1);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n = 0; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_NE(msg, "ok");
  EXPECT_NE(msg.find(f.dir.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot write the pack"), std::string::npos) << msg;
  for (const auto& e : fs::directory_iterator(f.dir)) ADD_FAILURE() << "left " << e.path();
}

TEST(PackCache, DefaultFolderFollowsTheEnvironment) {
  const char* saved = std::getenv("ARI_PACK_CACHE");
  const std::string keep = saved ? saved : "";
  ::setenv("ARI_PACK_CACHE", "/some/where", 1);
  EXPECT_EQ(*DefaultPackCacheDir(), fs::path("/some/where"));
  ::unsetenv("ARI_PACK_CACHE");
  ::setenv("CACHE_DIRECTORY", "/var/cache/ari:/other", 1);
  EXPECT_EQ(*DefaultPackCacheDir(), fs::path("/var/cache/ari/packs"));
  ::unsetenv("CACHE_DIRECTORY");
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(*DefaultPackCacheDir(), fs::path("/x/ari/packs"));
  ::unsetenv("XDG_CACHE_HOME");
  if (!keep.empty()) ::setenv("ARI_PACK_CACHE", keep.c_str(), 1);
}

}  // namespace
}  // namespace ari::runtime
