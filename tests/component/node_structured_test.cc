// Structured output over DDS, end to end (multi-process, loopback, the test's own domain):
// an ari-node with the shipped schemas registered answers constrained requests; the
// streamed text is checked by tests/grammar/json_validator.h (nlohmann-json; no code shared
// with the mask builder). Registered and inline schemas end DONE + FORMAT_COMPLETE and
// validate; a small max_tokens ends FORMAT_INCOMPLETE; bad formats are INVALID with the
// position; a constrained NORMAL request preempted by a constrained CRITICAL one still
// completes and validates; a full constraint pool answers BUSY; a bad registered file keeps
// the node from starting.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"
#include "tests/grammar/json_validator.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using component::AskParams;
using component::Client;
using component::ClientOptions;
using component::StreamSummary;
using namespace std::chrono_literals;

constexpr const char* kShipped[] = {"navigation_destination", "climate_setting", "media_command",
                                    "yes_no_confirmation"};

std::string ReadText(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SchemaText(const std::string& name) {
  return ReadText(SourceDir() / "config" / "schemas" / (name + ".json"));
}

// A free string of 120..160 characters: a long constrained answer (~60+ tokens).
const char* kLongSchema =
    R"({"type":"object","properties":{"story":{"type":"string","minLength":120,)"
    R"("maxLength":160}},"required":["story"]})";

// The registry of the shipped schemas (absolute paths) and a pool of 2 constraints.
std::string RegistryConfig() {
  std::string s = "structured_output {\n";
  for (const char* n : kShipped) {
    s += "  schemas { name: \"" + std::string(n) + "\" path: \"" +
         (SourceDir() / "config" / "schemas" / (std::string(n) + ".json")).string() + "\" }\n";
  }
  return s + "  max_constrained_in_flight: 2\n}\n";
}

std::filesystem::path g_dir, g_model;
NodeProcess* g_node = nullptr;
std::shared_ptr<dds::Domain> g_domain;

class NodeStructured : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_dir = TempDir("node_structured");
    g_model = Stories260KPack(g_dir);
    if (g_model.empty()) return;
    // A context of 1024 and answers up to 480 tokens: stories260K spells a navigation
    // destination with its waypoints in up to ~300 tokens of one or two characters.
    auto cfg = WriteNodeConfig(g_dir, g_model, RegistryConfig());
    std::string text = ReadText(cfg);
    for (auto [from, to] :
         {std::pair<std::string, std::string>{"max_context: 512", "max_context: 1024"},
          {"max_max_tokens: 256", "max_max_tokens: 480"}}) {
      const size_t pos = text.find(from);
      ASSERT_NE(pos, std::string::npos) << from;
      text.replace(pos, from.size(), to);
    }
    std::ofstream(cfg) << text;
    g_node = new NodeProcess();
    ASSERT_TRUE(g_node->Start(cfg, g_dir / "node.log"));
    dds::DomainOptions d;
    d.domain_id = static_cast<uint32_t>(TestDomainId());
    d.config = LoopbackConfigUri();
    auto dom = dds::Domain::Create(d);
    ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
    g_domain = *dom;
  }
  static void TearDownTestSuite() {
    if (g_node) {
      EXPECT_EQ(g_node->Stop(SIGTERM), 0) << g_node->Log();
      delete g_node;
      g_node = nullptr;
    }
    g_domain.reset();
    std::filesystem::remove_all(g_dir);
  }
  void SetUp() override {
    if (g_model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  }
  std::unique_ptr<Client> Connect(const std::string& name) {
    ClientOptions o;
    o.client_id = name;
    o.node_timeout = 20s;
    auto c = Client::Connect(g_domain, o);
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    if (!c) return nullptr;
    auto s = (*c)->WaitForNode(20s);
    EXPECT_TRUE(s.has_value()) << g_node->Log();
    return std::move(*c);
  }
  // Asks and waits for the summary (an error for a non-DONE terminal).
  static component::Result<StreamSummary> Run(Client& client, const AskParams& p) {
    auto s = client.Ask(p);
    if (!s) return std::unexpected(s.error());
    return s->Wait({}, 60s);
  }
};

AskParams Constrained(const std::string& prompt, uint32_t max_tokens) {
  AskParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  return p;
}

TEST_F(NodeStructured, RegisteredSchemasEndCompleteAndValidate) {
  auto client = Connect("registered");
  ASSERT_TRUE(client);
  for (const char* name : kShipped) {
    for (float temp : {0.0f, 1.0f}) {
      AskParams p = Constrained("Take me to the airport", 480);
      p.schema_name = name;
      p.sampling.temperature = temp;
      p.sampling.seed = 11;
      auto sum = Run(*client, p);
      ASSERT_TRUE(sum.has_value()) << name << ": " << sum.error().ToString();
      EXPECT_EQ(sum->status, ari_STATUS_DONE);
      EXPECT_EQ(sum->format_state, ari_FORMAT_COMPLETE) << name << ": " << sum->message;
      EXPECT_EQ(sum->gaps, 0u);
      EXPECT_EQ(ValidateJson(sum->text, SchemaText(name)), "")
          << name << " at " << temp << ": " << sum->text;
    }
  }
}

