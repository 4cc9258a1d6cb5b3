#include "component/node/node.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "component/node/env_replay.h"
#include "component/node/node_log.h"
#include "component/node/node_sensors.h"
#include "component/node/security_check.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_cache.h"
#include "thermal/clock.h"

namespace ari::component {
namespace {

using node_internal::Log;
using node_internal::NowNs;
using node_internal::Resolve;

// NodeStatus.model_hash of a model file: its content digest, or 0 (logged) when unreadable.
uint64_t ContentHash(const std::filesystem::path& model) {
  auto key = runtime::ModelContentKey(model);
  if (!key) {
    Log("model %s: no content digest for NodeStatus (%s)", model.c_str(),
        key.error().ToString().c_str());
    return 0;
  }
  return *key;
}

class CollectErrors final : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string_view origin) : origin_(origin) {}
  void AddError(int line, int column, const std::string& message) override {
    text += origin_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
            message + "\n";
  }
  std::string text;

 private:
  std::string origin_;
};

// The command line's overrides of the config.
void ApplyOverrides(const NodeOverrides& ov, config::NodeConfig& c) {
  if (!ov.model.empty()) c.set_model_path(ov.model);
  if (!ov.policy.empty()) c.set_policy_path(ov.policy);
  if (ov.domain_id >= 0) c.mutable_dds()->set_domain_id(static_cast<uint32_t>(ov.domain_id));
  if (!ov.cyclone_config.empty()) c.mutable_dds()->set_cyclone_config(ov.cyclone_config);
}

}  // namespace

Result<config::NodeConfig> ParseNodeConfig(std::string_view text, std::string_view origin) {
  config::NodeConfig cfg;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors(origin);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &cfg)) {
    return MakeError(ErrorCode::kConfig,
                     errors.text.empty() ? std::string(origin) + ": parse error" : errors.text);
  }
  return cfg;
}

Result<config::NodeConfig> LoadNodeConfig(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kConfig, "cannot read node config " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseNodeConfig(ss.str(), path.string());
}

ari_ChunkStatus WireStatus(qos::TerminalStatus s) {
  switch (s) {
    case qos::TerminalStatus::kDone: return ari_STATUS_DONE;
    case qos::TerminalStatus::kCancelled: return ari_STATUS_CANCELLED;
    case qos::TerminalStatus::kDeadlineMissed: return ari_STATUS_DEADLINE_MISSED;
    case qos::TerminalStatus::kRejected: return ari_STATUS_REJECTED;
    case qos::TerminalStatus::kFailed: return ari_STATUS_FAILED;
    case qos::TerminalStatus::kShutdown: return ari_STATUS_SHUTDOWN;
  }
  return ari_STATUS_FAILED;
}

Result<std::unique_ptr<Node>> Node::Create(const config::NodeConfig& config,
                                           const NodeOverrides& ov) {
  std::unique_ptr<Node> node(new Node());
  node->start_ns_ = NowNs();
  node->config_ = config;
  ApplyOverrides(ov, node->config_);
  if (auto r = node->InitLimits(ov); !r) return std::unexpected(r.error());
  if (auto r = node->LoadPolicy(ov); !r) return std::unexpected(r.error());
  const runtime::EngineOptions eo = node->EngineOptionsFromConfig();
  if (auto r = node->LoadModel(ov, eo); !r) return std::unexpected(r.error());
  if (auto r = node->WarmUp(); !r) return std::unexpected(r.error());
  node->RegisterPrefixes();
  if (auto r = node->LockMemory(); !r) return std::unexpected(r.error());
  if (auto r = node->InitStructuredOutput(ov); !r) return std::unexpected(r.error());
  if (auto r = node->OpenTemperatureSource(ov); !r) return std::unexpected(r.error());
  node->OpenMemorySource(ov);
  if (auto r = node->CreateScheduler(eo.max_chunk); !r) return std::unexpected(r.error());
  if (auto r = node->OpenTransport(ov); !r) return std::unexpected(r.error());
  node->LogSetup();
  if (auto r = node->GoLive(); !r) return std::unexpected(r.error());
  return node;
}

