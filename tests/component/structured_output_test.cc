// The node's structured output (component/node/structured_output.h) in process: the schema
// registry refuses bad files naming the file and the position, a request's response format
// compiles or is refused with the compiler's message, the constraint pool is bounded and
// its Release (the scheduler thread's part) allocates nothing, and the terminal's format
// state follows the constraint.
#include "component/node/structured_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "component/node/node.h"
#include "runtime/model/model.h"
#include "tests/common/counting_allocator.h"
#include "tests/component/node_test_util.h"

namespace ari::component {
namespace {

using testing::ModelsDir;
using testing::SourceDir;
using testing::TempDir;

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(TempDir("structured_output"));
    const auto gguf = testing::Stories260K(*dir_);
    if (gguf.empty()) return;
    auto m = runtime::Model::Load(gguf);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  }
  static const runtime::Tokenizer& Tok() { return *model_->tokenizer(); }
  static std::filesystem::path Write(const std::string& name, const std::string& text) {
    std::ofstream(*dir_ / name) << text;
    return *dir_ / name;
  }
  static config::StructuredOutputConfig Shipped() {
    config::StructuredOutputConfig c;
    for (const char* n :
         {"navigation_destination", "climate_setting", "media_command", "yes_no_confirmation"}) {
      auto* s = c.add_schemas();
      s->set_name(n);
      s->set_path(std::string("schemas/") + n + ".json");
    }
    return c;
  }
  static inline std::filesystem::path* dir_ = nullptr;
  static inline runtime::Model* model_ = nullptr;
};

ari_ResponseFormat Inline(ari_ResponseFormatKind kind, const std::string& text) {
  ari_ResponseFormat f{};
  f.kind = kind;
  f.text_len = static_cast<uint32_t>(text.size());
  std::memcpy(f.text, text.data(), std::min(text.size(), sizeof f.text));
  return f;
}

ari_ResponseFormat Named(const std::string& name) {
  ari_ResponseFormat f{};
  f.kind = ari_RESPONSE_FORMAT_SCHEMA_NAME;
  std::memcpy(f.schema_name, name.data(), std::min(name.size(), sizeof f.schema_name - 1));
  return f;
}

TEST_F(StructuredOutputTest, ShippedSchemasCompile) {
  auto so = StructuredOutput::Create(Shipped(), SourceDir() / "config", Tok());
  ASSERT_TRUE(so.has_value()) << so.error().ToString();
  EXPECT_EQ((*so)->names().size(), 4u);
  EXPECT_EQ((*so)->pool().size(), 4);  // the default
  EXPECT_EQ((*so)->trie().vocab_size(), Tok().VocabSize());
  auto g = (*so)->GrammarFor(Named("yes_no_confirmation"));
  ASSERT_TRUE(g.has_value());
  EXPECT_NE(*g, nullptr);
  auto none = (*so)->GrammarFor(ari_ResponseFormat{});
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(*none, nullptr);
}

// What ari-node does with the shipped config/node.textproto at start.
TEST_F(StructuredOutputTest, ShippedNodeConfigRegistersTheFourSchemas) {
  auto cfg = LoadNodeConfig(SourceDir() / "config" / "node.textproto");
  ASSERT_TRUE(cfg.has_value()) << cfg.error().ToString();
  auto so = StructuredOutput::Create(cfg->structured_output(), SourceDir() / "config", Tok());
  ASSERT_TRUE(so.has_value()) << so.error().ToString();
  EXPECT_EQ((*so)->names(),
            (std::vector<std::string>{"climate_setting", "media_command", "navigation_destination",
                                      "yes_no_confirmation"}));
  EXPECT_EQ((*so)->limits().max_inline_bytes, 2048u);
  EXPECT_EQ((*so)->pool().size(), 4);
}

TEST_F(StructuredOutputTest, BadRegisteredFileNamesTheFileAndThePosition) {
  config::StructuredOutputConfig c;
  auto* s = c.add_schemas();
  s->set_name("broken");
  s->set_path(
      Write("broken.json", "{\n  \"type\": \"object\",\n  \"properties\": {\n}").filename());
  auto so = StructuredOutput::Create(c, *dir_, Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("broken.json"), std::string::npos) << so.error().message;
  EXPECT_NE(so.error().message.find("line 4"), std::string::npos) << so.error().message;

  s->set_path(Write("bad.gbnf", "root ::= \"a\" undefined_rule\n").string());
  so = StructuredOutput::Create(c, *dir_, Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("bad.gbnf"), std::string::npos) << so.error().message;
  EXPECT_NE(so.error().message.find("line 1"), std::string::npos) << so.error().message;

  s->set_path(Write("schema.txt", "{}").string());
  so = StructuredOutput::Create(c, *dir_, Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("unknown file type"), std::string::npos);

  s->set_path("missing.json");
  so = StructuredOutput::Create(c, *dir_, Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("cannot read"), std::string::npos);

  auto dup = Shipped();
  dup.mutable_schemas(1)->set_name("navigation_destination");
  so = StructuredOutput::Create(dup, SourceDir() / "config", Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("registered twice"), std::string::npos);
  dup.mutable_schemas(1)->set_name("bad name");
  so = StructuredOutput::Create(dup, SourceDir() / "config", Tok());
  ASSERT_FALSE(so.has_value());
  EXPECT_NE(so.error().message.find("must be 1..31 bytes"), std::string::npos);
}

