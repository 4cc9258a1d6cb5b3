// Shared helpers of the sim tests: the shipped default policy and text-format drive logs.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "qos/policy.h"
#include "sim/drive_log.h"
#include "tests/common/test_util.h"

namespace ari::sim::testing {

// config/policy_default.textproto (a test failure, and an empty policy, if it does not load).
inline qos::Policy DefaultPolicy() {
  auto p = qos::LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().ToString());
  return p ? *p : qos::Policy{};
}

// A drive log in protobuf text format (a test failure, and an empty log, if it does not parse).
inline dl::DriveLog ParseLog(std::string_view text) {
  auto log = ParseDriveLogText(text, "test");
  EXPECT_TRUE(log.has_value()) << (log ? "" : log.error().message);
  return log ? *log : dl::DriveLog{};
}

}  // namespace ari::sim::testing
