// ari-node: wires the engine, the QoS scheduler and the DDS transport together.
//
//   auto config = LoadNodeConfig("config/node.textproto");
//   auto node = Node::Create(*config, {.model_override = "..."});
//   int signal_fd = ...;          // signalfd for SIGTERM/SIGINT/SIGHUP (blocked)
//   return (*node)->Serve(signal_fd);
//
// Threads: the transport's receive thread validates and admits requests (answering
// refusals at once with one terminal chunk); the scheduler thread runs chunks and
// publishes TokenChunks through the ChunkSink callbacks; the Serve() thread publishes
// the periodic NodeStatus and handles signals (SIGHUP: reload the policy; SIGTERM /
// SIGINT: stop admitting, finish or cancel in-flight requests per config, publish
// their terminals, return 0).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "component/client/error.h"
#include "component/node/control_receiver.h"
#include "component/node/fallback_model.h"
#include "component/node/identity.h"
#include "component/node/model_guard.h"
#include "component/node/node_transport.h"
#include "component/node/request_validator.h"
#include "component/node/structured_output.h"
#include "idl/node_config.pb.h"
#include "qos/policy.h"
#include "qos/scheduler.h"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/chat_template.h"
#include "thermal/memory_monitor.h"
#include "thermal/source.h"

namespace ari::component {

class EnvReplay;  // component/node/env_replay.h (sensor kind SENSOR_DDS_REPLAY only)

// Parses a NodeConfig in protobuf text format (errors name file, line and column).
Result<config::NodeConfig> ParseNodeConfig(std::string_view text, std::string_view origin);
Result<config::NodeConfig> LoadNodeConfig(const std::filesystem::path& path);

struct NodeOverrides {
  std::filesystem::path base_dir;  // relative paths in the config resolve against it
  std::string model;               // non-empty: replaces model_path
  int domain_id = -1;              // >= 0: replaces dds.domain_id
  std::string cyclone_config;      // non-empty: replaces dds.cyclone_config
  std::string policy;              // non-empty: replaces policy_path
  std::string pack_cache;          // non-empty: replaces pack_cache_dir
  // Tests and simulators: the memory reading the ladder sees (replaces the
  // MemoryMonitor), and a DDS domain shared with in-process clients.
  std::function<std::optional<thermal::MemoryReading>()> memory_source;
  std::shared_ptr<dds::Domain> domain;
  // Fault-injection tests: a temperature source used instead of the config's sensor.
  std::shared_ptr<thermal::TemperatureSource> temperature;
};

// The folder automatic packs of a plain GGUF model go to (override, config, or
// runtime::DefaultPackCacheDir()); empty when none can be found.
std::filesystem::path ResolvePackCacheDir(const config::NodeConfig& config,
                                          const NodeOverrides& overrides);
// The prompt-prefix cache's folder (prefix_cache.dir, else "prefixes" next to the pack cache
// folder); empty when none can be found.
std::filesystem::path ResolvePrefixCacheDir(const config::NodeConfig& config,
                                            const NodeOverrides& overrides);
// The spill folder of idle sessions (config parking.spill_dir; docs/memory.md).
std::filesystem::path ResolveSpillDir(const config::NodeConfig& config,
                                      const NodeOverrides& overrides);

// Maps a scheduler terminal to the wire status.
ari_ChunkStatus WireStatus(qos::TerminalStatus s);

class Node final : public qos::ChunkSink {
 public:
  static Result<std::unique_ptr<Node>> Create(const config::NodeConfig& config,
                                              const NodeOverrides& overrides = {});
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node() override;

  // Serves until SIGTERM/SIGINT arrives on `signal_fd` (a signalfd, or -1 to serve
  // until RequestStop()). Returns the process exit code (0 on a clean stop).
  int Serve(int signal_fd);
  void RequestStop();  // same as SIGTERM (thread-safe)
  // Loads the policy file again; an invalid file keeps the old policy (error says why).
  Result<void> ReloadPolicy();

  int64_t ready_ms() const { return ready_ms_; }

  // qos::ChunkSink (scheduler thread):
  void OnChunk(const qos::ChunkEvent& chunk) override;
  void OnTerminal(const qos::TerminalEvent& terminal) override;
  void OnDecision(const qos::Decision& decision, int64_t now_ns) override;
  void OnFallback(const qos::FallbackEvent& event) override;
  void OnPark(const qos::ParkEvent& event) override;
  void OnStandby(const qos::StandbyEvent& event) override;

  // The memory ladder's fallback model (null when none is configured).
  const FallbackModel* fallback_model() const { return fallback_.get(); }

