// Idle sessions spilled to disk; see engine_spill.h.
#include "runtime/engine/engine_spill.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "runtime/engine/engine_park.h"
#include "runtime/engine/prefix_cache.h"
#include "runtime/model/model.h"

namespace ari::runtime::engine_internal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kExt = ".kvspill";
constexpr const char* kParkExt = ".kvpark";

bool IsSpillFile(const fs::path& p) { return p.extension() == kExt || p.extension() == kParkExt; }

uint64_t HeaderChecksum(SpillFileHeader h) {
  h.header_checksum = 0;
  return PrefixDigest(&h, sizeof h, 0x5b11);
}

bool ReadAll(int fd, void* p, uint64_t n) {
  auto* b = static_cast<std::byte*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

SpillStore::SpillStore() = default;

SpillStore::~SpillStore() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

Result<void> SpillStore::Init(const fs::path& dir, uint64_t max_bytes, uint64_t model_id,
                              const Model& model, int32_t ctx, uint64_t max_slot_bytes, int level) {
  if (dir.empty()) return {};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, "session spill " + dir.string() +
                                         ": cannot create the folder: " + ec.message());
  }
  dir_ = dir;
  max_bytes_ = max_bytes;
  model_id_ = model_id;
  model_ = &model;
  ctx_ = ctx;
  layers_ = model.config().n_layers;
  level_ = level;
  raw_cap_ = max_slot_bytes + static_cast<uint64_t>(ctx) * sizeof(TokenId);
  packed_cap_ = ZSTD_compressBound(raw_cap_);
  raw_.reset(new std::byte[raw_cap_]);
  packed_.reset(new std::byte[packed_cap_]);
  cctx_ = ZSTD_createCCtx();
  dctx_ = ZSTD_createDCtx();
  if (cctx_ == nullptr || dctx_ == nullptr) {
    return MakeError(ErrorCode::kOutOfMemory, "session spill: cannot create zstd contexts");
  }
  counters_.bytes_on_disk = FolderBytes();
  return {};
}

fs::path SpillStore::PathOf(uint64_t key, SpillKind kind) const {
  char name[40];
  std::snprintf(name, sizeof name, "%016llx%s", static_cast<unsigned long long>(key),
                kind == SpillKind::kParkedTurn ? kParkExt : kExt);
  return dir_ / name;
}

uint64_t SpillStore::FolderBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!IsSpillFile(e.path())) continue;
    const uintmax_t n = e.file_size(ec);
    if (!ec) total += n;
  }
  return total;
}

Result<void> SpillStore::MakeRoom(uint64_t need) {
  if (need > max_bytes_) {
    return MakeError(ErrorCode::kIo, "session spill " + dir_.string() + ": a spill of " +
                                         std::to_string(need) + " bytes exceeds the bound " +
                                         std::to_string(max_bytes_));
  }
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!IsSpillFile(e.path())) continue;
    const uintmax_t n = e.file_size(ec);
    if (ec) continue;
    total += n;
    // Parked turns' files count but are never removed: their turns resume from them.
    if (e.path().extension() == kExt) files.emplace_back(e.last_write_time(ec), e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {  // the oldest spilled sessions go first
    if (total + need <= max_bytes_) break;
    const uintmax_t n = fs::file_size(f.second, ec);
    if (fs::remove(f.second, ec)) total -= std::min<uint64_t>(total, ec ? 0 : n);
  }
  counters_.bytes_on_disk = total;
  return {};
}

Result<uint64_t> SpillStore::Spill(const Slot& s, uint64_t session) {
  if (!enabled()) return MakeError(ErrorCode::kUnsupported, "session spill: no folder configured");
  if (s.ref || session == 0 || s.hist_len == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "session spill: nothing to spill");
  }
  KvRowsView rows;
  rows.k = static_cast<std::byte*>(s.kv.k);
  rows.v = static_cast<std::byte*>(s.kv.v);
  rows.rows_per_layer = ctx_;
  rows.type = s.kv.type;
  rows.position = s.position;
  rows.hist_len = s.hist_len;
  rows.pinned = s.pinned;
  rows.history = s.history;
  return Write(rows, session, SpillKind::kSession);
}

