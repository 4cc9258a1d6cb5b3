// Request encoding and terminal-status mapping of ari_client (no DDS entities).
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "component/client/client.h"

namespace ari::component {

Result<Turn> ParseTurn(std::string_view spec) {
  constexpr std::pair<std::string_view, ari_TurnRole> kRoles[] = {
      {"system", ari_ROLE_SYSTEM}, {"user", ari_ROLE_USER}, {"assistant", ari_ROLE_ASSISTANT}};
  for (const auto& [name, role] : kRoles) {
    if (spec.size() > name.size() && spec.starts_with(name) && spec[name.size()] == ':') {
      return Turn{role, std::string(spec.substr(name.size() + 1))};
    }
  }
  return MakeError(
      ErrorCode::kInvalidArgument,
      "turn '" + std::string(spec) + "': expected system:TEXT, user:TEXT or assistant:TEXT");
}

std::vector<Turn> ChatTurns(const AskParams& p) {
  std::vector<Turn> out;
  if (p.system.empty() && p.turns.empty()) return out;  // plain prompt
  out.reserve(p.turns.size() + 2);
  if (!p.system.empty()) out.push_back({ari_ROLE_SYSTEM, p.system});
  out.insert(out.end(), p.turns.begin(), p.turns.end());
  if (!p.prompt.empty()) out.push_back({ari_ROLE_USER, p.prompt});
  return out;
}

namespace {

// The response format of `p` (at most one of schema_name, json_schema, grammar).
Result<void> EncodeResponseFormat(const AskParams& p, ari_ResponseFormat* out) {
  auto bad = [](std::string m) { return MakeError(ErrorCode::kInvalidArgument, std::move(m)); };
  const int given = !p.schema_name.empty() + !p.json_schema.empty() + !p.grammar.empty();
  if (given > 1) return bad("give at most one of schema name, JSON schema, grammar");
  if (!p.schema_name.empty()) {
    if (!dds::CopyFixed(p.schema_name, out->schema_name)) {
      return bad("schema name must be 1.." + std::to_string(ari_kSchemaNameLen - 1) + " bytes");
    }
    out->kind = ari_RESPONSE_FORMAT_SCHEMA_NAME;
    return {};
  }
  const std::string& text = p.json_schema.empty() ? p.grammar : p.json_schema;
  if (text.empty()) return {};
  if (text.size() > ari_kFormatTextLen) {
    return bad(std::string(p.json_schema.empty() ? "grammar" : "JSON schema") + " has " +
               std::to_string(text.size()) + " bytes, limit " + std::to_string(ari_kFormatTextLen));
  }
  out->kind = p.json_schema.empty() ? ari_RESPONSE_FORMAT_GRAMMAR : ari_RESPONSE_FORMAT_JSON_SCHEMA;
  out->text_len = static_cast<uint32_t>(text.size());
  std::memcpy(out->text, text.data(), text.size());
  return {};
}

}  // namespace

std::string_view FormatStateName(ari_FormatState s) {
  switch (dds::RawEnum(s)) {
    case ari_FORMAT_COMPLETE: return "complete";
    case ari_FORMAT_INCOMPLETE: return "incomplete";
    default: return "none";
  }
}

Result<void> EncodeRequest(const AskParams& p, std::string_view request_id,
                           std::string_view client_id, ari_Request* out) {
  std::memset(out, 0, sizeof *out);
  auto bad = [](std::string m) { return MakeError(ErrorCode::kInvalidArgument, std::move(m)); };
  if (request_id.empty() || !dds::CopyFixed(request_id, out->request_id)) {
    return bad("request id must be 1.." + std::to_string(ari_kRequestIdLen - 1) + " bytes");
  }
  if (client_id.empty() || !dds::CopyFixed(client_id, out->client_id)) {
    return bad("client id must be 1.." + std::to_string(ari_kClientIdLen - 1) + " bytes");
  }
  if (!dds::CopyFixed(p.target_node, out->target_node_id)) {
    return bad("target node id must be at most " + std::to_string(ari_kNodeIdLen - 1) + " bytes");
  }
  const std::vector<Turn> turns = ChatTurns(p);
  if (p.prompt.empty() && turns.empty()) return bad("give a prompt or chat turns");
  if (const int32_t u = dds::RawEnum(p.urgency);
      u < ari_URGENCY_BACKGROUND || u > ari_URGENCY_CRITICAL) {
    return bad("unknown urgency " + std::to_string(u));
  }
  if (p.max_tokens == 0) return bad("max_tokens must be > 0");
  if (turns.empty() && p.prompt.size() > ari_kPromptLen) {
    return bad("prompt has " + std::to_string(p.prompt.size()) + " bytes, limit " +
               std::to_string(ari_kPromptLen));
  }
  if (turns.size() > ari_kMaxTurns) {
    return bad("too many chat turns: " + std::to_string(turns.size()) + " > " +
               std::to_string(ari_kMaxTurns) + " (system and prompt included)");
  }
  out->urgency = p.urgency;
  out->max_tokens = p.max_tokens;
  out->deadline_ms = p.deadline_ms;
  out->session_id = p.session_id;
  out->sampling = p.sampling;
  if (turns.empty()) {
    out->prompt_len = static_cast<uint32_t>(p.prompt.size());
    std::memcpy(out->prompt, p.prompt.data(), p.prompt.size());
  }
  out->n_turns = static_cast<uint32_t>(turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    if (const int32_t role = dds::RawEnum(t.role);
        role < ari_ROLE_SYSTEM || role > ari_ROLE_ASSISTANT) {
      return bad("turn " + std::to_string(i) + ": unknown role");
    }
    if (t.text.empty()) return bad("turn " + std::to_string(i) + " is empty");
    if (t.text.size() > ari_kTurnTextLen) {
      return bad("turn " + std::to_string(i) + " has " + std::to_string(t.text.size()) +
                 " bytes, limit " + std::to_string(ari_kTurnTextLen));
    }
    out->turns[i].role = t.role;
    out->turns[i].text_len = static_cast<uint32_t>(t.text.size());
    std::memcpy(out->turns[i].text, t.text.data(), t.text.size());
  }
  return EncodeResponseFormat(p, &out->response_format);
}

std::optional<Error> TerminalError(const ari_TokenChunk& c) {
  const std::string msg(dds::FixedView(c.message));
  auto make = [&](ErrorCode code, const char* what) {
    std::string m =
        std::string("request ") + std::string(dds::FixedView(c.request_id)) + " " + what;
    if (!msg.empty()) m += ": " + msg;
    return Error{code, m, 0, dds::RawEnum(c.status)};
  };
  switch (dds::RawEnum(c.status)) {
    case ari_STATUS_DONE: return std::nullopt;
    case ari_STATUS_CANCELLED: return make(ErrorCode::kCancelled, "cancelled");
    case ari_STATUS_DEADLINE_MISSED: return make(ErrorCode::kDeadlineMissed, "missed its deadline");
    case ari_STATUS_REJECTED: return make(ErrorCode::kRejected, "rejected (REJECTED)");
    case ari_STATUS_BUSY: return make(ErrorCode::kRejected, "rejected (BUSY)");
    case ari_STATUS_INVALID: return make(ErrorCode::kRejected, "rejected (INVALID)");
    case ari_STATUS_FORBIDDEN: return make(ErrorCode::kRejected, "rejected (FORBIDDEN)");
    case ari_STATUS_FAILED: return make(ErrorCode::kFailed, "failed");
    case ari_STATUS_SHUTDOWN: return make(ErrorCode::kFailed, "ended by node shutdown");
    case ari_STATUS_NODE_LOST: return make(ErrorCode::kNodeLost, "ended: its node was lost");
    default: break;  // OK or out of range: not a valid terminal status
  }
  return make(ErrorCode::kInternal, "ended with a non-terminal status");
}

}  // namespace ari::component
