// ari-cli: talk to an ARI node from a shell (uses ari_client only).
//   ari-cli [--domain N] [--config CYCLONE_XML] [--client NAME] COMMAND ...
//   ask [--urgency critical|high|normal|background] [--deadline-ms N] [--session ID]
//       [--max-tokens N] [--temp T] [--seed S] [--chunks] [--node NODE_ID] [--model M]
//       [--system TEXT] [--turn user:TEXT|assistant:TEXT]...
//       [--schema-name NAME | --schema FILE.json | --grammar FILE.gbnf] "prompt"
//       (--system/--turn make it a chat-form request: system, turns, then the prompt
//       as the last user turn; the node renders them with the model's chat template;
//       --schema-name: a schema registered in the node config, --schema / --grammar: an
//       inline JSON Schema / grammar; the answer is then constrained and the last line
//       on stderr says "structured output: FORMAT_COMPLETE" or "FORMAT_INCOMPLETE";
//       --node pins the request to one node, else the client library routes it among
//       the nodes on the domain, docs/routing.md; --model: only a node running model M
//       (its name or 16-hex content hash, as `status` prints them) may answer; stderr
//       names the node: "request ID (URGENCY) -> node N")
//   status [--timeout-ms N]       print the node's current NodeStatus
//   watch [--count N] [--duration-ms N]   print every NodeStatus as it arrives
//   cancel REQUEST_ID             (the id ask prints on stderr)
//   control standby|resume [--node NODE_ID] [--timeout-ms N]
//       memory yield on command (topic ari/v2/control, docs/memory.md "Memory yield"):
//       STANDBY hands the node's model pages and KV arena back, RESUME re-warms them;
//       prints the node's standby state and RSS once it changed. Under DDS Security only
//       identities granted publish on ari/v2/control may send it (exit 5 otherwise).
// Exit codes (ask): 0 DONE, 1 usage, 3 node absent, 4 node lost mid-stream,
// 5 REJECTED/BUSY/INVALID/FORBIDDEN, 6 DEADLINE_MISSED, 7 CANCELLED, 8 FAILED/SHUTDOWN,
// 9 other error (timeout, DDS). status/watch: 0, or 3 when no node answers.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "component/client/chunk_trace_text.h"
#include "component/client/client.h"
#include "component/client/control.h"
#include "component/client/routing.h"

