// Smoke test of the loopback-only Cyclone config: two participants in two processes
// (so the sample really crosses the network stack on `lo`) exchange one sample.
#include <dds/dds.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "ari.h"
#include "tests/common/dds_test_util.h"

namespace {

constexpr char kTopic[] = "ari_smoke_chunks";

dds_qos_t* ReliableQos() {
  dds_qos_t* qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
  dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, 8);
  return qos;
}

// Child process: publish one TokenChunk once the reader is matched. Returns exit code.
int Publisher(dds_domainid_t domain_id) {
  ari::testing::TestDomain domain(static_cast<int>(domain_id));
  if (!domain.ok()) return 10;
  dds_entity_t pp = dds_create_participant(domain_id, nullptr, nullptr);
  if (pp <= 0) return 11;
  dds_entity_t topic = dds_create_topic(pp, &ari_TokenChunk_desc, kTopic, nullptr, nullptr);
  dds_qos_t* qos = ReliableQos();
  dds_entity_t writer = dds_create_writer(pp, topic, qos, nullptr);
  dds_delete_qos(qos);
  if (topic <= 0 || writer <= 0) return 12;
  // Wait (on a waitset, not sleep-polling) until the other process's reader matches.
  if (dds_set_status_mask(writer, DDS_PUBLICATION_MATCHED_STATUS) != DDS_RETCODE_OK) return 13;
  dds_entity_t ws = dds_create_waitset(pp);
  if (dds_waitset_attach(ws, writer, writer) != DDS_RETCODE_OK) return 14;
  dds_publication_matched_status_t st{};
  for (int i = 0; i < 30 && st.current_count == 0; ++i) {
    dds_waitset_wait(ws, nullptr, 0, DDS_SECS(1));
    dds_get_publication_matched_status(writer, &st);
  }
  if (st.current_count == 0) return 15;
  ari_TokenChunk chunk{};
  std::strncpy(chunk.request_id, "smoke-1", sizeof chunk.request_id - 1);
  chunk.sequence_number = 3;
  chunk.terminal = true;
  chunk.status = ari_STATUS_DONE;
  const char* text = "Turn left in 200 m.";
  std::strncpy(chunk.text, text, sizeof chunk.text - 1);
  chunk.text_len = static_cast<uint32_t>(std::strlen(text));
  chunk.n_tokens = 2;
  chunk.token_ids[0] = 17;
  chunk.token_ids[1] = 4242;
  if (dds_write(writer, &chunk) != DDS_RETCODE_OK) return 16;
  if (dds_wait_for_acks(writer, DDS_SECS(10)) != DDS_RETCODE_OK) return 17;
  return dds_delete(pp) == DDS_RETCODE_OK ? 0 : 18;
}

TEST(DdsLoopback, ConfigIsLoopbackOnly) {
  std::ifstream in(ari::testing::SourceDir() / "config" / "cyclonedds-lo.xml");
  ASSERT_TRUE(in) << "config/cyclonedds-lo.xml missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string xml = ss.str();
  EXPECT_NE(xml.find("<NetworkInterface name=\"lo\""), std::string::npos);
  EXPECT_NE(xml.find("<AllowMulticast>false</AllowMulticast>"), std::string::npos);
  EXPECT_NE(xml.find("<Peer address=\"127.0.0.1\"/>"), std::string::npos);
}

TEST(DdsLoopback, TwoProcessesExchangeOneSample) {
  const dds_domainid_t domain_id = static_cast<dds_domainid_t>(ari::testing::TestDomainId());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(Publisher(domain_id));

  ari::testing::TestDomain domain;
  ASSERT_TRUE(domain.ok()) << dds_strretcode(domain.rc());
  dds_entity_t pp = dds_create_participant(domain_id, nullptr, nullptr);
  ASSERT_GT(pp, 0);
  dds_entity_t topic = dds_create_topic(pp, &ari_TokenChunk_desc, kTopic, nullptr, nullptr);
  ASSERT_GT(topic, 0);
  dds_qos_t* qos = ReliableQos();
  dds_entity_t reader = dds_create_reader(pp, topic, qos, nullptr);
  dds_delete_qos(qos);
  ASSERT_GT(reader, 0);
  dds_entity_t cond = dds_create_readcondition(reader, DDS_ANY_STATE);
  dds_entity_t ws = dds_create_waitset(pp);
  ASSERT_EQ(dds_waitset_attach(ws, cond, reader), DDS_RETCODE_OK);

  ari_TokenChunk got{};
  void* samples[1] = {&got};
  dds_sample_info_t info[1];
  int n = 0;
  for (int i = 0; i < 30 && n <= 0; ++i) {
    dds_waitset_wait(ws, nullptr, 0, DDS_SECS(1));
    n = dds_take(reader, samples, info, 1, 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(n, 1) << "no sample arrived over loopback";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "publisher exit " << status;
  EXPECT_STREQ(got.request_id, "smoke-1");
  EXPECT_EQ(got.sequence_number, 3u);
  EXPECT_TRUE(got.terminal);
  EXPECT_EQ(got.status, ari_STATUS_DONE);
  EXPECT_EQ(std::string(got.text, got.text_len), "Turn left in 200 m.");
  EXPECT_EQ(got.token_ids[1], 4242);
  EXPECT_EQ(dds_delete(pp), DDS_RETCODE_OK);
}

}  // namespace
