// libFuzzer target: ari-node's request validator on arbitrary bytes laid over the
// fixed-size IDL Request sample (what a hostile DDS writer can put on the wire: any
// length field, enum value, unterminated id, float bit pattern). Bytes beyond the
// sample pick the limits. The verdict must agree with an independent re-check of
// every length (the response format's too), and an admissible sample's fields must be
// safe to use as the node uses them; then the ids go through RecentIds and RateLimiter.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "component/client/dds.h"
#include "component/node/request_validator.h"
#include "runtime/core/utf8.h"

namespace {

using ari::component::RequestLimits;
using ari::runtime::IsValidUtf8;

template <size_t N>
size_t TerminatedLength(const char (&id)[N]) {
  const void* nul = std::memchr(id, '\0', N);
  if (nul == nullptr) __builtin_trap();  // an admitted id must be NUL-terminated
  return static_cast<size_t>(static_cast<const char*>(nul) - id);
}

// What the node does with an admitted sample, with every length re-checked.
void CheckAdmitted(const ari_Request& r, const RequestLimits& limits) {
  const size_t rid = TerminatedLength(r.request_id);
  const size_t cid = TerminatedLength(r.client_id);
  if (rid == 0 || cid == 0) __builtin_trap();
  const int32_t urgency = ari::component::dds::RawEnum(r.urgency);
  if (urgency < ari_URGENCY_BACKGROUND || urgency > ari_URGENCY_CRITICAL) __builtin_trap();
  std::string text;
  if (r.n_turns > 0) {
    if (r.prompt_len != 0 || r.n_turns > ari_kMaxTurns) __builtin_trap();
    for (uint32_t t = 0; t < r.n_turns; ++t) {
      const ari_ChatTurn& turn = r.turns[t];
      const int32_t role = ari::component::dds::RawEnum(turn.role);
      if (role < ari_ROLE_SYSTEM || role > ari_ROLE_ASSISTANT) __builtin_trap();
      if (turn.text_len == 0 || turn.text_len >= ari_kTurnTextLen) __builtin_trap();
      text.append(turn.text, turn.text_len);  // ASan: inside the sample
    }
  } else {
    if (r.prompt_len == 0 || r.prompt_len >= ari_kPromptLen) __builtin_trap();
    text.assign(r.prompt, r.prompt_len);
  }
  if (text.size() > limits.max_prompt_bytes) __builtin_trap();
  if (r.n_turns == 0 && !IsValidUtf8(text)) __builtin_trap();
  if (r.max_tokens < limits.min_max_tokens || r.max_tokens > limits.max_max_tokens) {
    __builtin_trap();
  }
  const ari_SamplingParams& s = r.sampling;
  if (!std::isfinite(s.temperature) || !std::isfinite(s.top_p) ||
      !std::isfinite(s.repetition_penalty)) {
    __builtin_trap();
  }
  // The response format, as the node reads it (structured_output.cc: GrammarFor).
  const ari_ResponseFormat& f = r.response_format;
  switch (ari::component::dds::RawEnum(f.kind)) {
    case ari_RESPONSE_FORMAT_NONE: break;
    case ari_RESPONSE_FORMAT_SCHEMA_NAME:
      if (TerminatedLength(f.schema_name) == 0) __builtin_trap();
      break;
    case ari_RESPONSE_FORMAT_JSON_SCHEMA:
    case ari_RESPONSE_FORMAT_GRAMMAR:
      if (f.text_len == 0 || f.text_len > ari_kFormatTextLen) __builtin_trap();
      text.assign(f.text, f.text_len);  // ASan: inside the sample
      break;
    default: __builtin_trap();
  }
}

uint32_t Take32(const uint8_t*& p, size_t& n) {
  uint32_t v = 0;
  const size_t k = n < 4 ? n : 4;
  std::memcpy(&v, p, k);
  p += k;
  n -= k;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Heap copy of exactly one sample, so ASan sees any read past its end.
  auto* r = static_cast<ari_Request*>(std::calloc(1, sizeof(ari_Request)));
  if (r == nullptr) return 0;
  std::memcpy(r, data, size < sizeof(ari_Request) ? size : sizeof(ari_Request));
  const uint8_t* rest = data + (size < sizeof(ari_Request) ? size : sizeof(ari_Request));
  size_t rest_n = size - static_cast<size_t>(rest - data);

  RequestLimits limits;  // the defaults, unless the input has bytes after the sample
  if (rest_n > 0) {
    limits.max_prompt_bytes = Take32(rest, rest_n) % (ari_kPromptLen + 16);
    limits.min_max_tokens = Take32(rest, rest_n) % 600;
    limits.max_max_tokens = Take32(rest, rest_n) % 600;
  }
  const ari::component::Verdict v = ari::component::ValidateRequest(*r, limits);
  static const bool verbose = std::getenv("ARI_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "request_fuzz: %s\n", v.ok() ? "admissible" : v.message.c_str());
  }
  if (v.ok()) {
    if (!v.message.empty()) __builtin_trap();
    CheckAdmitted(*r, limits);
  } else {
    // A refusal is INVALID with a reason that fits the TokenChunk message field.
    if (v.status != ari_STATUS_INVALID) __builtin_trap();
    if (v.message.empty() || v.message.size() >= ari_kMessageLen) __builtin_trap();
  }

  // Admission bookkeeping with the (possibly unterminated) ids as the node would key it.
  static ari::component::RecentIds recent(64);
  static ari::component::RateLimiter rate(5.0, 3, 16);
  static int64_t now_ns = 0;
  const std::string_view rid(r->request_id, strnlen(r->request_id, sizeof r->request_id));
  const std::string_view cid(r->client_id, strnlen(r->client_id, sizeof r->client_id));
  const bool fresh = recent.Insert(rid);
  if (!recent.Contains(rid)) __builtin_trap();
  if (fresh && recent.Insert(rid)) __builtin_trap();  // second insert is a duplicate
  if ((r->max_tokens & 7) == 0) recent.Erase(rid);
  now_ns += static_cast<int64_t>(r->deadline_ms % 1'000'000) * 1000;
  (void)rate.Allow(cid, now_ns);
  std::free(r);
  return 0;
}
