// ari-soak: long mixed-traffic run against a running ari-node (a benchmark, not a test;
// scripts/soak.sh starts the node and runs this). Reports per time window: requests by
// terminal status, end-to-end latency and time-to-first-chunk percentiles (all classes and
// CRITICAL), node RSS; at the end: RSS drift after warm-up (min/max/slope) and the ledger
// (every request id sent got exactly one terminal chunk; from an independent reader).
//
//   ari-soak --domain N [--config XML] [--minutes M] [--clients K] [--warmup-s S]
//            [--window-s W] [--node-pid PID] [--burst-every-s B] [--burst N] [--think-ms T]
// Traffic per client (closed loop, one request in flight, think time T..T+1000 ms, T=500): urgency
// CRITICAL 5%, HIGH 15%, NORMAL 40%, BACKGROUND 40%; max_tokens 2-24; and every B seconds
// one client fires N requests at once (default 8 every 60 s). Exit 0 when the ledger is clean.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "component/client/client.h"
#include "component/client/ledger.h"

namespace {

using namespace ari::component;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

long RssKb(long pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

struct Sample {
  int urgency;
  int status;
  double latency_ms;
  double first_ms;  // -1: no chunk before the terminal
};

struct Window {
  std::vector<Sample> samples;
  long rss_kb = -1;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

constexpr const char* kPrompts[] = {"Once upon a time",    "The little bird",
                                    "Tom and his dog",     "Lily went to the park",
                                    "The sun was shining", "A big red ball"};

struct SoakArgs {
  ClientOptions base;
  double minutes = 10, warmup_s = 60, window_s = 60, burst_every_s = 60;
  int clients = 4, burst = 8, think_min_ms = 500, think_span_ms = 1000;
  long node_pid = -1;
};

void Usage(FILE* out) {
  std::fputs(
      "usage: ari-soak --domain N [--config XML] [--minutes M] [--clients K] [--warmup-s S]\n"
      "                [--window-s W] [--node-pid PID] [--burst-every-s B] [--burst N]\n"
      "                [--think-ms T]\n"
      "  long mixed-traffic run against a running ari-node (scripts/soak.sh starts one)\n",
      out);
}

// nullopt: a bad argument (said on stderr) or --help (said on stdout, *help set).
std::optional<SoakArgs> ParseArgs(int argc, char** argv, bool* help) {
  SoakArgs o;
  o.base.domain.domain_id = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      *help = true;
      return std::nullopt;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      std::fprintf(stderr, "ari-soak: %s needs a value\n", a.c_str());
      return std::nullopt;
    }
    ++i;
    if (a == "--domain")
      o.base.domain.domain_id = static_cast<uint32_t>(std::atoi(v));
    else if (a == "--config")
      o.base.domain.config = v;
    else if (a == "--minutes")
      o.minutes = std::atof(v);
    else if (a == "--clients")
      o.clients = std::max(1, std::atoi(v));
    else if (a == "--warmup-s")
      o.warmup_s = std::atof(v);
    else if (a == "--window-s")
      o.window_s = std::max(1.0, std::atof(v));
    else if (a == "--node-pid")
      o.node_pid = std::atol(v);
    else if (a == "--burst-every-s")
      o.burst_every_s = std::atof(v);
    else if (a == "--burst")
      o.burst = std::atoi(v);
    else if (a == "--think-ms")
      o.think_min_ms = std::max(0, std::atoi(v));
    else {
      std::fprintf(stderr, "ari-soak: unknown argument %s\n", a.c_str());
      return std::nullopt;
    }
  }
  return o;
}

// One soak run: the clients and the ledger on one domain, the per-window samples, the
// node's RSS series and the counters the client threads share.
class Soak {
 public:
  explicit Soak(const SoakArgs& args) : a_(args) {}

  // The domain, the ledger and the clients, once a node answers; 0 or the exit code.
  int Connect();
  // The client threads, the RSS sampler and the window reports until the end.
  void Run();
  // The summary: RSS drift after warm-up and the ledger; the exit code.
  int Finish();

 private:
  size_t WindowOf(Clock::time_point t) const {
    const double s = std::chrono::duration<double>(t - t0_).count();
    return std::min<size_t>(windows_.size() - 1, static_cast<size_t>(s / a_.window_s));
  }
  void Record(int urgency, int status, Clock::time_point start, Clock::time_point first,
              bool has_first);
  void FinishStream(Stream& s, int urgency, Clock::time_point start);
  void ClientLoop(int c);
  void ReportWindow(size_t w);

