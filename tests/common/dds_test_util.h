// DDS helpers for tests: every test owns a domain created from the loopback-only config.
#pragma once

#include <dds/dds.h>

#include <string>

#include "tests/common/test_util.h"

namespace ari::testing {

// The repo's loopback config as a Cyclone config string ("file://...").
inline std::string LoopbackConfigUri() {
  return "file://" + (SourceDir() / "config" / "cyclonedds-lo.xml").string();
}

// RAII: creates this test's DDS domain with the loopback config (interface lo, no
// multicast, peer 127.0.0.1) and deletes it (and everything in it) at scope exit.
class TestDomain {
 public:
  explicit TestDomain(int domain_id = TestDomainId()) : id_(domain_id) {
    handle_ = dds_create_domain(static_cast<dds_domainid_t>(id_), LoopbackConfigUri().c_str());
  }
  ~TestDomain() {
    if (handle_ > 0) dds_delete(handle_);
  }
  TestDomain(const TestDomain&) = delete;
  TestDomain& operator=(const TestDomain&) = delete;

  bool ok() const { return handle_ > 0; }
  dds_return_t rc() const { return handle_; }
  dds_domainid_t id() const { return static_cast<dds_domainid_t>(id_); }

 private:
  int id_;
  dds_entity_t handle_ = 0;
};

}  // namespace ari::testing
