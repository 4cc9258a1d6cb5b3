// Security that cannot be half-configured (component/node/security_check.h): identity
// rights (security.critical_identity_certs) without DDS Security make ari-node refuse to
// start with a clear error, whether the Cyclone config has no Security section, an
// incomplete one, or one that does not apply to the node's domain (its participant is
// then not authenticated). Plus the config inspection itself on the shipped configs.
// This process never initialises DDS: every node is an ari-node process.
#include <gtest/gtest.h>

#include <string>

#include "component/node/security_check.h"
#include "tests/component/security_util.h"

namespace ari::testing {
namespace {

using component::InspectCycloneSecurity;
using component::InspectCycloneSecurityXml;

TEST(CycloneSecurityConfig, ShippedPlainConfigsHaveNoSecurity) {
  for (const char* name : {"cyclonedds-lo.xml", "cyclonedds-shm.xml"}) {
    auto c = InspectCycloneSecurity("file://" + (SourceDir() / "config" / name).string());
    ASSERT_TRUE(c.has_value()) << c.error().ToString();
    EXPECT_FALSE(c->has_section) << name;
    EXPECT_FALSE(c->complete()) << name;
  }
}

TEST(CycloneSecurityConfig, SecureTemplateIsCompleteAndNamesTheIdentity) {
  const std::string xml = ReadFile(SourceDir() / "config" / "cyclonedds-secure.xml.in");
  const auto c = InspectCycloneSecurityXml(xml);
  EXPECT_TRUE(c.complete()) << c.missing;
  EXPECT_EQ(c.identity_certificate, "file:@DIR@/@NAME@.pem");
  // Each required element, removed, is named.
  for (const char* tag : {"IdentityCA", "PrivateKey", "Permissions", "Governance"}) {
    std::string cut = xml;
    const size_t a = cut.find(std::string("<") + tag + ">");
    const size_t b = cut.find(std::string("</") + tag + ">");
    ASSERT_NE(a, std::string::npos) << tag;
    cut.erase(a, b + std::string(tag).size() + 3 - a);
    const auto m = InspectCycloneSecurityXml(cut);
    EXPECT_TRUE(m.has_section) << tag;
    EXPECT_EQ(m.missing, tag);
  }
  // A commented-out section is no section.
  EXPECT_FALSE(InspectCycloneSecurityXml("<CycloneDDS><Domain><!-- <Security><Authentication>"
                                         "</Authentication></Security> --></Domain></CycloneDDS>")
                   .has_section);
}

TEST(CycloneSecurityConfig, FilesAndInlineFragmentsTogether) {
  const std::string lo = "file://" + (SourceDir() / "config" / "cyclonedds-lo.xml").string();
  const std::string secure = ReadFile(SourceDir() / "config" / "cyclonedds-secure.xml.in");
  auto c = InspectCycloneSecurity(lo + "," + secure);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_TRUE(c->complete()) << c->missing;
  auto missing = InspectCycloneSecurity("file:///nonexistent/cyclone.xml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("/nonexistent/cyclone.xml"), std::string::npos);
}

class HalfConfigured : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("security_config");
    model_ = Stories260K(dir_);
    if (model_.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
    ARI_REQUIRE_SECURITY_TOOLS();
    ASSERT_TRUE(Generate(dir_, {"--client", "app-crit"}));
    std::ofstream(dir_ / "policy.textproto") << DefaultPolicyWith();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs ari-node with identity rights and this Cyclone config; its exit code (-1: it
  // was still running after 60 s, i.e. it started).
  int RunNode(const std::string& cyclone_config) {
    std::ofstream cfg(dir_ / "node.textproto");
    cfg << "model_path: \"" << model_.string() << "\"\n"
        << "policy_path: \"policy.textproto\"\n"
        << "dds { domain_id: " << TestDomainId() << " cyclone_config: \"" << cyclone_config
        << "\" }\n"
        << "session_slots: 1\nmax_context: 128\nsensor { kind: SENSOR_NONE }\nthreads: 1\n"
        << "security { critical_identity_certs: \"app-crit.pem\" }\n";
    cfg.close();
    NodeProcess node;
    if (!node.Start(dir_ / "node.textproto", dir_ / "node.log")) return -2;
    const int rc = node.Stop(0, std::chrono::seconds(60));  // signal 0: just wait
    log_ = node.Log();
    return rc;
  }

  std::filesystem::path dir_, model_;
  std::string log_;
};

TEST_F(HalfConfigured, IdentityRightsWithoutDdsSecurityRefuseToStart) {
  EXPECT_EQ(RunNode((SourceDir() / "config" / "cyclonedds-lo.xml").string()), 2) << log_;
  EXPECT_NE(log_.find("security.critical_identity_certs grants CRITICAL by authenticated "
                      "identity, which needs DDS Security"),
            std::string::npos)
      << log_;
  EXPECT_NE(log_.find("has no <Security> section"), std::string::npos) << log_;
  EXPECT_EQ(log_.find("ready in"), std::string::npos) << log_;
}

TEST_F(HalfConfigured, IncompleteSecuritySectionRefusesToStart) {
  std::string xml = ReadFile(dir_ / "cyclonedds-ari-node.xml");
  const size_t a = xml.find("<Permissions>");
  const size_t b = xml.find("</Permissions>");
  ASSERT_NE(a, std::string::npos);
  xml.erase(a, b + 14 - a);
  std::ofstream(dir_ / "no-permissions.xml") << xml;
  EXPECT_EQ(RunNode("no-permissions.xml"), 2) << log_;
  EXPECT_NE(log_.find("<Security> section lacks Permissions"), std::string::npos) << log_;
}

// The Security section sits in a <Domain> for another domain id: Cyclone creates the
// node's participant unauthenticated, and the GUID check catches it.
TEST_F(HalfConfigured, SecuritySectionForAnotherDomainRefusesToStart) {
  std::string xml = ReadFile(dir_ / "cyclonedds-ari-node.xml");
  const size_t a = xml.find("<Security>");
  ASSERT_NE(a, std::string::npos);
  xml.insert(a, "</Domain>\n  <Domain Id=\"229\">\n");
  std::ofstream(dir_ / "other-domain.xml") << xml;
  ASSERT_NE(TestDomainId(), 229);
  EXPECT_EQ(RunNode("other-domain.xml"), 2) << log_;
  EXPECT_NE(log_.find("the node's participant is not authenticated"), std::string::npos) << log_;
}

}  // namespace
}  // namespace ari::testing