namespace {

using namespace ari::component;
using Clock = std::chrono::steady_clock;

const char* StatusName(int32_t s) {
  static const char* kNames[] = {"OK",   "DONE",    "CANCELLED", "DEADLINE_MISSED", "REJECTED",
                                 "BUSY", "INVALID", "FORBIDDEN", "FAILED",          "SHUTDOWN"};
  return s >= 0 && s < 10 ? kNames[s] : "?";
}
const char* UrgencyName(int32_t u) {
  static const char* kNames[] = {"BACKGROUND", "NORMAL", "HIGH", "CRITICAL"};
  return u >= 0 && u < 4 ? kNames[u] : "?";
}
const char* NodeStateName(int32_t s) {
  static const char* kNames[] = {"STARTING", "READY", "DRAINING", "STOPPED"};
  return s >= 0 && s < 4 ? kNames[s] : "?";
}

int ExitCodeForStatus(int32_t status) {
  switch (status) {
    case ari_STATUS_DONE: return 0;
    case ari_STATUS_REJECTED:
    case ari_STATUS_BUSY:
    case ari_STATUS_INVALID:
    case ari_STATUS_FORBIDDEN: return 5;
    case ari_STATUS_DEADLINE_MISSED: return 6;
    case ari_STATUS_CANCELLED: return 7;
    case ari_STATUS_FAILED:
    case ari_STATUS_SHUTDOWN: return 8;
    case ari_STATUS_NODE_LOST: return 4;  // as ErrorCode::kNodeLost
    default: return 9;
  }
}

int ExitCodeForError(const Error& e) {
  if (e.status >= 0) return ExitCodeForStatus(e.status);
  switch (e.code) {
    case ErrorCode::kNodeAbsent: return 3;
    case ErrorCode::kNodeLost: return 4;
    case ErrorCode::kInvalidArgument: return 1;
    default: return 9;
  }
}

const char* StandbyName(int s) {
  switch (s) {
    case ari_STANDBY_NONE: return "none";
    case ari_STANDBY_ENTERING: return "entering";
    case ari_STANDBY_IN: return "in standby";
    case ari_STANDBY_RESUMING: return "resuming";
    default: return "?";
  }
}

void PrintStatus(const ari_NodeStatus& s) {
  const auto U = [&](int i) { return s.queue_depth[i]; };
  std::printf(
      "node %s %s seq %u up %llu ms | %.1f C (%s) | decision %s | reason %s | queues "
      "C%u H%u N%u B%u | sessions %u/%u | mem %llu MiB (memory level %u) | %.1f tok/s | band %d "
      "%s | model %s %s (%s; precision switch %s) | standby %s, RSS %llu MiB\n",
      dds::FixedView(s.node_id).data(), NodeStateName(dds::RawEnum(s.state)), s.status_seq,
      static_cast<unsigned long long>(s.uptime_ms), s.temperature_c,
      dds::RawEnum(s.sensor_state) == ari_SENSOR_OK          ? "ok"
      : dds::RawEnum(s.sensor_state) == ari_SENSOR_SIMULATED ? "simulated"
      : dds::RawEnum(s.sensor_state) == ari_SENSOR_STALE     ? "stale"
                                                             : "missing",
      dds::FixedView(s.decision).data(), dds::FixedView(s.reason).data(), U(3), U(2), U(1), U(0),
      s.sessions_in_use, s.sessions_total,
      static_cast<unsigned long long>(s.memory_available_bytes >> 20), s.memory_level,
      s.tokens_per_s, s.thermal_band, dds::FixedView(s.thermal_band_name).data(),
      dds::FixedView(s.model).data(), ModelHashText(s.model_hash).c_str(),
      dds::FixedView(s.pack).data(), s.can_switch_precision ? "yes" : "no",
      StandbyName(dds::RawEnum(s.standby)), static_cast<unsigned long long>(s.rss_bytes >> 20));
  std::fflush(stdout);
}

// `ask --chunks`: one line per chunk (wall-clock time of day, so the lines of several
// ari-cli processes can be merged), then what ran next to what was decided
// (docs/interface.md, "What ran").
void PrintChunkLine(const ari_TokenChunk& c, const std::string& tag) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  std::string text(c.text, c.text_len);
  for (size_t k = 0; (k = text.find('\n', k)) != std::string::npos; k += 2) {
    text.replace(k, 1, "\\n");
  }
  std::printf("%02lld:%02lld:%02lld.%03lld %-8s #%-3u %s\n    [%s]\n", (ms / 3600000) % 24,
              (ms / 60000) % 60, (ms / 1000) % 60, ms % 1000, tag.c_str(), c.sequence_number,
              text.c_str(), ChunkTraceText(c).c_str());
}

int Usage(FILE* out = stderr) {
  std::fprintf(out,
               "usage: ari-cli [--domain N] [--config XML] [--client NAME] COMMAND\n"
               "  ask [--urgency critical|high|normal|background] [--deadline-ms N]\n"
               "      [--session ID] [--max-tokens N] [--temp T] [--seed S] [--chunks]\n"
               "      [--node NODE_ID]  (pin one node; else routed, docs/routing.md)\n"
               "      [--model NAME|HASH]  (only a node running this model answers)\n"
               "      [--system TEXT] [--turn user:TEXT|assistant:TEXT]...\n"
               "      [--schema-name NAME | --schema FILE.json | --grammar FILE.gbnf] [PROMPT]\n"
               "      (chat form: system, turns, then PROMPT as the last user turn)\n"
               "  status [--timeout-ms N]\n"
               "  watch [--count N] [--duration-ms N]\n"
               "  cancel REQUEST_ID\n"
               "  control standby|resume [--node NODE_ID] [--timeout-ms N]\n");
  return 1;
}

bool ParseUrgency(const std::string& u, ari_UrgencyClass& out) {
  constexpr std::pair<const char*, ari_UrgencyClass> kNames[] = {
      {"critical", ari_URGENCY_CRITICAL},
      {"high", ari_URGENCY_HIGH},
      {"normal", ari_URGENCY_NORMAL},
      {"background", ari_URGENCY_BACKGROUND}};
  for (const auto& [name, urgency] : kNames) {
    if (u == name) {
      out = urgency;
      return true;
    }
  }
  return false;
}

// --system TEXT / --turn ROLE:TEXT into p; false (after a message) on a bad value.
bool AddChatArg(AskParams& p, const std::string& flag, const std::string& value) {
  if (flag == "--system") {
    p.system = value;
    return !value.empty();
  }
  auto turn = ParseTurn(value);
  if (!turn) std::fprintf(stderr, "ari-cli: %s\n", turn.error().ToString().c_str());
  if (turn) p.turns.push_back(std::move(*turn));
  return turn.has_value();
}

// The whole file at `path` into *out; false (after a message) when it cannot be read.
bool ReadTextFile(const std::string& path, std::string* out) {
  std::FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    std::fprintf(stderr, "ari-cli: cannot read '%s'\n", path.c_str());
    return false;
  }
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->append(buf, n);
  std::fclose(f);
  return true;
}

