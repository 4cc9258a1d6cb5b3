// Node: the prompt-prefix cache's system prompts (config prefix_cache; docs/memory.md
// "Prompt-prefix cache"), registered with the engine at start-up.
#include <string>
#include <vector>

#include "component/node/node.h"
#include "component/node/node_log.h"
#include "runtime/tokenizer/chat_template.h"

namespace ari::component {

using node_internal::Log;

void Node::RegisterPrefixes() {
  const auto& pc = config_.prefix_cache();
  int index = 0;
  for (const std::string& text : pc.system_prompts()) {
    // The forms a request's tokens start with: a plain prompt, and chat turns opening with
    // this system turn (the engine uses the longest shared run, so a template's trailing
    // tokens after the system turn do not matter).
    std::vector<std::pair<const char*, runtime::Result<std::vector<runtime::TokenId>>>> forms;
    forms.emplace_back("plain", tokenizer_->Encode(text, runtime::EncodeOptions{}));
    if (chat_kind_) {
      const runtime::ChatMessage system[] = {{"system", text}};
      forms.emplace_back("chat", runtime::EncodeChat(*tokenizer_, *chat_kind_, system));
    }
    for (size_t f = 0; f < forms.size(); ++f) {
      const auto& [form, ids] = forms[f];
      if (f > 0 && forms[0].second && ids && *ids == *forms[0].second) continue;
      if (!ids) {
        Log("prefix cache: system prompt %d (%s): %s; its requests run uncached", index, form,
            ids.error().ToString().c_str());
        continue;
      }
      // The governor may run either precision; a prefix's rows are per precision.
      for (runtime::Precision prec : {runtime::Precision::kW8A16, runtime::Precision::kW4A8}) {
        const std::string what = std::string(form) + ", " +
                                 std::string(runtime::PrecisionName(prec)) + ", " +
                                 std::to_string(ids->size()) + " tokens";
        auto info = engine_->AddPrefix(*ids, prec);
        if (!info) {
          Log("prefix cache: system prompt %d (%s) not cached: %s; its requests run uncached",
              index, what.c_str(), info.error().ToString().c_str());
          continue;
        }
        Log("prefix cache: system prompt %d (%s) %s %s (%llu bytes)%s%s", index, what.c_str(),
            info->built ? "computed into" : "mapped from", info->path.c_str(),
            static_cast<unsigned long long>(info->file_bytes),
            info->rebuilt_reason.empty() ? "" : "; rebuilt: ", info->rebuilt_reason.c_str());
      }
    }
    ++index;
  }
}

}  // namespace ari::component
