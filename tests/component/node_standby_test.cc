// Memory yield on command through ari-node (a separate process, stories260K pack, loopback
// without DDS Security, so standby { accept_without_security: true }): STANDBY on topic
// ari/v2/control makes the node spill its idle session, release the model's pages and the
// KV arena (its own NodeStatus: standby IN, rss_bytes lower, sessions_spilled), hold a
// NORMAL request, answer a CRITICAL one (auto-resume) and yield again; RESUME answers the
// NORMAL request and the session's next turn is restored from its spill file. With
// CRITICAL_REFUSE the CRITICAL request ends REJECTED. Without DDS Security and without the
// opt-in the node refuses to start.
#include <gtest/gtest.h>

#include <string>

#include "component/client/client.h"
#include "component/client/control.h"
#include "runtime/model/pack_file.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t kMinRssDrop = 1u << 20;  // bytes: the KV of 4 slots is ~2.6 MB

struct Rig {
  fs::path run;
  NodeProcess node;
  std::shared_ptr<dds::Domain> domain;
  std::unique_ptr<component::Client> client;
  std::unique_ptr<component::ControlSender> control;

  bool Start(const fs::path& pack, const std::string& extra) {
    const auto cfg = WriteNodeConfig(run, pack, extra);
    if (!node.Start(cfg, run / "node.log")) return false;
    dds::DomainOptions d;
    d.domain_id = static_cast<uint32_t>(TestDomainId());
    d.config = LoopbackConfigUri();
    auto dom = dds::Domain::Create(d);
    if (!dom) return false;
    domain = *dom;
    component::ClientOptions co;
    co.client_id = "standby-app";
    co.node_timeout = 20s;
    auto c = component::Client::Connect(domain, co);
    if (!c) return false;
    client = std::move(*c);
    auto s = component::ControlSender::Create(domain, "memory-manager");
    if (!s) return false;
    control = std::move(*s);
    return client->WaitForNode(20s).has_value();
  }
  // The node's next NodeStatus with standby == `want` (within 10 s).
  std::optional<ari_NodeStatus> WaitStandby(ari_StandbyState want) {
    auto s = client->WaitForNode(
        10s, [&](const ari_NodeStatus& st) { return dds::RawEnum(st.standby) == want; });
    if (!s) return std::nullopt;
    return *s;
  }
};

struct Answer {
  std::string text, message;
  int status = -1;  // ari_ChunkStatus of the terminal; -1: none
};

Answer Ask(component::Client& c, ari_UrgencyClass u, uint64_t session = 0,
           const std::string& prompt = "Once upon a time") {
  component::AskParams p;
  p.prompt = prompt;
  p.urgency = u;
  p.max_tokens = 24;
  p.session_id = session;
  Answer a;
  auto stream = c.Ask(p);
  if (!stream) return a;
  for (;;) {
    auto ch = stream->Next(30s);
    if (!ch) break;
    a.text.append(ch->text, ch->text_len);
    if (ch->terminal) {
      a.status = dds::RawEnum(ch->status);
      a.message = std::string(dds::FixedView(ch->message));
      break;
    }
  }
  return a;
}

fs::path Pack(const fs::path& dir) {
  const auto plain = Stories260K(dir);
  if (plain.empty()) return {};
  const auto pack = dir / "stories260K.pack.gguf";
  return runtime::WritePack(plain, pack) ? pack : fs::path();
}