// The options of `ask` into p (and *chunks); false on a usage error.
bool ParseAskArgs(std::vector<std::string>& args, AskParams& p, bool* chunks) {
  p.max_tokens = 128;
  std::string prompt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto val = [&]() -> std::string { return i + 1 < args.size() ? args[++i] : ""; };
    if (a == "--urgency") {
      if (!ParseUrgency(val(), p.urgency)) return false;
    } else if (a == "--deadline-ms") {
      p.deadline_ms = static_cast<uint32_t>(std::strtoul(val().c_str(), nullptr, 10));
    } else if (a == "--session") {
      p.session_id = std::strtoull(val().c_str(), nullptr, 10);
    } else if (a == "--max-tokens") {
      p.max_tokens = static_cast<uint32_t>(std::strtoul(val().c_str(), nullptr, 10));
    } else if (a == "--temp") {
      p.sampling.temperature = std::strtof(val().c_str(), nullptr);
    } else if (a == "--seed") {
      p.sampling.seed = std::strtoull(val().c_str(), nullptr, 10);
    } else if (a == "--chunks") {
      *chunks = true;
    } else if (a == "--node") {
      p.target_node = val();
      if (p.target_node.empty()) return false;
    } else if (a == "--model") {
      p.target_model = val();
      if (p.target_model.empty()) return false;
    } else if (a == "--schema-name") {
      p.schema_name = val();
      if (p.schema_name.empty()) return false;
    } else if (a == "--schema") {
      if (!ReadTextFile(val(), &p.json_schema)) return false;
    } else if (a == "--grammar") {
      if (!ReadTextFile(val(), &p.grammar)) return false;
    } else if (a == "--system" || a == "--turn") {
      if (!AddChatArg(p, a, val())) return false;
    } else if (prompt.empty() && !a.starts_with("--")) {
      prompt = a;
    } else {
      return false;
    }
  }
  p.prompt = prompt;
  return !(prompt.empty() && p.turns.empty());
}