Result<uint64_t> SpillStore::Write(const KvRowsView& s, uint64_t session, SpillKind kind) {
  if (!enabled()) return MakeError(ErrorCode::kUnsupported, "session spill: no folder configured");
  const auto rb = static_cast<uint32_t>(KvCacheView::RowBytes(model_->config(), s.type));
  const uint64_t half = static_cast<uint64_t>(layers_) * static_cast<uint64_t>(s.position) * rb;
  const uint64_t raw = 2 * half + static_cast<uint64_t>(s.hist_len) * sizeof(TokenId);
  if (raw > raw_cap_) return MakeError(ErrorCode::kInvalidArgument, "session spill: slot too big");
  CopyKvRows(s.k, raw_.get(), layers_, s.rows_per_layer, s.position, s.position, rb, true);
  CopyKvRows(s.v, raw_.get() + half, layers_, s.rows_per_layer, s.position, s.position, rb, true);
  std::memcpy(raw_.get() + 2 * half, s.history, static_cast<size_t>(s.hist_len) * sizeof(TokenId));
  const size_t z = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(cctx_), packed_.get(), packed_cap_,
                                     raw_.get(), raw, level_);
  if (ZSTD_isError(z)) {
    return MakeError(ErrorCode::kInternal,
                     std::string("session spill: zstd: ") + ZSTD_getErrorName(z));
  }
  SpillFileHeader h{};
  std::memcpy(h.magic, kSpillMagic, sizeof h.magic);
  h.version = kSpillVersion;
  h.kv_type = static_cast<uint32_t>(s.type);
  h.model_id = model_id_;
  h.session = session;
  h.n_layers = static_cast<uint32_t>(layers_);
  h.row_bytes = rb;
  h.position = s.position;
  h.hist_len = s.hist_len;
  h.pinned = s.pinned;
  h.kind = static_cast<uint32_t>(kind);
  h.raw_bytes = raw;
  h.compressed_bytes = z;
  h.payload_checksum = PrefixDigest(raw_.get(), raw, 0);
  h.header_checksum = HeaderChecksum(h);
  const uint64_t file_bytes = sizeof h + z;
  Forget(session, kind);  // an older spill of the session is superseded
  if (auto room = MakeRoom(file_bytes); !room) {
    ++counters_.failures;
    return std::unexpected(room.error());
  }
  const fs::path path = PathOf(session, kind);
  fs::path tmp = path;
  tmp += ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    ++counters_.failures;
    return MakeError(ErrorCode::kIo, "session spill " + dir_.string() +
                                         ": folder is not writable: " + std::strerror(errno));
  }
  Result<void> w = WriteAll(fd, &h, sizeof h, tmp, "session spill");
  if (w) w = WriteAll(fd, packed_.get(), z, tmp, "session spill");
  if (w && ::fsync(fd) != 0) {
    w = MakeError(ErrorCode::kIo,
                  "session spill " + dir_.string() + ": fsync: " + std::strerror(errno));
  }
  ::close(fd);
  if (w && std::rename(tmp.c_str(), path.c_str()) != 0) {
    w = MakeError(ErrorCode::kIo,
                  "session spill " + dir_.string() + ": rename: " + std::strerror(errno));
  }
  if (!w) {
    ::unlink(tmp.c_str());
    ++counters_.failures;
    return std::unexpected(w.error());
  }
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    if (::fsync(dfd) != 0) {
      // best effort: the file is complete; only the rename's durability is in doubt
    }
    ::close(dfd);
  }
  ++(kind == SpillKind::kSession ? counters_.spills : counters_.parks_offloaded);
  counters_.bytes_on_disk += file_bytes;
  return file_bytes;
}

std::string SpillStore::Check(const SpillFileHeader& h, uint64_t file_bytes, uint64_t session,
                              SpillKind kind) const {
  if (std::memcmp(h.magic, kSpillMagic, sizeof h.magic) != 0) return "not a spill file";
  if (h.version != kSpillVersion) return "version " + std::to_string(h.version);
  if (h.header_checksum != HeaderChecksum(h)) return "header checksum";
  if (h.model_id != model_id_) return "written by another model";
  if (h.session != session || h.kind != static_cast<uint32_t>(kind)) {
    return "another session's file";
  }
  if (h.n_layers != static_cast<uint32_t>(layers_)) return "layer count";
  const auto type = static_cast<KvType>(h.kv_type);
  if (type != KvType::kF16 && type != KvType::kInt8 && type != KvType::kF32) return "KV type";
  if (h.row_bytes != KvCacheView::RowBytes(model_->config(), type)) return "row bytes";
  if (h.position < 0 || h.hist_len < h.position || h.hist_len >= ctx_ || h.pinned < 0 ||
      h.pinned > h.hist_len) {
    return "positions out of range";
  }
  const uint64_t half =
      static_cast<uint64_t>(h.n_layers) * static_cast<uint64_t>(h.position) * h.row_bytes;
  if (h.raw_bytes != 2 * half + static_cast<uint64_t>(h.hist_len) * sizeof(TokenId) ||
      h.raw_bytes > raw_cap_ || h.compressed_bytes > packed_cap_) {
    return "sizes";
  }
  if (file_bytes != sizeof h + h.compressed_bytes) return "truncated or padded";
  return {};
}