TEST_F(NodeStructured, InlineSchemaAndGrammarEndComplete) {
  auto client = Connect("inline");
  ASSERT_TRUE(client);
  const std::string schema =
      R"({"type":"object","properties":{"zone":{"enum":["driver","rear"]},)"
      R"("fan_level":{"type":"integer","minimum":0,"maximum":7},"ac":{"type":"boolean"}},)"
      R"("required":["zone","fan_level","ac"]})";
  AskParams p = Constrained("Cool the rear seats", 120);
  p.json_schema = schema;
  p.sampling.temperature = 0.8f;
  p.sampling.seed = 5;
  auto sum = Run(*client, p);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->format_state, ari_FORMAT_COMPLETE) << sum->message;
  EXPECT_EQ(ValidateJson(sum->text, schema), "") << sum->text;

  AskParams g = Constrained("Once upon a time", 60);
  g.grammar = "root ::= \"Lily \" [a-z]{2,12} \".\"";
  sum = Run(*client, g);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->format_state, ari_FORMAT_COMPLETE) << sum->message;
  EXPECT_TRUE(sum->text.starts_with("Lily ")) << sum->text;
  EXPECT_TRUE(sum->text.ends_with(".")) << sum->text;
}

TEST_F(NodeStructured, SmallMaxTokensEndsIncomplete) {
  auto client = Connect("short");
  ASSERT_TRUE(client);
  AskParams p = Constrained("Take me to the airport", 3);
  p.schema_name = "navigation_destination";
  auto sum = Run(*client, p);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->status, ari_STATUS_DONE);
  EXPECT_EQ(sum->format_state, ari_FORMAT_INCOMPLETE);
  EXPECT_NE(sum->message.find("structured output incomplete"), std::string::npos) << sum->message;
  EXPECT_NE(ValidateJson(sum->text, SchemaText("navigation_destination")), "") << sum->text;
  // A free-text request is not a constrained one: FORMAT_NONE.
  sum = Run(*client, Constrained("Once upon a time", 4));
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->format_state, ari_FORMAT_NONE);
}

TEST_F(NodeStructured, BadFormatsAreInvalidWithThePosition) {
  auto client = Connect("bad");
  ASSERT_TRUE(client);
  struct Case {
    std::string schema_name, json_schema, grammar, expect;
  };
  const Case cases[] = {
      {"no_such_schema", "", "", "unknown schema name 'no_such_schema'"},
      {"", "{\"type\": \"object\", \"properties\": }", "", "line 1, column"},
      {"", R"({"type":"string","pattern":"^a"})", "", "at '/pattern'"},
      {"", "", "root ::= \"(\" root \")\"", "empty language"},
      {"", "", "root ::= \"a\"\nx ::= [b-a]", "line 2, column"},
  };
  for (const Case& c : cases) {
    AskParams p = Constrained("Take me home", 16);
    p.schema_name = c.schema_name;
    p.json_schema = c.json_schema;
    p.grammar = c.grammar;
    auto sum = Run(*client, p);
    ASSERT_FALSE(sum.has_value()) << c.expect;
    EXPECT_EQ(sum.error().status, ari_STATUS_INVALID) << sum.error().ToString();
    EXPECT_NE(sum.error().message.find(c.expect), std::string::npos) << sum.error().ToString();
  }
}

TEST_F(NodeStructured, PreemptedConstrainedRequestStillValidates) {
  auto normal = Connect("normal");
  auto critical = Connect("critical");
  ASSERT_TRUE(normal && critical);
  AskParams n = Constrained("Once upon a time, there was a little dog", 240);
  n.json_schema = kLongSchema;
  n.sampling.temperature = 1.0f;
  n.sampling.seed = 3;
  auto ns = normal->Ask(n);
  ASSERT_TRUE(ns.has_value()) << ns.error().ToString();
  auto first = ns->Next(30s);  // the NORMAL request is running
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  std::string normal_text(first->text, first->text_len);
  AskParams c = Constrained("Take me to the airport", 480);
  c.schema_name = "navigation_destination";
  c.urgency = ari_URGENCY_CRITICAL;
  auto crit = Run(*critical, c);
  ASSERT_TRUE(crit.has_value()) << crit.error().ToString();
  // The CRITICAL answer was done while the NORMAL one had not ended: it ran in between.
  EXPECT_FALSE(ns->finished()) << "the NORMAL request ended before the CRITICAL one";
  auto rest = ns->Wait({}, 60s);
  ASSERT_TRUE(rest.has_value()) << rest.error().ToString();
  normal_text += rest->text;
  EXPECT_EQ(crit->format_state, ari_FORMAT_COMPLETE) << crit->message;
  EXPECT_EQ(ValidateJson(crit->text, SchemaText("navigation_destination")), "") << crit->text;
  EXPECT_EQ(rest->format_state, ari_FORMAT_COMPLETE) << rest->message;
  EXPECT_EQ(rest->gaps, 0u);
  EXPECT_EQ(ValidateJson(normal_text, kLongSchema), "") << normal_text;
}

