// The model file changing under its read-only mapping (docs/reliability.md).
//
// ari-node maps the model (MAP_PRIVATE, PROT_READ). If the file is later truncated in
// place, every access to a page past the new end raises SIGBUS and kills the process;
// if it is rewritten in place, the weights silently change. Replacing the file by
// rename (the normal way to update it) is harmless: the mapping keeps the old inode.
//
// ModelFileWatch keeps a descriptor of the mapped inode and its size and mtime from
// load time; Check() fstat()s it (about a microsecond) and reports a change. Once a
// change is seen it stays reported (the mapping is no longer trustworthy): every later
// request fails with FAILED "model file changed ..." instead of touching the mapping,
// and the node keeps running (status and refusals still work) until it is restarted.
// GuardedRunner runs that check before each StartTurn and each RunChunk. Residual
// window: a truncation during a chunk that is already running still raises SIGBUS.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "component/client/error.h"
#include "runtime/engine/engine.h"

namespace ari::component {

class ModelFileWatch {
 public:
  // Opens `path` and records its identity. Fails when the file is smaller than
  // `mapped_size` (the bytes the loader mapped and checked: it changed during load).
  static Result<std::unique_ptr<ModelFileWatch>> Open(const std::filesystem::path& path,
                                                      uint64_t mapped_size);
  ~ModelFileWatch();
  ModelFileWatch(const ModelFileWatch&) = delete;
  ModelFileWatch& operator=(const ModelFileWatch&) = delete;

  // Empty string while the file is as loaded; else why not (sticky, thread-safe).
  std::string Check();
  bool changed() const { return changed_.load(std::memory_order_acquire); }
  const std::filesystem::path& path() const { return path_; }

 private:
  ModelFileWatch() = default;

  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t mapped_size_ = 0;
  uint64_t size_ = 0;
  timespec mtime_{};
  ino_t inode_ = 0;
  std::atomic<bool> changed_{false};
  std::mutex mu_;
  std::string why_;  // guarded by mu_
};

// Forwards to `inner`, failing StartTurn/RunChunk/ResumeParked once the watch reports a
// change. Slot parking is forwarded too (without it the scheduler could never park a turn
// in ari-node: ChunkRunner's defaults say kUnsupported).
class GuardedRunner final : public runtime::ChunkRunner {
 public:
  GuardedRunner(runtime::ChunkRunner& inner, ModelFileWatch& watch)
      : inner_(inner), watch_(watch) {}
  int32_t num_slots() const override { return inner_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& turn) override;
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& knobs) override;
  int32_t MaxLayerDrop() const override { return inner_.MaxLayerDrop(); }
  int32_t num_park_areas() const override { return inner_.num_park_areas(); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t slot) override { return inner_.ParkSlot(slot); }
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t slot) override;
  void DropParked(runtime::ParkId id) override { inner_.DropParked(id); }
  // Parked sessions on disk and memory yield: forwarded as well (the defaults would make
  // the spill folder and STANDBY no-ops in ari-node).
  runtime::Result<uint64_t> SpillSlot(int32_t slot, uint64_t session) override {
    return inner_.SpillSlot(slot, session);
  }
  runtime::Result<bool> RestoreSession(int32_t slot, uint64_t session,
                                       std::string* rejected) override {
    return inner_.RestoreSession(slot, session, rejected);
  }
  void ForgetSession(uint64_t session) override { inner_.ForgetSession(session); }
  runtime::Result<uint64_t> OffloadParked(runtime::ParkId id) override {
    return inner_.OffloadParked(id);
  }
  uint64_t ReleaseFreeParkAreas() override { return inner_.ReleaseFreeParkAreas(); }
  uint64_t ReleaseSlotPages(int32_t slot) override { return inner_.ReleaseSlotPages(slot); }
  runtime::Result<runtime::MemoryYield> ReleaseMemory(bool drop_page_cache) override {
    return inner_.ReleaseMemory(drop_page_cache);
  }
  runtime::Result<uint64_t> Rewarm() override { return inner_.Rewarm(); }
  bool memory_released() const override { return inner_.memory_released(); }

 private:
  runtime::ChunkRunner& inner_;
  ModelFileWatch& watch_;
};

}  // namespace ari::component
