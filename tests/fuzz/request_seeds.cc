// Writes the seed corpus of request_fuzz: raw ari_Request samples (the bytes the
// validator sees), admissible ones and one per refusal reason.
//   ari_fuzz_request_seeds <out dir>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "component/node/request_validator.h"

namespace {

ari_Request Base(std::string_view prompt) {
  ari_Request r;
  std::memset(&r, 0, sizeof r);
  std::strcpy(r.request_id, "req-1");
  std::strcpy(r.client_id, "nav");
  r.urgency = ari_URGENCY_NORMAL;
  r.max_tokens = 32;
  r.deadline_ms = 2000;
  r.sampling.top_p = 1.0f;
  r.sampling.repetition_penalty = 1.0f;
  r.prompt_len = static_cast<uint32_t>(prompt.size());
  std::memcpy(r.prompt, prompt.data(), prompt.size());
  return r;
}

void AddTurn(ari_Request& r, ari_TurnRole role, std::string_view text) {
  ari_ChatTurn& t = r.turns[r.n_turns++];
  t.role = role;
  t.text_len = static_cast<uint32_t>(text.size());
  std::memcpy(t.text, text.data(), text.size());
}

bool Write(const std::filesystem::path& dir, const std::string& name, const ari_Request& r,
           bool limits = false) {
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&r), sizeof r);
  if (limits) {  // max_prompt_bytes 64, max_tokens 4..8
    const uint32_t l[3] = {64, 4, 8};
    out.write(reinterpret_cast<const char*>(l), sizeof l);
  }
  std::printf("%s\n", (dir / name).c_str());
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  bool ok = true;
  ok &= Write(dir, "ok_prompt", Base("How far is the next charger?"));
  {
    auto r = Base(
        "Wie warm ist es drau\xc3\x9f"
        "en? \xe2\x9d\x84 \xf0\x9f\x9a\x97");
    r.urgency = ari_URGENCY_CRITICAL;
    r.sampling.temperature = 0.7f;
    r.sampling.top_p = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.seed = 7;
    r.session_id = 3;
    ok &= Write(dir, "ok_utf8_critical", r);
  }
  {
    auto r = Base("");
    AddTurn(r, ari_ROLE_SYSTEM, "You are a car assistant.");
    AddTurn(r, ari_ROLE_USER, "Turn on the seat heating.");
    AddTurn(r, ari_ROLE_ASSISTANT, "Done.");
    AddTurn(r, ari_ROLE_USER, "And the steering wheel?");
    r.urgency = ari_URGENCY_HIGH;
    ok &= Write(dir, "ok_turns", r);
  }
  ok &= Write(dir, "ok_with_limits", Base("short"), true);
  {
    auto r = Base(std::string(2047, 'a'));
    ok &= Write(dir, "long_prompt", r);
  }
  {
    auto r = Base("x");
    std::memset(r.request_id, 'r', sizeof r.request_id);  // not NUL-terminated
    ok &= Write(dir, "bad_unterminated_id", r);
  }
  {
    auto r = Base("x");
    std::strcpy(r.client_id, "a b");
    ok &= Write(dir, "bad_id_space", r);
  }
  {
    auto r = Base("x");
    const int32_t bad = 77;
    std::memcpy(&r.urgency, &bad, sizeof bad);
    ok &= Write(dir, "bad_urgency", r);
  }
  {
    auto r = Base("x");
    r.prompt_len = 0xffffffffu;
    ok &= Write(dir, "bad_prompt_len", r);
  }
  {
    auto r = Base("bad \xc0\xaf utf8 \xed\xa0\x80");
    ok &= Write(dir, "bad_utf8", r);
  }
  {
    auto r = Base("both");
    AddTurn(r, ari_ROLE_USER, "hi");
    ok &= Write(dir, "bad_both", r);
  }
  {
    auto r = Base("");
    AddTurn(r, ari_ROLE_USER, "hi");
    r.turns[0].text_len = 5000;
    r.n_turns = 9;
    ok &= Write(dir, "bad_turns", r);
  }
  {
    auto r = Base("Take me to the airport");
    r.response_format.kind = ari_RESPONSE_FORMAT_SCHEMA_NAME;
    std::strcpy(r.response_format.schema_name, "navigation_destination");
    ok &= Write(dir, "ok_schema_name", r);
  }
  {
    auto r = Base("Cool the rear");
    const std::string_view schema = R"({"type":"object","properties":{"ac":{"type":"boolean"}}})";
    r.response_format.kind = ari_RESPONSE_FORMAT_JSON_SCHEMA;
    r.response_format.text_len = static_cast<uint32_t>(schema.size());
    std::memcpy(r.response_format.text, schema.data(), schema.size());
    ok &= Write(dir, "ok_inline_schema", r);
  }
  {
    auto r = Base("x");
    r.response_format.kind = ari_RESPONSE_FORMAT_GRAMMAR;
    r.response_format.text_len = 0xffffffffu;
    ok &= Write(dir, "bad_format_len", r);
  }
  {
    auto r = Base("x");
    const int32_t bad = 9;
    std::memcpy(&r.response_format.kind, &bad, sizeof bad);
    std::memset(r.response_format.schema_name, 'n', sizeof r.response_format.schema_name);
    ok &= Write(dir, "bad_format_kind", r);
  }
  {
    auto r = Base("x");
    r.sampling.temperature = std::nanf("");
    r.sampling.top_p = -1.0f;
    r.max_tokens = 0;
    ok &= Write(dir, "bad_sampling", r);
  }
  return ok ? 0 : 1;
}