TEST_F(NodeStructured, FullConstraintPoolAnswersBusy) {
  auto client = Connect("pool");
  ASSERT_TRUE(client);
  AskParams l = Constrained("Once upon a time", 240);
  l.json_schema = kLongSchema;
  l.urgency = ari_URGENCY_BACKGROUND;
  l.sampling.temperature = 1.0f;
  auto a = client->Ask(l);
  auto b = client->Ask(l);
  ASSERT_TRUE(a.has_value() && b.has_value());
  AskParams third = Constrained("Take me home", 32);
  third.schema_name = "yes_no_confirmation";
  auto sum = Run(*client, third);
  ASSERT_FALSE(sum.has_value());
  EXPECT_EQ(sum.error().status, ari_STATUS_BUSY) << sum.error().ToString();
  EXPECT_NE(sum.error().message.find("max_constrained_in_flight"), std::string::npos)
      << sum.error().ToString();
  // Free text is not limited by the pool.
  auto free_text = Run(*client, Constrained("Once upon a time", 4));
  ASSERT_TRUE(free_text.has_value()) << free_text.error().ToString();
  // The two end (their constraints go back to the pool): a constrained request is admitted.
  ASSERT_TRUE(client->Cancel(a->request_id()).has_value());
  ASSERT_TRUE(client->Cancel(b->request_id()).has_value());
  auto ea = a->Wait({}, 60s);
  auto eb = b->Wait({}, 60s);
  sum = Run(*client, third);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->format_state, ari_FORMAT_COMPLETE) << sum->message;
}

// ari-cli ask --schema-name / --schema FILE / --grammar FILE: the answer on stdout, the
// format state on stderr's last line; a bad inline schema exits 5 (INVALID).
TEST_F(NodeStructured, AriCliSendsEachFormKind) {
  const auto bin = NodeBinary().parent_path() / "ari-cli";
  auto cli = [&](const std::string& args, std::string* out, std::string* err) {
    const std::string cmd = bin.string() + " --domain " + std::to_string(TestDomainId()) +
                            " --config " + (SourceDir() / "config" / "cyclonedds-lo.xml").string() +
                            " --client cli ask " + args + " >" + (g_dir / "cli.out").string() +
                            " 2>" + (g_dir / "cli.err").string();
    const int rc = std::system(cmd.c_str());
    *out = ReadText(g_dir / "cli.out");
    *err = ReadText(g_dir / "cli.err");
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  std::string out, err;
  EXPECT_EQ(cli("--max-tokens 64 --schema-name yes_no_confirmation 'Shall I?'", &out, &err), 0)
      << err;
  EXPECT_NE(err.find("structured output: FORMAT_COMPLETE"), std::string::npos) << err;
  EXPECT_EQ(ValidateJson(out, SchemaText("yes_no_confirmation")), "") << out;

  const auto schema = SourceDir() / "config" / "schemas" / "climate_setting.json";
  EXPECT_EQ(cli("--max-tokens 400 --schema " + schema.string() + " 'Warm the car'", &out, &err), 0)
      << err;
  EXPECT_NE(err.find("structured output: FORMAT_COMPLETE"), std::string::npos) << err;
  EXPECT_EQ(ValidateJson(out, ReadText(schema)), "") << out;

  std::ofstream(g_dir / "short.gbnf") << "root ::= \"Tom \" [a-z]{3,9}\n";
  EXPECT_EQ(
      cli("--max-tokens 2 --grammar " + (g_dir / "short.gbnf").string() + " 'Once'", &out, &err), 0)
      << err;
  EXPECT_NE(err.find("structured output: FORMAT_INCOMPLETE"), std::string::npos) << err;

  std::ofstream(g_dir / "bad.json") << "{\"type\": \"nope\"}";
  EXPECT_EQ(cli("--schema " + (g_dir / "bad.json").string() + " 'x'", &out, &err), 5) << err;
  EXPECT_NE(err.find("INVALID"), std::string::npos) << err;
}

TEST(NodeStructuredConfig, BadRegisteredSchemaKeepsTheNodeFromStarting) {
  const auto dir = TempDir("node_structured_bad");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  std::ofstream(dir / "bad.json") << "{\n  \"type\": \"object\",\n  \"required\": [1]\n}\n";
  auto cfg = WriteNodeConfig(
      dir, model, "structured_output { schemas { name: \"bad\" path: \"bad.json\" } }\n");
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "node.log"));
  // It exits on its own once it has compiled the registry; wait for its message first (a
  // signal sent earlier would be what ended it).
  for (int i = 0; i < 200 && node.Log().find("structured_output") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(200ms);
  const int rc = node.Stop(SIGTERM, 10s);
  const std::string log = node.Log();
  EXPECT_EQ(rc, 2) << log;
  EXPECT_NE(log.find("schema 'bad'"), std::string::npos) << log;
  EXPECT_NE(log.find("bad.json"), std::string::npos) << log;
  EXPECT_NE(log.find("required"), std::string::npos) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