Result<void> Node::LockMemory() {
  const config::MemoryLock mode = config_.memory_lock();
  if (mode == config::MEMORY_LOCK_OFF) return {};
  auto locked = engine_->LockMemory();
  if (locked) {
    Log("memory_lock: %llu bytes locked (engine arena, park areas, slot buffers)",
        static_cast<unsigned long long>(*locked));
    return {};
  }
  if (mode == config::MEMORY_LOCK_REQUIRED) {
    return MakeError(ErrorCode::kConfig,
                     "memory_lock: MEMORY_LOCK_REQUIRED and " + locked.error().message);
  }
  Log("memory_lock: %s; running unlocked (MEMORY_LOCK_TRY)", locked.error().message.c_str());
  return {};
}

Result<void> Node::InitLimits(const NodeOverrides& ov) {
  const config::NodeConfig& c = config_;
  const auto& lim = c.limits();
  limits_.max_prompt_bytes = lim.max_prompt_bytes()
                                 ? std::min<uint32_t>(lim.max_prompt_bytes(), ari_kPromptLen - 1)
                                 : ari_kPromptLen - 1;
  limits_.min_max_tokens = std::max<uint32_t>(1, lim.min_max_tokens());
  limits_.max_max_tokens = lim.max_max_tokens() ? lim.max_max_tokens() : 256;
  if (limits_.min_max_tokens > limits_.max_max_tokens) {
    return MakeError(ErrorCode::kConfig, "limits: min_max_tokens > max_max_tokens");
  }
  rate_ = std::make_unique<RateLimiter>(lim.client_rate_per_s(),
                                        lim.client_burst() ? lim.client_burst() : 4);
  // Urgency rights from authenticated identities (DDS Security; component/node/identity.h).
  for (const auto& cert : c.security().critical_identity_certs()) {
    auto prefix = GuidPrefixForCertificateFile(Resolve(ov.base_dir, cert));
    if (!prefix) return MakeError(ErrorCode::kConfig, "security: " + prefix.error().message);
    critical_prefixes_.push_back(*prefix);
  }
  return {};
}

Result<void> Node::LoadPolicy(const NodeOverrides& ov) {
  policy_path_ = ov.policy.empty() ? Resolve(ov.base_dir, config_.policy_path())
                                   : std::filesystem::path(ov.policy);
  if (policy_path_.empty()) return MakeError(ErrorCode::kConfig, "policy_path not set");
  auto policy = qos::LoadPolicyFile(policy_path_);
  if (!policy) return MakeError(ErrorCode::kConfig, "policy: " + policy.error().ToString());
  policy_ = std::make_unique<qos::Policy>(std::move(*policy));
  return {};
}

std::filesystem::path ResolvePackCacheDir(const config::NodeConfig& c, const NodeOverrides& ov) {
  if (!ov.pack_cache.empty()) return ov.pack_cache;
  if (!c.pack_cache_dir().empty()) return Resolve(ov.base_dir, c.pack_cache_dir());
  auto d = runtime::DefaultPackCacheDir();
  return d ? *d : std::filesystem::path{};
}

std::filesystem::path ResolveSpillDir(const config::NodeConfig& c, const NodeOverrides& ov) {
  if (!c.parking().spill_dir().empty()) return Resolve(ov.base_dir, c.parking().spill_dir());
  const std::filesystem::path packs = ResolvePackCacheDir(c, ov);
  return packs.empty() ? packs : packs.parent_path() / "sessions";
}

std::filesystem::path ResolvePrefixCacheDir(const config::NodeConfig& c, const NodeOverrides& ov) {
  if (!c.prefix_cache().dir().empty()) return Resolve(ov.base_dir, c.prefix_cache().dir());
  const std::filesystem::path packs = ResolvePackCacheDir(c, ov);
  return packs.empty() ? packs : packs.parent_path() / "prefixes";
}

runtime::EngineOptions Node::EngineOptionsFromConfig() const {
  const config::NodeConfig& c = config_;
  runtime::EngineOptions eo;
  eo.slots = c.session_slots() ? static_cast<int32_t>(c.session_slots()) : 2;
  eo.context_length = c.max_context() ? static_cast<int32_t>(c.max_context()) : 512;
  eo.max_chunk = c.max_chunk() ? static_cast<int32_t>(c.max_chunk()) : 64;
  eo.max_output = static_cast<int32_t>(limits_.max_max_tokens);
  eo.threads = static_cast<int32_t>(c.threads());
  eo.park_areas = c.parking().park_areas() ? static_cast<int32_t>(c.parking().park_areas()) : 1;
  eo.huge_pages = c.huge_pages() == config::HUGE_PAGES_ON    ? runtime::HugePages::kOn
                  : c.huge_pages() == config::HUGE_PAGES_OFF ? runtime::HugePages::kOff
                                                             : runtime::HugePages::kAuto;
  eo.require_tokenizer = true;
  eo.plain_gguf =
      c.reference_path() ? runtime::PlainGguf::kReference : runtime::PlainGguf::kAutoPack;
  return eo;
}

