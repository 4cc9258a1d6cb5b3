// DDS Security end to end (Cyclone's auth, access-control and crypto plugins from
// Debian's libddsc0debian): scripts/security/gen.sh makes a CA, identities and signed
// governance/permissions in a temp dir; ari-node runs with the secure config and
// security.critical_identity_certs. Every app runs as its own ari-cli process (one DDS
// domain per process and config), so this test process never initialises DDS itself
// except in forked children.
//   - an authorized client is served (CRITICAL too, when its identity may);
//   - the CRITICAL right is DDS access control (partition ari-critical): a client whose
//     permissions lack it is refused by its own Cyclone (its request never leaves it)
//     and served otherwise; a CRITICAL request in the default partition is FORBIDDEN;
//     an identity granted the partition but not listed in critical_identity_certs is
//     FORBIDDEN too (defence in depth); a node without the ari-critical subscribe rule
//     serves no CRITICAL request;
//   - an unauthenticated participant (plain loopback config) never discovers the node;
//   - an authenticated app without publish rights cannot even create the request topic;
//   - only a --critical-client identity may create a Request writer in partition
//     ari-critical (the DDS half of the CRITICAL right, docs/deployment.md "Security");
//   - only a --controller identity may send STANDBY / RESUME (ari/v2/control).
// Plus the identity mapping itself: SHA-256 vectors, DER walking on bad input, and the
// GUID prefix computed from a certificate equals the GUID Cyclone gives a participant
// authenticated with it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "component/client/client.h"
#include "component/client/dds.h"
#include "component/node/identity.h"
#include "tests/component/security_util.h"

