// The real-time scheduler: one loop, driven by ONE thread, that turns admitted requests
// into engine chunks under the governor's decisions. ari-node runs it in real time
// (Run()), ari-sim and the tests call Step() themselves in virtual time (ManualClock).
//
// Each Step() is one chunk boundary (docs/scheduler.md has the long form):
//  1. apply cancels (CANCELLED) and deadlines (DEADLINE_MISSED, or keep running
//     degraded when the class's deadline_miss is FINISH_DEGRADED);
//  2. read temperature + memory; pick the request to run: the best in-progress
//     request (it holds a slot) or the head of the queues when it ranks strictly
//     better and can get a slot; ranks age exactly like RequestQueue's order, so a
//     preempted BACKGROUND request is not starved either. A CRITICAL request thus
//     preempts a NORMAL one at the next boundary; the NORMAL request keeps its slot
//     (its KV cache) and resumes where it stopped;
//  3. Decide() for that request's class; emit OnDecision when the decision changed;
//  4. map the knobs to runtime::ChunkKnobs (CPU mask from the topology, threads,
//     precision, chunk sizes, ISA tier, layer drop, KV precision, memory actions)
//     and run one chunk; emit tokens (OnChunk) and the terminal (OnTerminal);
//  5. pacing: the class's pause_ms keeps that class and less urgent ones off the
//     engine until now + pause; more urgent classes may run during the pause.
//     Step() returns when the next step is due ("not before"), so the simulator
//     advances virtual time and Run() sleeps on a condition variable.
//
// Slots: a session id keeps its slot between turns (the next turn continues the
// conversation). A request needs a slot that is free or idle (no turn in progress).
// When none is free, the idle slot whose last turn had the lowest urgency is evicted,
// least recently used first among equals (its conversation is forgotten).
// Slot parking: when every slot of the engine has a turn in progress and the best-ranked
// waiting request is of a strictly higher CLASS (its base urgency; aging never parks)
// than the lowest-class turn in progress, that turn is parked at this boundary
// (ChunkRunner::ParkSlot: its whole state moves to a preallocated park area; the most
// recently started one among equals, i.e. the least progress) and the newcomer runs in
// the freed slot with this step's chunk. A parked turn waits like a queued request
// (ranked with aging) and resumes when it gets a free or idle slot (ResumeParked), any
// slot: a session's conversation then lives there. It continues token for token; its
// chunk seq numbers continue and it still gets exactly one terminal. When the runner
// cannot park (no park areas free, kUnsupported) the request waits for a turn to end.
// Parks and resumes are reported through ChunkSink::OnPark and StepInfo.
// A turn that ends other than DONE (cancel, deadline, failure) forgets the session's
// conversation too: its KV holds a partial answer.
//
// Threads: Submit/Cancel/Shutdown/RequestStop may be called from any thread. Step()
// and Run() from one thread at a time. The sink is called only from the thread in
// Step()/Run() (and from Shutdown()), never while the scheduler's lock is held.
// Every admitted request gets exactly one OnTerminal.
//
// Fallback model (memory ladder, docs/memory.md): while the decision's memory actions
// say use_fallback_model and SchedulerOptions::fallback is set, requests that START
// from then on run on the fallback engine (Acquire()d on first need, i.e. mapped
// lazily); turns already started finish on the engine they started on. Once the
// actions no longer ask for it (after the ladder's dwell/hysteresis), new requests go
// to the main engine again and the fallback engine is Release()d (unmapped) as soon as
// no turn runs on it. A session keeps its conversation only on the engine where it
// lives: a turn that starts on the other engine starts a fresh context there (and the
// old slot forgets the session). Each transition is reported through
// ChunkSink::OnFallback with the governor's reason.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "qos/error.h"
#include "qos/governor.h"
#include "qos/policy.h"
#include "qos/request_queue.h"
#include "runtime/engine/engine.h"
#include "thermal/clock.h"
#include "thermal/memory_monitor.h"
#include "thermal/source.h"
#include "thermal/topology.h"