Result<void> Node::LoadModel(const NodeOverrides& ov, const runtime::EngineOptions& options) {
  const config::NodeConfig& c = config_;
  // Model (fallback when the main one does not load).
  runtime::EngineOptions eo = options;
  eo.pack_cache.dir = ResolvePackCacheDir(c, ov);
  if (c.parking().spill_idle_sessions()) {
    eo.spill.dir = ResolveSpillDir(c, ov);
    if (c.parking().spill_max_bytes() > 0) eo.spill.max_bytes = c.parking().spill_max_bytes();
  }
  if (c.prefix_cache().system_prompts_size() > 0) {
    eo.prefix_cache.dir = ResolvePrefixCacheDir(c, ov);
    if (c.prefix_cache().max_bytes() > 0) eo.prefix_cache.max_bytes = c.prefix_cache().max_bytes();
  }
  std::filesystem::path model =
      ov.model.empty() ? Resolve(ov.base_dir, c.model_path()) : std::filesystem::path(ov.model);
  eo.model_path = model;
  auto engine = runtime::Engine::Create(eo);
  if (!engine && !c.fallback_model_path().empty()) {
    Log("model %s failed (%s); trying fallback", model.c_str(), engine.error().ToString().c_str());
    model = Resolve(ov.base_dir, c.fallback_model_path());
    eo.model_path = model;
    engine = runtime::Engine::Create(eo);
  }
  if (!engine) {
    return MakeError(ErrorCode::kConfig,
                     "model " + model.string() + ": " + engine.error().ToString());
  }
  engine_ = std::move(*engine);
  // The mapped file must stay as loaded: each turn and chunk checks it (model_guard.h).
  if (engine_->loaded_path() != model) {
    Log("model %s runs as its pack %s", model.c_str(), engine_->loaded_path().c_str());
  }
  for (const std::string& note : engine_->memory_plan().notes) {
    if (note.starts_with("kernel tier") || note.starts_with("pools ") ||
        note.starts_with("arena prefaulted")) {
      Log("%s", note.c_str());
    }
  }
  auto watch = ModelFileWatch::Open(engine_->loaded_path(), engine_->model().file().bytes().size());
  if (!watch) return std::unexpected(watch.error());
  model_watch_ = std::move(*watch);
  guarded_ = std::make_unique<GuardedRunner>(*engine_, *model_watch_);
  tokenizer_ = engine_->model().tokenizer();
  if (tokenizer_ == nullptr) return MakeError(ErrorCode::kConfig, "model has no tokenizer");
  if (auto chat = runtime::ModelChatTemplate(engine_->model().file())) {
    chat_kind_ = *chat;
    Log("chat format: %s", std::string(runtime::ChatTemplateName(*chat)).c_str());
  } else {
    chat_error_ = chat.error().message;
    Log("chat format: none, chat-form requests are INVALID (%s)", chat_error_.c_str());
  }
  model_name_ = model.filename().string();
  model_text_ = model_name_;
  main_model_hash_ = ContentHash(model);
  model_hash_ = main_model_hash_;
  // Memory ladder: the fallback model is mapped only when the ladder asks for it (not
  // when it already serves as the main model because model_path failed to load).
  if (const auto fb = Resolve(ov.base_dir, c.fallback_model_path()); !fb.empty() && fb != model) {
    if (std::filesystem::exists(fb)) {
      runtime::EngineOptions fo = eo;
      fo.model_path = fb;
      fo.prefix_cache.dir.clear();                            // the prefixes are the main model's
      if (!fo.spill.dir.empty()) fo.spill.dir /= "fallback";  // its own model's sessions
      fallback_ = std::make_unique<FallbackModel>(fo, tokenizer_);
      fallback_model_hash_ = ContentHash(fb);
    } else {
      Log("fallback model %s not found: the memory ladder's fallback step is disabled", fb.c_str());
    }
  }
  return {};
}