  const SoakArgs& a_;
  std::shared_ptr<dds::Domain> domain_;
  std::unique_ptr<ChunkLedger> ledger_;
  std::vector<std::unique_ptr<Client>> cl_;
  Clock::time_point t0_;
  decltype(Clock::now() + std::chrono::duration<double>()) end_;  // as t0_ + minutes
  int n_windows_ = 0;
  std::vector<Window> windows_;
  std::vector<std::pair<double, long>> rss_series_;  // (seconds, kB)
  std::mutex mu_;
  std::atomic<uint64_t> sent_{0}, send_errors_{0}, stream_errors_{0};
  std::vector<std::thread> threads_;
};

int Soak::Connect() {
  auto domain = ari::component::dds::Domain::Create(a_.base.domain);
  if (!domain) {
    std::fprintf(stderr, "ari-soak: %s\n", domain.error().ToString().c_str());
    return 2;
  }
  domain_ = std::move(*domain);
  auto ledger = ChunkLedger::Create(domain_, "soak");
  if (!ledger) {
    std::fprintf(stderr, "ari-soak: %s\n", ledger.error().ToString().c_str());
    return 2;
  }
  ledger_ = std::move(*ledger);
  for (int c = 0; c < a_.clients; ++c) {
    ClientOptions o = a_.base;
    o.client_id = "soak" + std::to_string(c);
    o.node_timeout = 30s;
    auto x = Client::Connect(domain_, o);
    if (!x || !(*x)->WaitForNode(30s)) {
      std::fprintf(stderr, "ari-soak: no node on domain %u\n", a_.base.domain.domain_id);
      return 3;
    }
    cl_.push_back(std::move(*x));
  }
  if (auto m = ledger_->WaitMatched(30s); !m) {
    std::fprintf(stderr, "ari-soak: %s\n", m.error().ToString().c_str());
    return 3;
  }
  return 0;
}

void Soak::Record(int urgency, int status, Clock::time_point start, Clock::time_point first,
                  bool has_first) {
  const auto now = Clock::now();
  Sample s{urgency, status, std::chrono::duration<double, std::milli>(now - start).count(),
           has_first ? std::chrono::duration<double, std::milli>(first - start).count() : -1};
  std::lock_guard<std::mutex> l(mu_);
  windows_[WindowOf(start)].samples.push_back(s);
}

// Waits for one stream's terminal; records it.
void Soak::FinishStream(Stream& s, int urgency, Clock::time_point start) {
  bool has_first = false, terminal = false;
  int status = -1;
  Clock::time_point first;
  auto waited = s.Wait(
      [&](const ari_TokenChunk& ch) {
        if (!has_first) {
          has_first = !ch.terminal;
          first = Clock::now();
        }
        if (ch.terminal) {
          terminal = true;
          status = ari::component::dds::RawEnum(ch.status);
        }
      },
      400s);  // > BACKGROUND's default deadline (300 s): queued work may wait that long
  if (!terminal) {
    if (stream_errors_.fetch_add(1) < 5) {
      std::fprintf(stderr, "ari-soak: %s ended without a terminal chunk: %s\n",
                   s.request_id().c_str(), waited ? "?" : waited.error().ToString().c_str());
    }
    return;
  }
  Record(urgency, status, start, first, has_first);
}

void Soak::ClientLoop(int c) {
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(c));
  auto next_burst = t0_ + std::chrono::duration<double>(a_.burst_every_s * (c + 1) / a_.clients);
  while (Clock::now() < end_) {
    const bool do_burst = a_.burst_every_s > 0 && a_.burst > 0 && Clock::now() >= next_burst;
    const int n = do_burst ? a_.burst : 1;
    if (do_burst) next_burst += std::chrono::duration<double>(a_.burst_every_s);
    std::vector<std::tuple<Stream, int, Clock::time_point>> inflight;
    for (int k = 0; k < n; ++k) {
      const int r = static_cast<int>(rng() % 100);
      AskParams p;
      p.urgency = r < 5    ? ari_URGENCY_CRITICAL
                  : r < 20 ? ari_URGENCY_HIGH
                  : r < 60 ? ari_URGENCY_NORMAL
                           : ari_URGENCY_BACKGROUND;
      p.prompt = kPrompts[rng() % std::size(kPrompts)];
      p.max_tokens = 2 + static_cast<uint32_t>(rng() % 23);
      const auto start = Clock::now();
      auto s = cl_[c]->Ask(p);
      if (!s) {
        send_errors_.fetch_add(1);
        continue;
      }
      sent_.fetch_add(1);
      ledger_->Expect(s->request_id());
      inflight.emplace_back(std::move(*s), static_cast<int>(p.urgency), start);
    }
    // One waiter per stream, so chunk times are taken when they arrive (a burst's
    // streams are not waited one after the other).
    std::vector<std::thread> waiters;
    waiters.reserve(inflight.size());
    for (auto& [s, u, start] : inflight) {
      waiters.emplace_back([this, &s = s, u = u, start = start] { FinishStream(s, u, start); });
    }
    for (auto& w : waiters) w.join();
    std::this_thread::sleep_for(
        std::chrono::milliseconds(a_.think_min_ms + rng() % a_.think_span_ms));
  }
}

