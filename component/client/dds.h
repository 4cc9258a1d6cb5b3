// Small RAII wrappers over the Cyclone DDS C API (dds/dds.h) for ARI's four topics.
// Every return code is checked and turned into a component Error. Entities are
// move-only and deleted at scope exit (children before parents: declare them after
// the entity they belong to). QoS per topic lives here and only here (TopicQos table,
// documented in docs/interface.md).
//
// Shared memory (iceoryx): a Domain whose config enables <SharedMemory> gets it only
// when the RouDi daemon is reachable; otherwise the domain is created with shared
// memory switched off (Cyclone would otherwise block for a minute and abort) and
// shared_memory_note() says why. Writers loan samples whenever Cyclone offers loans.
#pragma once

#include <dds/dds.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "component/client/error.h"
#include "component/client/function_ref.h"

namespace ari::component::dds {

using Duration = std::chrono::nanoseconds;
dds_duration_t ToDds(Duration d);  // negative/max -> DDS_INFINITY

// ---------------------------------------------------------------- configuration
enum class SharedMemoryMode {
  kFromConfig,  // shared memory if the config enables it and RouDi is reachable
  kOff,         // force the network (loopback) path
};

struct DomainOptions {
  uint32_t domain_id = 0;  // < 230
  // Cyclone config: "file://<path>", a plain path, or inline XML. Empty: DefaultConfigUri().
  std::string config;
  SharedMemoryMode shared_memory = SharedMemoryMode::kFromConfig;
};

// ARI_CYCLONE_CONFIG (environment) if set, else the project's loopback-only config
// (config/cyclonedds-lo.xml of the source tree / install prefix) as a file:// URI.
std::string DefaultConfigUri();
// URI of a config file shipped in the project's config/ folder (e.g. "cyclonedds-shm.xml").
std::string ShippedConfigUri(std::string_view file_name);

// True when a RouDi daemon answers on its well-known socket (/tmp/roudi). *why gets
// the reason when not.
bool RoudiReachable(std::string* why = nullptr);
// True when the config text contains <SharedMemory>...<Enable>true</Enable>.
bool ConfigEnablesSharedMemory(std::string_view xml);

class Domain {
 public:
  // Fails with kConfig for an unreadable config file, kDds when Cyclone refuses (a
  // domain with this id already exists in this process: share the Domain instead).
  static Result<std::shared_ptr<Domain>> Create(const DomainOptions& options);
  ~Domain();
  Domain(const Domain&) = delete;
  Domain& operator=(const Domain&) = delete;

  dds_domainid_t id() const { return id_; }
  dds_entity_t handle() const { return handle_; }
  const std::string& config() const { return config_; }  // effective config string
  bool shared_memory_requested() const { return shm_requested_; }
  bool shared_memory_enabled() const { return shm_enabled_; }  // requested and RouDi up
  // Human readable: "shared memory on (iceoryx)", "off: not enabled in config",
  // "off: requested but iox-roudi not reachable (...) - using the network path".
  const std::string& shared_memory_note() const { return shm_note_; }

 private:
  Domain() = default;
  dds_domainid_t id_ = 0;
  dds_entity_t handle_ = 0;
  std::string config_;
  bool shm_requested_ = false;
  bool shm_enabled_ = false;
  std::string shm_note_;
};

// ---------------------------------------------------------------- entities
// Move-only owner of one DDS entity handle; dds_delete at destruction.
class Entity {
 public:
  Entity() = default;
  explicit Entity(dds_entity_t h) : handle_(h) {}
  ~Entity() { Reset(); }
  Entity(Entity&& o) noexcept : handle_(o.handle_) { o.handle_ = 0; }
  Entity& operator=(Entity&& o) noexcept;
  Entity(const Entity&) = delete;
  Entity& operator=(const Entity&) = delete;

  dds_entity_t handle() const { return handle_; }
  bool valid() const { return handle_ > 0; }
  void Reset();

 private:
  dds_entity_t handle_ = 0;
};

// Scoped dds_qos_t with the few setters ARI uses.
class Qos {
 public:
  Qos();
  ~Qos();
  Qos(Qos&& o) noexcept : qos_(o.qos_) { o.qos_ = nullptr; }
  Qos(const Qos&) = delete;
  Qos& operator=(const Qos&) = delete;
  Qos& operator=(Qos&&) = delete;

  Qos& Reliable(Duration max_blocking);
  Qos& KeepLast(int32_t depth);
  Qos& KeepAll();
  Qos& Volatile();
  Qos& TransientLocal();
  Qos& DurabilityService(int32_t depth);  // KEEP_LAST depth kept for late joiners
  Qos& AutomaticLiveliness(Duration lease);
  Qos& DataRepresentationXcdr1();  // writers: the encoding every vendor reads
  const dds_qos_t* get() const { return qos_; }