int Ask(Client& client, std::vector<std::string>& args) {
  AskParams p;
  bool chunks = false;
  if (!ParseAskArgs(args, p, &chunks)) return Usage();
  const auto t0 = Clock::now();
  auto stream = client.Ask(p);
  if (!stream) {
    std::fprintf(stderr, "ari-cli: %s\n", stream.error().ToString().c_str());
    return ExitCodeForError(stream.error());
  }
  std::fprintf(stderr, "request %s (%s) -> node %s\n", stream->request_id().c_str(),
               UrgencyName(p.urgency),
               stream->node_id().empty() ? "(any)" : stream->node_id().c_str());
  const std::string tag = client.client_id();
  auto sum = stream->Wait([&](const ari_TokenChunk& c) {
    if (c.terminal) return;
    if (chunks) {
      PrintChunkLine(c, tag);
    } else {
      std::fwrite(c.text, 1, c.text_len, stdout);
    }
    std::fflush(stdout);
  });
  if (!chunks) std::printf("\n");
  if (!sum) {
    std::fprintf(stderr, "ari-cli: %s\n", sum.error().ToString().c_str());
    return ExitCodeForError(sum.error());
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::fprintf(stderr,
               "%s %s: %u tokens | queue wait %.1f ms | TTFT %.1f ms | %.1f tok/s | total %.1f ms"
               "%s%s\n",
               tag.c_str(), StatusName(sum->status), sum->timing.tokens_generated,
               sum->timing.queue_wait_us / 1000.0, sum->timing.time_to_first_token_us / 1000.0,
               sum->timing.tokens_per_s, total_ms, sum->message.empty() ? "" : " | ",
               sum->message.c_str());
  if (dds::RawEnum(sum->format_state) != ari_FORMAT_NONE) {
    std::fprintf(stderr, "structured output: %s\n",
                 dds::RawEnum(sum->format_state) == ari_FORMAT_COMPLETE ? "FORMAT_COMPLETE"
                                                                        : "FORMAT_INCOMPLETE");
  }
  return ExitCodeForStatus(sum->status);
}

// `control standby|resume`: one command to one node, then its NodeStatus once the
// standby state reached what was asked (IN after STANDBY, NONE after RESUME).
int Control(Client& c, std::shared_ptr<dds::Domain> domain, const std::string& sender_id,
            const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "standby" && args[0] != "resume")) return Usage();
  const bool standby = args[0] == "standby";
  std::string node = "ari-node";
  long timeout_ms = 10000;
  for (size_t k = 1; k + 1 < args.size(); k += 2) {
    if (args[k] == "--node")
      node = args[k + 1];
    else if (args[k] == "--timeout-ms")
      timeout_ms = std::atol(args[k + 1].c_str());
    else
      return Usage();
  }
  auto sender = ControlSender::Create(std::move(domain), sender_id);
  if (!sender) {
    std::fprintf(stderr, "ari-cli: %s\n", sender.error().ToString().c_str());
    return sender.error().dds_rc == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY ||
                   sender.error().message.find("DDS Security") != std::string::npos
               ? 5
               : 9;
  }
  const auto wait = std::chrono::milliseconds(timeout_ms);
  if (auto r = (*sender)->Send(node, standby ? ari_CONTROL_STANDBY : ari_CONTROL_RESUME, wait);
      !r) {
    std::fprintf(stderr, "ari-cli: %s\n", r.error().ToString().c_str());
    return 9;
  }
  const int want = standby ? ari_STANDBY_IN : ari_STANDBY_NONE;
  auto s = c.WaitForNode(wait, [&](const ari_NodeStatus& st) {
    return dds::FixedView(st.node_id) == node && dds::RawEnum(st.standby) == want;
  });
  if (!s) {
    std::fprintf(stderr, "ari-cli: node %s did not report standby state '%s': %s\n", node.c_str(),
                 StandbyName(want), s.error().ToString().c_str());
    return 3;
  }
  std::printf("node %s: %s, RSS %.1f MiB (times memory released: %llu, commands ignored: %llu)\n",
              node.c_str(), StandbyName(dds::RawEnum(s->standby)), s->rss_bytes / 1048576.0,
              static_cast<unsigned long long>(s->standby_entered),
              static_cast<unsigned long long>(s->control_ignored));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ClientOptions opt;
  opt.client_id = "ari-cli";
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return Usage(stdout), 0;
    if (a == "--domain" && i + 1 < argc)
      opt.domain.domain_id = std::atoi(argv[++i]);
    else if (a == "--config" && i + 1 < argc)
      opt.domain.config = argv[++i];
    else if (a == "--client" && i + 1 < argc)
      opt.client_id = argv[++i];
    else
      break;
  }
  if (i >= argc) return Usage();
  const std::string cmd = argv[i++];
  std::vector<std::string> args(argv + i, argv + argc);
  auto domain = dds::Domain::Create(opt.domain);  // shared by the client and a controller
  if (!domain) {
    std::fprintf(stderr, "ari-cli: %s\n", domain.error().ToString().c_str());
    return 9;
  }
  auto client = Client::Connect(*domain, opt);
  if (!client) {
    std::fprintf(stderr, "ari-cli: %s\n", client.error().ToString().c_str());
    return 9;
  }
  Client& c = **client;
  if (cmd == "ask") return Ask(c, args);
  if (cmd == "control") return Control(c, *domain, opt.client_id, args);
  if (cmd == "status" || cmd == "watch") {
    long timeout_ms = 5000, count = cmd == "status" ? 1 : -1, duration_ms = -1;
    for (size_t k = 0; k + 1 < args.size(); k += 2) {
      if (args[k] == "--timeout-ms")
        timeout_ms = std::atol(args[k + 1].c_str());
      else if (args[k] == "--count")
        count = std::atol(args[k + 1].c_str());
      else if (args[k] == "--duration-ms")
        duration_ms = std::atol(args[k + 1].c_str());
      else
        return Usage();
    }
    const auto end = duration_ms >= 0 ? Clock::now() + std::chrono::milliseconds(duration_ms)
                                      : Clock::time_point::max();
    uint32_t last_seq = 0;
    std::string last_node;
    for (long n = 0; count < 0 || n < count;) {
      auto wait = std::chrono::milliseconds(timeout_ms);
      if (end != Clock::time_point::max()) {
        wait = std::min(wait,
                        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
        if (wait.count() <= 0) break;
      }
      auto s = c.WaitForNode(wait, [&](const ari_NodeStatus& st) {
        return n == 0 || st.status_seq != last_seq || dds::FixedView(st.node_id) != last_node;
      });
      if (!s) {
        if (n > 0 && cmd == "watch") continue;
        std::fprintf(stderr, "ari-cli: no node status: %s\n", s.error().ToString().c_str());
        return 3;
      }
      last_seq = s->status_seq;
      last_node = std::string(dds::FixedView(s->node_id));
      PrintStatus(*s);
      ++n;
    }
    return 0;
  }
  if (cmd == "cancel") {
    if (args.size() != 1) return Usage();
    auto r = c.Cancel(args[0]);
    if (!r) {
      std::fprintf(stderr, "ari-cli: %s\n", r.error().ToString().c_str());
      return 9;
    }
    return 0;
  }
  return Usage();
}