namespace ari::qos {

enum class TerminalStatus : uint8_t {
  kDone,
  kCancelled,
  kDeadlineMissed,
  kRejected,  // refused or evicted from the queue (BUSY)
  kFailed,    // engine error
  kShutdown,
};
std::string_view TerminalStatusName(TerminalStatus s);  // "DONE", "CANCELLED", ...

struct SchedRequest {
  uint64_t id = 0;  // unique among live requests; 0 is invalid
  Urgency urgency = Urgency::kNormal;
  std::vector<runtime::TokenId> prompt;  // new tokens of this turn (not empty)
  int32_t max_tokens = 64;
  int64_t deadline_ns = 0;  // absolute clock time; 0 = now + class default_deadline_ms
  uint64_t session_id = 0;  // 0 = one-shot (fresh context, slot freed afterwards)
  runtime::SamplingParams sampling;
  // Decode under a response format (JSON schema / grammar). Implied by
  // sampling.constraint; the simulator sets it alone (its engine charges the measured
  // mask cost per token instead of masking).
  bool masked = false;
};

enum class SubmitStatus : uint8_t {
  kAdmitted,
  kBusy,       // queue of that class full (answer REJECTED/BUSY)
  kDuplicate,  // id already live
  kInvalid,    // id 0, empty prompt, max_tokens < 1, urgency out of range
  kShutdown,   // the scheduler no longer admits
};
std::string_view SubmitStatusName(SubmitStatus s);

// How one chunk really ran, from runtime::ChunkResult (next to StepInfo::knobs /
// ChunkEvent::decided, what was asked). CPUs are observed inside the compute.
struct ChunkRan {
  runtime::Precision precision = runtime::Precision::kReference;  // kReference: plain GGUF
  runtime::kernels::IsaTier isa = runtime::kernels::IsaTier::kScalar;
  int32_t threads = 0;           // participants the chunk was given
  int32_t threads_observed = 0;  // participants that computed (noted a CPU)
  uint64_t cpus = 0;             // bit i = CPU i, observed (ChunkResult::cpus_ran)
  int32_t tile_gemms = 0;        // GEMM calls that ran on AMX tiles (ChunkResult::tile_gemms)
  uint32_t gemv_tiers = 0;       // tiers of the matmul kernels called (ChunkResult::gemv_tiers)
  uint32_t gemm_tiers = 0;       // (ChunkResult::gemm_tiers)
  int32_t layers_dropped = 0;
  runtime::KvType kv_type = runtime::KvType::kF32;
  int32_t pin_failures = 0;
  bool isa_refused = false;
  // Constrained decoding: tokens sampled under the response format's mask and the part
  // of the chunk's compute time spent on the mask (runtime::ChunkResult::mask_ns).
  int32_t masked_tokens = 0;
  int64_t mask_ns = 0;
  int32_t prefix_tokens = 0;  // prompt tokens taken from the prefix cache (ChunkResult)
};
ChunkRan RanOf(const runtime::ChunkResult& r);

struct ChunkEvent {
  uint64_t id = 0;
  uint32_t seq = 0;                          // 0, 1, 2... per request over the OnChunk calls
  std::string_view text;                     // valid during the call only
  std::span<const runtime::TokenId> tokens;  // valid during the call only
  int64_t compute_ns = 0;
  runtime::Precision precision = runtime::Precision::kReference;  // = ran.precision
  runtime::ChunkKnobs decided;  // what the scheduler asked the engine for this chunk
  ChunkRan ran;                 // what the engine reports it ran
  bool on_fallback = false;     // computed on the fallback engine
};

struct TerminalEvent {
  uint64_t id = 0;
  TerminalStatus status = TerminalStatus::kDone;
  std::string_view message;  // e.g. "max tokens", "evicted by CRITICAL request 7"
  int32_t tokens_generated = 0;
  bool deadline_missed = false;  // also true for DONE after a degraded finish
  int64_t queue_wait_ns = -1;    // admission -> first chunk (-1: never ran)
  int64_t first_token_ns = -1;   // admission -> first token (-1: none)
};

// One chunk as it ran (prefill chunks too): for benchmarks, tests, status.
struct StepInfo {
  uint64_t id = 0;
  Urgency urgency = Urgency::kNormal;
  int32_t slot = -1;
  runtime::ChunkPhase phase = runtime::ChunkPhase::kPrefill;
  int32_t prompt_tokens = 0;
  int32_t prompt_remaining = 0;
  int32_t new_tokens = 0;
  int64_t start_ns = 0;  // clock time
  int64_t compute_ns = 0;
  runtime::ChunkKnobs knobs;  // decided
  ChunkRan ran;               // as it ran (all zero when the chunk failed)
  bool finished = false;
  bool fallback = false;   // ran on the fallback engine
  uint64_t parked_id = 0;  // the turn parked at this boundary to free this chunk's slot
  bool resumed = false;    // this chunk's turn was resumed from a park area into `slot`
};

enum class ParkEventKind : uint8_t {
  kParked,   // `id`'s turn moved out of `slot` to make room for `for_id`
  kResumed,  // `id`'s turn restored into `slot`
  kRefused,  // the runner could not park (`message`): `for_id` waits for a slot
  // Parked sessions on disk (ChunkRunner::SpillSlot / RestoreSession):
  kSpilled,        // idle `session`'s conversation left `slot` for the spill folder (for `id`)
  kSpillFailed,    // it could not be written (`message`): the conversation is forgotten
  kRestored,       // `session`'s conversation was restored into `slot` for its turn `id`
  kSpillRejected,  // its spill file was not trusted (`message`): the session restarts fresh
  // Parked turns on disk (memory ladder park_to_disk, standby; ChunkRunner::OffloadParked):
  kOffloaded,      // parked turn `id`'s KV went to the spill folder, its area's pages freed
  kOffloadFailed,  // it could not (`message`): the turn stays parked in RAM
};
// "parked", "resumed", "refused", "spilled", "spill-failed", "restored", "spill-rejected",
// "offloaded", "offload-failed"
std::string_view ParkEventName(ParkEventKind k);

struct ParkEvent {
  ParkEventKind kind = ParkEventKind::kParked;
  uint64_t id = 0;      // the turn parked / resumed
  uint64_t for_id = 0;  // kParked/kRefused: the waiting request it was (to be) parked for
  int32_t slot = -1;
  int64_t duration_ns = 0;   // ParkSlot / ResumeParked time (clock time)
  std::string_view message;  // kRefused: the error; call-time only
  bool on_fallback = false;
  uint64_t session = 0;  // kSpilled..kSpillRejected: the session
};

// Memory ladder, last step: the small second model (see the file comment).
class FallbackEngineProvider {
 public:
  virtual ~FallbackEngineProvider() = default;
  // Maps/creates the fallback engine; called on the scheduler thread, without the
  // scheduler's lock, on first need. The runner stays valid until Release().
  virtual runtime::Result<runtime::ChunkRunner*> Acquire() = 0;
  // Destroys it (unmaps the model). Called when no turn runs on it any more.
  virtual void Release() = 0;
};

enum class FallbackEventKind : uint8_t {
  kEngaged,     // new requests go to the fallback engine (mapped now or still mapped)
  kFailed,      // Acquire() failed: new requests stay on the main engine
  kDisengaged,  // pressure gone: new requests go to the main engine again
  kReleased,    // the fallback engine was released (unmapped), nothing ran on it
};
std::string_view FallbackEventName(FallbackEventKind k);  // "engaged", ...

struct FallbackEvent {
  FallbackEventKind kind = FallbackEventKind::kEngaged;
  std::string_view reason;  // the governor's reason (kFailed: the error); call-time only
  int32_t running = 0;      // turns still running on the fallback engine
  bool mapped_now = false;  // kEngaged: Acquire() was called for this transition
};

// Memory yield on command (docs/scheduler.md "Standby", docs/memory.md "Memory yield").
// RequestStandby: from the next boundary no new turn starts (CRITICAL ones only as
// StandbyCritical says); turns in progress finish (kFinish) or, non-CRITICAL ones, are
// parked in a park area (kPark; those without a free area finish). Once no turn runs on
// the main engine, its idle sessions are spilled (or forgotten without a spill folder) and
// ChunkRunner::ReleaseMemory hands the model's pages and the KV arena back. RequestResume:
// ChunkRunner::Rewarm at the next boundary, then everything waiting runs again. Requests
// held meanwhile keep their deadlines (DEADLINE_MISSED when one passes): each still gets
// exactly one terminal.
enum class StandbyInFlight : uint8_t { kFinish, kPark };
enum class StandbyCritical : uint8_t {
  kServe,   // a CRITICAL request resumes the engine, runs, and the node yields again after
  kRefuse,  // a CRITICAL request is REJECTED ("node in standby") while standby is commanded
};
struct StandbyOptions {
  StandbyInFlight in_flight = StandbyInFlight::kFinish;
  StandbyCritical critical = StandbyCritical::kServe;
  bool drop_page_cache = false;  // the model file's pages also leave the page cache
};
enum class StandbyState : uint8_t {
  kActive,    // serving
  kEntering,  // commanded: in-flight work finishing (or a CRITICAL served meanwhile)
  kStandby,   // memory released (or its release failed: see the last StandbyEvent)
  kResuming,  // Rewarm in progress
};
std::string_view StandbyStateName(StandbyState s);  // "active", "entering", ...
enum class StandbyAnswer : uint8_t {
  kAccepted,
  kAlready,     // STANDBY while commanded, RESUME while not
  kInProgress,  // RESUME while the engine is being re-warmed
  kShutdown,
};
std::string_view StandbyAnswerName(StandbyAnswer a);

enum class StandbyEventKind : uint8_t {
  kEntering,       // STANDBY took effect at this boundary (`parked` turns parked for it)
  kReleased,       // the engine's memory was released (`yield`)
  kReleaseFailed,  // ReleaseMemory refused (`message`): work stays held, memory stays
  kResumed,        // RESUME: the engine was re-warmed (`warmed_bytes`, `duration_ns`)
  kAutoResumed,    // CRITICAL request `id` re-warmed the engine during standby
  kRewarmFailed,   // Rewarm reported an error (`message`); serving continues regardless
};
std::string_view StandbyEventName(StandbyEventKind k);

struct StandbyEvent {
  StandbyEventKind kind = StandbyEventKind::kEntering;
  uint64_t id = 0;
  int32_t parked = 0;
  runtime::MemoryYield yield;
  uint64_t warmed_bytes = 0;
  int64_t duration_ns = 0;   // ReleaseMemory / Rewarm time (clock time)
  std::string_view message;  // call-time only
};

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual void OnChunk(const ChunkEvent& chunk) = 0;
  virtual void OnTerminal(const TerminalEvent& terminal) = 0;
  // Called when the decision differs from the last one emitted (knobs, class, bands).
  virtual void OnDecision(const Decision& decision, int64_t now_ns) = 0;
  virtual void OnStep(const StepInfo& /*step*/) {}
  virtual void OnFallback(const FallbackEvent& /*event*/) {}
  virtual void OnPark(const ParkEvent& /*event*/) {}
  virtual void OnStandby(const StandbyEvent& /*event*/) {}
};

