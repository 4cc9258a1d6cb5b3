#include "component/client/dds.h"

#include <dds/ddsc/dds_loan_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "ari.h"

namespace ari::component::dds {

dds_duration_t ToDds(Duration d) {
  if (d.count() < 0 || d == Duration::max()) return DDS_INFINITY;
  return static_cast<dds_duration_t>(d.count());
}

Entity& Entity::operator=(Entity&& o) noexcept {
  if (this != &o) {
    Reset();
    handle_ = o.handle_;
    o.handle_ = 0;
  }
  return *this;
}

void Entity::Reset() {
  // Deleting a child whose parent is already gone returns BAD_PARAMETER: harmless.
  if (handle_ > 0) {
    const dds_return_t rc = dds_delete(handle_);
    if (rc != DDS_RETCODE_OK && rc != DDS_RETCODE_BAD_PARAMETER) {
      std::fprintf(stderr, "ari: dds_delete(%d): %s\n", static_cast<int>(handle_),
                   dds_strretcode(rc));
    }
  }
  handle_ = 0;
}

Qos::Qos() : qos_(dds_create_qos()) {}
Qos::~Qos() {
  if (qos_) dds_delete_qos(qos_);
}
Qos& Qos::Reliable(Duration max_blocking) {
  dds_qset_reliability(qos_, DDS_RELIABILITY_RELIABLE, ToDds(max_blocking));
  return *this;
}
Qos& Qos::KeepAll() {
  dds_qset_history(qos_, DDS_HISTORY_KEEP_ALL, 0);
  return *this;
}
Qos& Qos::KeepLast(int32_t depth) {
  dds_qset_history(qos_, DDS_HISTORY_KEEP_LAST, depth);
  return *this;
}
Qos& Qos::Volatile() {
  dds_qset_durability(qos_, DDS_DURABILITY_VOLATILE);
  return *this;
}
Qos& Qos::TransientLocal() {
  dds_qset_durability(qos_, DDS_DURABILITY_TRANSIENT_LOCAL);
  return *this;
}
Qos& Qos::DurabilityService(int32_t depth) {
  dds_qset_durability_service(qos_, 0, DDS_HISTORY_KEEP_LAST, depth, DDS_LENGTH_UNLIMITED,
                              DDS_LENGTH_UNLIMITED, DDS_LENGTH_UNLIMITED);
  return *this;
}
Qos& Qos::AutomaticLiveliness(Duration lease) {
  dds_qset_liveliness(qos_, DDS_LIVELINESS_AUTOMATIC, ToDds(lease));
  return *this;
}

Qos& Qos::DataRepresentationXcdr1() {
  const dds_data_representation_id_t xcdr1[] = {DDS_DATA_REPRESENTATION_XCDR1};
  dds_qset_data_representation(qos_, 1, xcdr1);
  return *this;
}

const TopicQosSpec& TopicQos(TopicKind kind) {
  // name, writer depth, reader depth, transient-local, writer liveliness lease
  // Depths: a reliable KEEP_LAST writer keeps at most `writer_depth` unacknowledged
  // samples per instance (= per request). A reader drops data from a just-discovered
  // writer until that writer's first heartbeat and then gets it retransmitted, so the
  // chunk depth bounds how far a stream may run ahead of the slowest reader's ACKs.
  // The reader depth is also the iceoryx subscriber queue (max 256) under shm.
  static const TopicQosSpec kRequest{"ari/v2/request", 1, 64, false, false};
  static const TopicQosSpec kChunk{"ari/v2/token_chunk", 256, 256, false, false};
  static const TopicQosSpec kCancel{"ari/v2/cancel", 8, 64, false, false};
  static const TopicQosSpec kStatus{"ari/v2/node_status", 1, 1, true, true};
  static const TopicQosSpec kSimEnv{"ari/v2/sim_environment", 1, 1, false, false};
  static const TopicQosSpec kControl{"ari/v2/control", 4, 8, false, false};
  switch (kind) {
    case TopicKind::kRequest: return kRequest;
    case TopicKind::kTokenChunk: return kChunk;
    case TopicKind::kCancel: return kCancel;
    case TopicKind::kNodeStatus: return kStatus;
    case TopicKind::kSimEnvironment: return kSimEnv;
    case TopicKind::kControl: return kControl;
  }
  return kRequest;
}

const dds_topic_descriptor_t* TopicDescriptor(TopicKind kind) {
  switch (kind) {
    case TopicKind::kRequest: return &ari_Request_desc;
    case TopicKind::kTokenChunk: return &ari_TokenChunk_desc;
    case TopicKind::kCancel: return &ari_Cancel_desc;
    case TopicKind::kNodeStatus: return &ari_NodeStatus_desc;
    case TopicKind::kSimEnvironment: return &ari_SimEnvironment_desc;
    case TopicKind::kControl: return &ari_Control_desc;
  }
  return nullptr;
}

size_t TopicSampleSize(TopicKind kind) { return TopicDescriptor(kind)->m_size; }

namespace {
constexpr Duration kMaxBlocking = std::chrono::milliseconds(100);

constexpr int32_t kMaxIceoryxHistory = 16;  // iceoryx 2.0 MAX_PUBLISHER_HISTORY

Qos BaseQos(const TopicQosSpec& spec, int32_t depth) {
  Qos q;
  q.Reliable(kMaxBlocking).KeepLast(depth);
  if (spec.transient_local) {
    // History kept for late joiners; above 16 Cyclone would refuse shared memory.
    q.TransientLocal().DurabilityService(std::min(spec.writer_depth, kMaxIceoryxHistory));
  } else {
    q.Volatile();
  }
  return q;
}
}  // namespace

Qos WriterQos(TopicKind kind, Duration liveliness_lease) {
  const TopicQosSpec& spec = TopicQos(kind);
  Qos q = BaseQos(spec, spec.writer_depth);
  q.AutomaticLiveliness(spec.writer_liveliness_lease ? liveliness_lease : Duration::max());
  // XCDR1, the encoding every vendor reads (Fast DDS 2.9 readers accept only XCDR1 by
  // default); ARI's types are @final without optionals, so XCDR1 carries them whole.
  // Readers keep Cyclone's default (XCDR1 and XCDR2). docs/interface.md "Interop".
  q.DataRepresentationXcdr1();
  return q;
}

Qos ReaderQos(TopicKind kind) {
  const TopicQosSpec& spec = TopicQos(kind);
  Qos q = BaseQos(spec, spec.reader_depth);
  q.AutomaticLiveliness(Duration::max());  // requests no lease: matches any writer's lease
  return q;
}

Result<Participant> Participant::Create(std::shared_ptr<Domain> domain) {
  if (!domain) return MakeError(ErrorCode::kInvalidArgument, "Participant::Create: no domain");
  const dds_entity_t h = dds_create_participant(domain->id(), nullptr, nullptr);
  if (h < 0) return DdsError(h, "dds_create_participant");
  Participant p;
  p.domain_ = std::move(domain);
  p.entity_ = Entity(h);
  return p;
}

Result<Topic> Topic::Create(const Participant& participant, TopicKind kind) {
  const TopicQosSpec& spec = TopicQos(kind);
  Qos q = BaseQos(spec, spec.writer_depth);
  const dds_entity_t h =
      dds_create_topic(participant.handle(), TopicDescriptor(kind), spec.name, q.get(), nullptr);
  if (h < 0) return DdsError(h, std::string("dds_create_topic(") + spec.name + ")");
  Topic t;
  t.kind_ = kind;
  t.entity_ = Entity(h);
  return t;
}

namespace {

// The publisher (or subscriber) of an endpoint in a DDS partition; none for "".
Result<Entity> CreateGroup(const Participant& participant, std::string_view partition,
                           bool publisher) {
  if (partition.empty()) return Entity();
  dds_qos_t* q = dds_create_qos();
  const std::string name(partition);
  const char* names[] = {name.c_str()};
  dds_qset_partition(q, 1, names);
  const dds_entity_t h = publisher ? dds_create_publisher(participant.handle(), q, nullptr)
                                   : dds_create_subscriber(participant.handle(), q, nullptr);
  dds_delete_qos(q);
  if (h < 0) {
    return DdsError(h, std::string(publisher ? "dds_create_publisher" : "dds_create_subscriber") +
                           "(partition " + name + ")");
  }
  return Entity(h);
}

}  // namespace

Result<Writer> Writer::Create(const Participant& participant, const Topic& topic,
                              Duration liveliness_lease, std::string_view partition,
                              bool keep_all) {
  Qos q = WriterQos(topic.kind(), liveliness_lease);
  if (keep_all) q.KeepAll();
  auto group = CreateGroup(participant, partition, true);
  if (!group) return std::unexpected(group.error());
  const dds_entity_t parent = group->valid() ? group->handle() : participant.handle();
  const dds_entity_t h = dds_create_writer(parent, topic.handle(), q.get(), nullptr);
  if (h < 0) {
    return DdsError(h, std::string("dds_create_writer(") + TopicQos(topic.kind()).name +
                           (partition.empty() ? "" : ", partition " + std::string(partition)) +
                           ")");
  }
  Writer w;
  w.publisher_ = std::move(*group);
  w.kind_ = topic.kind();
  w.writes_ = std::make_unique<std::atomic<uint64_t>>(0);
  w.loaned_ = std::make_unique<std::atomic<uint64_t>>(0);
  w.entity_ = Entity(h);
  return w;
}

bool Writer::shared_memory() const { return dds_is_shared_memory_available(handle()); }
bool Writer::loan_available() const { return dds_is_loan_available(handle()); }

bool Writer::TryLoanedWrite(FunctionRef<void(void*)> fill, Result<void>* result) {
  if (!loan_available()) return false;
  void* loan = nullptr;
  const dds_return_t rc = dds_loan_sample(handle(), &loan);
  // Pool exhausted or similar: the caller falls back to the copying path.
  if (rc != DDS_RETCODE_OK || loan == nullptr) return false;
  fill(loan);
  const dds_return_t wrc = dds_write(handle(), loan);
  if (wrc != DDS_RETCODE_OK) {
    *result = DdsError(wrc, std::string("dds_write(loaned ") + TopicQos(kind_).name + ")");
  } else {
    writes_->fetch_add(1);
    loaned_->fetch_add(1);
    *result = {};
  }
  return true;
}

Result<void> Writer::Write(const void* sample) {
  const size_t size = TopicSampleSize(kind_);
  Result<void> result;
  if (TryLoanedWrite([&](void* dst) { std::memcpy(dst, sample, size); }, &result)) return result;
  const dds_return_t rc = dds_write(handle(), sample);
  if (rc != DDS_RETCODE_OK)
    return DdsError(rc, std::string("dds_write(") + TopicQos(kind_).name + ")");
  writes_->fetch_add(1);
  return {};
}

Result<void> Writer::WriteInPlace(FunctionRef<void(void*)> fill, void* scratch) {
  Result<void> result;
  if (TryLoanedWrite(fill, &result)) return result;
  if (scratch == nullptr) return MakeError(ErrorCode::kInvalidArgument, "WriteInPlace: no scratch");
  fill(scratch);
  const dds_return_t rc = dds_write(handle(), scratch);
  if (rc != DDS_RETCODE_OK)
    return DdsError(rc, std::string("dds_write(") + TopicQos(kind_).name + ")");
  writes_->fetch_add(1);
  return {};
}

Result<void> Writer::Unregister(const void* key_sample) {
  const dds_return_t rc = dds_unregister_instance(handle(), key_sample);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_unregister_instance");
  return {};
}

Result<uint32_t> Writer::MatchedReaders() const {
  dds_publication_matched_status_t st{};
  const dds_return_t rc = dds_get_publication_matched_status(handle(), &st);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_get_publication_matched_status");
  return st.current_count;
}

namespace {
bool SameGuid(const dds_guid_t& a, const dds_guid_t& b) {
  return std::memcmp(a.v, b.v, sizeof a.v) == 0;
}

// Walks matched endpoints of `entity` (writer: subscriptions, reader: publications).
bool MatchedOf(dds_entity_t entity, bool is_writer, const dds_guid_t& participant) {
  constexpr size_t kMax = 64;
  dds_instance_handle_t handles[kMax];
  const dds_return_t n = is_writer ? dds_get_matched_subscriptions(entity, handles, kMax)
                                   : dds_get_matched_publications(entity, handles, kMax);
  if (n < 0) return false;
  for (dds_return_t i = 0; i < n && static_cast<size_t>(i) < kMax; ++i) {
    dds_builtintopic_endpoint_t* ep = is_writer
                                          ? dds_get_matched_subscription_data(entity, handles[i])
                                          : dds_get_matched_publication_data(entity, handles[i]);
    if (ep == nullptr) continue;
    const bool same = SameGuid(ep->participant_key, participant);
    dds_builtintopic_free_endpoint(ep);
    if (same) return true;
  }
  return false;
}
}  // namespace

bool Writer::MatchedReaderOf(const dds_guid_t& participant) const {
  return MatchedOf(handle(), true, participant);
}

bool Reader::MatchedWriterOf(const dds_guid_t& participant) const {
  return MatchedOf(handle(), false, participant);
}

Result<Reader> Reader::Create(const Participant& participant, const Topic& topic,
                              uint32_t status_mask, std::string_view partition) {
  Qos q = ReaderQos(topic.kind());
  auto group = CreateGroup(participant, partition, false);
  if (!group) return std::unexpected(group.error());
  const dds_entity_t parent = group->valid() ? group->handle() : participant.handle();
  const dds_entity_t h = dds_create_reader(parent, topic.handle(), q.get(), nullptr);
  if (h < 0) {
    return DdsError(h, std::string("dds_create_reader(") + TopicQos(topic.kind()).name +
                           (partition.empty() ? "" : ", partition " + std::string(partition)) +
                           ")");
  }
  Reader r;
  r.subscriber_ = std::move(*group);
  r.samples_ = std::make_unique<std::atomic<uint64_t>>(0);
  r.shm_samples_ = std::make_unique<std::atomic<uint64_t>>(0);
  r.entity_ = Entity(h);
  const dds_return_t rc = dds_set_status_mask(h, status_mask);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_set_status_mask");
  return r;
}

bool Reader::shared_memory() const { return dds_is_shared_memory_available(handle()); }

Result<int> Reader::TakeLoaned(
    int max, const std::function<void(const void*, const dds_sample_info_t&)>& visit,
    bool keys_of_invalid) {
  constexpr int kBatch = 16;
  void* buf[kBatch] = {};
  dds_sample_info_t infos[kBatch];
  const int want = max < kBatch ? max : kBatch;
  const int n =
      dds_take(handle(), buf, infos, static_cast<size_t>(want), static_cast<uint32_t>(want));
  if (n < 0) return DdsError(n, "dds_take");
  const bool shm = shared_memory();
  for (int i = 0; i < n; ++i) {
    if (infos[i].valid_data) {
      samples_->fetch_add(1);
      if (shm) shm_samples_->fetch_add(1);
    }
    visit(infos[i].valid_data || keys_of_invalid ? buf[i] : nullptr, infos[i]);
  }
  if (n > 0) {
    const dds_return_t rc = dds_return_loan(handle(), buf, n);
    if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_return_loan");
  }
  return n;
}

Result<dds_liveliness_changed_status_t> Reader::LivelinessChanged() const {
  dds_liveliness_changed_status_t st{};
  const dds_return_t rc = dds_get_liveliness_changed_status(handle(), &st);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_get_liveliness_changed_status");
  return st;
}

Result<uint32_t> Reader::MatchedWriters() const {
  dds_subscription_matched_status_t st{};
  const dds_return_t rc = dds_get_subscription_matched_status(handle(), &st);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_get_subscription_matched_status");
  return st.current_count;
}

Result<dds_guid_t> Reader::WriterParticipant(dds_instance_handle_t publication_handle) const {
  dds_builtintopic_endpoint_t* ep = dds_get_matched_publication_data(handle(), publication_handle);
  if (ep == nullptr)
    return MakeError(ErrorCode::kInternal, "no matched publication data for writer handle");
  dds_guid_t key = ep->participant_key;
  dds_builtintopic_free_endpoint(ep);
  return key;
}

Result<ReadCondition> ReadCondition::Create(const Reader& reader, uint32_t mask) {
  const dds_entity_t h = dds_create_readcondition(reader.handle(), mask);
  if (h < 0) return DdsError(h, "dds_create_readcondition");
  ReadCondition c;
  c.entity_ = Entity(h);
  return c;
}

Result<GuardCondition> GuardCondition::Create(const Participant& participant) {
  const dds_entity_t h = dds_create_guardcondition(participant.handle());
  if (h < 0) return DdsError(h, "dds_create_guardcondition");
  GuardCondition g;
  g.entity_ = Entity(h);
  return g;
}

Result<void> GuardCondition::Trigger() {
  const dds_return_t rc = dds_set_guardcondition(handle(), true);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_set_guardcondition");
  return {};
}

Result<bool> GuardCondition::TakeTriggered() {
  bool triggered = false;
  const dds_return_t rc = dds_take_guardcondition(handle(), &triggered);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_take_guardcondition");
  return triggered;
}

Result<WaitSet> WaitSet::Create(const Participant& participant) {
  const dds_entity_t h = dds_create_waitset(participant.handle());
  if (h < 0) return DdsError(h, "dds_create_waitset");
  WaitSet w;
  w.entity_ = Entity(h);
  return w;
}

Result<void> WaitSet::Attach(dds_entity_t entity, dds_attach_t cookie) {
  const dds_return_t rc = dds_waitset_attach(handle(), entity, cookie);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_waitset_attach");
  return {};
}

Result<void> WaitSet::Detach(dds_entity_t entity) {
  const dds_return_t rc = dds_waitset_detach(handle(), entity);
  if (rc != DDS_RETCODE_OK) return DdsError(rc, "dds_waitset_detach");
  return {};
}

Result<size_t> WaitSet::Wait(std::span<dds_attach_t> out, Duration timeout) {
  const dds_return_t n = dds_waitset_wait(handle(), out.data(), out.size(), ToDds(timeout));
  if (n < 0) return DdsError(n, "dds_waitset_wait");
  return static_cast<size_t>(n);
}

InstanceKey KeyOfName(std::string_view name) {
  // FNV-1a 64 over the bytes, once from the standard offset basis and once from a second
  // basis (the standard one hashed with itself): docs/interface.md "Keys".
  auto fnv = [&](uint64_t h) {
    for (const char ch : name) {
      h ^= static_cast<unsigned char>(ch);
      h *= 0x100000001b3ull;
    }
    return h;
  };
  return {fnv(0xcbf29ce484222325ull), fnv(0x84222325cbf29ce4ull)};
}

bool CopyFixed(std::string_view text, char* dst, size_t capacity) {
  std::memset(dst, 0, capacity);
  if (capacity == 0) return text.empty();
  const size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
  std::memcpy(dst, text.data(), n);
  return n == text.size();
}

}  // namespace ari::component::dds
