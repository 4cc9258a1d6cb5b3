// The DDS wrappers: config handling, shared-memory fallback, QoS table, errors, and the
// client's request encoding (no node needed).
#include "component/client/dds.h"

#include <gtest/gtest.h>

#include <cstring>

#include "component/client/client.h"
#include "tests/common/dds_test_util.h"

namespace {

namespace dds = ari::component::dds;
using ari::component::AskParams;
using ari::component::EncodeRequest;
using ari::component::ErrorCode;

AskParams Prompt(std::string text) {
  AskParams p;
  p.prompt = std::move(text);
  return p;
}

dds::DomainOptions Loopback() {
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(ari::testing::TestDomainId());
  d.config = ari::testing::LoopbackConfigUri();
  return d;
}

TEST(DdsWrappers, DetectsSharedMemoryInConfig) {
  EXPECT_FALSE(dds::ConfigEnablesSharedMemory("<CycloneDDS><Domain/></CycloneDDS>"));
  EXPECT_TRUE(dds::ConfigEnablesSharedMemory(
      "<Domain><SharedMemory>\n  <Enable> true </Enable></SharedMemory></Domain>"));
  EXPECT_FALSE(
      dds::ConfigEnablesSharedMemory("<SharedMemory><Enable>false</Enable></SharedMemory>"));
  EXPECT_FALSE(dds::ConfigEnablesSharedMemory(
      "<!-- <SharedMemory><Enable>true</Enable></SharedMemory> --><Domain/>"));
}

TEST(DdsWrappers, LoopbackDomainHasNoSharedMemory) {
  auto d = dds::Domain::Create(Loopback());
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_FALSE((*d)->shared_memory_requested());
  EXPECT_FALSE((*d)->shared_memory_enabled());
  EXPECT_NE((*d)->shared_memory_note().find("not enabled"), std::string::npos);
  // A second domain with the same id in one process is refused with a clear error.
  auto again = dds::Domain::Create(Loopback());
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kDds);
  EXPECT_NE(again.error().dds_rc, 0);
  EXPECT_NE(again.error().message.find("already exist"), std::string::npos);
}

TEST(DdsWrappers, SharedMemoryConfigFallsBackWithoutRoudi) {
  std::string why;
  if (dds::RoudiReachable(&why)) GTEST_SKIP() << "an iox-roudi is running on this machine";
  auto opts = Loopback();
  opts.config = dds::ShippedConfigUri("cyclonedds-shm.xml");
  auto d = dds::Domain::Create(opts);  // must not block waiting for RouDi
  ASSERT_TRUE(d) << d.error().ToString();
  EXPECT_TRUE((*d)->shared_memory_requested());
  EXPECT_FALSE((*d)->shared_memory_enabled());
  EXPECT_NE((*d)->shared_memory_note().find("iox-roudi is not reachable"), std::string::npos)
      << (*d)->shared_memory_note();
  auto pp = dds::Participant::Create(*d);
  ASSERT_TRUE(pp);
  auto topic = dds::Topic::Create(*pp, dds::TopicKind::kTokenChunk);
  ASSERT_TRUE(topic) << topic.error().ToString();
  auto w = dds::Writer::Create(*pp, *topic);
  ASSERT_TRUE(w);
  EXPECT_FALSE(w->shared_memory());
  EXPECT_FALSE(w->loan_available());
  ari_TokenChunk c{};
  dds::CopyFixed("r-1", c.request_id);
  ASSERT_TRUE(w->Write(&c));
  EXPECT_EQ(w->stats().writes, 1u);
  EXPECT_EQ(w->stats().loaned_writes, 0u);
}

