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
#include <random>
#include <string>
#include <thread>
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

const char* kPrompts[] = {"Once upon a time", "The little bird", "Tom and his dog",
                          "Lily went to the park", "The sun was shining", "A big red ball"};

}  // namespace

int main(int argc, char** argv) {
  ClientOptions base;
  base.domain.domain_id = 0;
  double minutes = 10, warmup_s = 60, window_s = 60, burst_every_s = 60;
  int clients = 4, burst = 8, think_min_ms = 500, think_span_ms = 1000;
  long node_pid = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      std::fprintf(stderr, "ari-soak: %s needs a value\n", a.c_str());
      return 1;
    }
    ++i;
    if (a == "--domain") base.domain.domain_id = static_cast<uint32_t>(std::atoi(v));
    else if (a == "--config") base.domain.config = v;
    else if (a == "--minutes") minutes = std::atof(v);
    else if (a == "--clients") clients = std::max(1, std::atoi(v));
    else if (a == "--warmup-s") warmup_s = std::atof(v);
    else if (a == "--window-s") window_s = std::max(1.0, std::atof(v));
    else if (a == "--node-pid") node_pid = std::atol(v);
    else if (a == "--burst-every-s") burst_every_s = std::atof(v);
    else if (a == "--burst") burst = std::atoi(v);
    else if (a == "--think-ms") think_min_ms = std::max(0, std::atoi(v));
    else {
      std::fprintf(stderr, "ari-soak: unknown argument %s\n", a.c_str());
      return 1;
    }
  }
  auto domain = ari::component::dds::Domain::Create(base.domain);
  if (!domain) {
    std::fprintf(stderr, "ari-soak: %s\n", domain.error().ToString().c_str());
    return 2;
  }
  auto ledger = ChunkLedger::Create(*domain, "soak");
  if (!ledger) {
    std::fprintf(stderr, "ari-soak: %s\n", ledger.error().ToString().c_str());
    return 2;
  }
  std::vector<std::unique_ptr<Client>> cl;
  for (int c = 0; c < clients; ++c) {
    ClientOptions o = base;
    o.client_id = "soak" + std::to_string(c);
    o.node_timeout = 30s;
    auto x = Client::Connect(*domain, o);
    if (!x || !(*x)->WaitForNode(30s)) {
      std::fprintf(stderr, "ari-soak: no node on domain %u\n", base.domain.domain_id);
      return 3;
    }
    cl.push_back(std::move(*x));
  }
  if (auto m = (*ledger)->WaitMatched(30s); !m) {
    std::fprintf(stderr, "ari-soak: %s\n", m.error().ToString().c_str());
    return 3;
  }

  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(minutes * 60.0);
  const int n_windows = static_cast<int>(std::ceil(minutes * 60.0 / window_s));
  std::vector<Window> windows(static_cast<size_t>(n_windows) + 1);
  std::vector<std::pair<double, long>> rss_series;  // (seconds, kB)
  std::mutex mu;
  std::atomic<uint64_t> sent{0}, send_errors{0}, stream_errors{0};
  auto window_of = [&](Clock::time_point t) {
    const double s = std::chrono::duration<double>(t - t0).count();
    return std::min<size_t>(windows.size() - 1, static_cast<size_t>(s / window_s));
  };
  auto record = [&](int urgency, int status, Clock::time_point start, Clock::time_point first,
                    bool has_first) {
    const auto now = Clock::now();
    Sample s{urgency, status, std::chrono::duration<double, std::milli>(now - start).count(),
             has_first ? std::chrono::duration<double, std::milli>(first - start).count() : -1};
    std::lock_guard<std::mutex> l(mu);
    windows[window_of(start)].samples.push_back(s);
  };
  // Waits for one stream's terminal; records it.
  auto finish = [&](Stream& s, int urgency, Clock::time_point start) {
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
      if (stream_errors.fetch_add(1) < 5) {
        std::fprintf(stderr, "ari-soak: %s ended without a terminal chunk: %s\n",
                     s.request_id().c_str(),
                     waited ? "?" : waited.error().ToString().c_str());
      }
      return;
    }
    record(urgency, status, start, first, has_first);
  };

  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(1234 + static_cast<uint64_t>(c));
      auto next_burst = t0 + std::chrono::duration<double>(burst_every_s * (c + 1) / clients);
      while (Clock::now() < end) {
        const bool do_burst = burst_every_s > 0 && burst > 0 && Clock::now() >= next_burst;
        const int n = do_burst ? burst : 1;
        if (do_burst) next_burst += std::chrono::duration<double>(burst_every_s);
        std::vector<std::tuple<Stream, int, Clock::time_point>> inflight;
        for (int k = 0; k < n; ++k) {
          const int r = static_cast<int>(rng() % 100);
          AskParams p;
          p.urgency = r < 5 ? ari_URGENCY_CRITICAL : r < 20 ? ari_URGENCY_HIGH
                    : r < 60 ? ari_URGENCY_NORMAL : ari_URGENCY_BACKGROUND;
          p.prompt = kPrompts[rng() % std::size(kPrompts)];
          p.max_tokens = 2 + static_cast<uint32_t>(rng() % 23);
          const auto start = Clock::now();
          auto s = cl[c]->Ask(p);
          if (!s) {
            send_errors.fetch_add(1);
            continue;
          }
          sent.fetch_add(1);
          (*ledger)->Expect(s->request_id());
          inflight.emplace_back(std::move(*s), static_cast<int>(p.urgency), start);
        }
        // One waiter per stream, so chunk times are taken when they arrive (a burst's
        // streams are not waited one after the other).
        std::vector<std::thread> waiters;
        for (auto& [s, u, start] : inflight) {
          waiters.emplace_back([&finish, &s = s, u = u, start = start] { finish(s, u, start); });
        }
        for (auto& w : waiters) w.join();
        std::this_thread::sleep_for(std::chrono::milliseconds(think_min_ms + rng() % think_span_ms));
      }
    });
  }
  // RSS sampler + window reports.
  size_t reported = 0;
  auto report = [&](size_t w) {
    std::vector<double> lat, first, crit_lat, crit_first;
    uint64_t st[kWireStatusCount] = {};
    long rss;
    {
      std::lock_guard<std::mutex> l(mu);
      for (const Sample& s : windows[w].samples) {
        lat.push_back(s.latency_ms);
        if (s.first_ms >= 0) first.push_back(s.first_ms);
        if (s.urgency == ari_URGENCY_CRITICAL && s.status == ari_STATUS_DONE) {
          crit_lat.push_back(s.latency_ms);
          if (s.first_ms >= 0) crit_first.push_back(s.first_ms);
        }
        if (s.status >= 0 && s.status < kWireStatusCount) ++st[s.status];
      }
      rss = windows[w].rss_kb;
    }
    std::printf("window %2zu [%4.0f-%4.0f s] n=%5zu DONE %zu BUSY %zu REJ %zu DL %zu | e2e ms p50 "
                "%.1f p90 %.1f p99 %.1f max %.1f | first ms p50 %.1f p99 %.1f | CRITICAL e2e "
                "p50 %.1f p99 %.1f first p99 %.1f | node RSS %ld kB\n",
                w, w * window_s, (w + 1) * window_s, lat.size(),
                static_cast<size_t>(st[ari_STATUS_DONE]), static_cast<size_t>(st[ari_STATUS_BUSY]),
                static_cast<size_t>(st[ari_STATUS_REJECTED]),
                static_cast<size_t>(st[ari_STATUS_DEADLINE_MISSED]), Pct(lat, 0.5),
                Pct(lat, 0.9), Pct(lat, 0.99), Pct(lat, 1.0), Pct(first, 0.5), Pct(first, 0.99),
                Pct(crit_lat, 0.5), Pct(crit_lat, 0.99), Pct(crit_first, 0.99), rss);
    std::fflush(stdout);
  };
  while (Clock::now() < end) {
    std::this_thread::sleep_for(1s);
    const auto now = Clock::now();
    const long rss = RssKb(node_pid);
    const double t = std::chrono::duration<double>(now - t0).count();
    {
      std::lock_guard<std::mutex> l(mu);
      rss_series.emplace_back(t, rss);
      windows[window_of(now)].rss_kb = rss;
    }
    // A window is reported once the next one started (its late finishers are in).
    while (reported < window_of(now)) report(reported++);
  }
  for (auto& t : threads) t.join();
  while (reported < static_cast<size_t>(n_windows)) report(reported++);

  const bool complete = (*ledger)->WaitComplete(60s);
  const LedgerReport lr = (*ledger)->Report();
  // RSS drift after warm-up: min, max and the least-squares slope in kB per minute.
  long lo = -1, hi = -1;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (auto [t, kb] : rss_series) {
    if (t < warmup_s || kb < 0) continue;
    lo = lo < 0 ? kb : std::min(lo, kb);
    hi = std::max(hi, kb);
    sx += t; sy += static_cast<double>(kb); sxx += t * t; sxy += t * static_cast<double>(kb);
    ++n;
  }
  const double slope = n > 1 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60.0 : NAN;
  std::printf("soak: %.1f min, %d clients, sent %llu (send errors %llu, streams without "
              "terminal %llu)\n",
              minutes, clients, static_cast<unsigned long long>(sent.load()),
              static_cast<unsigned long long>(send_errors.load()),
              static_cast<unsigned long long>(stream_errors.load()));
  std::printf("node RSS after %.0f s warm-up: min %ld kB, max %ld kB (spread %ld kB), slope "
              "%.1f kB/min over %d samples\n",
              warmup_s, lo, hi, hi - lo, slope, n);
  std::printf("ledger (%s): %s\n", complete ? "complete" : "INCOMPLETE", lr.ToString().c_str());
  return complete && lr.ok() && lr.expected == sent.load() ? 0 : 4;
}
