#include "component/node/request_validator.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "component/client/dds.h"
#include "runtime/core/utf8.h"

namespace ari::component {
namespace {

Verdict Bad(ari_ChunkStatus status, std::string message) { return {status, std::move(message)}; }

// Length of a NUL-terminated id inside its array; -1 when there is no NUL.
template <size_t N>
int IdLength(const char (&id)[N]) {
  const void* nul = std::memchr(id, '\0', N);
  return nul == nullptr ? -1 : static_cast<int>(static_cast<const char*>(nul) - id);
}

template <size_t N>
std::string_view CheckId(const char (&id)[N], const char* what, Verdict* v) {
  const int len = IdLength(id);
  if (len < 0) {
    *v = Bad(ari_STATUS_INVALID, std::string(what) + " not NUL-terminated");
    return {};
  }
  if (len == 0) {
    *v = Bad(ari_STATUS_INVALID, std::string(what) + " empty");
    return {};
  }
  for (int i = 0; i < len; ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c <= 0x20 || c == 0x7f) {
      *v = Bad(ari_STATUS_INVALID, std::string(what) + " has a space or control byte");
      return {};
    }
  }
  return std::string_view(id, static_cast<size_t>(len));
}

// The response format's fields (the text itself is compiled at intake, by the node).
Verdict CheckResponseFormat(const ari_ResponseFormat& f) {
  Verdict v;
  switch (dds::RawEnum(f.kind)) {
    case ari_RESPONSE_FORMAT_NONE: return v;
    case ari_RESPONSE_FORMAT_SCHEMA_NAME:
      CheckId(f.schema_name, "response_format.schema_name", &v);
      return v;
    case ari_RESPONSE_FORMAT_JSON_SCHEMA:
    case ari_RESPONSE_FORMAT_GRAMMAR:
      if (f.text_len == 0 || f.text_len > ari_kFormatTextLen) {
        return Bad(ari_STATUS_INVALID, "response_format.text_len " + std::to_string(f.text_len) +
                                           " out of 1.." + std::to_string(ari_kFormatTextLen));
      }
      return v;
    default: break;
  }
  return Bad(ari_STATUS_INVALID,
             "unknown response_format.kind " + std::to_string(dds::RawEnum(f.kind)));
}

}  // namespace

Verdict ValidateRequest(const ari_Request& r, const RequestLimits& limits) {
  Verdict v;
  if (CheckId(r.request_id, "request_id", &v).empty()) return v;
  if (CheckId(r.client_id, "client_id", &v).empty()) return v;
  const int32_t urgency = dds::RawEnum(r.urgency);
  if (urgency < ari_URGENCY_BACKGROUND || urgency > ari_URGENCY_CRITICAL) {
    return Bad(ari_STATUS_INVALID, "unknown urgency " + std::to_string(urgency));
  }
  if (r.prompt_len > 0 && r.n_turns > 0) {
    return Bad(ari_STATUS_INVALID, "both prompt and chat turns given");
  }
  size_t total = 0;
  if (r.n_turns > 0) {
    if (r.n_turns > ari_kMaxTurns) {
      return Bad(ari_STATUS_INVALID,
                 "n_turns " + std::to_string(r.n_turns) + " > " + std::to_string(ari_kMaxTurns));
    }
    for (uint32_t t = 0; t < r.n_turns; ++t) {
      const ari_ChatTurn& turn = r.turns[t];
      const int32_t role = dds::RawEnum(turn.role);
      if (role < ari_ROLE_SYSTEM || role > ari_ROLE_ASSISTANT) {
        return Bad(ari_STATUS_INVALID, "turn " + std::to_string(t) + ": unknown role");
      }
      if (turn.text_len == 0 || turn.text_len >= ari_kTurnTextLen) {
        return Bad(ari_STATUS_INVALID, "turn " + std::to_string(t) + ": text_len " +
                                           std::to_string(turn.text_len) + " out of 1.." +
                                           std::to_string(ari_kTurnTextLen - 1));
      }
      if (!runtime::IsValidUtf8(std::string_view(turn.text, turn.text_len))) {
        return Bad(ari_STATUS_INVALID, "turn " + std::to_string(t) + ": invalid UTF-8");
      }
      total += turn.text_len;
    }
  } else {
    if (r.prompt_len == 0) return Bad(ari_STATUS_INVALID, "empty prompt");
    if (r.prompt_len >= ari_kPromptLen) {
      return Bad(ari_STATUS_INVALID, "prompt_len " + std::to_string(r.prompt_len) +
                                         " exceeds the array (" +
                                         std::to_string(ari_kPromptLen - 1) + ")");
    }
    if (!runtime::IsValidUtf8(std::string_view(r.prompt, r.prompt_len))) {
      return Bad(ari_STATUS_INVALID, "prompt is not valid UTF-8");
    }
    total = r.prompt_len;
  }
  if (total > limits.max_prompt_bytes) {
    return Bad(ari_STATUS_INVALID, "prompt of " + std::to_string(total) + " bytes > limit " +
                                       std::to_string(limits.max_prompt_bytes));
  }
  if (r.max_tokens < limits.min_max_tokens || r.max_tokens > limits.max_max_tokens) {
    return Bad(ari_STATUS_INVALID, "max_tokens " + std::to_string(r.max_tokens) + " out of " +
                                       std::to_string(limits.min_max_tokens) + ".." +
                                       std::to_string(limits.max_max_tokens));
  }
  const ari_SamplingParams& s = r.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f || s.temperature > 10.0f) {
    return Bad(ari_STATUS_INVALID, "sampling.temperature out of 0..10");
  }
  if (!std::isfinite(s.top_p) || s.top_p < 0.0f || s.top_p > 1.0f) {
    return Bad(ari_STATUS_INVALID, "sampling.top_p out of 0..1");
  }
  if (!std::isfinite(s.repetition_penalty) || s.repetition_penalty < 0.0f ||
      s.repetition_penalty > 10.0f) {
    return Bad(ari_STATUS_INVALID, "sampling.repetition_penalty out of 0..10");
  }
  return CheckResponseFormat(r.response_format);
}

RateLimiter::RateLimiter(double rate_per_s, uint32_t burst, size_t max_clients)
    : rate_per_s_(rate_per_s), burst_(burst == 0 ? 1.0 : burst), max_clients_(max_clients) {}

bool RateLimiter::Allow(std::string_view client, int64_t now_ns) {
  if (!(rate_per_s_ > 0.0)) return true;
  auto it = buckets_.find(std::string(client));
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_clients_ && !order_.empty()) {
      buckets_.erase(order_.front());
      order_.pop_front();
    }
    it = buckets_.emplace(std::string(client), Bucket{burst_, now_ns}).first;
    order_.emplace_back(client);
  }
  Bucket& b = it->second;
  if (now_ns > b.last_ns) {
    b.tokens =
        std::min(burst_, b.tokens + static_cast<double>(now_ns - b.last_ns) * 1e-9 * rate_per_s_);
    b.last_ns = now_ns;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

bool RecentIds::Insert(std::string_view id) {
  std::string key(id);
  if (set_.contains(key)) return false;
  if (set_.size() >= capacity_ && !order_.empty()) {
    set_.erase(order_.front());
    order_.pop_front();
  }
  set_.insert(key);
  order_.push_back(std::move(key));
  return true;
}

void RecentIds::Erase(std::string_view id) {
  const std::string key(id);
  if (set_.erase(key) == 0) return;
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (*it == key) {
      order_.erase(it);
      break;
    }
  }
}

}  // namespace ari::component