Result<void> Node::WarmUp() {
  // Warm-up: one tiny chunk so first-touch page faults and pool start-up are paid now.
  std::vector<runtime::TokenId> tiny = {tokenizer_->Bos() >= 0 ? tokenizer_->Bos() : 0};
  runtime::TurnSpec turn;
  turn.prompt = tiny;
  turn.max_tokens = 1;
  turn.keep_context = false;
  if (auto r = engine_->StartTurn(0, turn); !r) {
    return MakeError(ErrorCode::kInternal, "warm-up: " + r.error().ToString());
  }
  for (int i = 0; i < 4; ++i) {
    auto r = engine_->RunChunk(0, runtime::ChunkKnobs{});
    if (!r) return MakeError(ErrorCode::kInternal, "warm-up: " + r.error().ToString());
    if (r->finished) break;
  }
  engine_->ResetSlot(0);
  return {};
}

Result<void> Node::InitStructuredOutput(const NodeOverrides& ov) {
  auto so = StructuredOutput::Create(config_.structured_output(), ov.base_dir, *tokenizer_);
  if (!so) return std::unexpected(so.error());
  structured_ = std::move(*so);
  std::string names;
  for (const std::string& n : structured_->names()) names += (names.empty() ? "" : ", ") + n;
  Log("structured output: %zu registered schemas (%s), %d constrained requests at once, inline "
      "text <= %u bytes, token trie of %d tokens",
      structured_->names().size(), names.empty() ? "none" : names.c_str(),
      structured_->pool().size(), structured_->limits().max_inline_bytes,
      structured_->trie().vocab_size());
  return {};
}

Result<void> Node::CreateScheduler(int32_t max_prefill_chunk) {
  decision_text_.reserve(kDecisionTextCapacity);
  reason_text_.reserve(kReasonTextCapacity);
  qos::SchedulerOptions so;
  so.policy = policy_.get();
  so.engine = guarded_.get();
  so.clock = &thermal::SteadyClock::Instance();
  so.sink = this;
  so.temperature = temperature_.get();
  so.max_prefill_chunk = max_prefill_chunk;
  so.fallback = fallback_.get();
  const config::StandbyConfig& sb = config_.standby();
  so.standby.in_flight = sb.in_flight() == config::StandbyConfig::IN_FLIGHT_PARK
                             ? qos::StandbyInFlight::kPark
                             : qos::StandbyInFlight::kFinish;
  so.standby.critical = sb.critical() == config::StandbyConfig::CRITICAL_REFUSE
                            ? qos::StandbyCritical::kRefuse
                            : qos::StandbyCritical::kServe;
  so.standby.drop_page_cache = sb.drop_page_cache();
  Node* self = this;
  so.memory = [self]() -> std::optional<thermal::MemoryReading> {
    if (self->memory_source_) {
      auto r = self->memory_source_();
      if (r) self->memory_available_.store(r->available_bytes);
      return r;
    }
    if (!self->memory_) return std::nullopt;
    auto r = self->memory_->Read();
    if (!r) return std::nullopt;
    self->memory_available_.store(r->available_bytes);
    return *r;
  };
  auto sched = qos::Scheduler::Create(std::move(so));
  if (!sched) return MakeError(ErrorCode::kInternal, "scheduler: " + sched.error().ToString());
  scheduler_ = std::move(*sched);
  return {};
}

