// The prompt-prefix cache's files; see prefix_cache.h.
#include "runtime/engine/prefix_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <utility>

namespace ari::runtime::engine_internal {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kAlign = 64;

uint64_t IdsBytes(uint64_t n) { return n * sizeof(TokenId); }
uint64_t HeaderBytes(uint64_t n) {
  return (sizeof(PrefixFileHeader) + IdsBytes(n) + kAlign - 1) / kAlign * kAlign;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t HeaderChecksum(PrefixFileHeader h, const void* ids, uint64_t n) {
  h.header_checksum = 0;
  return PrefixDigest(ids, IdsBytes(n), PrefixDigest(&h, sizeof h, 0x51ed));
}

void Unmap(PrefixEntry& e) {
  if (e.map != nullptr) ::munmap(e.map, e.file_bytes);
  if (e.fd >= 0) ::close(e.fd);
  e.map = nullptr;
  e.fd = -1;
}

}  // namespace

Result<void> WriteAll(int fd, const void* p, uint64_t n, const fs::path& path,
                      std::string_view what) {
  const auto* b = static_cast<const std::byte*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      return MakeError(ErrorCode::kIo, std::string(what) + " " + path.parent_path().string() +
                                           ": " +
                                           (err == ENOSPC ? "disk full: " : "cannot write: ") +
                                           path.filename().string() + ": " + std::strerror(err));
    }
    b += w;
    n -= static_cast<uint64_t>(w);
  }
  return {};
}

uint64_t PrefixDigest(const void* p, size_t n, uint64_t seed) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = 1469598103934665603ull ^ seed;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h ^ (h >> 32);
}

uint64_t PrefixFileBytes(uint32_t n_tokens, uint32_t n_layers, uint32_t row_bytes) {
  return HeaderBytes(n_tokens) + 2ull * n_layers * n_tokens * row_bytes;
}

PrefixStore::~PrefixStore() {
  for (auto& e : entries_) Unmap(*e);
}

void PrefixStore::Init(fs::path dir, uint64_t max_bytes) {
  dir_ = std::move(dir);
  max_bytes_ = max_bytes;
}

std::string PrefixStore::FileName(const PrefixIdentity& id, std::span<const TokenId> tokens) const {
  const uint64_t t = PrefixDigest(tokens.data(), tokens.size_bytes(), tokens.size());
  return Hex(id.model_id) + "-" + Hex(id.compute_id) + "-" + Hex(t) + ".kvprefix";
}

std::string PrefixStore::Validate(const std::byte* p, uint64_t size, const PrefixIdentity& id,
                                  std::span<const TokenId> tokens) {
  if (size < sizeof(PrefixFileHeader)) {
    return "truncated: " + std::to_string(size) + " bytes, shorter than the header";
  }
  PrefixFileHeader h{};
  std::memcpy(&h, p, sizeof h);
  if (std::memcmp(h.magic, kPrefixMagic, sizeof h.magic) != 0) return "not a prefix cache file";
  if (h.version != kPrefixVersion) return "format version " + std::to_string(h.version);
  if (h.n_tokens != tokens.size()) {
    return "holds " + std::to_string(h.n_tokens) + " tokens, not " + std::to_string(tokens.size());
  }
  const uint64_t want = PrefixFileBytes(h.n_tokens, id.n_layers, id.row_bytes);
  if (h.header_bytes != HeaderBytes(h.n_tokens) || size != want ||
      h.payload_bytes != want - h.header_bytes) {
    return "truncated or padded: " + std::to_string(size) + " bytes, " + std::to_string(want) +
           " expected";
  }
  if (h.model_id != id.model_id) {
    return "built by another model (" + Hex(h.model_id) + ", this one " + Hex(id.model_id) + ")";
  }
  if (h.header_checksum != HeaderChecksum(h, p + sizeof h, h.n_tokens)) return "header checksum";
  if (h.compute_id != id.compute_id || h.kv_type != static_cast<uint32_t>(id.kv_type) ||
      h.n_layers != id.n_layers || h.row_bytes != id.row_bytes) {
    return "computed with other settings (compute id, KV type or shape)";
  }
  if (std::memcmp(p + sizeof h, tokens.data(), tokens.size_bytes()) != 0) return "other tokens";
  if (h.payload_checksum != PrefixDigest(p + h.header_bytes, h.payload_bytes, 0)) {
    return "payload checksum mismatch (corrupt)";
  }
  return {};
}