 private:
  dds_qos_t* qos_;
};

// kSimEnvironment: simulation only (ari-sim live replay -> a node configured with
// SENSOR_DDS_REPLAY); see idl/ari.idl SimEnvironment.
// kControl: STANDBY / RESUME to a node (idl/ari.idl Control).
enum class TopicKind { kRequest, kTokenChunk, kCancel, kNodeStatus, kSimEnvironment, kControl };

// The QoS table (docs/interface.md "QoS"). Reliable everywhere, KEEP_LAST, no deadline.
struct TopicQosSpec {
  const char* name;              // DDS topic name
  int32_t writer_depth;          // KEEP_LAST depth (per instance) on the writer
  int32_t reader_depth;          // KEEP_LAST depth (per instance) on the reader; also the
                                 // iceoryx subscriber queue capacity under shared memory
  bool transient_local;          // late joiners get the last writer_depth samples
  bool writer_liveliness_lease;  // writer offers AUTOMATIC liveliness with a finite lease
};
const TopicQosSpec& TopicQos(TopicKind kind);
const dds_topic_descriptor_t* TopicDescriptor(TopicKind kind);
size_t TopicSampleSize(TopicKind kind);
Qos WriterQos(TopicKind kind, Duration liveliness_lease);
Qos ReaderQos(TopicKind kind);

inline constexpr Duration kDefaultLivelinessLease = std::chrono::seconds(1);

// The DDS partition of CRITICAL requests (docs/deployment.md "Security"): under DDS
// Security only identities whose permissions grant ari/v2/request in this partition
// may write there, so the CRITICAL right is DDS access control. Everything else uses
// the default (empty) partition.
inline constexpr std::string_view kCriticalPartition = "ari-critical";

// Shared memory start-up race (root cause of the "first chunks lost" seen under shm):
// Cyclone creates an iceoryx publisher per writer and a subscriber per reader, and
// skips the network path between two same-host endpoints that both use iceoryx. RouDi
// connects a new subscriber to a publisher (or a new publisher to subscribers) only in
// its discovery loop, every roudi::DISCOVERY_INTERVAL = 100 ms (iceoryx 2.0), while DDS
// discovery over loopback usually reports the match within a few ms. Volatile writers
// have no iceoryx history, so samples written in that window are lost for the new
// endpoint, and Cyclone 0.10 offers no API to see the iceoryx connection state. So a
// Client sends its first request to a node only this long after it first saw that
// node's request reader and chunk writer matched (a one-off wait per node, only when
// shared memory is on; docs/interface.md "Shared memory").
inline constexpr Duration kIceoryxSettle = std::chrono::milliseconds(250);

class Participant {
 public:
  static Result<Participant> Create(std::shared_ptr<Domain> domain);
  dds_entity_t handle() const { return entity_.handle(); }
  const Domain& domain() const { return *domain_; }

 private:
  std::shared_ptr<Domain> domain_;  // outlives the participant entity
  Entity entity_;
};

class Topic {
 public:
  static Result<Topic> Create(const Participant& participant, TopicKind kind);
  dds_entity_t handle() const { return entity_.handle(); }
  TopicKind kind() const { return kind_; }

 private:
  TopicKind kind_ = TopicKind::kRequest;
  Entity entity_;
};

struct WriterStats {
  uint64_t writes = 0;
  uint64_t loaned_writes = 0;  // written through a sample loaned from iceoryx
};

class Writer {
 public:
  // `partition` non-empty: the writer gets its own publisher in that DDS partition.
  // `keep_all`: KEEP_ALL history instead of the table's KEEP_LAST (tests: a writer that a
  // stuck reader throttles, docs/reliability.md "A stuck reader").
  static Result<Writer> Create(const Participant& participant, const Topic& topic,
                               Duration liveliness_lease = kDefaultLivelinessLease,
                               std::string_view partition = {}, bool keep_all = false);
  dds_entity_t handle() const { return entity_.handle(); }
  // Cyclone will move this writer's samples through iceoryx.
  bool shared_memory() const;
  bool loan_available() const;

  // Writes a sample of the topic's type; through a loaned sample when loans are
  // available (one copy into shared memory), else a plain dds_write.
  Result<void> Write(const void* sample);
  // Lets `fill` write the sample in place: into the loaned sample (zero copy) or,
  // without loans, into `scratch` (caller-owned, at least the type's size).
  Result<void> WriteInPlace(FunctionRef<void(void* sample)> fill, void* scratch);
  // Ends the instance identified by the key fields of `key_sample` (frees caches).
  Result<void> Unregister(const void* key_sample);
  Result<uint32_t> MatchedReaders() const;
  // True when a reader of `participant` (a remote participant key) is matched.
  bool MatchedReaderOf(const dds_guid_t& participant) const;
  WriterStats stats() const { return {writes_->load(), loaned_->load()}; }

