// Shared helpers of the sim tests: the shipped default policy and text-format drive logs.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "qos/policy.h"
#include "sim/cost_model.h"
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

// prefill 100 tok/s, decode 10 tok/s, no overheads, 2 threads; W4A8 twice as fast.
inline CostModel SimpleCost() {
  CostModel c;
  c.source = "test";
  c.layers = 10;
  c.best_isa = "avx2";
  c.isa_speed = DefaultIsaSpeed();
  c.thread_scaling = 1.0;
  c.efficiency_core_speed = 0.5;
  CostEntry e;
  e.threads = 2;
  e.isa = "avx2";
  e.precision = runtime::Precision::kW8A16;
  e.prefill_tps = 100;
  e.decode_tps = 10;
  c.entries.push_back(e);
  e.precision = runtime::Precision::kW4A8;
  e.prefill_tps = 200;
  e.decode_tps = 20;
  c.entries.push_back(e);
  return c;
}

}  // namespace ari::sim::testing
