// Cross-vendor DDS: a client built with eProsima Fast DDS (types generated from
// idl/ari.idl by fastddsgen at build time) against a real ari-node (Cyclone DDS), over
// loopback only (Fast DDS: UDPv4 on 127.0.0.1, no multicast, no shared memory; the node:
// config/cyclonedds-lo.xml). It waits for the node's READY status and a handshake (both
// sides of discovery), streams a request and checks the whole stream, cancels a second
// one, disposes a third, unregisters every instance, and finds no warning in the node's
// log. docs/reliability.md "Cross-vendor DDS".
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastrtps/utils/IPLocator.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/Topic.hpp>
#include <fastdds/dds/topic/TypeSupport.hpp>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ariPubSubTypes.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace fdds = eprosima::fastdds::dds;
using eprosima::fastrtps::rtps::IPLocator;
using eprosima::fastrtps::rtps::Locator_t;
using namespace std::chrono_literals;

template <size_t N>
void SetText(std::array<char, N>& dst, const std::string& s) {
  dst.fill('\0');
  std::memcpy(dst.data(), s.data(), std::min(s.size(), N - 1));
}
template <size_t N>
std::string Text(const std::array<char, N>& a, size_t len = N) {
  size_t n = 0;
  while (n < len && n < N && a[n] != '\0') ++n;
  return std::string(a.data(), n);
}

// Fast DDS participant + the four ARI topics, loopback only.
class FastDdsClient {
 public:
  bool Create(int domain) {
    fdds::DomainParticipantQos pqos;
    pqos.name("ari-fastdds-interop");
    pqos.transport().use_builtin_transports = false;  // no SHM, no default UDP
    auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
    udp->interfaceWhiteList.emplace_back("127.0.0.1");
    pqos.transport().user_transports.push_back(udp);
    Locator_t lo;
    lo.kind = LOCATOR_KIND_UDPv4;
    IPLocator::setIPv4(lo, 127, 0, 0, 1);
    auto& builtin = pqos.wire_protocol().builtin;
    builtin.initialPeersList.push_back(lo);               // the node: unicast 127.0.0.1
    builtin.metatrafficUnicastLocatorList.push_back(lo);  // set: no default multicast
    pqos.wire_protocol().default_unicast_locator_list.push_back(lo);
    participant_ = fdds::DomainParticipantFactory::get_instance()->create_participant(domain, pqos);
    if (!participant_) return false;
    fdds::TypeSupport types[] = {fdds::TypeSupport(new ari::RequestPubSubType()),
                                 fdds::TypeSupport(new ari::TokenChunkPubSubType()),
                                 fdds::TypeSupport(new ari::CancelPubSubType()),
                                 fdds::TypeSupport(new ari::NodeStatusPubSubType())};
    for (auto& t : types) {
      if (t.register_type(participant_) != ReturnCode_t::RETCODE_OK) return false;
    }
    auto topic = [&](const char* name, const char* type) {
      return participant_->create_topic(name, type, fdds::TOPIC_QOS_DEFAULT);
    };
    request_ = topic("ari/v2/request", "ari::Request");
    chunk_ = topic("ari/v2/token_chunk", "ari::TokenChunk");
    cancel_ = topic("ari/v2/cancel", "ari::Cancel");
    status_ = topic("ari/v2/node_status", "ari::NodeStatus");
    pub_ = participant_->create_publisher(fdds::PUBLISHER_QOS_DEFAULT);
    sub_ = participant_->create_subscriber(fdds::SUBSCRIBER_QOS_DEFAULT);
    if (!request_ || !chunk_ || !cancel_ || !status_ || !pub_ || !sub_) return false;
    // The QoS table of docs/interface.md: reliable, KEEP_LAST, volatile except status.
    fdds::DataWriterQos wq = fdds::DATAWRITER_QOS_DEFAULT;
    wq.reliability().kind = fdds::RELIABLE_RELIABILITY_QOS;
    wq.history().kind = fdds::KEEP_LAST_HISTORY_QOS;
    wq.history().depth = 8;
    wq.durability().kind = fdds::VOLATILE_DURABILITY_QOS;
    request_writer_ = pub_->create_datawriter(request_, wq);
    cancel_writer_ = pub_->create_datawriter(cancel_, wq);
    fdds::DataReaderQos rq = fdds::DATAREADER_QOS_DEFAULT;
    rq.reliability().kind = fdds::RELIABLE_RELIABILITY_QOS;
    rq.history().kind = fdds::KEEP_LAST_HISTORY_QOS;
    rq.history().depth = 256;
    rq.durability().kind = fdds::VOLATILE_DURABILITY_QOS;
    chunk_reader_ = sub_->create_datareader(chunk_, rq);
    rq.history().depth = 1;
    rq.durability().kind = fdds::TRANSIENT_LOCAL_DURABILITY_QOS;
    status_reader_ = sub_->create_datareader(status_, rq);
    return request_writer_ && cancel_writer_ && chunk_reader_ && status_reader_;
  }

