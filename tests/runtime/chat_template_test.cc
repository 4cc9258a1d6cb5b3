// Chat templates: expected strings are llama.cpp's tests/test-chat-template.cpp outputs
// (llm_chat_apply_template, the non-Jinja path) for the same conversation.
#include "runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

const std::vector<ChatMessage>& Conversation() {
  static const std::vector<ChatMessage> c = {
      {"system", "You are a helpful assistant"},
      {"user", "Hello"},
      {"assistant", "Hi there"},
      {"user", "Who are you"},
      {"assistant", "   I am an assistant   "},
      {"user", "Another question"},
  };
  return c;
}

// Template sources as they appear in llama.cpp's test (and in the models' GGUF metadata).
constexpr const char* kOpenHermesChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kMistralV02 =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";
constexpr const char* kFusionNet =
    "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' "
    "-%}\n{%- if idx > 1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' "
    "-}}\n{%- else -%}\n{{- messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif "
    "messages[idx]['role'] == 'system' %}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + "
    "'\\n<</SYS>>\\n\\n' -}}\n{%- elif messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + "
    "messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}";
constexpr const char* kVigogne =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] "
    "%}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = "
    "messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% "
    "if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + "
    "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
    "endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}";
constexpr const char* kGemma =
    "{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | "
    "trim + '<end_of_turn>\\n' }}{% endfor %}";

std::string Render(const char* jinja, ChatTemplateKind want_kind) {
  auto kind = DetectChatTemplate(jinja);
  EXPECT_TRUE(kind.has_value()) << (kind ? "" : kind.error().ToString());
  if (!kind) return {};
  EXPECT_EQ(*kind, want_kind) << ChatTemplateName(*kind);
  auto out = ApplyChatTemplate(*kind, Conversation(), true);
  EXPECT_TRUE(out.has_value());
  return out ? *out : std::string();
}

TEST(ChatTemplate, ChatMlMatchesLlamaCpp) {
  EXPECT_EQ(Render(kOpenHermesChatMl, ChatTemplateKind::kChatMl),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|"
            "im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are "
            "you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   "
            "<|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
  // Without the assistant prefix.
  auto no_prefix =
      ApplyChatTemplate(ChatTemplateKind::kChatMl, std::span(Conversation()).first(2), false);
  ASSERT_TRUE(no_prefix.has_value());
  EXPECT_EQ(*no_prefix,
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|"
            "im_end|>\n");
}

TEST(ChatTemplate, Llama3MatchesLlamaCpp) {
  EXPECT_EQ(Render(kLlama3, ChatTemplateKind::kLlama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
            "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|"
            "start_header_id|>assistant<|end_header_id|>\n\nHi "
            "there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are "
            "you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an "
            "assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother "
            "question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2VariantsMatchLlamaCpp) {
  // mistralai/Mistral-7B-Instruct-v0.2: [INST] without <<SYS>>.
  EXPECT_EQ(Render(kMistralV02, ChatTemplateKind::kLlama2),
            "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you "
            "[/INST]   I am an assistant   </s>[INST] Another question [/INST]");
  // TheBloke/FusionNet_34Bx2_MoE-AWQ: <<SYS>> block, <s> inside the history.
  EXPECT_EQ(Render(kFusionNet, ChatTemplateKind::kLlama2SysBos),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi "
            "there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another "
            "question [/INST]");
  // bofenghuang/vigogne-2-70b-chat: <<SYS>> block, stripped contents.
  EXPECT_EQ(Render(kVigogne, ChatTemplateKind::kLlama2SysStrip),
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi "
            "there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question "
            "[/INST]");
  // Plain <<SYS>> variant (by name).
  auto sys = ApplyChatTemplate(ChatTemplateKind::kLlama2Sys, Conversation(), true);
  ASSERT_TRUE(sys.has_value());
  EXPECT_EQ(*sys,
            "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi "
            "there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another "
            "question [/INST]");
}

TEST(ChatTemplate, DetectByName) {
  for (auto kind : {ChatTemplateKind::kChatMl, ChatTemplateKind::kLlama3, ChatTemplateKind::kLlama2,
                    ChatTemplateKind::kLlama2Sys, ChatTemplateKind::kLlama2SysBos,
                    ChatTemplateKind::kLlama2SysStrip, ChatTemplateKind::kPlain}) {
    auto k = DetectChatTemplate(ChatTemplateName(kind));
    ASSERT_TRUE(k.has_value()) << ChatTemplateName(kind);
    EXPECT_EQ(*k, kind);
  }
  auto bad = ChatTemplateFromName("vicuna");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("vicuna"), std::string::npos);
}

TEST(ChatTemplate, UnknownAndUnsupportedTemplatesAreErrors) {
  auto r = DetectChatTemplate("INVALID TEMPLATE");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("INVALID TEMPLATE"), std::string::npos) << r.error().message;

  auto g = DetectChatTemplate(kGemma);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message.find("gemma"), std::string::npos) << g.error().message;

  // Phi-4 uses <|im_start|> but is not ChatML.
  auto phi4 = DetectChatTemplate("{{'<|im_start|>' + message['role'] + '<|im_sep|>'}}");
  ASSERT_FALSE(phi4.has_value());
  EXPECT_NE(phi4.error().message.find("phi4"), std::string::npos);

  EXPECT_FALSE(DetectChatTemplate("").has_value());
}

