// Bounded per-class request queues with EDF and aging; see request_queue.h.
#include "qos/request_queue.h"

#include <algorithm>
#include <tuple>

namespace ari::qos {
namespace {

constexpr int64_t kNsPerMs = 1000000;

}  // namespace

std::string_view PushStatusName(PushStatus s) {
  switch (s) {
    case PushStatus::kAccepted: return "accepted";
    case PushStatus::kAcceptedEvicted: return "accepted_evicted";
    case PushStatus::kFull: return "full";
    case PushStatus::kDuplicate: return "duplicate";
    case PushStatus::kInvalid: return "invalid";
  }
  return "?";
}

QueueConfig QueueConfig::FromPolicy(const Policy& policy) {
  QueueConfig c;
  for (Urgency u : kAllUrgencies) {
    c.capacity[Rank(u)] = policy.Class(u).queue_capacity;
    c.aging_step_ns[Rank(u)] = static_cast<int64_t>(policy.Class(u).aging_step_ms) * kNsPerMs;
  }
  c.aging_ceiling = policy.aging_ceiling;
  return c;
}

RequestQueue::RequestQueue(const QueueConfig& config) : config_(config) {
  for (uint32_t cap : config_.capacity) storage_ += cap;
  entries_ = std::make_unique<QueueEntry[]>(storage_);
}

int RequestQueue::EffectiveRank(const QueueEntry& e, int64_t now_ns) const {
  const int rank = Rank(e.urgency);
  const int ceiling = Rank(config_.aging_ceiling);
  const int64_t step = config_.aging_step_ns[rank];
  if (step <= 0 || rank <= ceiling || now_ns <= e.enqueue_ns) return rank;
  const int64_t levels = (now_ns - e.enqueue_ns) / step;
  return static_cast<int>(std::max<int64_t>(ceiling, rank - levels));
}

int RequestQueue::Find(uint64_t id) const {
  for (size_t i = 0; i < size_; ++i) {
    if (entries_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

int RequestQueue::Best(int64_t now_ns) const {
  int best = -1;
  auto key = [&](const QueueEntry& e) {
    // Lower is better: effective rank, then more aged (higher native rank), EDF, arrival.
    return std::make_tuple(EffectiveRank(e, now_ns), -Rank(e.urgency), e.deadline_ns, e.seq);
  };
  for (size_t i = 0; i < size_; ++i) {
    if (best < 0 || key(entries_[i]) < key(entries_[best])) best = static_cast<int>(i);
  }
  return best;
}

QueueEntry RequestQueue::RemoveAt(int index) {
  const QueueEntry e = entries_[index];
  entries_[index] = entries_[size_ - 1];
  --size_;
  --depth_[Rank(e.urgency)];
  return e;
}

void RequestQueue::Insert(const QueueEntry& e) {
  entries_[size_++] = e;
  ++depth_[Rank(e.urgency)];
}

PushResult RequestQueue::Push(const QueueEntry& entry) {
  PushResult result;
  const int rank = Rank(entry.urgency);
  if (rank < 0 || rank >= kNumUrgencies) {
    result.status = PushStatus::kInvalid;
    return result;
  }
  if (Find(entry.id) >= 0) {
    result.status = PushStatus::kDuplicate;
    return result;
  }
  QueueEntry e = entry;
  e.seq = next_seq_++;
  const bool class_full = depth_[rank] >= config_.capacity[rank];
  if (!class_full && size_ < storage_) {
    Insert(e);
    result.status = PushStatus::kAccepted;
    return result;
  }
  if (entry.urgency != Urgency::kCritical) {
    result.status = PushStatus::kFull;
    return result;
  }
  // CRITICAL: make room by evicting the latest-deadline entry of the lowest class.
  for (int victim_rank = kNumUrgencies - 1; victim_rank > Rank(Urgency::kCritical); --victim_rank) {
    if (depth_[victim_rank] == 0) continue;
    int victim = -1;
    for (size_t i = 0; i < size_; ++i) {
      const QueueEntry& c = entries_[i];
      if (Rank(c.urgency) != victim_rank) continue;
      if (victim < 0 || std::tie(c.deadline_ns, c.seq) >
                            std::tie(entries_[victim].deadline_ns, entries_[victim].seq)) {
        victim = static_cast<int>(i);
      }
    }
    result.evicted = RemoveAt(victim);
    Insert(e);
    result.status = PushStatus::kAcceptedEvicted;
    return result;
  }
  result.status = PushStatus::kFull;
  return result;
}

std::optional<QueueEntry> RequestQueue::Peek(int64_t now_ns) const {
  const int best = Best(now_ns);
  if (best < 0) return std::nullopt;
  return entries_[best];
}

std::optional<QueueEntry> RequestQueue::Pop(int64_t now_ns) {
  const int best = Best(now_ns);
  if (best < 0) return std::nullopt;
  return RemoveAt(best);
}

std::optional<QueueEntry> RequestQueue::Cancel(uint64_t id) {
  const int i = Find(id);
  if (i < 0) return std::nullopt;
  return RemoveAt(i);
}

std::optional<QueueEntry> RequestQueue::PopExpired(int64_t now_ns) {
  int found = -1;
  for (size_t i = 0; i < size_; ++i) {
    const QueueEntry& e = entries_[i];
    if (e.deadline_ns >= now_ns) continue;
    if (found < 0 || std::tie(e.deadline_ns, e.seq) <
                         std::tie(entries_[found].deadline_ns, entries_[found].seq)) {
      found = static_cast<int>(i);
    }
  }
  if (found < 0) return std::nullopt;
  return RemoveAt(found);
}

}  // namespace ari::qos