  ~FastDdsClient() {
    if (!participant_) return;
    if (participant_->delete_contained_entities() != ReturnCode_t::RETCODE_OK) {
      ADD_FAILURE() << "delete_contained_entities";
    }
    fdds::DomainParticipantFactory::get_instance()->delete_participant(participant_);
  }

  // Until the node's status says READY and it matched our request writer and chunk reader.
  bool WaitReady(std::chrono::seconds timeout, std::string* why) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    bool ready = false;
    while (std::chrono::steady_clock::now() < end) {
      ari::NodeStatus st;
      fdds::SampleInfo info;
      while (status_reader_->take_next_sample(&st, &info) == ReturnCode_t::RETCODE_OK) {
        if (info.valid_data && st.state() == ari::NODE_READY) ready = true;
      }
      fdds::PublicationMatchedStatus pm;
      fdds::SubscriptionMatchedStatus sm;
      request_writer_->get_publication_matched_status(pm);
      chunk_reader_->get_subscription_matched_status(sm);
      if (ready && pm.current_count > 0 && sm.current_count > 0) return true;
      std::this_thread::sleep_for(20ms);
    }
    *why = "ready=" + std::to_string(ready);
    return false;
  }

  // Discovery is two-sided: our writers matching the node's readers (WaitReady) does not
  // mean the node's readers matched our writers yet, and a volatile reader drops what a
  // writer it has not discovered sent. A real client handshakes: a cancel, then its
  // request, repeated under fresh ids until the node answers one CANCELLED. That answer
  // proves the node reads our request and cancel writers and we read its chunks.
  bool Handshake(std::chrono::seconds timeout, std::string* why) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    int tries = 0;
    for (uint64_t probe = kFirstProbe; std::chrono::steady_clock::now() < end; ++probe) {
      ++tries;
      ari::Cancel c = MakeCancel(probe);
      if (!cancel_writer_->write(&c)) break;
      std::this_thread::sleep_for(300ms);
      ari::Request r = MakeRequest(probe, "Once", 1);
      if (!request_writer_->write(&r)) break;
      for (uint64_t p = kFirstProbe; p <= probe; ++p) {
        const auto got = AwaitTerminal(p, p == probe ? 2s : 0s);
        if (!got.empty() && got.back().status() == ari::STATUS_CANCELLED) return true;
      }
    }
    *why = "no probe answered CANCELLED after " + std::to_string(tries) + " tries";
    return false;
  }

  ari::Cancel MakeCancel(uint64_t counter) {
    ari::Cancel c;
    c.key_hi(kNonce);
    c.key_lo(counter);
    SetText(c.request_id(), RequestId(counter));
    SetText(c.client_id(), "fastdds");
    return c;
  }

  ari::Request MakeRequest(uint64_t counter, const std::string& prompt, uint32_t max_tokens) {
    ari::Request r;
    r.key_hi(kNonce);
    r.key_lo(counter);
    SetText(r.request_id(), RequestId(counter));
    SetText(r.client_id(), "fastdds");
    r.urgency(ari::URGENCY_NORMAL);
    r.max_tokens(max_tokens);
    SetText(r.prompt(), prompt);
    r.prompt_len(static_cast<uint32_t>(prompt.size()));
    return r;
  }
  static std::string RequestId(uint64_t counter) {
    return "fastdds-" + std::to_string(counter) + "-5eed";
  }

  // Chunks of request `counter` until its terminal or timeout.
  std::vector<ari::TokenChunk> AwaitTerminal(uint64_t counter, std::chrono::seconds timeout) {
    std::vector<ari::TokenChunk> got;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      ari::TokenChunk c;
      fdds::SampleInfo info;
      bool any = false;
      while (chunk_reader_->take_next_sample(&c, &info) == ReturnCode_t::RETCODE_OK) {
        if (!info.valid_data) continue;  // the node unregistered a finished stream
        any = true;
        if (c.key_hi() == kNonce) seen_[c.key_lo()].push_back(c);
      }
      auto& mine = seen_[counter];
      if (!mine.empty() && mine.back().terminal()) return mine;
      if (!any) std::this_thread::sleep_for(5ms);
    }
    return seen_[counter];
  }

  static constexpr uint64_t kNonce = 0x5eed0f00dca11ab1ull;
  static constexpr uint64_t kFirstProbe = 1000;  // handshake ids, apart from the test's
  fdds::DataWriter* request_writer_ = nullptr;
  fdds::DataWriter* cancel_writer_ = nullptr;

 private:
  fdds::DomainParticipant* participant_ = nullptr;
  fdds::Topic *request_ = nullptr, *chunk_ = nullptr, *cancel_ = nullptr, *status_ = nullptr;
  fdds::Publisher* pub_ = nullptr;
  fdds::Subscriber* sub_ = nullptr;
  fdds::DataReader *chunk_reader_ = nullptr, *status_reader_ = nullptr;
  std::map<uint64_t, std::vector<ari::TokenChunk>> seen_;
};

