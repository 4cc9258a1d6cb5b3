// Chat templates for instruct models: render {role, content} turns into a prompt string.
//
// Supported families (outputs equal llama.cpp's llm_chat_apply_template):
//   ChatML (Qwen, OpenHermes):  <|im_start|>role\ncontent<|im_end|>\n ... [<|im_start|>assistant\n]
//   Llama 3:  <|start_header_id|>role<|end_header_id|>\n\n{trimmed content}<|eot_id|> ...
//             [<|start_header_id|>assistant<|end_header_id|>\n\n]
//   Llama 2 [INST] and its variants (with/without <<SYS>> block, <s> between turns, stripped
//             content), chosen from the Jinja text as llama.cpp does.
// The template is chosen from the GGUF `tokenizer.chat_template` Jinja text by substring
// markers (as llama.cpp's llm_chat_detect_template) or by name ("chatml", "llama3",
// "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip").
//
// A model without tokenizer.chat_template (e.g. the llama2.c story models) gets ARI's own
// plain format ("plain"; llama.cpp has no equivalent): one line per turn,
//   System: {content}\nUser: {content}\nAssistant: {content}\n ... [Assistant:]
// (other roles as given). A template that exists but is unknown or unsupported is an error,
// never rendered as plain text: ModelChatTemplate() below.
//
// The leading BOS (<s>, <|begin_of_text|>) is NOT part of the rendered text: the tokenizer
// adds it (EncodeOptions::add_bos); encode the prompt with parse_special = true so the
// markers become their control tokens.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

class GgufFile;
class Tokenizer;

enum class ChatTemplateKind {
  kChatMl,
  kLlama3,
  kLlama2,          // [INST] without <<SYS>> (system text prepended to the first user turn)
  kLlama2Sys,       // [INST] <<SYS>>\n...\n<</SYS>>\n\n
  kLlama2SysBos,    // as kLlama2Sys, "<s>" before every [INST] after the first
  kLlama2SysStrip,  // as kLlama2Sys, contents trimmed
  kPlain,           // "Role: content" lines; for models without a template (see above)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (others are passed through)
  std::string content;
};

// Canonical name ("chatml", "llama3", "llama2", "llama2-sys", ...).
std::string_view ChatTemplateName(ChatTemplateKind kind);
// Exact name -> kind; kNotFound naming the unknown name.
Result<ChatTemplateKind> ChatTemplateFromName(std::string_view name);

// Accepts a template name or the Jinja source. Unknown or unsupported template ->
// kUnsupported whose message names the template (its family when recognised, else
// the beginning of its text).
Result<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_or_name);

// Reads tokenizer.chat_template from the model (kNotFound when absent) and detects it.
Result<ChatTemplateKind> DetectChatTemplate(const GgufFile& model);

// Renders the conversation. add_assistant_prefix appends the header that opens the
// assistant's turn (ChatML, Llama 3; the [INST] formats end with " [/INST]" anyway).
Result<std::string> ApplyChatTemplate(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                      bool add_assistant_prefix);

// The format chat-form prompts of this model use: its tokenizer.chat_template detected as
// above, or kPlain when the model has no such key. A template that is present but unknown,
// unsupported or not a string is kUnsupported (kFormat for a non-string), the message
// naming it (not the file: callers add that).
Result<ChatTemplateKind> ModelChatTemplate(const GgufFile& model);

// The one way a conversation becomes prompt ids (ari-run --chat and ari-node use it):
// renders `messages` with `kind`, the assistant's turn opened, and encodes the text with
// `tok` (BOS as the vocab says; a template's markers parsed as their control tokens; the
// plain format parses none, so a turn cannot forge a marker there).
Result<std::vector<TokenId>> EncodeChat(const Tokenizer& tok, ChatTemplateKind kind,
                                        std::span<const ChatMessage> messages);

}  // namespace ari::runtime
