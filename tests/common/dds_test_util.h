// DDS helpers for tests: every test owns a domain created from the loopback-only config.
#pragma once

#include <dds/dds.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/test_util.h"

namespace ari::testing {

// The repo's loopback config as a Cyclone config string ("file://...").
inline std::string LoopbackConfigUri() {
  return "file://" + (SourceDir() / "config" / "cyclonedds-lo.xml").string();
}

// The loopback config plus 8 kB non-adaptive writer-history watermarks (the setting under
// which a reliable writer blocks soonest on a stuck reader), written to a temp file named
// after `tag` and this process: its path (docs/reliability.md "A stuck reader").
inline std::filesystem::path WriteSmallWhcConfig(const std::string& tag) {
  std::ifstream lo(SourceDir() / "config" / "cyclonedds-lo.xml");
  std::stringstream ss;
  ss << lo.rdbuf();
  std::string xml = ss.str();
  xml.insert(xml.rfind("</Domain>"),
             "<Internal><Watermarks><WhcHigh>8kB</WhcHigh><WhcHighInit>8kB</WhcHighInit>"
             "<WhcLow>2kB</WhcLow><WhcAdaptive>false</WhcAdaptive></Watermarks></Internal>\n");
  auto path = std::filesystem::temp_directory_path() /
              ("ari_" + tag + "_" + std::to_string(getpid()) + ".xml");
  std::ofstream(path) << xml;
  return path;
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