// Sequence numbers 0..n-1, exactly one terminal (the last), every chunk keyed and named
// as the request.
void ExpectWholeStream(const std::vector<ari::TokenChunk>& chunks, uint64_t counter) {
  ASSERT_FALSE(chunks.empty());
  int terminals = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].sequence_number(), i);
    EXPECT_EQ(chunks[i].key_lo(), counter);
    EXPECT_EQ(Text(chunks[i].request_id()), FastDdsClient::RequestId(counter));
    EXPECT_EQ(Text(chunks[i].client_id()), "fastdds");
    terminals += chunks[i].terminal() ? 1 : 0;
  }
  EXPECT_EQ(terminals, 1);
  EXPECT_TRUE(chunks.back().terminal());
}

TEST(FastDdsInterop, StreamCancelDisposeAndUnregisterAgainstRealNode) {
  const auto dir = TempDir("fastdds_interop");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K not found under " << ModelsDir();
  const auto cfg = WriteNodeConfig(dir, model);
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "node.log"));
  FastDdsClient client;
  ASSERT_TRUE(client.Create(TestDomainId()));
  std::string why;
  ASSERT_TRUE(client.WaitReady(60s, &why)) << why << "\n" << node.Log();
  ASSERT_TRUE(client.Handshake(60s, &why)) << why << "\n" << node.Log();

  // 1. A whole stream.
  ari::Request r1 = client.MakeRequest(1, "Once upon a time", 40);
  ASSERT_EQ(client.request_writer_->write(&r1), true);
  auto s1 = client.AwaitTerminal(1, 30s);
  ExpectWholeStream(s1, 1);
  ASSERT_FALSE(s1.empty()) << node.Log();
  EXPECT_EQ(s1.back().status(), ari::STATUS_DONE) << Text(s1.back().message());
  std::string text;
  uint32_t tokens = 0;
  for (const auto& c : s1) {
    text += Text(c.text(), c.text_len());
    tokens += c.n_tokens();
  }
  EXPECT_FALSE(text.empty());
  EXPECT_GT(tokens, 0u);
  EXPECT_LE(tokens, 40u);
  EXPECT_EQ(s1.back().timing().tokens_generated(), tokens);
  EXPECT_EQ(client.request_writer_->unregister_instance(&r1, fdds::HANDLE_NIL),
            ReturnCode_t::RETCODE_OK);

  // 2. A cancel (sent first: the node answers the request CANCELLED on arrival; the
  // topics are independent, so it waits for the cancel to land).
  ari::Cancel c2 = client.MakeCancel(2);
  ASSERT_EQ(client.cancel_writer_->write(&c2), true);
  std::this_thread::sleep_for(300ms);
  ari::Request r2 = client.MakeRequest(2, "Once upon a time", 200);
  ASSERT_EQ(client.request_writer_->write(&r2), true);
  auto s2 = client.AwaitTerminal(2, 30s);
  ExpectWholeStream(s2, 2);
  ASSERT_FALSE(s2.empty()) << node.Log();
  EXPECT_EQ(s2.back().status(), ari::STATUS_CANCELLED) << Text(s2.back().message());
  EXPECT_EQ(client.cancel_writer_->unregister_instance(&c2, fdds::HANDLE_NIL),
            ReturnCode_t::RETCODE_OK);
  EXPECT_EQ(client.request_writer_->unregister_instance(&r2, fdds::HANDLE_NIL),
            ReturnCode_t::RETCODE_OK);

  // 3. Dispose by key hash (Fast DDS sends the 16-byte key as the key hash only), right
  // after the write (same writer: ordered): the node maps the key back to the request
  // and cancels it long before its 256 tokens.
  ari::Request r3 = client.MakeRequest(3, "Once upon a time", 256);
  ASSERT_EQ(client.request_writer_->write(&r3), true);
  EXPECT_EQ(client.request_writer_->dispose(&r3, fdds::HANDLE_NIL), ReturnCode_t::RETCODE_OK);
  auto s3 = client.AwaitTerminal(3, 30s);
  ExpectWholeStream(s3, 3);
  ASSERT_FALSE(s3.empty()) << node.Log();
  EXPECT_EQ(s3.back().status(), ari::STATUS_CANCELLED) << Text(s3.back().message());
  EXPECT_LT(s3.back().timing().tokens_generated(), 256u);
  std::this_thread::sleep_for(200ms);
  const std::string rid3 = FastDdsClient::RequestId(3);
  EXPECT_NE(node.Log().find("request " + rid3 + " disposed"), std::string::npos) << node.Log();

  EXPECT_EQ(node.Stop(SIGTERM), 0);
  const std::string log = node.Log();
  EXPECT_NE(log.find(FastDdsClient::RequestId(1) + " DONE"), std::string::npos) << log;
  // No deserialization / malformed-sample / key-hash warning anywhere (Cyclone writes its
  // warnings, e.g. "data(application, ...): deserialization ... failed", to stderr).
  for (const char* bad : {"deserializ", "malformed", "invalid sample", "keyhash", "key hash",
                          "serdata", "receive error"}) {
    EXPECT_EQ(log.find(bad), std::string::npos) << bad << " in:\n" << log;
  }
}

}  // namespace
}  // namespace ari::testing
