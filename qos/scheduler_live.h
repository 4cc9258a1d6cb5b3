// Private to the scheduler's .cc files (scheduler.cc, scheduler_pick.cc): the state of
// one admitted request. Not part of the public API.
#pragma once

#include <cstdint>
#include <limits>

#include "qos/scheduler.h"

namespace ari::qos {

inline constexpr int64_t kSchedNever = std::numeric_limits<int64_t>::max();

struct Scheduler::Live {
  SchedRequest req;
  uint64_t seq = 0;
  int64_t admitted_ns = 0;
  int64_t deadline_ns = kSchedNever;
  bool started = false;  // holds a slot, turn started (or parked)
  int32_t slot = -1;
  bool parked = false;  // the turn sits in a park area (slot = -1) until it resumes
  runtime::ParkId park_id = -1;
  bool offloaded = false;        // park_to_disk handled this park (on disk, or tried once)
  bool on_fallback = false;      // the slot is on the fallback engine
  int64_t waiting_since_ns = 0;  // aging of a started (preempted) request
  int32_t generated = 0;
  uint32_t chunk_seq = 0;
  bool degraded = false;
  bool deadline_missed = false;
  int64_t first_chunk_ns = -1;
  int64_t first_token_ns = -1;
};

}  // namespace ari::qos