 private:
  // (key_hi, key_lo) of a request instance (idl/ari.idl, docs/interface.md "Keys").
  using RequestKey = std::pair<uint64_t, uint64_t>;
  struct LiveRequest {
    std::string request_id;
    std::string client_id;
    RequestKey key{0, 0};
    ari_UrgencyClass urgency = ari_URGENCY_NORMAL;
    uint32_t seq = 0;
    int64_t admitted_ns = 0;
    int64_t first_token_ns = -1;
    uint32_t tokens = 0;
    int32_t constraint = -1;      // slot in structured_->pool(); -1: free text
    bool publish_failed = false;  // a chunk of it could not be written (logged once)
  };
  class RecordingSource;

  Node() = default;
  // The steps of Create(), in order.
  Result<void> InitLimits(const NodeOverrides& ov);  // limits, rate limiter, identities
  Result<void> LoadPolicy(const NodeOverrides& ov);
  runtime::EngineOptions EngineOptionsFromConfig() const;
  // The engine (from the fallback model when the main one does not load), its file
  // watch, the tokenizer, and the memory ladder's fallback model.
  Result<void> LoadModel(const NodeOverrides& ov, const runtime::EngineOptions& options);
  Result<void> WarmUp();
  // prefix_cache.system_prompts into the engine's prefix cache (node_prefix.cc); a prompt
  // that cannot be cached is logged and runs uncached.
  void RegisterPrefixes();
  // config memory_lock: mlock the engine's memory (refused: log, or fail when REQUIRED).
  Result<void> LockMemory();
  // The schema registry, the token trie and the constraint pool (structured_output.h).
  Result<void> InitStructuredOutput(const NodeOverrides& ov);
  Result<void> OpenTemperatureSource(const NodeOverrides& ov);
  void OpenMemorySource(const NodeOverrides& ov);
  Result<void> CreateScheduler(int32_t max_prefill_chunk);
  Result<void> OpenTransport(const NodeOverrides& ov);
  void LogSetup() const;
  Result<void> GoLive();  // scheduler thread, intake, READY
  void OnRequest(const ari_Request& request, const RequestInfo& info);
  // The steps of OnRequest(). May this requester ask CRITICAL? Under DDS Security only
  // from partition ari-critical (DDS access control granted it), and with
  // security.critical_identity_certs only a listed identity. Empty: allowed; else why not.
  std::string_view CriticalRefusal(const ari_Request& request, const RequestInfo& info) const;
  // Duplicates, early cancels, rate limit (takes mu_). False: ignore the request (a
  // duplicate of a live one); else *refuse != OK says how to answer it and *why why.
  bool ScreenRequest(const std::string& rid, const std::string& cid, int64_t now,
                     ari_ChunkStatus* refuse, std::string* why);
  // The constraint a request's response format asks for, from the pool (*slot; -1: free
  // text); INVALID (the compiler's message) or BUSY (pool full) otherwise.
  Verdict PrepareFormat(const ari_Request& request, int32_t* slot);
  // Registers the request as live under a new id (sr.id; a zero seed becomes one).
  uint64_t AddLive(const ari_Request& request, const std::string& rid, const std::string& cid,
                   int64_t now, int32_t constraint, qos::SchedRequest& sr);
  // The terminal for a request the scheduler did not admit.
  void RefuseNotSubmitted(const ari_Request& request, qos::SubmitStatus st, qos::Urgency urgency);
  // A cancel; one with an empty request_id is a disposed Request instance (only its key
  // is known: NodeTransport), handled by OnDispose.
  void OnCancel(const ari_Cancel& cancel);
  void OnDispose(uint64_t key_hi, uint64_t key_lo);
  // A STANDBY / RESUME addressed to this node (control receive thread): forwarded to the
  // scheduler, logged; answers that change nothing count as control_ignored.
  void OnControl(const ari_Control& control);
  // standby.enabled: the control reader may exist only under DDS Security, or when the
  // config says accept_without_security (node_standby.cc).
  Result<void> CheckStandbyConfig() const;
  void EraseKey(const RequestKey& key, uint64_t id);  // from by_key_ if it maps to id (mu_)
  void Refuse(const ari_Request& request, ari_ChunkStatus status, std::string_view message);
  // Publish accounting (NodeStatus publish_failures_*): counts a failed write by its
  // reason; for a terminal also terminal_undelivered, with one log line.
  void CountPublishFailure(const Error& error);
  void CheckTerminalPublish(const Result<void>& r, std::string_view request_id);
  // The prompt ids of a request: its prompt, or its chat turns (roles kept) through the
  // model's chat format (runtime::EncodeChat, as ari-run --chat). Errors answer INVALID.
  Result<std::vector<runtime::TokenId>> Tokenize(const ari_Request& request) const;
  void PublishStatus(ari_NodeState state);
  void StartScheduler();
  void StopScheduler();
  void Drain(int signal_fd);
  float TemperatureC() const;
  ari_SensorState SensorWireState() const;