Result<bool> SpillStore::Restore(uint64_t session, Slot& s, std::string* rejected) {
  rejected->clear();
  if (!enabled() || session == 0 || s.ref) return false;
  KvRowsView rows;
  rows.k = static_cast<std::byte*>(s.kv.k);
  rows.v = static_cast<std::byte*>(s.kv.v);
  rows.rows_per_layer = ctx_;
  rows.history = s.history;
  auto ok = Read(session, SpillKind::kSession, rows, rejected);
  if (!ok || !*ok) return ok;
  s.kv.type = rows.type;
  s.position = rows.position;
  s.hist_len = rows.hist_len;
  s.pinned = rows.pinned;
  return true;
}

Result<bool> SpillStore::Read(uint64_t session, SpillKind kind, KvRowsView& s,
                              std::string* rejected) {
  rejected->clear();
  if (!enabled()) return false;
  const fs::path path = PathOf(session, kind);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // never spilled (or spilled and lost): a fresh start
  struct stat st {};
  SpillFileHeader h{};
  std::string why;
  if (::fstat(fd, &st) != 0 || !ReadAll(fd, &h, sizeof h)) {
    why = "truncated header";
  } else {
    why = Check(h, static_cast<uint64_t>(st.st_size), session, kind);
    if (why.empty() && h.position > s.rows_per_layer) why = "positions out of range";
  }
  if (why.empty() && !ReadAll(fd, packed_.get(), h.compressed_bytes)) why = "short read";
  ::close(fd);
  if (why.empty()) {
    const size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), raw_.get(), raw_cap_,
                                         packed_.get(), h.compressed_bytes);
    if (ZSTD_isError(n)) {
      why = std::string("zstd: ") + ZSTD_getErrorName(n);
    } else if (n != h.raw_bytes) {
      why = "decompressed size";
    } else if (PrefixDigest(raw_.get(), n, 0) != h.payload_checksum) {
      why = "payload checksum";
    }
  }
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  fs::remove(path, ec);
  if (!ec) counters_.bytes_on_disk -= std::min<uint64_t>(counters_.bytes_on_disk, bytes);
  if (!why.empty()) {
    *rejected = path.filename().string() + ": " + why;
    ++counters_.rejected;
    return false;
  }
  const auto type = static_cast<KvType>(h.kv_type);
  const uint64_t half =
      static_cast<uint64_t>(h.n_layers) * static_cast<uint64_t>(h.position) * h.row_bytes;
  s.type = type;
  CopyKvRows(raw_.get(), s.k, layers_, s.rows_per_layer, h.position, h.position, h.row_bytes,
             false);
  CopyKvRows(raw_.get() + half, s.v, layers_, s.rows_per_layer, h.position, h.position, h.row_bytes,
             false);
  std::memcpy(s.history, raw_.get() + 2 * half, static_cast<size_t>(h.hist_len) * sizeof(TokenId));
  s.position = h.position;
  s.hist_len = h.hist_len;
  s.pinned = h.pinned;
  ++(kind == SpillKind::kSession ? counters_.restores : counters_.parks_reloaded);
  return true;
}

void SpillStore::Forget(uint64_t session, SpillKind kind) {
  if (!enabled()) return;
  std::error_code ec;
  const fs::path path = PathOf(session, kind);
  const uintmax_t bytes = fs::file_size(path, ec);
  if (ec) return;
  if (fs::remove(path, ec)) {
    counters_.bytes_on_disk -= std::min<uint64_t>(counters_.bytes_on_disk, bytes);
  }
}

}  // namespace ari::runtime::engine_internal
