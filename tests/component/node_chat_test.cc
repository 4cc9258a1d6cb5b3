// Chat-form requests over real DDS (ari-node process, loopback, the test's own domain):
// the node renders the turns with the model's chat template, roles kept, and tokenizes
// them as ari-run --chat does (runtime::EncodeChat), so the streamed ids equal the
// in-process engine's on EncodeChat's ids and the text equals ari-run --chat's output. A
// model without a template uses the plain format; a template that cannot be rendered
// answers INVALID with a message saying so, and the node goes on serving.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "component/client/client.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/chat_template.h"
#include "tests/component/node_fixture.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
namespace rt = runtime;
using component::AskParams;
using component::Client;
using namespace std::chrono_literals;

// Llama 2 chat's template (detected as "llama2-sys": [INST] with a <<SYS>> block).
constexpr const char* kLlama2Chat =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% "
    "set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' "
    "+ content + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content + ' ' "
    "+ eos_token }}{% endif %}{% endfor %}";
// A template no family matches.
constexpr const char* kUnknown = "{% for m in messages %}{{ m['content'] }}{% endfor %}";

constexpr int kTokens = 24;

struct Answer {
  std::string text;
  std::vector<int32_t> tokens;
  int terminals = 0;
  ari_ChunkStatus status = ari_STATUS_OK;
  std::string message;
};

Answer Collect(component::Stream& stream) {
  Answer a;
  for (;;) {
    auto c = stream.Next(30s);
    if (!c) break;  // kClosed after the terminal
    a.text.append(c->text, c->text_len);
    a.tokens.insert(a.tokens.end(), c->token_ids, c->token_ids + c->n_tokens);
    if (c->terminal) {
      ++a.terminals;
      a.status = static_cast<ari_ChunkStatus>(dds::RawEnum(c->status));
      a.message = c->message;
    }
  }
  return a;
}

// The conversation every test sends: system, a user/assistant exchange, then the prompt.
AskParams Conversation() {
  AskParams p;
  p.system = "You tell short stories.";
  p.turns = {{ari_ROLE_USER, "Tell me about a cat."}, {ari_ROLE_ASSISTANT, "The cat was happy."}};
  p.prompt = "And a dog?";
  p.max_tokens = kTokens;
  // The node has no sensor, so it runs the policy's conservative table: CRITICAL is W8A16,
  // what the in-process engine and ari-run (--precision auto on an F32 file) run.
  p.urgency = ari_URGENCY_CRITICAL;
  return p;  // sampling zero: greedy
}

std::vector<rt::ChatMessage> Messages(const AskParams& p) {
  std::vector<rt::ChatMessage> m = {{"system", p.system}};
  for (const auto& t : p.turns)
    m.push_back({t.role == ari_ROLE_USER ? "user" : "assistant", t.text});
  m.push_back({"user", p.prompt});
  return m;
}

class NodeChat : public NodeTestBase {
 protected:
  NodeChat() : NodeTestBase("node_chat") {}