void Soak::ReportWindow(size_t w) {
  std::vector<double> lat, first, crit_lat, crit_first;
  uint64_t st[kWireStatusCount] = {};
  long rss = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const Sample& s : windows_[w].samples) {
      lat.push_back(s.latency_ms);
      if (s.first_ms >= 0) first.push_back(s.first_ms);
      if (s.urgency == ari_URGENCY_CRITICAL && s.status == ari_STATUS_DONE) {
        crit_lat.push_back(s.latency_ms);
        if (s.first_ms >= 0) crit_first.push_back(s.first_ms);
      }
      if (s.status >= 0 && s.status < kWireStatusCount) ++st[s.status];
    }
    rss = windows_[w].rss_kb;
  }
  const double window_s = a_.window_s;
  std::printf(
      "window %2zu [%4.0f-%4.0f s] n=%5zu DONE %zu BUSY %zu REJ %zu DL %zu | e2e ms p50 "
      "%.1f p90 %.1f p99 %.1f max %.1f | first ms p50 %.1f p99 %.1f | CRITICAL e2e "
      "p50 %.1f p99 %.1f first p99 %.1f | node RSS %ld kB\n",
      w, w * window_s, (w + 1) * window_s, lat.size(), static_cast<size_t>(st[ari_STATUS_DONE]),
      static_cast<size_t>(st[ari_STATUS_BUSY]), static_cast<size_t>(st[ari_STATUS_REJECTED]),
      static_cast<size_t>(st[ari_STATUS_DEADLINE_MISSED]), Pct(lat, 0.5), Pct(lat, 0.9),
      Pct(lat, 0.99), Pct(lat, 1.0), Pct(first, 0.5), Pct(first, 0.99), Pct(crit_lat, 0.5),
      Pct(crit_lat, 0.99), Pct(crit_first, 0.99), rss);
  std::fflush(stdout);
}

void Soak::Run() {
  t0_ = Clock::now();
  end_ = t0_ + std::chrono::duration<double>(a_.minutes * 60.0);
  n_windows_ = static_cast<int>(std::ceil(a_.minutes * 60.0 / a_.window_s));
  windows_.resize(static_cast<size_t>(n_windows_) + 1);
  for (int c = 0; c < a_.clients; ++c) threads_.emplace_back([this, c] { ClientLoop(c); });
  // RSS sampler + window reports.
  size_t reported = 0;
  while (Clock::now() < end_) {
    std::this_thread::sleep_for(1s);
    const auto now = Clock::now();
    const long rss = RssKb(a_.node_pid);
    const double t = std::chrono::duration<double>(now - t0_).count();
    {
      std::lock_guard<std::mutex> l(mu_);
      rss_series_.emplace_back(t, rss);
      windows_[WindowOf(now)].rss_kb = rss;
    }
    // A window is reported once the next one started (its late finishers are in).
    while (reported < WindowOf(now)) ReportWindow(reported++);
  }
  for (auto& t : threads_) t.join();
  while (reported < static_cast<size_t>(n_windows_)) ReportWindow(reported++);
}

int Soak::Finish() {
  const bool complete = ledger_->WaitComplete(60s);
  const LedgerReport lr = ledger_->Report();
  // RSS drift after warm-up: min, max and the least-squares slope in kB per minute.
  long lo = -1, hi = -1;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (auto [t, kb] : rss_series_) {
    if (t < a_.warmup_s || kb < 0) continue;
    lo = lo < 0 ? kb : std::min(lo, kb);
    hi = std::max(hi, kb);
    sx += t;
    sy += static_cast<double>(kb);
    sxx += t * t;
    sxy += t * static_cast<double>(kb);
    ++n;
  }
  const double slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60.0 : NAN;
  std::printf(
      "soak: %.1f min, %d clients, sent %llu (send errors %llu, streams without "
      "terminal %llu)\n",
      a_.minutes, a_.clients, static_cast<unsigned long long>(sent_.load()),
      static_cast<unsigned long long>(send_errors_.load()),
      static_cast<unsigned long long>(stream_errors_.load()));
  std::printf(
      "node RSS after %.0f s warm-up: min %ld kB, max %ld kB (spread %ld kB), slope "
      "%.1f kB/min over %d samples\n",
      a_.warmup_s, lo, hi, hi - lo, slope, n);
  std::printf("ledger (%s): %s\n", complete ? "complete" : "INCOMPLETE", lr.ToString().c_str());
  return complete && lr.ok() && lr.expected == sent_.load() ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  bool help = false;
  const std::optional<SoakArgs> args = ParseArgs(argc, argv, &help);
  if (!args) return help ? 0 : 1;
  Soak soak(*args);
  if (const int rc = soak.Connect(); rc != 0) return rc;
  soak.Run();
  return soak.Finish();
}
