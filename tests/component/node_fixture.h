// Fixture base of the in-process node tests: a temp dir holding stories260K (the test
// skips when the model is absent) and a loopback DDS domain with the test's own id.
// A derived SetUp() calls NodeTestBase::SetUp() first and returns if IsSkipped() or
// HasFatalFailure(); a derived TearDown() ends with NodeTestBase::TearDown().
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {

class NodeTestBase : public ::testing::Test {
 protected:
  explicit NodeTestBase(std::string name) : name_(std::move(name)) {}

  void SetUp() override {
    dir_ = TempDir(name_);
    model_ = Stories260K(dir_);
    if (model_.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
    component::dds::DomainOptions d;
    d.domain_id = static_cast<uint32_t>(TestDomainId());
    d.config = LoopbackConfigUri();
    auto dom = component::dds::Domain::Create(d);
    ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
    domain_ = *dom;
  }
  void TearDown() override {
    domain_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_, model_;
  std::shared_ptr<component::dds::Domain> domain_;

 private:
  std::string name_;
};

}  // namespace ari::testing