  // stories260K with tokenizer.chat_template = `tmpl`.
  std::filesystem::path WithTemplate(const std::string& name, const char* tmpl) {
    auto src = rt::GgufFile::Open(model_);
    EXPECT_TRUE(src.has_value());
    if (!src) return {};
    rt::GgufWriter w;
    w.CopyMetadata(*src, "");
    w.SetString("tokenizer.chat_template", tmpl);
    for (const rt::TensorInfo& t : src->tensors()) {
      auto r = w.AddTensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims),
                           std::span(t.data, t.nbytes));
      EXPECT_TRUE(r.has_value()) << r.error().ToString();
    }
    auto out = dir_ / name;
    auto r = w.WriteFile(out);
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    return out;
  }

  // Starts a node on `model`, sends `asks` one after the other (then ari-cli with cli_ask_),
  // stops the node; returns the last answer, every answer into `all`.
  Answer AskNode(const std::filesystem::path& model, const std::string& tag,
                 const std::vector<AskParams>& asks, std::vector<Answer>* all = nullptr) {
    NodeProcess node;
    auto cfg = WriteNodeConfig(dir_ / tag, model);
    EXPECT_TRUE(node.Start(cfg, dir_ / (tag + ".log")));
    component::ClientOptions o;
    o.client_id = "chat-" + tag;
    o.node_timeout = 20s;
    auto client = Client::Connect(domain_, o);
    EXPECT_TRUE(client.has_value());
    Answer last;
    if (client && (*client)->WaitForNode(20s)) {
      for (const AskParams& p : asks) {
        auto s = (*client)->Ask(p);
        EXPECT_TRUE(s.has_value()) << s.error().ToString();
        if (!s) break;
        last = Collect(*s);
        EXPECT_EQ(last.terminals, 1) << node.Log();
        if (all) all->push_back(last);
      }
      if (!cli_ask_.empty()) RunCli();
    } else {
      ADD_FAILURE() << "no node: " << node.Log();
    }
    log_ = node.Log();
    EXPECT_EQ(node.Stop(SIGTERM), 0) << log_;
    return last;
  }

  // What ari-run --chat --memory-plan computes: EncodeChat with the model's format, then
  // greedy chunks of an in-process engine (default knobs, as node_stream_test's reference).
  Answer InProcess(const std::filesystem::path& model, const AskParams& p) {
    rt::EngineOptions eo;
    eo.model_path = model;
    eo.slots = 1;
    eo.context_length = 512;
    eo.max_output = 256;
    eo.threads = 1;
    eo.require_tokenizer = true;
    auto engine = rt::Engine::Create(eo);
    EXPECT_TRUE(engine.has_value()) << engine.error().ToString();
    Answer a;
    if (!engine) return a;
    auto kind = rt::ModelChatTemplate((*engine)->model().file());
    EXPECT_TRUE(kind.has_value()) << kind.error().ToString();
    if (!kind) return a;
    auto ids = rt::EncodeChat(*(*engine)->model().tokenizer(), *kind, Messages(p));
    EXPECT_TRUE(ids.has_value());
    if (!ids) return a;
    rt::TurnSpec turn;
    turn.prompt = *ids;
    turn.max_tokens = static_cast<int32_t>(p.max_tokens);
    turn.keep_context = false;
    EXPECT_TRUE((*engine)->StartTurn(0, turn).has_value());
    for (int i = 0; i < 1000; ++i) {
      auto r = (*engine)->RunChunk(0, rt::ChunkKnobs{});
      EXPECT_TRUE(r.has_value());
      if (!r) break;
      a.text += r->text;
      a.tokens.insert(a.tokens.end(), r->tokens.begin(), r->tokens.end());
      if (r->finished) break;
    }
    return a;
  }

  // stdout of ari-run --chat with the same conversation ("" when ari-run is not built).
  std::string AriRunChat(const std::filesystem::path& model, const AskParams& p,
                         const char* extra) {
    const char* bin = std::getenv("ARI_BINARY_DIR");
    const auto run = bin ? std::filesystem::path(bin) / "runtime" / "ari-run" : "";
    if (run.empty() || !std::filesystem::exists(run)) return "";
    const auto out = dir_ / "ari_run.txt";
    std::string cmd =
        run.string() + " -m " + model.string() + " --chat --system '" + p.system + "'";
    for (const auto& t : p.turns) {
      cmd += std::string(" --turn '") + (t.role == ari_ROLE_USER ? "user:" : "assistant:") +
             t.text + "'";
    }
    cmd += " -p '" + p.prompt + "' -n " + std::to_string(p.max_tokens) + " --temp 0 " + extra +
           " >" + out.string() + " 2>/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

  // ari-cli ask with cli_ask_ (single-quoted), stdout into cli_out_.
  void RunCli() {
    const auto bin = NodeBinary().parent_path() / "ari-cli";
    const auto out = dir_ / "cli.txt";
    std::string cmd = bin.string() + " --domain " + std::to_string(TestDomainId()) + " --config " +
                      (SourceDir() / "config" / "cyclonedds-lo.xml").string() +
                      " --client chat-cli ask";
    for (const std::string& a : cli_ask_) cmd += " '" + a + "'";
    cmd += " >" + out.string() + " 2>" + (dir_ / "cli.err").string();
    cli_rc_ = std::system(cmd.c_str());
    std::ifstream f(out);
    cli_out_ = std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }

  std::string log_;
  std::vector<std::string> cli_ask_;  // ari-cli ask arguments, run while the node is up
  std::string cli_out_;
  int cli_rc_ = -1;
};

