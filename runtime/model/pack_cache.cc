#include "runtime/model/pack_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/model/model_config.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kHeaderBytes = 4u << 20;  // GGUF header, metadata and tensor table
constexpr uint64_t kSampleBytes = 64u << 10;
constexpr int kSamples = 32;

struct Fnv64 {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void AddU64(uint64_t v) { Add(&v, sizeof v); }
};

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Result<void> HashRange(int fd, uint64_t off, uint64_t n, std::vector<unsigned char>& buf, Fnv64& h,
                       const fs::path& path) {
  buf.resize(n);
  uint64_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf.data() + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return MakeError(ErrorCode::kIo, path.string() + ": read: " +
                                           (r < 0 ? std::strerror(errno) : "unexpected end"));
    }
    got += static_cast<uint64_t>(r);
  }
  h.Add(buf.data(), n);
  return {};
}

// Closes the descriptor on every path.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Why the cache file at `path` cannot be trusted for `key` (empty: it can).
std::string Untrusted(const fs::path& path, const std::string& key) {
  auto f = GgufFile::Open(path);
  if (!f) return f.error().ToString();
  if (!IsPack(*f)) return "not a pack";
  auto k = f->GetString("ari.pack.source_key");
  if (!k) return "no ari.pack.source_key";
  if (*k != key) return "source key " + std::string(*k) + " != " + key;
  auto config = ModelConfig::FromGguf(*f);
  if (!config) return config.error().ToString();
  if (auto pw = BindPack(*f, *config); !pw) return pw.error().ToString();
  return {};
}

// Removes earlier packs of the same source path (other keys) from the cache folder.
void RemoveSuperseded(const fs::path& dir, const fs::path& keep, const std::string& source) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    if (p == keep || !p.filename().string().ends_with(".pack.gguf")) continue;
    auto f = GgufFile::Open(p);
    if (!f) continue;  // not ours to judge
    auto src = f->GetString("ari.pack.source_path");
    if (src && *src == source) {
      std::error_code rm;
      if (fs::remove(p, rm)) std::fprintf(stderr, "ari: removed superseded pack %s\n", p.c_str());
    }
  }
}

Error CacheError(const fs::path& dir, const std::string& what) {
  return Error{ErrorCode::kIo, "pack cache " + dir.string() + ": " + what +
                                   " (choose another folder with --pack-cache DIR, the node "
                                   "config's pack_cache_dir or ARI_PACK_CACHE)"};
}

