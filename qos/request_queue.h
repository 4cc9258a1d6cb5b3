// Waiting requests, one bounded queue per urgency class, in storage allocated
// once at construction (Push/Pop/Cancel never allocate).
//
// Order (Pop/Peek), computed at time `now`:
//  1. effective rank, most urgent first. A request's effective rank is its class
//     rank minus one level per aging_step of waiting (classes with step 0 never
//     age), never above the policy's aging_ceiling;
//  2. at equal effective rank, the request that aged more (lower class) first:
//     it has already waited a full step per level;
//  3. earliest deadline first (within a class: EDF);
//  4. arrival order.
// So BACKGROUND cannot starve: after (its rank - ceiling rank) steps it ranks with
// the ceiling class and goes ahead of every native request there.
//
// Capacity: each class holds at most its queue_capacity; a full class refuses
// with kFull (the request is answered BUSY, the queue does not grow). A CRITICAL
// request that finds its class full instead evicts the latest-deadline request of
// the lowest non-empty non-CRITICAL class and takes its slot (the storage is the
// sum of all capacities); the evicted entry is returned so the caller can send its
// terminal chunk. Only when nothing can be evicted is a CRITICAL refused.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "qos/policy.h"

namespace ari::qos {

struct QueueEntry {
  uint64_t id = 0;  // caller's handle (unique among queued entries)
  Urgency urgency = Urgency::kNormal;
  int64_t deadline_ns = 0;  // absolute, same clock as now_ns
  int64_t enqueue_ns = 0;   // when it was admitted (aging starts here)
  uint64_t seq = 0;         // set by Push: arrival order

  bool operator==(const QueueEntry&) const = default;
};

enum class PushStatus : uint8_t {
  kAccepted,
  kAcceptedEvicted,  // accepted; `evicted` holds the entry that made room
  kFull,             // refused: class at capacity (caller answers BUSY)
  kDuplicate,        // refused: an entry with this id is queued already
  kInvalid,          // refused: urgency out of range
};
std::string_view PushStatusName(PushStatus s);

struct PushResult {
  PushStatus status = PushStatus::kFull;
  std::optional<QueueEntry> evicted;

  bool accepted() const {
    return status == PushStatus::kAccepted || status == PushStatus::kAcceptedEvicted;
  }
};

struct QueueConfig {
  std::array<uint32_t, kNumUrgencies> capacity{};      // by class rank
  std::array<int64_t, kNumUrgencies> aging_step_ns{};  // 0 = never ages
  Urgency aging_ceiling = Urgency::kCritical;

  static QueueConfig FromPolicy(const Policy& policy);
};

class RequestQueue {
 public:
  explicit RequestQueue(const QueueConfig& config);

  PushResult Push(const QueueEntry& entry);
  // Removes and returns the first entry in the order above, if any.
  std::optional<QueueEntry> Pop(int64_t now_ns);
  std::optional<QueueEntry> Peek(int64_t now_ns) const;
  // Removes the entry with this id (cancel before it ran).
  std::optional<QueueEntry> Cancel(uint64_t id);
  // Removes one entry whose deadline is before now (earliest deadline first);
  // call until empty at each boundary to answer DEADLINE_MISSED.
  std::optional<QueueEntry> PopExpired(int64_t now_ns);

  bool Contains(uint64_t id) const { return Find(id) >= 0; }
  // Effective rank of an entry at `now` (0 = CRITICAL level); see the order above.
  int EffectiveRank(const QueueEntry& e, int64_t now_ns) const;

  uint32_t Depth(Urgency u) const { return depth_[Rank(u)]; }
  std::array<uint32_t, kNumUrgencies> Depths() const { return depth_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t storage() const { return storage_; }
  const QueueConfig& config() const { return config_; }

 private:
  int Find(uint64_t id) const;
  int Best(int64_t now_ns) const;
  QueueEntry RemoveAt(int index);
  void Insert(const QueueEntry& e);

  QueueConfig config_;
  size_t storage_ = 0;
  std::unique_ptr<QueueEntry[]> entries_;  // [0, size_) used, unordered
  size_t size_ = 0;
  std::array<uint32_t, kNumUrgencies> depth_{};
  uint64_t next_seq_ = 0;
};

}  // namespace ari::qos