struct SchedulerOptions {
  const Policy* policy = nullptr;          // must outlive the scheduler
  runtime::ChunkRunner* engine = nullptr;  // must outlive the scheduler (Engine or a
                                           // simulated one, sim/sim_engine.h)
  const thermal::Clock* clock = nullptr;
  ChunkSink* sink = nullptr;
  thermal::TemperatureSource* temperature = nullptr;  // null: reads as kNoSensor
  // Memory reading per step; empty or nullopt: unknown (the ladder holds its band).
  std::function<std::optional<thermal::MemoryReading>()> memory;
  // CPU classes; nullopt: thermal::DetectTopology(). Efficiency knobs on a machine
  // without efficiency cores use the performance cores.
  std::optional<thermal::CpuTopology> topology;
  runtime::KvType base_kv = runtime::KvType::kF16;  // what KV_FP16 maps to
  int32_t max_prefill_chunk = 0;  // clamp for prefill_chunk (engine's max_chunk); 0 = none
  // The memory ladder's fallback model; null: use_fallback_model is ignored.
  FallbackEngineProvider* fallback = nullptr;  // must outlive the scheduler
  // While idle with the memory ladder not at rest (a band in force or the fallback
  // mapped), step again after this long so the ladder can relax and the fallback be
  // unmapped without waiting for the next request. 0: only when requests arrive.
  int64_t idle_memory_poll_ms = 250;
  StandbyOptions standby;  // RequestStandby's behaviour
};

