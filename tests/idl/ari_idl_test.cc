// Round trip of the DDS types through Cyclone's CDR serializer (idlc-generated descriptors).
#include <dds/dds.h>
#include <dds/ddsi/ddsi_serdata.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ari.h"
#include "tests/common/dds_test_util.h"

namespace {

void CopyText(char* dst, size_t cap, const char* src) {
  std::memset(dst, 0, cap);
  std::strncpy(dst, src, cap - 1);
}

TEST(AriIdl, TypesAreFixedSize) {
  // Shared memory needs fixed-size types: the descriptor must say so.
  EXPECT_NE(ari_Request_desc.m_flagset & DDS_TOPIC_FIXED_SIZE, 0u);
  EXPECT_NE(ari_TokenChunk_desc.m_flagset & DDS_TOPIC_FIXED_SIZE, 0u);
  EXPECT_NE(ari_Cancel_desc.m_flagset & DDS_TOPIC_FIXED_SIZE, 0u);
  EXPECT_NE(ari_NodeStatus_desc.m_flagset & DDS_TOPIC_FIXED_SIZE, 0u);
  // Every sample must fit the iceoryx chunk pools of config/roudi.toml (docs/interface.md):
  // 1 KiB pool for TokenChunk/NodeStatus/Cancel, 16 KiB pool for Request, each including
  // ~100 bytes of iceoryx + Cyclone headers.
  EXPECT_LE(sizeof(ari_TokenChunk) + 128, 1024u);
  EXPECT_LE(sizeof(ari_NodeStatus) + 128, 1024u);
  EXPECT_LE(sizeof(ari_Cancel) + 128, 1024u);
  EXPECT_LE(sizeof(ari_Request) + 128, 16384u);
}

TEST(AriIdl, RequestSerializesAndDeserializes) {
  ari::testing::TestDomain domain;
  ASSERT_TRUE(domain.ok()) << dds_strretcode(domain.rc());
  dds_entity_t pp = dds_create_participant(domain.id(), nullptr, nullptr);
  ASSERT_GT(pp, 0) << dds_strretcode(pp);
  dds_entity_t topic =
      dds_create_topic(pp, &ari_Request_desc, "ari_idl_roundtrip", nullptr, nullptr);
  ASSERT_GT(topic, 0) << dds_strretcode(topic);
  dds_qos_t* qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
  dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, 4);
  dds_entity_t reader = dds_create_reader(pp, topic, qos, nullptr);
  dds_entity_t writer = dds_create_writer(pp, topic, qos, nullptr);
  dds_delete_qos(qos);
  ASSERT_GT(reader, 0);
  ASSERT_GT(writer, 0);

  ari_Request in{};
  CopyText(in.request_id, sizeof in.request_id, "req-42");
  CopyText(in.client_id, sizeof in.client_id, "navigation");
  in.urgency = ari_URGENCY_CRITICAL;
  in.max_tokens = 64;
  in.deadline_ms = 1500;
  in.session_id = 0x1122334455667788ull;
  in.sampling.temperature = 0.25f;
  in.sampling.top_p = 0.9f;
  in.sampling.top_k = 40;
  in.sampling.seed = 7;
  in.n_turns = 1;
  in.turns[0].role = ari_ROLE_SYSTEM;
  CopyText(in.turns[0].text, sizeof in.turns[0].text, "be brief");
  in.turns[0].text_len = 8;
  const char* prompt =
      "Route to the nearest charging station, avoiding tolls. \xC3\xA9\xE2\x82\xAC";
  CopyText(in.prompt, sizeof in.prompt, prompt);
  in.prompt_len = static_cast<uint32_t>(std::strlen(prompt));
  const char* schema = R"({"type":"object","properties":{"answer":{"enum":["yes","no"]}}})";
  in.response_format.kind = ari_RESPONSE_FORMAT_JSON_SCHEMA;
  CopyText(in.response_format.schema_name, sizeof in.response_format.schema_name, "unused");
  CopyText(in.response_format.text, sizeof in.response_format.text, schema);
  in.response_format.text_len = static_cast<uint32_t>(std::strlen(schema));
  ASSERT_EQ(dds_write(writer, &in), DDS_RETCODE_OK);

