// Round trip of the protobuf config through binary and text format.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "idl/node_config.pb.h"

namespace {

ari::config::NodeConfig Sample() {
  ari::config::NodeConfig c;
  c.set_model_path("/var/lib/ari/model.pack.gguf");
  c.set_fallback_model_path("/var/lib/ari/small.gguf");
  c.set_policy_path("/etc/ari/policy.textproto");
  c.mutable_dds()->set_domain_id(17);
  c.mutable_dds()->set_cyclone_config("file:///etc/ari/cyclonedds.xml");
  c.mutable_dds()->set_shared_memory(true);
  c.set_session_slots(4);
  c.set_max_context(2048);
  return c;
}

TEST(NodeConfig, BinaryRoundTrip) {
  const auto in = Sample();
  std::string bytes;
  ASSERT_TRUE(in.SerializeToString(&bytes));
  ari::config::NodeConfig out;
  ASSERT_TRUE(out.ParseFromString(bytes));
  EXPECT_EQ(out.SerializeAsString(), bytes);
  EXPECT_EQ(out.dds().domain_id(), 17u);
  EXPECT_EQ(out.model_path(), in.model_path());
  EXPECT_TRUE(out.dds().shared_memory());
}

TEST(NodeConfig, TextFormatRoundTrip) {
  const auto in = Sample();
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(in, &text));
  ari::config::NodeConfig out;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &out));
  EXPECT_EQ(out.SerializeAsString(), in.SerializeAsString());
}

TEST(NodeConfig, MalformedTextIsRejected) {
  ari::config::NodeConfig out;
  google::protobuf::LogSilencer silence;
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("session_slots: -3", &out));
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("no_such_field: 1", &out));
}

}  // namespace
