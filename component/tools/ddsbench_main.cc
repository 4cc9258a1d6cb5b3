// ari-ddsbench: what DDS costs on top of the engine (a benchmark program, not a test).
//
//   ari-ddsbench --model stories260K.gguf [--requests 50] [--max-tokens 32]
//                [--domain 227] [--shm auto|on|off] [--urgency critical|normal]
//
// Requests are CRITICAL (greedy) and the node runs a simulated cool die, so the
// governor adds no pacing pauses.
// 1. In-process: the engine alone, time to first token (TTFT) for the request below.
// 2. Phase "off": starts ari-node (this build's binary, loopback config, its own domain)
//    and a client in a child process; per request: TTFT seen by ari_client (Ask ->
//    first chunk), the node's own TTFT (TokenChunk timing: admission -> first token
//    published), and for every chunk the delivery latency = reception time in the
//    client process - the DDS source timestamp the node's dds_write put on the chunk
//    (same host, same clock).
// 3. Phase "on": the same with its own iox-roudi (config/roudi.toml, stopped by PID)
//    and cyclonedds-shm.xml: chunks and requests through iceoryx shared memory.
// DDS overhead = client TTFT - node TTFT (per request), and client TTFT - in-process
// TTFT (medians). Results: docs/benchmarks.md "DDS overhead".
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "component/client/client.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model.h"

namespace {

namespace dds = ari::component::dds;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model;
  int requests = 50;
  uint32_t max_tokens = 32;
  int domain = 227;  // above the test domains (10..)
  std::string shm = "auto";
  std::string urgency = "critical";
  std::string phase;  // child: "off" / "on"
  std::string prompt = "Once upon a time";
};

constexpr int kMaxSamples = 4096;
struct PhaseResult {
  int ok = 0;
  int shm_chunk_reader = 0, shm_request_writer = 0;
  uint64_t loaned_requests = 0;
  int n_ttft = 0, n_lat = 0;
  double client_ttft_us[512] = {};
  double node_ttft_us[512] = {};
  double latency_us[kMaxSamples] = {};
  char error[256] = {};
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(
      v.size() - 1, static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

fs::path SelfDir() { return fs::read_symlink("/proc/self/exe").parent_path(); }
// A config file shipped in the project's config/ folder (the path ari_client was built with).
fs::path SourceConfig(const char* name) {
  std::string uri = dds::ShippedConfigUri(name);
  if (uri.rfind("file://", 0) == 0) uri = uri.substr(7);
  return uri;
}

// ------------------------------------------------------------ in-process engine
std::vector<double> InProcessTtft(const Args& a, int reps) {
  ari::runtime::EngineOptions eo;
  eo.model_path = a.model;
  eo.slots = 1;
  eo.context_length = 512;
  eo.max_output = 256;
  eo.threads = 1;
  eo.require_tokenizer = true;
  auto engine = ari::runtime::Engine::Create(eo);
  if (!engine) {
    std::fprintf(stderr, "engine: %s\n", engine.error().ToString().c_str());
    return {};
  }
  std::vector<double> out;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    auto ids = (*engine)->model().tokenizer()->Encode(a.prompt, ari::runtime::EncodeOptions{});
    if (!ids) return {};
    ari::runtime::TurnSpec turn;
    turn.prompt = *ids;
    turn.max_tokens = static_cast<int32_t>(a.max_tokens);
    turn.keep_context = false;
    if (!(*engine)->StartTurn(0, turn)) return {};
    for (;;) {
      auto c = (*engine)->RunChunk(0, ari::runtime::ChunkKnobs{});
      if (!c) return {};
      if (!c->tokens.empty()) {
        out.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        break;
      }
      if (c->finished) break;
    }
    (*engine)->ResetSlot(0);
  }
  return out;
}

// ------------------------------------------------------------ child processes
pid_t Spawn(std::vector<std::string> argv, const fs::path& log, int keep_fd = -1) {
  // execve takes char* const[]: point at this function's own copies of the strings.
  std::vector<char*> v;
  v.reserve(argv.size() + 1);
  for (auto& s : argv) v.push_back(s.data());
  v.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty()) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
    }
    if (keep_fd >= 0) dup2(keep_fd, 3);
    execve(v[0], v.data(), environ);
    _exit(127);
  }
  return pid;
}