// NodeStatus / SimEnvironment keys (docs/interface.md "Keys"): FNV-1a 64 from two bases.
// Expected values computed independently (FNV-1a 64 of "a" is the published
// 0xaf63dc4c8601ec8c).
TEST(DdsWrappers, KeyOfNameIsTwoFnv1aHashes) {
  EXPECT_EQ(dds::KeyOfName("a").hi, 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(dds::KeyOfName("a").lo, 0x789e3e398d3ff5ffull);
  EXPECT_EQ(dds::KeyOfName("ari-node").hi, 0x396a654262b62948ull);
  EXPECT_EQ(dds::KeyOfName("ari-node").lo, 0xa809e3e3553511bdull);
  EXPECT_EQ(dds::KeyOfName("").hi, 0xcbf29ce484222325ull);
  EXPECT_NE(dds::KeyOfName("node-1").hi, dds::KeyOfName("node-2").hi);
}

TEST(DdsWrappers, BadConfigAndDomainAreErrors) {
  auto opts = Loopback();
  opts.config = "file:///nonexistent/cyclone.xml";
  auto d = dds::Domain::Create(opts);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kConfig);
  opts = Loopback();
  opts.domain_id = 231;
  EXPECT_FALSE(dds::Domain::Create(opts));
}

TEST(DdsWrappers, QosTable) {
  using dds::TopicKind;
  for (TopicKind k :
       {TopicKind::kRequest, TopicKind::kTokenChunk, TopicKind::kCancel, TopicKind::kNodeStatus}) {
    const auto& spec = dds::TopicQos(k);
    EXPECT_GE(spec.reader_depth, 1);
    EXPECT_GE(spec.writer_depth, 1);
    // Fixed-size types are a precondition of the shared-memory path.
    EXPECT_NE(dds::TopicDescriptor(k)->m_flagset & DDS_TOPIC_FIXED_SIZE, 0u) << spec.name;
    dds::Qos wq = dds::WriterQos(k, std::chrono::seconds(1));
    dds_reliability_kind_t rel = DDS_RELIABILITY_BEST_EFFORT;
    dds_duration_t block = 0;
    ASSERT_TRUE(dds_qget_reliability(wq.get(), &rel, &block));
    EXPECT_EQ(rel, DDS_RELIABILITY_RELIABLE);
    dds_duration_t deadline = 0;
    EXPECT_FALSE(dds_qget_deadline(wq.get(), &deadline)) << "no deadline QoS (disables shm)";
    dds_durability_kind_t dur = DDS_DURABILITY_VOLATILE;
    ASSERT_TRUE(dds_qget_durability(wq.get(), &dur));
    EXPECT_EQ(dur, k == TopicKind::kNodeStatus ? DDS_DURABILITY_TRANSIENT_LOCAL
                                               : DDS_DURABILITY_VOLATILE);
    dds_liveliness_kind_t lk = DDS_LIVELINESS_MANUAL_BY_TOPIC;
    dds_duration_t lease = 0;
    ASSERT_TRUE(dds_qget_liveliness(wq.get(), &lk, &lease));
    EXPECT_EQ(lk, DDS_LIVELINESS_AUTOMATIC);
    EXPECT_EQ(lease == DDS_INFINITY, k != TopicKind::kNodeStatus);
  }
}

TEST(DdsWrappers, WaitSetTimesOutAndGuardWakesIt) {
  auto d = dds::Domain::Create(Loopback());
  ASSERT_TRUE(d);
  auto pp = dds::Participant::Create(*d);
  ASSERT_TRUE(pp);
  auto ws = dds::WaitSet::Create(*pp);
  auto g = dds::GuardCondition::Create(*pp);
  ASSERT_TRUE(ws && g);
  ASSERT_TRUE(ws->Attach(g->handle(), 42));
  dds_attach_t out[2];
  auto n = ws->Wait(out, std::chrono::milliseconds(1));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  ASSERT_TRUE(g->Trigger());
  n = ws->Wait(out, std::chrono::seconds(5));
  ASSERT_TRUE(n);
  ASSERT_EQ(*n, 1u);
  EXPECT_EQ(out[0], 42);
  auto taken = g->TakeTriggered();
  ASSERT_TRUE(taken);
  EXPECT_TRUE(*taken);
  // Attaching a deleted entity is a DDS error, not a crash.
  auto bad = ws->Attach(123456, 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kDds);
}

