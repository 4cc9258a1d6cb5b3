// Chat templates: expected strings are llama.cpp's tests/test-chat-template.cpp outputs
// (llm_chat_apply_template, the non-Jinja path) for the same conversation.
#include "runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

#include "runtime/gguf/gguf.h"
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
                    ChatTemplateKind::kLlama2SysStrip}) {
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

}  // namespace
}  // namespace ari::runtime