int StopPid(pid_t pid) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Starts iox-roudi with the project's pool config; 0 when it did not become ready.
pid_t StartRoudi(const fs::path& log) {
  const pid_t pid = Spawn({"/usr/bin/iox-roudi", "-c", SourceConfig("roudi.toml").string()}, log);
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (dds::RoudiReachable()) return pid;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return 0;
  }
  StopPid(pid);
  return 0;
}

void Fail(PhaseResult* r, const std::string& why) { dds::CopyFixed(why, r->error); }

void WriteNodeConfig(const fs::path& dir, const Args& a, bool shm, const std::string& cyclone) {
  std::ofstream cfg(dir / "node.textproto");
  cfg << "model_path: \"" << fs::absolute(a.model).string() << "\"\n"
      << "policy_path: \"" << SourceConfig("policy_default.textproto").string() << "\"\n"
      << "dds { domain_id: " << a.domain << " cyclone_config: \"" << cyclone
      << "\" shared_memory: " << (shm ? "true" : "false") << " }\n"
      << "session_slots: 2\nmax_context: 512\nthreads: 1\nstatus_period_ms: 1000\n"
      << "limits { max_max_tokens: 256 client_rate_per_s: 0 }\n"
      // Simulated cool die: the governor stays in its "normal" band (no pacing pauses;
      // without a sensor it runs conservative and paces), so node TTFT ~ engine TTFT.
      << "sensor { kind: SENSOR_RC_MODEL }\n";
}

// The requests through the client library, `measuring` after the warm-up ones: time to
// first chunk at the client and at the node.
void AskRequests(const Args& a, ari::component::Client& client, std::atomic<bool>& measuring,
                 PhaseResult* r) {
  ari::component::AskParams p;
  p.prompt = a.prompt;
  p.max_tokens = a.max_tokens;
  // CRITICAL: no pacing pauses in the cool band, the engine runs flat out (2 threads);
  // NORMAL: short pacing pauses between chunks leave the CPU to the DDS threads.
  p.urgency = a.urgency == "normal" ? ari_URGENCY_NORMAL : ari_URGENCY_CRITICAL;
  const int warmup = 5;
  for (int i = 0; i < warmup + a.requests && i - warmup < 512; ++i) {
    measuring.store(i >= warmup);
    const auto t0 = Clock::now();
    auto s = client.Ask(p);
    if (!s) {
      Fail(r, "ask: " + s.error().ToString());
      break;
    }
    auto first = s->Next(std::chrono::seconds(30));
    const auto t1 = Clock::now();
    if (!first) {
      Fail(r, "first chunk: " + first.error().ToString());
      break;
    }
    ari_TokenChunk last = *first;
    while (!last.terminal) {
      auto c = s->Next(std::chrono::seconds(30));
      if (!c) break;
      last = *c;
    }
    if (i >= warmup && last.terminal && dds::RawEnum(last.status) == ari_STATUS_DONE) {
      r->client_ttft_us[r->n_ttft] = std::chrono::duration<double, std::micro>(t1 - t0).count();
      r->node_ttft_us[r->n_ttft] = last.timing.time_to_first_token_us;
      ++r->n_ttft;
    }
  }
}