namespace ari::testing {
namespace {

using namespace std::chrono_literals;

TEST(Identity, Sha256KnownAnswers) {
  auto h = [](std::string_view s) {
    return Hex(component::Sha256({reinterpret_cast<const uint8_t*>(s.data()), s.size()}));
  };
  EXPECT_EQ(h(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(h("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(h("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(h(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Identity, MalformedCertificatesAreErrorsNotCrashes) {
  EXPECT_FALSE(component::GuidPrefixForCertificate("").has_value());
  EXPECT_FALSE(component::GuidPrefixForCertificate("-----BEGIN CERTIFICATE-----\n!!\n"
                                                   "-----END CERTIFICATE-----\n")
                   .has_value());
  const uint8_t kShort[] = {0x30, 0x82, 0xff, 0xff, 0x30};
  EXPECT_FALSE(component::CertificateSubjectDer(kShort).has_value());
  const uint8_t kNested[] = {0x30, 0x06, 0x30, 0x04, 0x02, 0x01, 0x01, 0x05};
  EXPECT_FALSE(component::CertificateSubjectDer(kNested).has_value());
  // Every truncation of a real certificate fails cleanly.
  const auto dir = TempDir("identity_trunc");
  ARI_REQUIRE_SECURITY_TOOLS();
  ASSERT_TRUE(Generate(dir));
  auto der = component::PemCertificateToDer(ReadFile(dir / "app-crit.pem"));
  ASSERT_TRUE(der.has_value());
  ASSERT_TRUE(component::CertificateSubjectDer(*der).has_value());
  for (size_t n = 0; n + 1 < der->size(); n += 7) {
    auto sub = component::CertificateSubjectDer(std::span<const uint8_t>(der->data(), n));
    if (sub) {
      EXPECT_LE(sub->size(), n);  // a prefix may still hold the whole subject
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Identity, GuidPrefixEqualsTheGuidCycloneGivesTheAuthenticatedParticipant) {
  const auto dir = TempDir("identity_guid");
  ARI_REQUIRE_SECURITY_TOOLS();
  ASSERT_TRUE(Generate(dir));
  auto prefix = component::GuidPrefixForCertificateFile(dir / "app-crit.pem");
  ASSERT_TRUE(prefix.has_value()) << prefix.error().ToString();
  auto other = component::GuidPrefixForCertificateFile(dir / "app-plain.pem");
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(*prefix, *other);
  // A forked child (DDS is never initialised in this process) creates a participant with
  // app-crit's secure config and reports its GUID.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    const std::string uri = "file://" + (dir / "cyclonedds-app-crit.xml").string();
    const dds_entity_t d =
        dds_create_domain(static_cast<dds_domainid_t>(TestDomainId()), uri.c_str());
    const dds_entity_t pp =
        d > 0
            ? dds_create_participant(static_cast<dds_domainid_t>(TestDomainId()), nullptr, nullptr)
            : -1;
    dds_guid_t guid{};
    if (pp < 0 || dds_get_guid(pp, &guid) != DDS_RETCODE_OK) _exit(1);
    if (write(fds[1], guid.v, sizeof guid.v) != static_cast<ssize_t>(sizeof guid.v)) _exit(2);
    dds_delete(d);
    _exit(0);
  }
  close(fds[1]);
  uint8_t guid[16] = {};
  const ssize_t n = read(fds[0], guid, sizeof guid);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "secure participant failed";
  ASSERT_EQ(n, 16);
  EXPECT_TRUE(component::GuidHasPrefix(guid, *prefix))
      << "guid " << Hex(guid) << " prefix " << Hex(*prefix);
  EXPECT_FALSE(component::GuidHasPrefix(guid, *other));
  std::filesystem::remove_all(dir);
}

// In a forked child: as identity `who`, create a Request writer in DDS partition
// `partition` ("" = default). 0 = created, 1 = NOT_ALLOWED_BY_SECURITY (for the topic or
// the writer), 2 = other error.
int CreateRequestWriter(const std::filesystem::path& dir, const std::string& who,
                        const std::string& partition) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    namespace dds = component::dds;
    const std::string uri = "file://" + (dir / ("cyclonedds-" + who + ".xml")).string();
    const auto id = static_cast<dds_domainid_t>(TestDomainId());
    const dds_entity_t d = dds_create_domain(id, uri.c_str());
    const dds_entity_t pp = d > 0 ? dds_create_participant(id, nullptr, nullptr) : -1;
    if (pp < 0) _exit(2);
    const dds_entity_t topic =
        dds_create_topic(pp, dds::TopicDescriptor(dds::TopicKind::kRequest),
                         dds::TopicQos(dds::TopicKind::kRequest).name, nullptr, nullptr);
    dds_qos_t* q = dds_create_qos();
    const char* parts[] = {partition.c_str()};
    if (!partition.empty()) dds_qset_partition(q, 1, parts);
    const dds_entity_t pub = dds_create_publisher(pp, q, nullptr);
    dds_delete_qos(q);
    dds_entity_t w = topic < 0 ? topic : pub;  // no publish right at all: the topic fails
    if (topic > 0 && pub > 0) w = dds_create_writer(pub, topic, nullptr, nullptr);
    dds_delete(d);
    _exit(w > 0 ? 0 : w == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY ? 1 : 2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The CRITICAL right as DDS access control can carry it (docs/deployment.md "Security"):
// only a --critical-client's permissions allow Request writers in partition ari-critical;
// Cyclone refuses the writer to everyone else, whatever the application does.
TEST(CriticalPartition, OnlyGrantedIdentitiesMayPublishInIt) {
  const auto dir = TempDir("critical_partition");
  ARI_REQUIRE_SECURITY_TOOLS();
  ASSERT_TRUE(Generate(dir));
  EXPECT_EQ(CreateRequestWriter(dir, "app-crit", "ari-critical"), 0);
  EXPECT_EQ(CreateRequestWriter(dir, "app-crit", ""), 0);
  EXPECT_EQ(CreateRequestWriter(dir, "app-plain", "ari-critical"), 1);
  EXPECT_EQ(CreateRequestWriter(dir, "app-plain", ""), 0);
  EXPECT_EQ(CreateRequestWriter(dir, "app-reader", ""), 1);
  std::filesystem::remove_all(dir);
}

// In a forked child, as identity `who`: the pre-partition way of asking CRITICAL (a
// Request writer in the default partition, a TokenChunk reader) against a live node.
// Exit code: the terminal's ari_ChunkStatus, 100 + n on a setup failure, 120 = no terminal.
int CriticalFromDefaultPartition(const std::filesystem::path& dir, const std::string& who) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    namespace dds = component::dds;
    dds::DomainOptions o;
    o.domain_id = static_cast<uint32_t>(TestDomainId());
    o.config = "file://" + (dir / ("cyclonedds-" + who + ".xml")).string();
    auto d = dds::Domain::Create(o);
    if (!d) _exit(101);
    auto pp = dds::Participant::Create(*d);
    if (!pp) _exit(102);
    auto rt = dds::Topic::Create(*pp, dds::TopicKind::kRequest);
    auto ct = dds::Topic::Create(*pp, dds::TopicKind::kTokenChunk);
    if (!rt || !ct) _exit(103);
    auto w = dds::Writer::Create(*pp, *rt);
    auto r = dds::Reader::Create(*pp, *ct);
    if (!w || !r) _exit(104);
    for (int i = 0; i < 800; ++i) {
      auto mw = w->MatchedReaders();
      auto mr = r->MatchedWriters();
      if (mw && mr && *mw > 0 && *mr > 0) break;
      std::this_thread::sleep_for(25ms);
    }
    component::AskParams p;
    p.prompt = "Once upon a time";
    p.max_tokens = 4;
    p.urgency = ari_URGENCY_CRITICAL;
    ari_Request req{};
    const std::string id = who + "-raw-1";
    if (!component::EncodeRequest(p, id, who, &req)) _exit(105);
    const dds::InstanceKey key = dds::KeyOfName(id);
    req.key_hi = key.hi;
    req.key_lo = key.lo;
    if (!w->Write(&req)) _exit(106);
    int status = 120;
    for (int i = 0; i < 800 && status == 120; ++i) {
      auto n = r->TakeLoaned(16, [&](const void* sample, const dds_sample_info_t&) {
        const auto* c = static_cast<const ari_TokenChunk*>(sample);
        if (c != nullptr && c->terminal && dds::FixedView(c->request_id) == id) {
          status = dds::RawEnum(c->status);
        }
      });
      if (!n) _exit(107);
      std::this_thread::sleep_for(25ms);
    }
    _exit(status);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class Secure : public ::testing::Test {
 protected:
  // app-crit: --critical-client listed in critical_identity_certs; app-unlisted: granted
  // partition ari-critical by DDS but not listed; app-plain: --client only.
  std::vector<std::string> Identities() const {
    std::vector<std::string> ids = {"--critical-client", "app-crit",  "--critical-client",
                                    "app-unlisted",      "--client",  "app-plain",
                                    "--reader",          "app-reader"};
    if (node_without_critical_) ids.push_back("--node-without-critical");
    if (standby_) ids.insert(ids.end(), {"--controller", "app-ctl"});
    return ids;
  }
  void SetUp() override {
    dir_ = TempDir("security");
    model_ = Stories260K(dir_);
    if (model_.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
    ARI_REQUIRE_SECURITY_TOOLS();
    ASSERT_TRUE(Generate(dir_, Identities()));
    std::ofstream(dir_ / "policy.textproto") << DefaultPolicyWith();
    std::ofstream cfg(dir_ / "node.textproto");
    cfg << "model_path: \"" << model_.string() << "\"\n"
        << "policy_path: \"policy.textproto\"\n"
        << "dds { domain_id: " << TestDomainId()
        << " cyclone_config: \"cyclonedds-ari-node.xml\" liveliness_lease_ms: 1000 }\n"
        << "session_slots: 2\nmax_context: 256\n"
        << "limits { max_max_tokens: 16 client_rate_per_s: 0 }\n"
        << "sensor { kind: SENSOR_NONE }\nstatus_period_ms: 200\nthreads: 1\n"
        << "security { critical_identity_certs: \"app-crit.pem\" }\n";
    if (standby_) cfg << "standby { enabled: true }\n";
    cfg.close();
    ASSERT_TRUE(node_.Start(dir_ / "node.textproto", dir_ / "node.log"));
    // The authorized client sees the node (authentication + discovery done).
    ASSERT_EQ(Cli("app-crit", {"status", "--timeout-ms", "30000"}), 0) << out_ << node_.Log();
  }
  void TearDown() override {
    if (node_.pid() > 0) {
      EXPECT_EQ(node_.Stop(SIGTERM), 0) << node_.Log();
    }
    std::filesystem::remove_all(dir_);
  }
  // ari-cli as identity `who` ("" = no security: plain loopback config).
  int Cli(const std::string& who, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {CliBinary().string(), "--domain",
                                     std::to_string(TestDomainId()), "--config"};
    argv.push_back(who.empty() ? (SourceDir() / "config" / "cyclonedds-lo.xml").string()
                               : (dir_ / ("cyclonedds-" + who + ".xml")).string());
    argv.insert(argv.end(), {"--client", who.empty() ? "anonymous" : who});
    argv.insert(argv.end(), args.begin(), args.end());
    const auto log = dir_ / "cli.log";
    const int rc = RunProcess(argv, log);
    out_ = ReadFile(log);
    return rc;
  }
  int Ask(const std::string& who, const std::string& urgency) {
    int rc = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {  // 3 = node not (yet) discovered
      rc = Cli(who, {"ask", "--urgency", urgency, "--max-tokens", "4", "Once upon a time"});
      if (rc != 3 || who.empty()) break;
    }
    return rc;
  }

  std::filesystem::path dir_, model_;
  NodeProcess node_;
  std::string out_;
  bool node_without_critical_ = false;  // gen.sh --node-without-critical
  bool standby_ = false;                // gen.sh --controller app-ctl, standby.enabled
};

TEST_F(Secure, AuthorizedClientsAreServedAndCriticalNeedsTheRight) {
  EXPECT_EQ(Ask("app-crit", "critical"), 0) << out_ << node_.Log();
  EXPECT_NE(out_.find("(CRITICAL)"), std::string::npos) << out_;
  EXPECT_NE(node_.Log().find("DONE (CRITICAL)"), std::string::npos) << node_.Log();
  EXPECT_EQ(Ask("app-crit", "normal"), 0) << out_;
  // app-plain's own Cyclone refuses its ari-critical writer: the request never leaves
  // the app (the node's log has no trace of app-plain), and ari-cli exits 5 (FORBIDDEN).
  EXPECT_EQ(Ask("app-plain", "critical"), 5) << out_ << node_.Log();
  EXPECT_NE(out_.find("Not Allowed By Security"), std::string::npos) << out_;
  EXPECT_NE(out_.find("rejected"), std::string::npos) << out_;
  EXPECT_EQ(node_.Log().find("app-plain"), std::string::npos) << node_.Log();
  // The same app is served for the other urgencies (and then shows up in the log).
  EXPECT_EQ(Ask("app-plain", "normal"), 0) << out_ << node_.Log();
  EXPECT_NE(node_.Log().find("app-plain"), std::string::npos) << node_.Log();
}

// Defence in depth: DDS grants app-unlisted the partition, the node's GUID check
// (security.critical_identity_certs lists only app-crit) still refuses it.
TEST_F(Secure, PartitionRightWithoutListedIdentityIsForbidden) {
  EXPECT_EQ(Ask("app-unlisted", "critical"), 5) << out_ << node_.Log();
  EXPECT_NE(out_.find("FORBIDDEN"), std::string::npos) << out_;
  EXPECT_NE(out_.find("CRITICAL not allowed for this client identity"), std::string::npos) << out_;
  EXPECT_EQ(Ask("app-unlisted", "high"), 0) << out_ << node_.Log();
}

// Under DDS Security CRITICAL counts only from partition ari-critical: the same listed
// identity asking CRITICAL in the default partition (as clients before the partition
// did) is FORBIDDEN.
TEST_F(Secure, CriticalFromTheDefaultPartitionIsForbidden) {
  EXPECT_EQ(CriticalFromDefaultPartition(dir_, "app-crit"), ari_STATUS_FORBIDDEN) << node_.Log();
  EXPECT_NE(node_.Log().find("CRITICAL requests must come in DDS partition ari-critical"),
            std::string::npos)
      << node_.Log();
  EXPECT_EQ(Ask("app-crit", "critical"), 0) << out_ << node_.Log();  // the partition works
}

// A node whose own permissions lack the ari-critical subscribe rule: it starts, says
// so, serves the other urgencies and no CRITICAL request by either route.
class SecureNodeWithoutCritical : public Secure {
 protected:
  SecureNodeWithoutCritical() { node_without_critical_ = true; }
};

TEST_F(SecureNodeWithoutCritical, ServesNoCriticalRequest) {
  EXPECT_NE(node_.Log().find("no reader in DDS partition ari-critical"), std::string::npos)
      << node_.Log();
  EXPECT_EQ(Cli("app-crit", {"ask", "--urgency", "critical", "--max-tokens", "4", "Once"}), 3)
      << out_;
  EXPECT_NE(out_.find("no request reader in DDS partition ari-critical"), std::string::npos)
      << out_;
  EXPECT_EQ(CriticalFromDefaultPartition(dir_, "app-crit"), ari_STATUS_FORBIDDEN) << node_.Log();
  EXPECT_EQ(node_.Log().find("DONE (CRITICAL)"), std::string::npos) << node_.Log();
  EXPECT_EQ(Ask("app-crit", "normal"), 0) << out_ << node_.Log();
}

// Memory yield on command under DDS Security: only app-ctl (gen.sh --controller) may write
// ari/v2/control. Everyone else's writer is refused by their own Cyclone (DDS access
// control), so the node never sees the command; the controller's STANDBY and RESUME act,
// and a CRITICAL request in standby is still answered (CRITICAL_SERVE, the default).
class SecureStandby : public Secure {
 protected:
  SecureStandby() { standby_ = true; }
};

TEST_F(SecureStandby, OnlyPermittedControllersMayCommandStandby) {
  EXPECT_NE(node_.Log().find("senders checked by DDS Security"), std::string::npos) << node_.Log();
  for (const char* who : {"app-plain", "app-crit"}) {
    EXPECT_EQ(Cli(who, {"control", "standby", "--timeout-ms", "3000"}), 5) << who << out_;
    EXPECT_NE(out_.find("Not Allowed By Security"), std::string::npos) << out_;
  }
  EXPECT_EQ(node_.Log().find("control: STANDBY"), std::string::npos) << node_.Log();
  ASSERT_EQ(Cli("app-crit", {"status"}), 0) << out_;
  EXPECT_NE(out_.find("standby none"), std::string::npos) << out_;

  ASSERT_EQ(Cli("app-ctl", {"control", "standby", "--timeout-ms", "20000"}), 0)
      << out_ << node_.Log();
  EXPECT_NE(out_.find("in standby"), std::string::npos) << out_;
  EXPECT_NE(node_.Log().find("control: STANDBY from app-ctl (seq 1): accepted"), std::string::npos)
      << node_.Log();
  EXPECT_NE(node_.Log().find("standby: released"), std::string::npos) << node_.Log();
  EXPECT_EQ(Ask("app-crit", "critical"), 0) << out_ << node_.Log();
  EXPECT_NE(node_.Log().find("standby: auto-resumed for a CRITICAL request"), std::string::npos)
      << node_.Log();
  ASSERT_EQ(Cli("app-ctl", {"control", "resume", "--timeout-ms", "20000"}), 0)
      << out_ << node_.Log();
  EXPECT_NE(out_.find("node ari-node: none"), std::string::npos) << out_;
  EXPECT_EQ(Ask("app-plain", "normal"), 0) << out_ << node_.Log();
}

TEST_F(Secure, UnauthenticatedParticipantNeverDiscoversTheNode) {
  EXPECT_EQ(Ask("", "normal"), 3) << out_;  // no node within ari-cli's 5 s
  EXPECT_EQ(node_.Log().find("anonymous"), std::string::npos) << node_.Log();
  // The node is still there for authenticated clients.
  EXPECT_EQ(Ask("app-plain", "normal"), 0) << out_;
}

TEST_F(Secure, AuthenticatedAppWithoutPublishRightsCannotCreateTheRequestTopic) {
  EXPECT_EQ(Cli("app-reader", {"status", "--timeout-ms", "3000"}), 9) << out_;
  EXPECT_NE(out_.find("Not Allowed By Security"), std::string::npos) << out_;
}

}  // namespace
}  // namespace ari::testing
