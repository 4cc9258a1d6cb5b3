#include "runtime/tokenizer/chat_template.h"

#include <array>
#include <utility>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {

namespace {

struct NamedKind {
  std::string_view name;
  ChatTemplateKind kind;
};

constexpr std::array<NamedKind, 7> kNames = {{
    {"chatml", ChatTemplateKind::kChatMl},
    {"llama3", ChatTemplateKind::kLlama3},
    {"llama2", ChatTemplateKind::kLlama2},
    {"llama2-sys", ChatTemplateKind::kLlama2Sys},
    {"llama2-sys-bos", ChatTemplateKind::kLlama2SysBos},
    {"llama2-sys-strip", ChatTemplateKind::kLlama2SysStrip},
    {"plain", ChatTemplateKind::kPlain},
}};

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// A short, single-line excerpt of a template for error messages.
std::string Excerpt(std::string_view s) {
  constexpr size_t kMax = 60;
  std::string out;
  for (char c : s.substr(0, kMax)) out += (c == '\n' || c == '\r') ? ' ' : c;
  if (s.size() > kMax) out += "...";
  return out;
}

std::string_view PlainRoleName(std::string_view role) {
  if (role == "system") return "System";
  if (role == "user") return "User";
  if (role == "assistant") return "Assistant";
  return role;
}

void RenderPlain(std::span<const ChatMessage> messages, bool add_assistant_prefix,
                 std::string& out) {
  for (const auto& m : messages) {
    out += PlainRoleName(m.role);
    out += ": ";
    out += m.content;
    out += '\n';
  }
  if (add_assistant_prefix) out += "Assistant:";
}

}  // namespace

std::string_view ChatTemplateName(ChatTemplateKind kind) {
  for (const auto& n : kNames) {
    if (n.kind == kind) return n.name;
  }
  return "unknown";
}

Result<ChatTemplateKind> ChatTemplateFromName(std::string_view name) {
  for (const auto& n : kNames) {
    if (n.name == name) return n.kind;
  }
  return MakeError(ErrorCode::kNotFound, "unknown chat template name '" + std::string(name) + "'");
}

Result<ChatTemplateKind> DetectChatTemplate(std::string_view t) {
  if (auto by_name = ChatTemplateFromName(t)) return *by_name;
  auto has = [t](std::string_view marker) { return t.find(marker) != std::string_view::npos; };
  auto unsupported = [t](std::string_view family) -> Result<ChatTemplateKind> {
    return MakeError(ErrorCode::kUnsupported, "unsupported chat template '" + std::string(family) +
                                                  "' (\"" + Excerpt(t) +
                                                  "\"); supported: chatml, llama3, llama2 [INST]");
  };
  // Same markers and order as llama.cpp's llm_chat_detect_template, so a template that
  // llama.cpp gives to another family is reported as that family, not misrendered.
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return unsupported("phi4");
    if (has("<end_of_utterance>")) return unsupported("smolvlm");
    return ChatTemplateKind::kChatMl;
  }
  if (t.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return unsupported("mistral-v7");
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      return unsupported("mistral-v1/v3");
    }
    if (has("content.strip()")) return ChatTemplateKind::kLlama2SysStrip;
    if (has("bos_token + '[INST]")) return ChatTemplateKind::kLlama2SysBos;
    if (has("<<SYS>>")) return ChatTemplateKind::kLlama2Sys;
    return ChatTemplateKind::kLlama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return unsupported("phi3");
  if (has("[gMASK]<sop>")) return unsupported("chatglm4");
  if (has("<|assistant|>") && has("<|user|>")) return unsupported("falcon3/glmedge");
  if (has("<|user|>") && has("<|endoftext|>")) return unsupported("zephyr");
  if (has("bos_token + message['role']")) return unsupported("monarch");
  if (has("<start_of_turn>")) return unsupported("gemma");
  if (has("'\\n\\nAssistant: ' + eos_token")) return unsupported("orion");
  if (has("GPT4 Correct ")) return unsupported("openchat");
  if (has("USER: ") && has("ASSISTANT: ")) return unsupported("vicuna");
  if (has("### Instruction:") && has("<|EOT|>")) return unsupported("deepseek");
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return unsupported("command-r");
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatTemplateKind::kLlama3;
  if (has("<|header_start|>") && has("<|header_end|>")) return unsupported("llama4");
  return MakeError(ErrorCode::kUnsupported,
                   "unknown chat template \"" + Excerpt(t) +
                       "\"; supported: chatml, llama3, llama2 [INST] (or pass one of these names)");
}