  config::NodeConfig config_;
  std::filesystem::path policy_path_;
  std::string model_name_;
  RequestLimits limits_;
  // security.critical_identity_certs: GUID prefixes of identities allowed CRITICAL
  // (empty: no restriction). See component/node/identity.h.
  std::vector<GuidPrefix6> critical_prefixes_;
  // The Cyclone config has a <Security> section: CRITICAL only from partition ari-critical.
  bool dds_security_ = false;
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<ModelFileWatch> model_watch_;  // the mapped file's size/mtime at load
  std::unique_ptr<GuardedRunner> guarded_;       // engine_ behind model_watch_ (scheduler)
  const runtime::Tokenizer* tokenizer_ = nullptr;
  // The chat format of the model (runtime::ModelChatTemplate); unset when its template
  // cannot be rendered, chat_error_ then says why (chat-form requests are INVALID).
  std::optional<runtime::ChatTemplateKind> chat_kind_;
  std::string chat_error_;
  std::unique_ptr<qos::Policy> policy_;
  std::unique_ptr<RecordingSource> temperature_;
  std::unique_ptr<EnvReplay> env_;  // SENSOR_DDS_REPLAY: environment from the simulator
  std::unique_ptr<thermal::MemoryMonitor> memory_;
  std::function<std::optional<thermal::MemoryReading>()> memory_source_;
  std::unique_ptr<FallbackModel> fallback_;       // declared before scheduler_: outlives it
  std::unique_ptr<StructuredOutput> structured_;  // before scheduler_: its constraints outlive it
  std::unique_ptr<qos::Scheduler> scheduler_;
  std::unique_ptr<NodeTransport> transport_;
  std::unique_ptr<ControlReceiver> control_;  // standby.enabled: ari/v2/control
  std::shared_ptr<dds::Domain> domain_;       // shared by transport, env replay and control
  std::jthread sched_thread_;

  std::mutex mu_;  // guards everything below up to the atomics
  std::unordered_map<uint64_t, LiveRequest> live_;
  std::unordered_map<std::string, uint64_t> by_request_id_;
  std::map<RequestKey, uint64_t> by_key_;  // live requests by instance key (dispose)
  RecentIds recent_ids_;
  RecentIds early_cancels_{256};  // cancels that overtook their request
  std::unique_ptr<RateLimiter> rate_;
  uint64_t next_id_ = 1;
  // Capacity reserved at start (CreateScheduler): OnDecision assigns without allocating.
  static constexpr size_t kDecisionTextCapacity = 256;
  static constexpr size_t kReasonTextCapacity = 1024;
  std::string decision_text_ = "idle";
  std::string reason_text_ = "starting";
  std::string model_text_;   // NodeStatus.model: the model new requests go to
  uint64_t model_hash_ = 0;  // NodeStatus.model_hash: of that model (ModelContentKey)
  // NodeStatus.thermal_band_name: the policy's name of the band in force (OnDecision).
  char band_name_[ari_kBandNameLen] = {};

  std::mutex admit_mu_;  // Submit vs. policy swap (Submit reads the policy)
  std::mutex status_mu_;
  uint32_t status_seq_ = 0;
  ari_NodeState state_ = ari_NODE_STARTING;

  std::atomic<bool> draining_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<uint64_t> tokens_total_{0};
  std::atomic<uint64_t> memory_available_{0};
  std::atomic<uint64_t> publish_failures_timeout_{0}, publish_failures_other_{0};
  std::atomic<uint64_t> terminal_undelivered_{0};
  std::atomic<bool> status_failure_logged_{false};
  float tokens_per_s_ = 0.0f;
  // NodeStatus.decode_tokens_per_s: written by the scheduler thread (OnTerminal), read by
  // the status publisher.
  std::atomic<float> decode_tokens_per_s_{0.0f};
  // The model files' content digests (NodeStatus.model_hash; 0 = could not be read).
  uint64_t main_model_hash_ = 0, fallback_model_hash_ = 0;
  // NodeStatus.thermal_band / memory_band: the last decision's (-1 = none yet / none).
  std::atomic<int> thermal_band_{-1}, memory_band_{-1};
  // NodeStatus KV lifecycle counters (scheduler thread writes, status thread reads).
  std::atomic<uint64_t> sessions_spilled_{0}, sessions_restored_{0}, spill_rejected_{0};
  std::atomic<uint64_t> spill_failures_{0}, prefix_hits_{0};
  // Memory yield (NodeStatus standby_entered / control_ignored); a standby transition asks
  // the Serve() thread for a NodeStatus at once (status_due_).
  std::atomic<uint64_t> standby_entered_{0}, control_ignored_{0};
  std::atomic<bool> status_due_{false};
  int64_t start_ns_ = 0;
  int64_t ready_ms_ = 0;
};

}  // namespace ari::component
