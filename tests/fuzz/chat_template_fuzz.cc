// libFuzzer target: chat template detection on arbitrary template text/names, and
// rendering of input-derived conversations with every template kind.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/chat_template.h"

namespace {

using namespace ari::runtime;

constexpr std::array<ChatTemplateKind, 7> kKinds = {
    ChatTemplateKind::kChatMl,       ChatTemplateKind::kLlama3,
    ChatTemplateKind::kLlama2,       ChatTemplateKind::kLlama2Sys,
    ChatTemplateKind::kLlama2SysBos, ChatTemplateKind::kLlama2SysStrip,
    ChatTemplateKind::kPlain};
constexpr std::array<std::string_view, 5> kRoles = {"system", "user", "assistant", "tool", ""};

}  // namespace

// Input layout: byte 0 = flags; then turns separated by '\x1f'. A turn's first byte
// picks its role (kRoles), the rest is its content.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  // Detection sees the whole input as a template name or Jinja source.
  auto detected = DetectChatTemplate(all);
  if (detected) {
    if (!ChatTemplateFromName(ChatTemplateName(*detected))) __builtin_trap();
  }
  (void)ChatTemplateFromName(all);
  if (size == 0) return 0;

  const uint8_t flags = data[0];
  std::vector<ChatMessage> messages;
  std::string_view rest = all.substr(1);
  while (!rest.empty() && messages.size() < 64) {
    const size_t end = rest.find('\x1f');
    std::string_view turn = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ChatMessage m;
    if (!turn.empty()) {
      m.role = kRoles[static_cast<uint8_t>(turn[0]) % kRoles.size()];
      m.content = turn.substr(1);
    }
    messages.push_back(std::move(m));
  }
  const bool add_prefix = (flags & 1) != 0;
  for (ChatTemplateKind kind : kKinds) {
    auto text = ApplyChatTemplate(kind, messages, add_prefix);
    if (!text && text.error().message.empty()) __builtin_trap();
  }
  return 0;
}