// The client and, next to it, a raw chunk reader (every chunk with its sample info:
// publication -> reception latency) on the node's domain. False when the domain or the
// raw reader could not be set up (r->error says why).
bool MeasureOverDds(const Args& a, const fs::path& dir, const std::string& cyclone,
                    PhaseResult* r) {
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(a.domain);
  d.config = "file://" + cyclone;
  auto domain = dds::Domain::Create(d);
  auto fail = [r](const std::string& why) {
    Fail(r, why);
    return false;
  };
  if (!domain) return fail(domain.error().ToString());
  // Raw reader next to the client: sees every chunk with its sample info.
  auto pp = dds::Participant::Create(*domain);
  if (!pp) return fail(pp.error().ToString());
  auto topic = dds::Topic::Create(*pp, dds::TopicKind::kTokenChunk);
  if (!topic) return fail(topic.error().ToString());
  auto reader = dds::Reader::Create(*pp, *topic);
  if (!reader) return fail(reader.error().ToString());
  auto cond = dds::ReadCondition::Create(*reader);
  auto ws = dds::WaitSet::Create(*pp);
  if (!cond || !ws || !ws->Attach(cond->handle(), 1)) return fail("raw reader setup failed");
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> take_errors{0};  // latency samples lost to a failed take
  std::thread taker([&] {
    dds_attach_t fired[1];
    while (!stop.load()) {
      auto n = ws->Wait(fired, std::chrono::milliseconds(100));
      if (!n || *n == 0) continue;
      auto took = reader->TakeLoaned(16, [&](const void* s, const dds_sample_info_t& info) {
        const dds_time_t now = dds_time();
        if (s == nullptr || !measuring.load() || r->n_lat >= kMaxSamples) return;
        r->latency_us[r->n_lat++] = static_cast<double>(now - info.source_timestamp) / 1e3;
      });
      if (!took) take_errors.fetch_add(1);
    }
  });
  ari::component::ClientOptions o;
  o.client_id = "ddsbench";
  o.node_timeout = std::chrono::seconds(30);
  auto client = ari::component::Client::Connect(*domain, o);
  if (client && (*client)->WaitForNode(std::chrono::seconds(60))) {
    r->shm_chunk_reader = (*client)->chunk_shared_memory();
    r->shm_request_writer = (*client)->request_shared_memory();
    AskRequests(a, **client, measuring, r);
    r->loaned_requests = (*client)->request_stats().loaned_writes;
    r->ok = r->n_ttft > 0 && r->error[0] == '\0';
  } else {
    Fail(r, client ? "node not seen (log " + (dir / "node.log").string() + ")"
                   : client.error().ToString());
  }
  stop.store(true);
  taker.join();
  if (const uint64_t lost = take_errors.load(); lost > 0 && r->ok) {
    Fail(r, "raw chunk reader: " + std::to_string(lost) + " takes failed (latencies lost)");
    r->ok = false;
  }
  return true;
}