Result<const PrefixEntry*> PrefixStore::Load(const PrefixIdentity& id,
                                             std::span<const TokenId> tokens) {
  if (!enabled()) return MakeError(ErrorCode::kUnsupported, "prefix cache: no folder configured");
  const fs::path path = dir_ / FileName(id, tokens);
  std::erase_if(entries_, [](const auto& e) { return e->map == nullptr; });  // dropped ones
  for (const auto& e : entries_) {
    if (e->path == path) return e.get();
  }
  PrefixEntry e;
  e.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (e.fd < 0) {
    const int err = errno;
    return MakeError(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                     path.string() + ": " + std::strerror(err));
  }
  struct stat st {};
  std::string why;
  if (::fstat(e.fd, &st) != 0) {
    why = std::string("stat: ") + std::strerror(errno);
  } else {
    e.file_bytes = static_cast<uint64_t>(st.st_size);
    if (e.file_bytes > 0) {
      void* m = ::mmap(nullptr, e.file_bytes, PROT_READ, MAP_PRIVATE, e.fd, 0);
      if (m == MAP_FAILED) {
        why = std::string("mmap: ") + std::strerror(errno);
      } else {
        e.map = m;
      }
    }
    if (why.empty()) why = Validate(static_cast<const std::byte*>(e.map), e.file_bytes, id, tokens);
  }
  if (!why.empty()) {
    Unmap(e);
    std::error_code ec;
    fs::remove(path, ec);
    return MakeError(ErrorCode::kFormat, path.string() + ": " + why);
  }
  const auto* base = static_cast<const std::byte*>(e.map);
  PrefixFileHeader h{};
  std::memcpy(&h, base, sizeof h);
  e.id = id;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.path = path;
  e.k = base + h.header_bytes;
  e.v = e.k + h.payload_bytes / 2;
  entries_.push_back(std::make_unique<PrefixEntry>(std::move(e)));
  if (!Touch(*entries_.back())) return MakeError(ErrorCode::kIo, path.string() + ": changed size");
  return entries_.back().get();
}

Result<void> PrefixStore::MakeRoom(uint64_t incoming) {
  const auto bound = [&] {
    return "prefix cache " + dir_.string() + ": an entry of " + std::to_string(incoming) +
           " bytes does not fit the bound of " + std::to_string(max_bytes_) +
           " bytes (prefix_cache max_bytes)";
  };
  if (incoming > max_bytes_) return MakeError(ErrorCode::kOutOfMemory, bound());
  struct File {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<File> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(dir_, ec)) {
    std::error_code e1, e2;
    const std::string name = d.path().filename().string();
    if (name.starts_with('.') && name.find(".kvprefix.tmp.") != std::string::npos &&
        d.last_write_time(e2) < fs::file_time_type::clock::now() - std::chrono::hours(1)) {
      fs::remove(d.path(), e1);  // left by a writer that crashed
      continue;
    }
    if (d.path().extension() != ".kvprefix" || !d.is_regular_file(e1)) continue;
    const uint64_t b = d.file_size(e1);
    const auto t = d.last_write_time(e2);
    if (e1 || e2) continue;
    total += b;
    files.push_back({d.path(), b, t});
  }
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.mtime < b.mtime; });
  for (const File& f : files) {
    if (total + incoming <= max_bytes_) break;
    const bool mapped = std::any_of(entries_.begin(), entries_.end(),
                                    [&](const auto& e) { return e->path == f.path; });
    std::error_code rm;
    if (mapped || !fs::remove(f.path, rm)) continue;
    total -= f.bytes;
    std::fprintf(stderr, "ari: prefix cache: evicted %s (least recently used, %llu bytes)\n",
                 f.path.c_str(), static_cast<unsigned long long>(f.bytes));
  }
  if (total + incoming > max_bytes_) {
    return MakeError(ErrorCode::kOutOfMemory,
                     bound() + "; " + std::to_string(total) + " bytes are held by prefixes in use");
  }
  return {};
}