  // Take the serialized form, check it is CDR of the right size, deserialize explicitly.
  struct ddsi_serdata* sd = nullptr;
  dds_sample_info_t info;
  int n = 0;
  for (int tries = 0; tries < 100 && n <= 0; ++tries) {
    n = dds_takecdr(reader, &sd, 1, &info, DDS_ANY_STATE);
    if (n <= 0) dds_sleepfor(DDS_MSECS(10));
  }
  ASSERT_EQ(n, 1);
  EXPECT_GE(ddsi_serdata_size(sd), sizeof(in.prompt));
  ari_Request out{};
  ASSERT_TRUE(ddsi_serdata_to_sample(sd, &out, nullptr, nullptr));
  ddsi_serdata_unref(sd);

  EXPECT_STREQ(out.request_id, "req-42");
  EXPECT_STREQ(out.client_id, "navigation");
  EXPECT_EQ(out.urgency, ari_URGENCY_CRITICAL);
  EXPECT_EQ(out.max_tokens, 64u);
  EXPECT_EQ(out.deadline_ms, 1500u);
  EXPECT_EQ(out.session_id, in.session_id);
  EXPECT_FLOAT_EQ(out.sampling.temperature, 0.25f);
  EXPECT_EQ(out.sampling.top_k, 40u);
  EXPECT_EQ(out.sampling.seed, 7u);
  EXPECT_EQ(out.n_turns, 1u);
  EXPECT_EQ(out.turns[0].role, ari_ROLE_SYSTEM);
  EXPECT_STREQ(out.turns[0].text, "be brief");
  EXPECT_EQ(out.prompt_len, in.prompt_len);
  EXPECT_EQ(std::memcmp(out.prompt, in.prompt, sizeof in.prompt), 0);
  EXPECT_EQ(out.response_format.kind, ari_RESPONSE_FORMAT_JSON_SCHEMA);
  EXPECT_STREQ(out.response_format.schema_name, "unused");
  EXPECT_EQ(out.response_format.text_len, in.response_format.text_len);
  EXPECT_STREQ(out.response_format.text, schema);
  EXPECT_EQ(dds_delete(pp), DDS_RETCODE_OK);
}

TEST(AriIdl, TokenChunkCarriesTheFormatState) {
  ari::testing::TestDomain domain;
  ASSERT_TRUE(domain.ok()) << dds_strretcode(domain.rc());
  dds_entity_t pp = dds_create_participant(domain.id(), nullptr, nullptr);
  ASSERT_GT(pp, 0) << dds_strretcode(pp);
  dds_entity_t topic =
      dds_create_topic(pp, &ari_TokenChunk_desc, "ari_idl_chunk_roundtrip", nullptr, nullptr);
  ASSERT_GT(topic, 0) << dds_strretcode(topic);
  dds_qos_t* qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
  dds_entity_t reader = dds_create_reader(pp, topic, qos, nullptr);
  dds_entity_t writer = dds_create_writer(pp, topic, qos, nullptr);
  dds_delete_qos(qos);
  ASSERT_GT(reader, 0);
  ASSERT_GT(writer, 0);
  ari_TokenChunk in{};
  CopyText(in.request_id, sizeof in.request_id, "req-43");
  in.terminal = true;
  in.status = ari_STATUS_DONE;
  in.pin_failures = 3;
  in.format_state = ari_FORMAT_INCOMPLETE;
  ASSERT_EQ(dds_write(writer, &in), DDS_RETCODE_OK);
  ari_TokenChunk out{};
  void* samples[1] = {&out};
  dds_sample_info_t info;
  int n = 0;
  for (int tries = 0; tries < 100 && n <= 0; ++tries) {
    n = dds_take(reader, samples, &info, 1, 1);
    if (n <= 0) dds_sleepfor(DDS_MSECS(10));
  }
  ASSERT_EQ(n, 1);
  EXPECT_STREQ(out.request_id, "req-43");
  EXPECT_EQ(out.pin_failures, 3u);
  EXPECT_EQ(out.format_state, ari_FORMAT_INCOMPLETE);
  EXPECT_EQ(dds_delete(pp), DDS_RETCODE_OK);
}

}  // namespace