struct StepResult {
  bool ran = false;              // a chunk ran
  bool idle = false;             // nothing admitted and not finished
  int64_t next_step_ns = 0;      // do not call Step() before this (INT64_MAX: wait for input)
  std::optional<StepInfo> info;  // the chunk that ran
};

// Maps the governor's knobs to the engine's (pure; exposed for tests and docs).
runtime::ChunkKnobs MapKnobs(const Knobs& knobs, const MemoryActions& memory,
                             const thermal::CpuTopology& topology, runtime::KvType base_kv,
                             int32_t max_prefill_chunk);
// The CPUs of a core class: perf -> performance, efficiency -> efficiency (or
// performance when there are none), any -> all.
std::vector<int> CpusFor(CoreClass c, const thermal::CpuTopology& topology);

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> Create(SchedulerOptions options);
  ~Scheduler();  // Shutdown("scheduler destroyed") if still running

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Admits into the class queue. A CRITICAL request may evict a queued lower-class
  // request, which then gets a REJECTED terminal at the next step.
  SubmitStatus Submit(SchedRequest request);
  // Cancels a queued or running request; it ends CANCELLED at the next boundary.
  // False when the id is not live.
  bool Cancel(uint64_t id);

  // One chunk boundary (see above). Call from one thread.
  StepResult Step();
  // Real-time loop: Step(), then wait on a condition variable until the next step is
  // due, a request/cancel arrives, or stop is requested. Returns on stop (requests
  // stay admitted: call Shutdown() or Step() further).
  void Run(const std::stop_token& stop);
  // Stops admitting and ends every live request with SHUTDOWN.
  void Shutdown(std::string_view message = "shutdown");

  // Memory yield (see StandbyOptions above). Thread-safe; the step thread acts on them at
  // its next boundary (Run() is woken).
  StandbyAnswer RequestStandby();
  StandbyAnswer RequestResume();
  StandbyState standby_state() const;

  size_t live_requests() const;
  std::array<uint32_t, kNumUrgencies> QueueDepths() const;
  const Decision& last_decision() const { return last_decision_; }
  // The fallback engine is mapped / new requests go to it (thread-safe).
  bool fallback_mapped() const;
  bool fallback_routing() const;
  const thermal::CpuTopology& topology() const { return topology_; }

 private:
  struct Live;
  struct ChunkPlan;  // scheduler_live.h
  struct Slot {
    uint64_t session = 0;  // 0 = no conversation kept
    uint64_t running = 0;  // request id with a turn in progress, 0 = none
    int64_t last_used_ns = 0;
    Urgency last_urgency = Urgency::kBackground;
  };
  struct Pending {  // a terminal decided under the lock, delivered outside it
    TerminalEvent event;
    std::array<char, 256> message{};  // in place (truncated): Finish() does not allocate
    size_t message_len = 0;
  };
  struct OrderKey {
    int effective_rank;
    int neg_class_rank;  // at equal effective rank, the one that aged more first
    int not_parked;      // then a parked turn before a new one (the park areas drain)
    int64_t deadline_ns;
    uint64_t seq;
    auto operator<=>(const OrderKey&) const = default;
  };

  Scheduler(SchedulerOptions options, thermal::CpuTopology topology);

  // With mu_ held:
  void ApplyCancelsAndDeadlines(int64_t now);
  Live* Pick(int64_t now, int* slot, bool* keep_context);
  // Slot parking (scheduler_park.cc). With mu_ held: the waiting request that may park a
  // turn now and its victim (both null: none).
  struct ParkPlan {
    const Live* newcomer = nullptr;
    const Live* victim = nullptr;
  };
  ParkPlan FindPark(int64_t now) const;
  // With mu_ held (released around ParkSlot): parks for the newcomer; its id, or 0.
  uint64_t ParkForNewcomer(std::unique_lock<std::mutex>& lk, int64_t now, uint64_t* victim);
  // With mu_ held (released around ParkSlot): parks started turn `id` (for request
  // `for_id`, 0 = for standby); false when it could not (then park_blocked_).
  bool ParkTurn(std::unique_lock<std::mutex>& lk, uint64_t id, uint64_t for_id);
  // With mu_ held: the newcomer in the slot its park freed, else the normal Pick.
  Live* PickAfterPark(int64_t now, uint64_t newcomer, int* slot, bool* keep_context);
  runtime::ChunkRunner* EngineOf(bool fallback) { return fallback ? fallback_engine_ : &engine_; }
  int32_t ParkedOn(bool fallback) const;
  // A slot for a request that has not started, on the engine new requests go to.
  int FindSlotFor(const Live& r, bool* keep_context) const;
  std::vector<Slot>& SlotsOf(bool fallback) { return fallback ? fb_slots_ : slots_; }
  const std::vector<Slot>& SlotsOf(bool fallback) const { return fallback ? fb_slots_ : slots_; }
  int32_t RunningOnFallback() const;
  OrderKey Key(const Live& r, int64_t now) const;
  size_t ReservedFor(const Live& r, const std::vector<Slot>& slots) const;
  Live* Find(uint64_t id) const;
  void Finish(uint64_t id, TerminalStatus status, std::string_view message);
  int64_t NextStep(int64_t now) const;
  // `next`, or sooner while the memory ladder is not at rest (idle_memory_poll_ms).
  int64_t MemoryPoll(int64_t now, int64_t next) const;
  // Without mu_ held:
  void Deliver();
  void EndStep();
  // Routes new requests per the memory actions; maps/unmaps the fallback engine.
  void UpdateFallback(const Decision& preview);

  // The steps of Step(), in order. Without mu_ held: the temperature and memory readings
  // (and the fallback routing they imply) into `in`.
  void ReadInputs(int64_t now, GovernorInputs& in);
  // inputs_ reset for a new step, keeping the reading's source string and its capacity (a
  // sensor label exceeds the small-string buffer: a fresh copy would allocate every step).
  GovernorInputs& FreshInputs();
  // Standby (scheduler_standby.cc). With mu_ held: true when `r` may not run now because
  // standby is commanded.
  bool HeldByStandby(const Live& r) const;
  // With mu_ held: CRITICAL requests refused under StandbyCritical::kRefuse.
  void RefuseInStandby();
  // With mu_ held (released around the engine calls): parks for / releases / re-warms at
  // this boundary as the command and the waiting work say.
  void StandbyBoundary(std::unique_lock<std::mutex>& lk);
  void ReleaseForStandby(std::unique_lock<std::mutex>& lk, int32_t parked);
  void RewarmEngine(std::unique_lock<std::mutex>& lk, uint64_t for_id);
  // With mu_ held: records the decision; true when it differs from the last one emitted.
  bool NoteDecision(const Decision& d);
  // With mu_ held: claims the picked request's slot, maps the knobs of its chunk.
  ChunkPlan ClaimChunk(Live& r, int slot, const Decision& d);
  // Without mu_ held: starts the turn if the plan says so, runs one chunk.
  // Without mu_: spills the idle conversation the turn evicts, restores the turn's session;
  // true when restored (the turn then continues it).
  bool SpillAndRestore(const Live& r, const ChunkPlan& plan);
  // Without mu_: the memory action spill_idle_sessions (scheduler.cc).
  void SpillIdleSessions();
  // Without mu_: the memory action park_to_disk (scheduler_park.cc): every parked turn of
  // the main engine not on disk yet goes there; `release_free` also hands back the free
  // park areas' pages.
  void OffloadParkedTurns(bool release_free);
  runtime::Result<runtime::ChunkResult> RunPlannedChunk(const Live& r, const ChunkPlan& plan,
                                                        bool keep_context);
  // Without mu_ held: the sink's OnChunk (tokens came out) and OnStep.
  StepInfo ReportChunk(Live& r, const ChunkPlan& plan, int64_t start_ns,
                       const runtime::Result<runtime::ChunkResult>& cr);
  // With mu_ held: the request's times and counts; finishes it when the chunk ended it.
  void AccountChunk(Live& r, const runtime::Result<runtime::ChunkResult>& cr, int64_t start_ns,
                    int64_t end_ns);
  // With mu_ held: pause_ms holds this class and less urgent ones until end_ns + pause.
  void Pace(const Knobs& knobs, Urgency urgency, int64_t end_ns);

  SchedulerOptions opt_;
  thermal::CpuTopology topology_;
  const Policy& policy_;
  runtime::ChunkRunner& engine_;
  const thermal::Clock& clock_;
  ChunkSink& sink_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool wake_ = false;
  bool shutdown_ = false;
  bool stepping_ = false;
  uint64_t next_seq_ = 0;
  RequestQueue queue_;
  std::vector<std::unique_ptr<Live>> live_;  // admitted, not yet terminated
  std::vector<uint64_t> cancels_;
  std::vector<Pending> pending_;
  std::vector<Pending> deliver_;  // step-thread scratch

  std::vector<Slot> slots_;
  // Fallback engine (the step thread changes these with mu_ held).
  runtime::ChunkRunner* fallback_engine_ = nullptr;
  std::vector<Slot> fb_slots_;
  bool fallback_route_ = false;   // new requests start on the fallback engine
  bool fallback_failed_ = false;  // Acquire() failed in this pressure episode
  GovernorState gov_state_;
  Decision last_decision_;
  bool decision_emitted_ = false;
  GovernorInputs inputs_;  // this step's; the reading is filled in place (ReadInputs)
  std::array<int64_t, kNumUrgencies> not_before_{};  // pacing, per class rank
  uint64_t released_slot_bytes_ = 0;                 // KV pages handed back by spill_idle_sessions
  std::string spill_reason_;      // RestoreSession's rejection (reused: no allocation once grown)
  bool park_blocked_ = false;     // a ParkSlot failed: no new try until a turn or park ends
  bool park_to_disk_on_ = false;  // the last decision's park_to_disk (edge: free areas released)
  // Standby (mu_): commanded; the main engine's memory released; Rewarm running; a
  // ReleaseMemory refused (no retry until the next STANDBY); the last kEntering reported.
  bool standby_wanted_ = false;
  bool mem_released_ = false;
  bool resuming_ = false;
  bool release_failed_ = false;
  bool standby_noted_ = false;
};

}  // namespace ari::qos