 private:
  // Writes through a loan when Cyclone offers one; false = no loan, caller copies.
  bool TryLoanedWrite(FunctionRef<void(void*)> fill, Result<void>* result);
  TopicKind kind_ = TopicKind::kRequest;
  std::unique_ptr<std::atomic<uint64_t>> writes_, loaned_;
  Entity publisher_;  // own publisher (partition), else 0; outlives entity_
  Entity entity_;
};

struct ReaderStats {
  uint64_t samples = 0;      // valid samples taken
  uint64_t shm_samples = 0;  // of which arrived while the reader had shared memory
};

class Reader {
 public:
  // `status_mask` enables statuses (DDS_LIVELINESS_CHANGED_STATUS...) for waitsets.
  // `partition` non-empty: the reader gets its own subscriber in that DDS partition.
  static Result<Reader> Create(const Participant& participant, const Topic& topic,
                               uint32_t status_mask = 0, std::string_view partition = {});
  dds_entity_t handle() const { return entity_.handle(); }
  bool shared_memory() const;

  // Takes up to `max` samples as loans (zero copy under shared memory) and calls
  // visit(sample or nullptr for invalid-data infos, info) for each; returns the count.
  // keys_of_invalid: invalid-data infos (dispose, unregister) get the sample too, whose
  // key fields only are set (info.valid_data tells).
  Result<int> TakeLoaned(int max,
                         const std::function<void(const void*, const dds_sample_info_t&)>& visit,
                         bool keys_of_invalid = false);
  Result<dds_liveliness_changed_status_t> LivelinessChanged() const;
  Result<uint32_t> MatchedWriters() const;
  // True when a writer of `participant` (a remote participant key) is matched.
  bool MatchedWriterOf(const dds_guid_t& participant) const;
  // Participant key of the remote writer that wrote a sample (from its sample info).
  Result<dds_guid_t> WriterParticipant(dds_instance_handle_t publication_handle) const;
  ReaderStats stats() const { return {samples_->load(), shm_samples_->load()}; }

 private:
  std::unique_ptr<std::atomic<uint64_t>> samples_, shm_samples_;
  Entity subscriber_;  // own subscriber (partition), else 0; outlives entity_
  Entity entity_;
};

class ReadCondition {
 public:
  static Result<ReadCondition> Create(const Reader& reader, uint32_t mask = DDS_ANY_STATE);
  dds_entity_t handle() const { return entity_.handle(); }

 private:
  Entity entity_;
};

class GuardCondition {
 public:
  static Result<GuardCondition> Create(const Participant& participant);
  dds_entity_t handle() const { return entity_.handle(); }
  Result<void> Trigger();
  Result<bool> TakeTriggered();  // reads and clears

 private:
  Entity entity_;
};

class WaitSet {
 public:
  static Result<WaitSet> Create(const Participant& participant);
  dds_entity_t handle() const { return entity_.handle(); }
  Result<void> Attach(dds_entity_t entity, dds_attach_t cookie);
  Result<void> Detach(dds_entity_t entity);
  // Blocks until an attached entity triggers or the timeout passes; writes the
  // triggered cookies to `out`, returns how many (0 = timeout).
  Result<size_t> Wait(std::span<dds_attach_t> out, Duration timeout);

 private:
  Entity entity_;
};

// The raw integer of an IDL enum field. Samples come from other processes, and loading
// an out-of-range value through the C++ enum type is undefined: validate via this.
template <class E>
int32_t RawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int32_t), "IDL enums are 32 bit");
  int32_t v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The 16-byte instance key of a topic keyed by a name (NodeStatus.node_id,
// SimEnvironment.source_id): two FNV-1a 64 hashes of the name (docs/interface.md "Keys").
struct InstanceKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
};
InstanceKey KeyOfName(std::string_view name);

// Copies text into a fixed char array, NUL padded; false when it does not fit
// (capacity - 1 bytes usable so the field stays NUL-terminated).
bool CopyFixed(std::string_view text, char* dst, size_t capacity);
template <size_t N>
bool CopyFixed(std::string_view text, char (&dst)[N]) {
  return CopyFixed(text, dst, N);
}
// The text of a NUL-padded fixed char array.
template <size_t N>
std::string_view FixedView(const char (&src)[N]) {
  size_t n = 0;
  while (n < N && src[n] != '\0') ++n;
  return std::string_view(src, n);
}

}  // namespace ari::component::dds