Result<const PrefixEntry*> PrefixStore::Store(const PrefixIdentity& id,
                                              std::span<const TokenId> tokens,
                                              const PrefixRows& rows) {
  if (!enabled()) return MakeError(ErrorCode::kUnsupported, "prefix cache: no folder configured");
  if (tokens.empty()) return MakeError(ErrorCode::kInvalidArgument, "prefix cache: empty prefix");
  const auto n = static_cast<uint32_t>(tokens.size());
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "prefix cache " + dir_.string() +
                                         ": cannot create the folder: " + ec.message());
  }
  const uint64_t file_bytes = PrefixFileBytes(n, id.n_layers, id.row_bytes);
  if (auto room = MakeRoom(file_bytes); !room) return std::unexpected(room.error());
  PrefixFileHeader h{};
  std::memcpy(h.magic, kPrefixMagic, sizeof h.magic);
  h.version = kPrefixVersion;
  h.header_bytes = static_cast<uint32_t>(HeaderBytes(n));
  h.model_id = id.model_id;
  h.compute_id = id.compute_id;
  h.kv_type = static_cast<uint32_t>(id.kv_type);
  h.n_layers = id.n_layers;
  h.row_bytes = id.row_bytes;
  h.n_tokens = n;
  h.payload_bytes = file_bytes - h.header_bytes;
  const uint64_t layer_bytes = static_cast<uint64_t>(n) * id.row_bytes;
  // The payload's digest runs over K then V, as written: one buffer per layer and half.
  std::vector<std::byte> payload(h.payload_bytes);
  for (int half = 0; half < 2; ++half) {
    for (uint32_t l = 0; l < id.n_layers; ++l) {
      std::memcpy(payload.data() + (half * id.n_layers + l) * layer_bytes, rows(l, half == 1),
                  layer_bytes);
    }
  }
  h.payload_checksum = PrefixDigest(payload.data(), payload.size(), 0);
  h.header_checksum = HeaderChecksum(h, tokens.data(), n);
  const fs::path path = dir_ / FileName(id, tokens);
  std::string tmp_name = path.filename().string();
  tmp_name.insert(0, 1, '.');
  tmp_name.append(".tmp.").append(std::to_string(::getpid()));
  const fs::path tmp = dir_ / tmp_name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return MakeError(ErrorCode::kIo, "prefix cache " + dir_.string() +
                                         ": folder is not writable: " + std::strerror(errno));
  }
  std::vector<std::byte> head(h.header_bytes, std::byte{0});
  std::memcpy(head.data(), &h, sizeof h);
  std::memcpy(head.data() + sizeof h, tokens.data(), tokens.size_bytes());
  Result<void> w = WriteAll(fd, head.data(), head.size(), tmp, "prefix cache");
  if (w) w = WriteAll(fd, payload.data(), payload.size(), tmp, "prefix cache");
  if (w && ::fsync(fd) != 0) {
    w = MakeError(ErrorCode::kIo,
                  "prefix cache " + dir_.string() + ": fsync: " + std::strerror(errno));
  }
  ::close(fd);
  if (w && std::rename(tmp.c_str(), path.c_str()) != 0) {
    w = MakeError(ErrorCode::kIo,
                  "prefix cache " + dir_.string() + ": rename: " + std::strerror(errno));
  }
  if (!w) {
    ::unlink(tmp.c_str());
    return std::unexpected(w.error());
  }
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    // The entry is usable either way; only its survival of a power cut is in question.
    if (::fsync(dfd) != 0) {
      std::fprintf(stderr,
                   "ari: prefix cache: fsync of %s: %s (the new entry may not survive a "
                   "power cut)\n",
                   dir_.c_str(), std::strerror(errno));
    }
    ::close(dfd);
  }
  return Load(id, tokens);
}

PrefixEntry* PrefixStore::Find(std::span<const TokenId> prompt, uint64_t compute_id, KvType kv,
                               int32_t max_use, int32_t& use) {
  PrefixEntry* best = nullptr;
  use = 0;
  for (const auto& e : entries_) {
    if (e->id.compute_id != compute_id || e->id.kv_type != kv || e->map == nullptr) continue;
    const size_t n = std::min(prompt.size(), e->tokens.size());
    size_t m = 0;
    while (m < n && prompt[m] == e->tokens[m]) ++m;
    const auto u = static_cast<int32_t>(std::min<size_t>(m, static_cast<size_t>(max_use)));
    if (u > use) {
      use = u;
      best = e.get();
    }
  }
  return best;
}

bool PrefixStore::Touch(PrefixEntry& e) {
  struct stat st {};
  if (e.fd < 0 || ::fstat(e.fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != e.file_bytes) {
    std::fprintf(stderr, "ari: prefix cache: %s changed size under the engine: not used again\n",
                 e.path.c_str());
    Unmap(e);
    return false;
  }
  // LRU order. Refused when another user owns the file: it keeps its creation order.
  if (::futimens(e.fd, nullptr) != 0 && errno != EPERM && errno != EACCES) {
    std::fprintf(stderr, "ari: prefix cache: %s: futimens: %s (LRU order not updated)\n",
                 e.path.c_str(), std::strerror(errno));
  }
  return true;
}

}  // namespace ari::runtime::engine_internal
