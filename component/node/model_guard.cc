#include "component/node/model_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ari::component {

Result<std::unique_ptr<ModelFileWatch>> ModelFileWatch::Open(const std::filesystem::path& path,
                                                             uint64_t mapped_size) {
  std::unique_ptr<ModelFileWatch> w(new ModelFileWatch());
  w->path_ = path;
  w->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (w->fd_ < 0) {
    return MakeError(ErrorCode::kConfig,
                     "model " + path.string() + ": open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(w->fd_, &st) != 0) {
    return MakeError(ErrorCode::kConfig,
                     "model " + path.string() + ": fstat: " + std::strerror(errno));
  }
  w->mapped_size_ = mapped_size;
  w->size_ = static_cast<uint64_t>(st.st_size);
  w->mtime_ = st.st_mtim;
  w->inode_ = st.st_ino;
  if (w->size_ < mapped_size) {
    return MakeError(ErrorCode::kConfig, "model " + path.string() + ": file shrank during load (" +
                                             std::to_string(w->size_) + " < " +
                                             std::to_string(mapped_size) + " bytes mapped)");
  }
  return w;
}

ModelFileWatch::~ModelFileWatch() {
  if (fd_ >= 0) ::close(fd_);
}

std::string ModelFileWatch::Check() {
  if (changed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> l(mu_);
    return why_;
  }
  struct stat st {};
  std::string why;
  if (::fstat(fd_, &st) != 0) {
    why = std::string("fstat failed: ") + std::strerror(errno);
  } else if (static_cast<uint64_t>(st.st_size) < mapped_size_) {
    why = "truncated to " + std::to_string(st.st_size) + " bytes while mapped (" +
          std::to_string(mapped_size_) + " mapped)";
  } else if (st.st_size != static_cast<off_t>(size_) || st.st_mtim.tv_sec != mtime_.tv_sec ||
             st.st_mtim.tv_nsec != mtime_.tv_nsec) {
    why = "modified in place while mapped";
  } else {
    return {};
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!changed_.load(std::memory_order_relaxed)) {
    why_ = "model file changed: " + path_.filename().string() + " " + why + "; restart ari-node";
    changed_.store(true, std::memory_order_release);
  }
  return why_;
}

runtime::Result<void> GuardedRunner::StartTurn(int32_t slot, const runtime::TurnSpec& turn) {
  if (std::string why = watch_.Check(); !why.empty()) {
    return runtime::MakeError(runtime::ErrorCode::kIo, why);
  }
  return inner_.StartTurn(slot, turn);
}

runtime::Result<runtime::ChunkResult> GuardedRunner::RunChunk(int32_t slot,
                                                              const runtime::ChunkKnobs& knobs) {
  if (std::string why = watch_.Check(); !why.empty()) {
    return runtime::MakeError(runtime::ErrorCode::kIo, why);
  }
  return inner_.RunChunk(slot, knobs);
}

runtime::Result<void> GuardedRunner::ResumeParked(runtime::ParkId id, int32_t slot) {
  if (watch_.changed()) return runtime::MakeError(runtime::ErrorCode::kIo, watch_.Check());
  return inner_.ResumeParked(id, slot);
}

}  // namespace ari::component