// Phase child: node + client + raw chunk reader; fills *r.
void RunPhase(const Args& a, bool shm, PhaseResult* r) {
  const fs::path dir = fs::temp_directory_path() / ("ari-ddsbench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cyclone =
      SourceConfig(shm ? "cyclonedds-shm.xml" : "cyclonedds-lo.xml").string();
  WriteNodeConfig(dir, a, shm, cyclone);
  const pid_t node =
      Spawn({(SelfDir() / "ari-node").string(), "--config", (dir / "node.textproto").string()},
            dir / "node.log");
  // A failed setup returns at once: the node is left running, its directory in place.
  if (!MeasureOverDds(a, dir, cyclone, r)) return;
  if (StopPid(node) != 0)
    std::fprintf(stderr, "ari-node did not exit 0 (log %s)\n", (dir / "node.log").c_str());
  fs::remove_all(dir);
}

bool RunPhaseChild(const Args& a, const char* phase, PhaseResult* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const pid_t pid = Spawn({self, "--model", a.model, "--requests", std::to_string(a.requests),
                           "--max-tokens", std::to_string(a.max_tokens), "--domain",
                           std::to_string(a.domain), "--urgency", a.urgency, "--phase", phase},
                          {}, fds[1]);
  close(fds[1]);
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(out);
  while (got < sizeof *out) {
    const ssize_t n = read(fds[0], bytes + got, sizeof *out - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == sizeof *out;
}

void Report(const char* name, const PhaseResult& r, double inproc_med) {
  std::vector<double> ct(r.client_ttft_us, r.client_ttft_us + r.n_ttft);
  std::vector<double> nt(r.node_ttft_us, r.node_ttft_us + r.n_ttft);
  std::vector<double> ov;
  ov.reserve(ct.size());
  for (int i = 0; i < r.n_ttft; ++i) ov.push_back(ct[i] - nt[i]);
  std::vector<double> lat(r.latency_us, r.latency_us + r.n_lat);
  std::printf("%-4s  shm(chunk reader=%d, request writer=%d, loaned requests=%llu)\n", name,
              r.shm_chunk_reader, r.shm_request_writer,
              static_cast<unsigned long long>(r.loaned_requests));
  std::printf("      client TTFT        p50 %8.1f us  p99 %8.1f us  (%d requests)\n",
              Percentile(ct, 0.5), Percentile(ct, 0.99), r.n_ttft);
  std::printf("      node TTFT          p50 %8.1f us  p99 %8.1f us\n", Percentile(nt, 0.5),
              Percentile(nt, 0.99));
  std::printf("      overhead (client-node TTFT)  p50 %8.1f us  p99 %8.1f us\n",
              Percentile(ov, 0.5), Percentile(ov, 0.99));
  std::printf("      client TTFT / in-process TTFT (medians): %.2fx, difference %.1f us\n",
              inproc_med > 0 ? Percentile(ct, 0.5) / inproc_med : 0.0,
              Percentile(ct, 0.5) - inproc_med);
  std::printf("      chunk delivery     p50 %8.1f us  p99 %8.1f us  max %8.1f us  (%d chunks)\n",
              Percentile(lat, 0.5), Percentile(lat, 0.99),
              lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end()), r.n_lat);
}

// The iceoryx phase: starts its own iox-roudi (stopped by PID), or skips when one it did not
// start is running. Returns 1 when the phase ran and failed, or was required and could not run.
int RunShmPhase(const Args& a, double inproc_med) {
  int rc = 0;
  if (dds::RoudiReachable()) {
    std::printf("on    skipped: an iox-roudi this program did not start is running\n");
  } else {
    const fs::path roudi_log =
        fs::temp_directory_path() / ("ari-ddsbench-roudi-" + std::to_string(getpid()) + ".log");
    const pid_t roudi = StartRoudi(roudi_log);
    if (roudi == 0) {
      std::printf("on    skipped: iox-roudi did not start (log %s)\n", roudi_log.c_str());
      if (a.shm == "on") rc = 1;
    } else {
      auto on = std::make_unique<PhaseResult>();
      const bool ok = RunPhaseChild(a, "on", on.get()) && on->ok;
      StopPid(roudi);
      fs::remove(roudi_log);
      if (!ok) {
        std::fprintf(stderr, "phase on failed: %s\n", on->error);
        rc = 1;
      } else {
        Report("on", *on, inproc_med);
      }
    }
  }
  return rc;
}

int Usage(FILE* out = stderr) {
  std::fprintf(
      out,
      "usage: ari-ddsbench --model FILE.gguf [--requests N (<=500)] [--max-tokens N]\n"
      "                    [--domain N] [--shm auto|on|off] [--urgency critical|normal]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") return Usage(stdout), 0;
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return Usage();
    if (k == "--model")
      a.model = v;
    else if (k == "--requests")
      a.requests = std::clamp(std::atoi(v), 1, 500);
    else if (k == "--max-tokens")
      a.max_tokens = static_cast<uint32_t>(std::clamp(std::atoi(v), 1, 256));
    else if (k == "--domain")
      a.domain = std::atoi(v);
    else if (k == "--shm")
      a.shm = v;
    else if (k == "--urgency" && (std::string(v) == "critical" || std::string(v) == "normal"))
      a.urgency = v;
    else if (k == "--phase")
      a.phase = v;
    else
      return Usage();
  }
  if (a.model.empty()) return Usage();
  if (!a.phase.empty()) {  // child
    auto r = std::make_unique<PhaseResult>();
    RunPhase(a, a.phase == "on", r.get());
    const bool ok = write(3, r.get(), sizeof *r) == static_cast<ssize_t>(sizeof *r);
    std::fflush(nullptr);
    std::exit(ok ? 0 : 1);  // static destructors deregister from iox-roudi
  }
  const auto inproc = InProcessTtft(a, a.requests + 5);
  if (inproc.empty()) return 1;
  const std::vector<double> measured(inproc.begin() + 5, inproc.end());
  const double inproc_med = Percentile(measured, 0.5);
  std::printf(
      "ari-ddsbench: model %s, prompt \"%s\", max_tokens %u, urgency %s, %d requests "
      "(+5 warm-up), domain %d\n",
      a.model.c_str(), a.prompt.c_str(), a.max_tokens, a.urgency.c_str(), a.requests, a.domain);
  {
    std::ifstream la("/proc/loadavg");
    std::string l1, l5, l15;
    la >> l1 >> l5 >> l15;
    std::printf("machine: %u CPUs online, load average %s %s %s (shared machine: expect noise)\n",
                std::thread::hardware_concurrency(), l1.c_str(), l5.c_str(), l15.c_str());
  }
  std::printf("in-process TTFT       p50 %8.1f us  p99 %8.1f us\n", inproc_med,
              Percentile(measured, 0.99));
  int rc = 0;
  if (a.shm != "on") {
    auto off = std::make_unique<PhaseResult>();
    if (!RunPhaseChild(a, "off", off.get()) || !off->ok) {
      std::fprintf(stderr, "phase off failed: %s\n", off->error);
      rc = 1;
    } else {
      Report("off", *off, inproc_med);
    }
  }
  if (a.shm != "off") rc |= RunShmPhase(a, inproc_med);
  return rc;
}