TEST_F(NodeChat, TemplatedChatEqualsAriRunChat) {
  const auto model = WithTemplate("llama2chat.gguf", kLlama2Chat);
  ASSERT_FALSE(model.empty());
  const AskParams p = Conversation();
  cli_ask_ = {"--system",     p.system,
              "--turn",       "user:" + p.turns[0].text,
              "--turn",       "assistant:" + p.turns[1].text,
              "--max-tokens", std::to_string(kTokens),
              "--urgency",    "critical",
              p.prompt};
  const Answer got = AskNode(model, "llama2", {p});
  EXPECT_EQ(got.status, ari_STATUS_DONE) << got.message;
  EXPECT_NE(log_.find("chat format: llama2-sys"), std::string::npos) << log_;
  const Answer want = InProcess(model, p);
  ASSERT_EQ(want.tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  // ari-cli ask --system --turn ... sends the same conversation.
  EXPECT_EQ(cli_rc_, 0);
  EXPECT_EQ(cli_out_, got.text + "\n");
  // ari-run --chat itself, both of its paths (greedy: the same text as the node's).
  for (const char* extra : {"", "--memory-plan"}) {
    const std::string run = AriRunChat(model, p, extra);
    if (run.empty()) GTEST_SKIP() << "ari-run not built";
    EXPECT_EQ(run, got.text + "\n") << extra;
  }
  // Roles matter: the same texts joined as a plain prompt (the old behaviour) differ.
  AskParams joined;
  joined.prompt = p.system + "\n" + p.turns[0].text + "\n" + p.turns[1].text + "\n" + p.prompt;
  joined.max_tokens = kTokens;
  auto tok_file = rt::Model::Load(model);
  ASSERT_TRUE(tok_file.has_value());
  auto chat_ids =
      rt::EncodeChat(*(*tok_file)->tokenizer(), rt::ChatTemplateKind::kLlama2Sys, Messages(p));
  auto plain_ids = (*tok_file)->tokenizer()->Encode(joined.prompt, rt::EncodeOptions{});
  ASSERT_TRUE(chat_ids.has_value() && plain_ids.has_value());
  EXPECT_NE(*chat_ids, *plain_ids);
}

TEST_F(NodeChat, ModelWithoutTemplateUsesThePlainFormat) {
  const AskParams p = Conversation();
  AskParams car;  // a plain prompt: the streamed text is llama.cpp's continuation
  car.prompt = "The car turned left at the";
  car.max_tokens = 16;
  car.urgency = ari_URGENCY_CRITICAL;  // W8A16 (see Conversation)
  std::vector<Answer> answers;
  AskNode(model_, "plain", {p, car}, &answers);
  ASSERT_EQ(answers.size(), 2u);
  const Answer& got = answers[0];
  EXPECT_EQ(got.status, ari_STATUS_DONE) << got.message;
  // llama-simple -m stories260K.gguf -n 16 "The car turned left at the" prints
  // "<s> The car turned left at the park. It was a big, red ball. The"
  // (tests/runtime/detokenize_golden_test.cc): the space before "park" comes over DDS too.
  EXPECT_EQ(answers[1].text, " park. It was a big, red ball. The");
  EXPECT_NE(log_.find("chat format: plain"), std::string::npos) << log_;
  const Answer want = InProcess(model_, p);
  ASSERT_FALSE(want.tokens.empty());
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  const std::string run = AriRunChat(model_, p, "");
  if (!run.empty()) {
    EXPECT_EQ(run, got.text + "\n");
  }
}

TEST_F(NodeChat, UnknownTemplateIsInvalidWithAMessageAndTheNodeServesOn) {
  const auto model = WithTemplate("unknown.gguf", kUnknown);
  ASSERT_FALSE(model.empty());
  AskParams plain;
  plain.prompt = "Once upon a time";
  plain.max_tokens = 8;
  std::vector<Answer> answers;
  AskNode(model, "unknown", {Conversation(), plain}, &answers);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].status, ari_STATUS_INVALID);
  EXPECT_TRUE(answers[0].tokens.empty());
  EXPECT_EQ(answers[0].message.rfind("chat turns: unknown chat template", 0), 0u)
      << answers[0].message;
  EXPECT_NE(log_.find("refused"), std::string::npos) << log_;
  EXPECT_NE(log_.find("chat-form requests are INVALID"), std::string::npos) << log_;
  // A plain prompt does not need the template.
  EXPECT_EQ(answers[1].status, ari_STATUS_DONE) << answers[1].message;
  EXPECT_EQ(answers[1].tokens.size(), 8u);
}

}  // namespace
}  // namespace ari::testing