TEST(EncodeRequest, PromptTurnsAndLimits) {
  ari_Request r;
  AskParams p;
  p.prompt = "hello";
  p.urgency = ari_URGENCY_CRITICAL;
  p.max_tokens = 9;
  p.deadline_ms = 250;
  p.session_id = 3;
  ASSERT_TRUE(EncodeRequest(p, "c-1-abc", "c", &r));
  EXPECT_EQ(r.prompt_len, 5u);
  EXPECT_EQ(std::string(r.prompt, r.prompt_len), "hello");
  EXPECT_EQ(r.urgency, ari_URGENCY_CRITICAL);
  EXPECT_EQ(r.deadline_ms, 250u);
  EXPECT_EQ(r.n_turns, 0u);

  AskParams t;
  t.turns = {{ari_ROLE_SYSTEM, "sys"}, {ari_ROLE_USER, "hi"}};
  ASSERT_TRUE(EncodeRequest(t, "c-2-abc", "c", &r));
  EXPECT_EQ(r.prompt_len, 0u);
  ASSERT_EQ(r.n_turns, 2u);
  EXPECT_EQ(r.turns[0].role, ari_ROLE_SYSTEM);
  EXPECT_EQ(std::string(r.turns[1].text, r.turns[1].text_len), "hi");

  // Exactly at the limit is fine; one byte more is not.
  AskParams full = Prompt(std::string(ari_kPromptLen, 'a'));
  EXPECT_TRUE(EncodeRequest(full, "c-3", "c", &r));
  full.prompt.push_back('a');
  auto e = EncodeRequest(full, "c-3", "c", &r);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);

  EXPECT_FALSE(EncodeRequest(AskParams{}, "c-4", "c", &r));  // neither prompt nor turns
  AskParams many;
  many.turns = std::vector<ari::component::Turn>(ari_kMaxTurns + 1, {ari_ROLE_USER, "y"});
  EXPECT_FALSE(EncodeRequest(many, "c-6", "c", &r));
  many.turns.pop_back();
  EXPECT_TRUE(EncodeRequest(many, "c-6", "c", &r));
  many.prompt = "z";  // the prompt is one more turn
  EXPECT_FALSE(EncodeRequest(many, "c-6", "c", &r));
  AskParams empty_turn;
  empty_turn.turns = {{ari_ROLE_USER, ""}};
  EXPECT_FALSE(EncodeRequest(empty_turn, "c-6", "c", &r));
  AskParams urg = Prompt("x");
  urg.urgency = static_cast<ari_UrgencyClass>(9);
  EXPECT_FALSE(EncodeRequest(urg, "c-7", "c", &r));
  AskParams zero = Prompt("x");
  zero.max_tokens = 0;
  EXPECT_FALSE(EncodeRequest(zero, "c-8", "c", &r));
  EXPECT_FALSE(EncodeRequest(Prompt("x"), std::string(ari_kRequestIdLen, 'r'), "c", &r));
}

// Chat form: system, turns, then the prompt as the last user turn.
TEST(EncodeRequest, SystemTurnsAndPromptMakeChatForm) {
  ari_Request r;
  AskParams p = Prompt("Where is the next charger?");
  p.system = "Be brief.";
  p.turns = {{ari_ROLE_USER, "Hi"}, {ari_ROLE_ASSISTANT, "Hello."}};
  ASSERT_TRUE(EncodeRequest(p, "c-9", "c", &r));
  EXPECT_EQ(r.prompt_len, 0u);
  ASSERT_EQ(r.n_turns, 4u);
  const ari_TurnRole roles[] = {ari_ROLE_SYSTEM, ari_ROLE_USER, ari_ROLE_ASSISTANT, ari_ROLE_USER};
  const char* texts[] = {"Be brief.", "Hi", "Hello.", "Where is the next charger?"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.turns[i].role, roles[i]);
    EXPECT_EQ(std::string(r.turns[i].text, r.turns[i].text_len), texts[i]);
  }
  AskParams sys_only = Prompt("q");
  sys_only.system = "s";
  ASSERT_TRUE(EncodeRequest(sys_only, "c-10", "c", &r));
  EXPECT_EQ(r.n_turns, 2u);
  EXPECT_TRUE(ari::component::ChatTurns(Prompt("plain")).empty());
}