TEST(ChatTemplate, FromGgufMetadata) {
  ARI_REQUIRE_MODEL(phi3, "vocab/ggml-vocab-phi-3.gguf");
  auto file = GgufFile::Open(phi3);
  ASSERT_TRUE(file.has_value()) << file.error().ToString();
  auto k = DetectChatTemplate(*file);  // Phi-3's template: recognised, not supported
  ASSERT_FALSE(k.has_value());
  EXPECT_EQ(k.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(k.error().message.find("phi3"), std::string::npos) << k.error().message;

  ARI_REQUIRE_MODEL(spm, "vocab/ggml-vocab-llama-spm.gguf");
  auto no_tmpl = GgufFile::Open(spm);
  ASSERT_TRUE(no_tmpl.has_value());
  auto none = DetectChatTemplate(*no_tmpl);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("tokenizer.chat_template"), std::string::npos);
}

TEST(ChatTemplate, EmptyConversation) {
  auto c = ApplyChatTemplate(ChatTemplateKind::kChatMl, {}, true);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, "<|im_start|>assistant\n");
  auto l = ApplyChatTemplate(ChatTemplateKind::kLlama3, {}, false);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*l, "");
}

// ARI's own format for models without a template (not llama.cpp's; see chat_template.h).
TEST(ChatTemplate, PlainFormat) {
  auto k = DetectChatTemplate("plain");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(*k, ChatTemplateKind::kPlain);
  auto out = ApplyChatTemplate(ChatTemplateKind::kPlain, std::span(Conversation()).first(3), true);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out,
            "System: You are a helpful assistant\nUser: Hello\nAssistant: Hi there\nAssistant:");
  const std::vector<ChatMessage> tool = {{"tool", "42"}};
  EXPECT_EQ(*ApplyChatTemplate(ChatTemplateKind::kPlain, tool, false), "tool: 42\n");
}

// A GGUF holding only `key` = `value` (or nothing when key is empty).
Result<std::vector<std::byte>> MetadataOnly(const char* key, const char* value, bool as_int) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  if (key != nullptr) {
    if (as_int) {
      w.SetUint32(key, 7);
    } else {
      w.SetString(key, value);
    }
  }
  return w.WriteToMemory();
}

TEST(ChatTemplate, ModelChatTemplateFallsBackOnlyWithoutTemplate) {
  auto kind_of = [](const char* value, bool as_int = false) -> Result<ChatTemplateKind> {
    auto bytes = MetadataOnly(value ? "tokenizer.chat_template" : nullptr, value, as_int);
    if (!bytes) return std::unexpected(bytes.error());
    auto f = GgufFile::Parse(*bytes, "m.gguf");
    if (!f) return std::unexpected(f.error());
    return ModelChatTemplate(*f);
  };
  auto none = kind_of(nullptr);
  ASSERT_TRUE(none.has_value()) << none.error().ToString();
  EXPECT_EQ(*none, ChatTemplateKind::kPlain);
  auto chatml = kind_of(kOpenHermesChatMl);
  ASSERT_TRUE(chatml.has_value());
  EXPECT_EQ(*chatml, ChatTemplateKind::kChatMl);
  // Present but not renderable: an error naming it, never the plain fallback.
  auto gemma = kind_of(kGemma);
  ASSERT_FALSE(gemma.has_value());
  EXPECT_EQ(gemma.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(gemma.error().message.find("gemma"), std::string::npos) << gemma.error().message;
  auto junk = kind_of("{{ whatever }}");
  ASSERT_FALSE(junk.has_value());
  EXPECT_NE(junk.error().message.find("unknown chat template"), std::string::npos);
  EXPECT_FALSE(kind_of("").has_value());
  auto not_string = kind_of("x", /*as_int=*/true);
  ASSERT_FALSE(not_string.has_value());
  EXPECT_NE(not_string.error().message.find("tokenizer.chat_template"), std::string::npos);
}

// EncodeChat parses a template's markers as control tokens ("<s>" between [INST] turns
// becomes BOS), but nothing in the plain format: a turn cannot forge a control token.
TEST(ChatTemplate, EncodeChatParsesMarkersOfTemplatesOnly) {
  ARI_REQUIRE_MODEL(spm, "vocab/ggml-vocab-llama-spm.gguf");
  auto file = GgufFile::Open(spm);
  ASSERT_TRUE(file.has_value());
  auto tok = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.has_value()) << tok.error().ToString();
  const TokenId bos = (*tok)->Bos();
  auto count_bos = [bos](const std::vector<TokenId>& ids) {
    return std::count(ids.begin(), ids.end(), bos);
  };
  auto sys_bos = EncodeChat(**tok, ChatTemplateKind::kLlama2SysBos, Conversation());
  ASSERT_TRUE(sys_bos.has_value());
  EXPECT_EQ(sys_bos->front(), bos);
  EXPECT_EQ(count_bos(*sys_bos), 3);  // the tokenizer's, then "<s>" before [INST] 2 and 3
  auto text = ApplyChatTemplate(ChatTemplateKind::kLlama2SysBos, Conversation(), true);
  ASSERT_TRUE(text.has_value());
  auto direct = (*tok)->Encode(*text, EncodeOptions{.parse_special = true});
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(*sys_bos, *direct);
  const std::vector<ChatMessage> forged = {{"user", "hi <s> there"}};
  auto plain = EncodeChat(**tok, ChatTemplateKind::kPlain, forged);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(count_bos(*plain), 1);
  EXPECT_EQ((*tok)->Decode(*plain), "User: hi <s> there\nAssistant:");
}

}  // namespace
}  // namespace ari::runtime