// The folder exists and a file can be created in it.
Result<void> CheckWritable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::unexpected(CacheError(dir, "cannot create the folder: " + ec.message()));
  const fs::path probe = dir / (".ari-probe." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return std::unexpected(
        CacheError(dir, std::string("folder is not writable: ") + std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

}  // namespace

Result<fs::path> DefaultPackCacheDir() {
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0' ? v : nullptr;
  };
  if (const char* v = env("ARI_PACK_CACHE")) return fs::path(v);
  if (const char* v = env("CACHE_DIRECTORY")) {  // systemd: may list several, ':'-separated
    const std::string s(v);
    return fs::path(s.substr(0, s.find(':'))) / "packs";
  }
  if (const char* v = env("XDG_CACHE_HOME")) return fs::path(v) / "ari" / "packs";
  if (const char* v = env("HOME")) return fs::path(v) / ".cache" / "ari" / "packs";
  return MakeError(ErrorCode::kNotFound,
                   "no pack cache folder: set ARI_PACK_CACHE (or HOME, XDG_CACHE_HOME)");
}

namespace {

// FNV-1a over `salt`, the file's size, (with_mtime) its modification time, its first
// kHeaderBytes and kSamples + 1 evenly spaced kSampleBytes samples of the rest.
Result<uint64_t> SampledDigest(const fs::path& source, std::string_view salt, bool with_mtime) {
  Fd f{::open(source.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    return MakeError(ErrorCode::kIo, source.string() + ": open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    return MakeError(ErrorCode::kIo, source.string() + ": stat: " + std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  Fnv64 h;
  h.Add(salt.data(), salt.size());
  h.AddU64(kPackVersion);
  h.AddU64(size);
  if (with_mtime) {
    h.AddU64(static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
             static_cast<uint64_t>(st.st_mtim.tv_nsec));
  }
  std::vector<unsigned char> buf;
  const uint64_t head = std::min(size, kHeaderBytes);
  if (auto r = HashRange(f.fd, 0, head, buf, h, source); !r) return std::unexpected(r.error());
  if (size > head + kSampleBytes) {
    const uint64_t span = size - head - kSampleBytes;
    for (int i = 0; i <= kSamples; ++i) {
      const uint64_t off = head + span / kSamples * static_cast<uint64_t>(i);
      if (auto r = HashRange(f.fd, off, kSampleBytes, buf, h, source); !r) {
        return std::unexpected(r.error());
      }
    }
  }
  return h.h;
}

}  // namespace

Result<std::string> PackSourceKey(const fs::path& source) {
  auto d = SampledDigest(source, "ari.pack", /*with_mtime=*/true);
  if (!d) return std::unexpected(d.error());
  return Hex16(*d);
}

Result<uint64_t> ModelContentKey(const fs::path& model) {
  return SampledDigest(model, "ari.model", /*with_mtime=*/false);
}

Result<CachedPack> EnsurePack(const fs::path& source, const PackCacheOptions& opts) {
  fs::path dir = opts.dir;
  if (dir.empty()) {
    auto d = DefaultPackCacheDir();
    if (!d) return std::unexpected(d.error());
    dir = *d;
  }
  auto key = PackSourceKey(source);
  if (!key) return std::unexpected(key.error());
  std::error_code ec;
  const fs::path abs = fs::absolute(source, ec);
  const std::string source_path = ec ? source.string() : abs.lexically_normal().string();
  CachedPack out;
  out.path = dir / (source.stem().string() + "." + *key + ".pack.gguf");
  if (fs::exists(out.path, ec)) {
    out.rebuilt_reason = Untrusted(out.path, *key);
    if (out.rebuilt_reason.empty()) return out;
    std::fprintf(stderr, "ari: cached pack %s not used (%s): rebuilding\n", out.path.c_str(),
                 out.rebuilt_reason.c_str());
  }
  if (auto w = CheckWritable(dir); !w) return std::unexpected(w.error());
  PackOptions po;
  po.source_key = *key;
  po.source_path = source_path;
  if (opts.progress) {
    std::fprintf(stderr, "ari: packing %s into %s (once; W8 + W4 layouts)\n", source.c_str(),
                 out.path.c_str());
    po.progress = [last = -10](int done, int total) mutable {
      const int pct = total > 0 ? done * 100 / total : 100;
      if (pct / 10 != last / 10 || done == total) {
        std::fprintf(stderr, "ari: packing %3d%% (%d/%d matrices)\n", pct, done, total);
        last = pct;
      }
    };
  }
  auto sum = WritePack(source, out.path, po);
  if (!sum) {
    if (sum.error().code != ErrorCode::kIo) return std::unexpected(sum.error());
    const bool full = sum.error().message.find(std::strerror(ENOSPC)) != std::string::npos;
    return std::unexpected(CacheError(
        dir,
        std::string(full ? "folder is full: " : "cannot write the pack: ") + sum.error().message));
  }
  out.built = true;
  out.seconds = sum->seconds;
  if (opts.progress) {
    std::fprintf(stderr, "ari: packed %d matrices, %.1f MiB in %.1f s\n", sum->matrices,
                 static_cast<double>(sum->bytes_written) / (1 << 20), sum->seconds);
  }
  if (auto why = Untrusted(out.path, *key); !why.empty()) {
    return MakeError(ErrorCode::kInternal, out.path.string() + ": fresh pack unusable: " + why);
  }
  RemoveSuperseded(dir, out.path, source_path);
  return out;
}

}  // namespace ari::runtime