Result<void> Node::OpenTransport(const NodeOverrides& ov) {
  const config::NodeConfig& c = config_;
  dds::DomainOptions dopt;
  dopt.domain_id = c.dds().domain_id();
  dopt.config = c.dds().cyclone_config().empty()
                    ? dds::DefaultConfigUri()
                    : Resolve(ov.base_dir, c.dds().cyclone_config()).string();
  dopt.shared_memory =
      c.dds().shared_memory() ? dds::SharedMemoryMode::kFromConfig : dds::SharedMemoryMode::kOff;
  NodeTransportOptions topt;
  if (!c.dds().node_id().empty()) topt.node_id = c.dds().node_id();
  if (c.dds().liveliness_lease_ms()) {
    topt.liveliness_lease = std::chrono::milliseconds(c.dds().liveliness_lease_ms());
  }
  std::shared_ptr<dds::Domain> domain = ov.domain;
  std::string identity_pem;  // identity rights need DDS Security (security_check.h)
  if (!critical_prefixes_.empty()) {
    auto pem = RequireSecurityConfig(domain ? domain->config() : dopt.config);
    if (!pem) return std::unexpected(pem.error());
    identity_pem = std::move(*pem);
  }
  if (!domain && (env_ || config_.standby().enabled())) {  // shared with env replay, control
    auto d = dds::Domain::Create(dopt);
    if (!d) return std::unexpected(d.error());
    domain = std::move(*d);
  }
  auto transport = domain ? NodeTransport::Create(domain, topt) : NodeTransport::Create(dopt, topt);
  if (!transport) return std::unexpected(transport.error());
  transport_ = std::move(*transport);
  // Chunks the writer could not take at once are retried off the scheduler thread; one
  // that is finally lost is counted here (and a terminal logged: it has none on the wire).
  transport_->SetPublishFailureHandler([this](const Error& e, const ari_TokenChunk& c) {
    if (c.terminal) {
      CheckTerminalPublish(Result<void>(std::unexpected(e)), dds::FixedView(c.request_id));
    } else {
      CountPublishFailure(e);
    }
  });
  // Under DDS Security the CRITICAL right is DDS access control (partition ari-critical):
  // CRITICAL from the default partition is then refused (MayAskCritical). An unreadable
  // config counts as secure: refusing is the safe side.
  auto sec = InspectCycloneSecurity(transport_->domain().config());
  dds_security_ = !sec || sec->has_section;
  if (!identity_pem.empty()) {
    auto authenticated = RequireAuthenticated(transport_->participant(), identity_pem);
    if (!authenticated) return std::unexpected(authenticated.error());
  }
  if (env_) {
    if (auto r = env_->Start(domain); !r) return std::unexpected(r.error());
  }
  domain_ = domain;
  return CheckStandbyConfig();
}

void Node::LogSetup() const {
  Log("%s", transport_->Describe().c_str());
  Log("model %s (%s), fallback %s, policy %s, sensor %s, memory %s", model_name_.c_str(),
      engine_->has_pack() ? "pack" : "plain", fallback_ ? fallback_->path().c_str() : "none",
      policy_->name.c_str(), temperature_ ? std::string(temperature_->name()).c_str() : "none",
      memory_source_ ? "injected"
      : memory_      ? memory_->Describe().c_str()
                     : "none");
}

Result<void> Node::GoLive() {
  StartScheduler();
  Node* self = this;
  if (config_.standby().enabled()) {
    control_ = std::make_unique<ControlReceiver>(
        transport_->node_id(), [self](const ari_Control& c) { self->OnControl(c); });
    if (auto r = control_->Start(domain_); !r) return std::unexpected(r.error());
    Log("standby: reading ari/v2/control (in flight: %s, CRITICAL in standby: %s%s)",
        config_.standby().in_flight() == config::StandbyConfig::IN_FLIGHT_PARK ? "park" : "finish",
        config_.standby().critical() == config::StandbyConfig::CRITICAL_REFUSE ? "refused"
                                                                               : "served",
        dds_security_ ? ", senders checked by DDS Security" : ", WITHOUT DDS Security");
  }
  if (auto r = transport_->Start(
          [self](const ari_Request& r, const RequestInfo& i) { self->OnRequest(r, i); },
          [self](const ari_Cancel& c) { self->OnCancel(c); });
      !r) {
    return std::unexpected(r.error());
  }
  {
    std::lock_guard<std::mutex> l(status_mu_);
    state_ = ari_NODE_READY;
  }
  ready_ms_ = (NowNs() - start_ns_) / 1'000'000;
  PublishStatus(ari_NODE_READY);
  Log("ready in %lld ms (domain %u, node id %s)", static_cast<long long>(ready_ms_),
      config_.dds().domain_id(), transport_->node_id().c_str());
  return {};
}

Node::~Node() {
  if (control_) control_->Stop();
  if (transport_) transport_->Stop();
  StopScheduler();
  if (scheduler_) scheduler_->Shutdown("node destroyed");
}

void Node::StartScheduler() {
  sched_thread_ = std::jthread([this](const std::stop_token& st) {
    // "ari-sched": the real-time path's thread (top -H, perf, tests/component/node_alloc_test).
    if (prctl(PR_SET_NAME, "ari-sched", 0, 0, 0) != 0) Log("scheduler thread: not named");
    scheduler_->Run(st);
  });
}

void Node::StopScheduler() {
  if (sched_thread_.joinable()) {
    sched_thread_.request_stop();
    sched_thread_.join();
  }
}

}  // namespace ari::component