Result<ChatTemplateKind> DetectChatTemplate(const GgufFile& model) {
  auto t = model.GetString("tokenizer.chat_template");
  if (!t) {
    return MakeError(t.error().code,
                     model.name() + ": no usable tokenizer.chat_template: " + t.error().message);
  }
  auto kind = DetectChatTemplate(*t);
  if (!kind) return MakeError(kind.error().code, model.name() + ": " + kind.error().message);
  return *kind;
}

Result<std::string> ApplyChatTemplate(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                      bool add_assistant_prefix) {
  std::string out;
  size_t reserve = 64;
  for (const auto& m : messages) reserve += m.role.size() + m.content.size() + 32;
  out.reserve(reserve);
  switch (kind) {
    case ChatTemplateKind::kPlain: RenderPlain(messages, add_assistant_prefix, out); return out;
    case ChatTemplateKind::kChatMl:
      for (const auto& m : messages) {
        out += "<|im_start|>";
        out += m.role;
        out += '\n';
        out += m.content;
        out += "<|im_end|>\n";
      }
      if (add_assistant_prefix) out += "<|im_start|>assistant\n";
      return out;
    case ChatTemplateKind::kLlama3:
      for (const auto& m : messages) {
        out += "<|start_header_id|>";
        out += m.role;
        out += "<|end_header_id|>\n\n";
        out += Trim(m.content);
        out += "<|eot_id|>";
      }
      if (add_assistant_prefix) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatTemplateKind::kLlama2:
    case ChatTemplateKind::kLlama2Sys:
    case ChatTemplateKind::kLlama2SysBos:
    case ChatTemplateKind::kLlama2SysStrip: {
      const bool sys_block = kind != ChatTemplateKind::kLlama2;
      const bool bos_in_history = kind == ChatTemplateKind::kLlama2SysBos;
      const bool strip = kind == ChatTemplateKind::kLlama2SysStrip;
      bool inside_turn = true;  // the first [INST] is written up front (BOS by tokenizer)
      out += "[INST] ";
      for (const auto& m : messages) {
        std::string_view content = strip ? Trim(m.content) : std::string_view(m.content);
        if (!inside_turn) {
          inside_turn = true;
          out += bos_in_history ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") {
          if (sys_block) {
            out += "<<SYS>>\n";
            out += content;
            out += "\n<</SYS>>\n\n";
          } else {
            out += content;
            out += '\n';
          }
        } else if (m.role == "user") {
          out += content;
          out += " [/INST]";
        } else {
          out += content;
          out += "</s>";
          inside_turn = false;
        }
      }
      return out;
    }
  }
  return MakeError(ErrorCode::kInvalidArgument, "invalid chat template kind");
}

Result<ChatTemplateKind> ModelChatTemplate(const GgufFile& model) {
  if (!model.Has("tokenizer.chat_template")) return ChatTemplateKind::kPlain;
  auto t = model.GetString("tokenizer.chat_template");
  if (!t) return MakeError(t.error().code, "tokenizer.chat_template: " + t.error().message);
  return DetectChatTemplate(*t);
}

Result<std::vector<TokenId>> EncodeChat(const Tokenizer& tok, ChatTemplateKind kind,
                                        std::span<const ChatMessage> messages) {
  auto text = ApplyChatTemplate(kind, messages, /*add_assistant_prefix=*/true);
  if (!text) return std::unexpected(text.error());
  EncodeOptions eo;
  eo.parse_special = kind != ChatTemplateKind::kPlain;
  return tok.Encode(*text, eo);
}

}  // namespace ari::runtime