// Structured output: one of schema name / inline JSON schema / inline grammar.
TEST(EncodeRequest, ResponseFormat) {
  ari_Request r;
  ASSERT_TRUE(EncodeRequest(Prompt("free"), "c-11", "c", &r));
  EXPECT_EQ(r.response_format.kind, ari_RESPONSE_FORMAT_NONE);
  AskParams named = Prompt("Take me home");
  named.schema_name = "navigation_destination";
  ASSERT_TRUE(EncodeRequest(named, "c-12", "c", &r));
  EXPECT_EQ(r.response_format.kind, ari_RESPONSE_FORMAT_SCHEMA_NAME);
  EXPECT_STREQ(r.response_format.schema_name, "navigation_destination");
  EXPECT_EQ(r.response_format.text_len, 0u);
  AskParams schema = Prompt("q");
  schema.json_schema = R"({"type":"boolean"})";
  ASSERT_TRUE(EncodeRequest(schema, "c-13", "c", &r));
  EXPECT_EQ(r.response_format.kind, ari_RESPONSE_FORMAT_JSON_SCHEMA);
  EXPECT_EQ(std::string(r.response_format.text, r.response_format.text_len), schema.json_schema);
  AskParams grammar = Prompt("q");
  grammar.grammar = std::string(ari_kFormatTextLen, 'g');  // exactly the bound
  ASSERT_TRUE(EncodeRequest(grammar, "c-14", "c", &r));
  EXPECT_EQ(r.response_format.kind, ari_RESPONSE_FORMAT_GRAMMAR);
  EXPECT_EQ(r.response_format.text_len, ari_kFormatTextLen);
  grammar.grammar.push_back('g');
  auto e = EncodeRequest(grammar, "c-15", "c", &r);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.error().message.find("grammar has 2049 bytes"), std::string::npos);
  AskParams two = Prompt("q");
  two.schema_name = "a";
  two.grammar = "root ::= \"a\"";
  EXPECT_FALSE(EncodeRequest(two, "c-16", "c", &r));
  AskParams long_name = Prompt("q");
  long_name.schema_name = std::string(ari_kSchemaNameLen, 'n');
  EXPECT_FALSE(EncodeRequest(long_name, "c-17", "c", &r));
  EXPECT_EQ(ari::component::FormatStateName(ari_FORMAT_COMPLETE), "complete");
  EXPECT_EQ(ari::component::FormatStateName(ari_FORMAT_INCOMPLETE), "incomplete");
  EXPECT_EQ(ari::component::FormatStateName(ari_FORMAT_NONE), "none");
}

TEST(ParseTurn, RoleColonText) {
  auto u = ari::component::ParseTurn("user:Hello: world");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->role, ari_ROLE_USER);
  EXPECT_EQ(u->text, "Hello: world");
  auto a = ari::component::ParseTurn("assistant:Hi");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->role, ari_ROLE_ASSISTANT);
  auto s = ari::component::ParseTurn("system:Be brief");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->role, ari_ROLE_SYSTEM);
  for (const char* bad : {"Hello", "tool:x", "user", "User:x", ":x"}) {
    auto b = ari::component::ParseTurn(bad);
    ASSERT_FALSE(b.has_value()) << bad;
    EXPECT_EQ(b.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(TerminalError, MapsStatuses) {
  ari_TokenChunk c{};
  c.terminal = true;
  c.status = ari_STATUS_DONE;
  EXPECT_FALSE(ari::component::TerminalError(c));
  c.status = ari_STATUS_BUSY;
  dds::CopyFixed("queue full", c.message);
  auto e = ari::component::TerminalError(c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, ErrorCode::kRejected);
  EXPECT_EQ(e->status, ari_STATUS_BUSY);
  EXPECT_NE(e->message.find("queue full"), std::string::npos);
  c.status = ari_STATUS_SHUTDOWN;
  EXPECT_EQ(ari::component::TerminalError(c)->code, ErrorCode::kFailed);
}

}  // namespace
