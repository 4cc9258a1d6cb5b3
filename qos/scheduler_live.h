// Private to the scheduler's .cc files (scheduler*.cc): the state of one admitted
// request, and the plan of one chunk. Not part of the public API.
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

// What the step thread took from the picked request under the lock, to run its chunk
// without the lock.
struct Scheduler::ChunkPlan {
  int32_t slot = -1;
  bool start = false;   // the request starts its turn with this chunk
  bool resume = false;  // the request's parked turn is resumed into `slot` first
  runtime::ParkId park_id = -1;
  uint64_t parked_id = 0;  // the turn parked at this boundary to free `slot`
  int32_t max_tokens = 0;  // of the turn (capped by the memory ladder)
  Knobs knobs;             // the decision's, degraded to W4A8 for a degraded request
  runtime::ChunkKnobs engine_knobs;
  runtime::ChunkRunner* engine = nullptr;
  bool on_fallback = false;
  uint64_t evicted_session = 0;  // the idle conversation `slot` held (spilled first)
};

}  // namespace ari::qos