TEST(NodeStandby, YieldsMemoryServesCriticalAndResumes) {
  const auto dir = TempDir("node_standby");
  const auto pack = Pack(dir);
  if (pack.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  Rig r;
  r.run = dir / "serve";
  ASSERT_TRUE(r.Start(pack,
                      "standby { enabled: true accept_without_security: true }\n"
                      "parking { spill_idle_sessions: true spill_dir: \"" +
                          (dir / "sessions").string() + "\" }\n"))
      << r.node.Log();
  const Answer first = Ask(*r.client, ari_URGENCY_NORMAL, 77);
  ASSERT_EQ(first.status, ari_STATUS_DONE) << r.node.Log();
  auto before = r.WaitStandby(ari_STANDBY_NONE);
  ASSERT_TRUE(before);

  ASSERT_TRUE(r.control->Send("ari-node", ari_CONTROL_STANDBY, 10s).has_value());
  auto in = r.WaitStandby(ari_STANDBY_IN);
  ASSERT_TRUE(in) << r.node.Log();
  std::printf("[standby] ari-node RSS %llu -> %llu bytes\n",
              static_cast<unsigned long long>(before->rss_bytes),
              static_cast<unsigned long long>(in->rss_bytes));
  EXPECT_EQ(in->standby_entered, 1u);
  EXPECT_EQ(in->sessions_spilled, 1u) << "the idle session went to its spill file";
  EXPECT_LE(in->rss_bytes + kMinRssDrop, before->rss_bytes) << r.node.Log();

  // NORMAL waits for the RESUME; CRITICAL is answered meanwhile.
  component::AskParams held;
  held.prompt = "Lily saw a big red car";
  held.max_tokens = 16;
  auto waiting = r.client->Ask(held);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_FALSE(waiting->Next(1500ms).has_value()) << "a NORMAL request ran in standby";
  const Answer nav = Ask(*r.client, ari_URGENCY_CRITICAL);
  EXPECT_EQ(nav.status, ari_STATUS_DONE) << r.node.Log();
  auto again = r.WaitStandby(ari_STANDBY_IN);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->standby_entered, 2u) << "the node yielded again after the CRITICAL request";

  ASSERT_TRUE(r.control->Send("ari-node", ari_CONTROL_STANDBY, 10s).has_value());  // ignored
  ASSERT_TRUE(r.control->Send("ari-node", ari_CONTROL_RESUME, 10s).has_value());
  int status = -1;
  for (;;) {
    auto ch = waiting->Next(30s);
    if (!ch) break;
    if (ch->terminal) {
      status = dds::RawEnum(ch->status);
      break;
    }
  }
  EXPECT_EQ(status, ari_STATUS_DONE) << r.node.Log();
  auto after = r.WaitStandby(ari_STANDBY_NONE);
  ASSERT_TRUE(after);
  EXPECT_GE(after->control_ignored, 1u);  // the second STANDBY changed nothing
  const Answer second = Ask(*r.client, ari_URGENCY_NORMAL, 77, " and then");
  EXPECT_EQ(second.status, ari_STATUS_DONE);
  auto restored = r.client->WaitForNode(
      10s, [](const ari_NodeStatus& st) { return st.sessions_restored >= 1; });
  EXPECT_TRUE(restored.has_value()) << "session 77 not restored from its spill file\n"
                                    << r.node.Log();
  EXPECT_EQ(r.node.Stop(SIGTERM), 0) << r.node.Log();
  const std::string log = r.node.Log();
  for (const char* line :
       {"standby: reading ari/v2/control", "control: STANDBY from memory-manager",
        "standby: released", "auto-resumed for a CRITICAL request",
        "control: RESUME from memory-manager", "standby: resumed"}) {
    EXPECT_NE(log.find(line), std::string::npos) << line << "\n" << log;
  }
  fs::remove_all(dir);
}

TEST(NodeStandby, CriticalRefusedByPolicyAndNoControlWithoutSecurityOptIn) {
  const auto dir = TempDir("node_standby_refuse");
  const auto pack = Pack(dir);
  if (pack.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  {
    Rig r;
    r.run = dir / "refuse";
    ASSERT_TRUE(r.Start(pack,
                        "standby { enabled: true accept_without_security: true "
                        "critical: CRITICAL_REFUSE }\n"))
        << r.node.Log();
    ASSERT_TRUE(r.control->Send("ari-node", ari_CONTROL_STANDBY, 10s).has_value());
    ASSERT_TRUE(r.WaitStandby(ari_STANDBY_IN)) << r.node.Log();
    const Answer nav = Ask(*r.client, ari_URGENCY_CRITICAL);
    EXPECT_EQ(nav.status, ari_STATUS_REJECTED) << r.node.Log();
    EXPECT_NE(nav.message.find("node in standby"), std::string::npos) << nav.message;
    EXPECT_EQ(r.node.Stop(SIGTERM), 0) << r.node.Log();
  }
  // standby.enabled without DDS Security and without the opt-in: the node does not start.
  const auto cfg = WriteNodeConfig(dir / "open", pack, "standby { enabled: true }\n");
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "open" / "node.log"));
  EXPECT_NE(node.Wait(), 0);
  EXPECT_NE(node.Log().find("standby.enabled without DDS Security"), std::string::npos)
      << node.Log();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