TEST_F(StructuredOutputTest, RequestFormatsAreRefusedWithThePosition) {
  config::StructuredOutputConfig c = Shipped();
  c.set_max_inline_bytes(64);
  auto so = StructuredOutput::Create(c, SourceDir() / "config", Tok());
  ASSERT_TRUE(so.has_value()) << so.error().ToString();
  auto r = (*so)->GrammarFor(Named("no_such_schema"));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("unknown schema name 'no_such_schema'"), std::string::npos);
  r = (*so)->GrammarFor(Inline(ari_RESPONSE_FORMAT_JSON_SCHEMA, "{\"type\": \"object\",}"));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("line 1, column"), std::string::npos) << r.error().message;
  r = (*so)->GrammarFor(Inline(ari_RESPONSE_FORMAT_GRAMMAR, "root ::= \"(\" root \")\""));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("empty language"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("line 1"), std::string::npos) << r.error().message;
  r = (*so)->GrammarFor(
      Inline(ari_RESPONSE_FORMAT_GRAMMAR, "root ::= \"" + std::string(80, 'x') + "\""));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("limit of 64"), std::string::npos) << r.error().message;
  r = (*so)->GrammarFor(Inline(ari_RESPONSE_FORMAT_GRAMMAR, "root ::= [a-z]{1,8}"));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
}

TEST_F(StructuredOutputTest, PoolIsBoundedAndReleaseDoesNotAllocate) {
  config::StructuredOutputConfig c = Shipped();
  c.set_max_constrained_in_flight(2);
  auto so = StructuredOutput::Create(c, SourceDir() / "config", Tok());
  ASSERT_TRUE(so.has_value()) << so.error().ToString();
  auto g = (*so)->GrammarFor(Named("yes_no_confirmation"));
  ASSERT_TRUE(g.has_value());
  ConstraintPool& pool = (*so)->pool();
  const int32_t a = pool.Acquire(*g);
  const int32_t b = pool.Acquire(*g);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.Acquire(*g), -1);  // full: the node answers BUSY
  EXPECT_EQ(pool.in_use(), 2);
  {
    testing::CountAllocations allocations;
    pool.Release(a);
    pool.Release(a);  // twice: ignored
    pool.Release(-1);
    EXPECT_EQ(allocations.count(), 0);
  }
  EXPECT_EQ(pool.in_use(), 1);
  EXPECT_EQ(pool.Acquire(*g), a);
  // A constraint fresh from the pool is at the start of its grammar.
  runtime::TokenConstraint& tc = *pool.Get(a);
  EXPECT_FALSE(tc.Finished());
  EXPECT_GT(tc.ComputeMask(), 0);
  EXPECT_FALSE(tc.Accepting());
}

TEST_F(StructuredOutputTest, FormatStateFollowsTheConstraint) {
  auto so = StructuredOutput::Create(Shipped(), SourceDir() / "config", Tok());
  ASSERT_TRUE(so.has_value()) << so.error().ToString();
  auto g = (*so)->GrammarFor(Inline(ari_RESPONSE_FORMAT_GRAMMAR, "root ::= \"a\""));
  ASSERT_TRUE(g.has_value()) << g.error().ToString();
  const int32_t slot = (*so)->pool().Acquire(*g);
  ASSERT_GE(slot, 0);
  runtime::TokenConstraint& tc = *(*so)->pool().Get(slot);
  FormatVerdict v = JudgeFormat(tc, ari_STATUS_DONE, "max_tokens");
  EXPECT_EQ(v.state, ari_FORMAT_INCOMPLETE);
  EXPECT_FALSE(v.dead_end);
  EXPECT_EQ(v.message, "max_tokens: structured output incomplete");
  tc.ComputeMask();
  runtime::TokenId a_id = -1;
  for (size_t i = 0; i < tc.allowed().size(); ++i) {
    if (tc.allowed()[i] && (*so)->trie().Piece(static_cast<runtime::TokenId>(i)) == "a") {
      a_id = static_cast<runtime::TokenId>(i);
    }
  }
  ASSERT_GE(a_id, 0) << "stories260K has a token 'a'";
  ASSERT_TRUE(tc.Accept(a_id));
  ASSERT_TRUE(tc.Complete());
  v = JudgeFormat(tc, ari_STATUS_DONE, "grammar_done");
  EXPECT_EQ(v.state, ari_FORMAT_COMPLETE);
  EXPECT_EQ(v.message, "grammar_done");
  // Complete but cancelled / missed: never reported complete.
  EXPECT_EQ(JudgeFormat(tc, ari_STATUS_CANCELLED, "cancelled").state, ari_FORMAT_INCOMPLETE);
  (*so)->pool().Release(slot);
}

// A vocabulary that cannot spell what the grammar needs: the terminal is a dead end (the
// node answers FAILED + FORMAT_INCOMPLETE), never complete.
TEST(JudgeFormat, DeadEndIsIncompleteAndFails) {
  auto g = runtime::CompiledGrammar::Parse(R"(root ::= "a" "z")");
  ASSERT_TRUE(g.has_value());
  auto t = runtime::TokenTrie::FromPieces({"a", "b", "<eos>"}, {2});
  ASSERT_TRUE(t.has_value());
  runtime::TokenConstraint c(*g, *t);
  ASSERT_TRUE(c.Accept(0));
  c.ComputeMask();
  ASSERT_TRUE(c.DeadEnd());
  const FormatVerdict v = JudgeFormat(c, ari_STATUS_DONE, "grammar_dead_end");
  EXPECT_EQ(v.state, ari_FORMAT_INCOMPLETE);
  EXPECT_TRUE(v.dead_end);
  EXPECT_NE(v.message.find("grammar dead end"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("structured output incomplete"), std::string::npos) << v.message;
}

}  // namespace
}  // namespace ari::component
