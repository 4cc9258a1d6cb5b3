// The policy tuner: objective, search, Pareto table, diff; see tune.h.
#include "sim/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include "sim/prng.h"
#include "sim/replay.h"

namespace ari::sim {
namespace {

int64_t P95Key(double s) { return std::llround(s * 10.0); }  // 0.1 s resolution

// The candidate's policy: the start with the chosen values, validated by a text round trip.
Result<qos::Policy> Build(const qos::Policy& start, const TuneSpace& space,
                          const std::vector<int>& choice) {
  qos::Policy p = start;
  for (size_t i = 0; i < choice.size(); ++i) {
    if (choice[i] < 0 || IsRoutingParam(space.params[i].name)) continue;
    auto r = ApplyTuneParam(p, space.params[i].name,
                            space.params[i].values[static_cast<size_t>(choice[i])]);
    if (!r) return std::unexpected(r.error());
  }
  auto checked = qos::ParsePolicyText(qos::PolicyToText(p), "candidate");
  if (!checked) return MakeError(ErrorCode::kInvalidArgument, checked.error().message);
  return *checked;
}

// The candidate's routing weights: the fleet's with the chosen "routing.*" values.
Result<component::RoutingWeights> BuildRouting(const component::RoutingWeights& start,
                                               const TuneSpace& space,
                                               const std::vector<int>& choice) {
  component::RoutingWeights w = start;
  for (size_t i = 0; i < choice.size(); ++i) {
    if (choice[i] < 0 || !IsRoutingParam(space.params[i].name)) continue;
    auto r = ApplyRoutingParam(w, space.params[i].name,
                               space.params[i].values[static_cast<size_t>(choice[i])]);
    if (!r) return std::unexpected(r.error());
  }
  if (w.warm_celsius > w.hot_celsius) {
    return MakeError(ErrorCode::kInvalidArgument, "routing.warm_celsius above routing.hot_celsius");
  }
  return w;
}

std::string Changes(const TuneCandidate& c, const TuneSpace& space) {
  std::string s;
  for (size_t i = 0; i < c.choice.size(); ++i) {
    if (c.choice[i] < 0) continue;
    if (!s.empty()) s += ", ";
    s += space.params[i].name + "=" + space.params[i].values[static_cast<size_t>(c.choice[i])];
  }
  return s.empty() ? "(start)" : s;
}

}  // namespace

bool TuneScore::BetterThan(const TuneScore& o, double limit) const {
  if (valid != o.valid) return valid;
  if (!valid) return false;
  if (feasible != o.feasible) return feasible;
  if (!feasible && peak_c != o.peak_c) return peak_c < o.peak_c;
  (void)limit;
  if (critical_misses != o.critical_misses) return critical_misses < o.critical_misses;
  if (P95Key(normal_p95_s) != P95Key(o.normal_p95_s)) return normal_p95_s < o.normal_p95_s;
  return quality_loss < o.quality_loss;
}

Result<TuneScore> ScorePolicy(const qos::Policy& policy,
                              const std::vector<const dl::DriveLog*>& logs, const CostModel& cost,
                              double peak_limit, const QualityTable* quality_table,
                              const ReplayOptions* base, const FleetOptions* fleet) {
  TuneScore s;
  ReplayOptions o = base ? *base : ReplayOptions{};
  o.quality = quality_table;
  o.policy = &policy;
  o.cost = &cost;
  o.record_decisions = false;
  o.record_samples = false;
  double quality = 0;
  for (const dl::DriveLog* log : logs) {
    Result<ReplayReport> r = MakeError(ErrorCode::kInternal, "not run");
    if (fleet != nullptr) {
      FleetOptions f = *fleet;
      f.node = o;
      auto fr = ReplayFleet(*log, f);
      if (!fr) return std::unexpected(fr.error());
      r = std::move(fr->merged);
    } else {
      r = ReplayModel(*log, o);
    }
    if (!r) return std::unexpected(r.error());
    s.peak_c = std::max(s.peak_c, r->summary.peak_die_c);
    s.critical_misses += r->Class(qos::Urgency::kCritical).deadline_misses;
    // NORMAL p95 over every NORMAL request; one that did not finish (refused, stopped)
    // counts as infinitely late, so dropping chat cannot look fast.
    std::vector<double> normal;
    for (const RequestReport& q : r->requests) {
      if (q.urgency != "NORMAL") continue;
      normal.push_back(q.status == "DONE" ? q.completion_s : 1e9);
    }
    s.normal_p95_s = std::max(s.normal_p95_s, ComputePercentiles(std::move(normal)).p95);
    quality += r->summary.quality_loss;
    s.energy_j += r->summary.energy_j;
  }
  s.quality_loss = logs.empty() ? 0 : quality / static_cast<double>(logs.size());
  s.valid = true;
  s.feasible = peak_limit <= 0 || s.peak_c <= peak_limit;
  return s;
}

namespace {

Result<void> CheckTuneOptions(const TuneOptions& o) {
  if (!o.start || !o.cost || o.logs.empty() || o.space.params.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tune: start policy, cost model, logs and a space are required");
  }
  if (o.budget < 1) return MakeError(ErrorCode::kInvalidArgument, "tune: budget must be >= 1");
  for (const TuneParam& p : o.space.params) {  // every name and value must apply
    if (p.values.empty())
      return MakeError(ErrorCode::kInvalidArgument, "tune: " + p.name + ": no values");
    for (const std::string& v : p.values) {
      if (IsRoutingParam(p.name)) {
        if (o.fleet == nullptr) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "tune: " + p.name + ": routing parameters need several nodes (--nodes)");
        }
        component::RoutingWeights probe = o.fleet->routing;
        if (auto r = ApplyRoutingParam(probe, p.name, v); !r) {
          return MakeError(ErrorCode::kInvalidArgument, "tune: " + r.error().message);
        }
        continue;
      }
      qos::Policy probe = *o.start;
      if (auto r = ApplyTuneParam(probe, p.name, v); !r) {
        return MakeError(ErrorCode::kInvalidArgument, "tune: " + r.error().message);
      }
    }
  }
  return {};
}

// Scores a batch (one thread per candidate) and appends it to the result, best first
// by TuneScore::BetterThan.
void Evaluate(const TuneOptions& o, std::vector<TuneCandidate>& batch, TuneResult& res) {
  std::vector<qos::Policy> policies(batch.size());
  std::vector<FleetOptions> fleets(batch.size());
  std::vector<std::thread> pool;
  std::vector<Result<TuneScore>> scores(batch.size(), MakeError(ErrorCode::kInternal, "not run"));
  for (size_t i = 0; i < batch.size(); ++i) {
    auto p = Build(*o.start, o.space, batch[i].choice);
    if (!p) {
      batch[i].error = p.error().message;
      continue;
    }
    policies[i] = std::move(*p);
    if (o.fleet != nullptr) {
      auto w = BuildRouting(o.fleet->routing, o.space, batch[i].choice);
      if (!w) {
        batch[i].error = w.error().message;
        continue;
      }
      fleets[i] = *o.fleet;
      fleets[i].routing = *w;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].error.empty()) continue;
    pool.emplace_back([&, i] {
      scores[i] = ScorePolicy(policies[i], o.logs, *o.cost, o.space.peak_celsius_limit, o.quality,
                              o.replay_base, o.fleet != nullptr ? &fleets[i] : nullptr);
    });
  }
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < batch.size(); ++i) {
    TuneCandidate& c = batch[i];
    if (c.error.empty()) {
      if (scores[i])
        c.score = *scores[i];
      else
        c.error = scores[i].error().message;
    }
    if (!c.error.empty()) ++res.invalid;
    res.candidates.push_back(c);
    const TuneCandidate& best = res.candidates[res.best];
    if (res.candidates.size() == 1 || c.score.BetterThan(best.score, o.space.peak_celsius_limit)) {
      res.best = res.candidates.size() - 1;
      if (c.score.valid) {
        res.best_policy = policies[i];
        if (o.fleet != nullptr) res.best_routing = fleets[i].routing;
      }
    }
  }
}

// A choice near the best one (one or two parameters changed) or, one time in five, a
// random restart; tries 64 times to find one not seen yet (returns the last try).
std::vector<int> Propose(const TuneResult& res, const TuneSpace& space,
                         const std::set<std::vector<int>>& seen, Prng& rng) {
  const size_t np = space.params.size();
  std::vector<int> c;
  for (int attempt = 0; attempt < 64; ++attempt) {
    c = res.candidates[res.best].choice;
    if (rng.Bernoulli(0.2)) {  // random restart
      for (size_t i = 0; i < np; ++i) {
        c[i] = static_cast<int>(rng.Below(space.params[i].values.size() + 1)) - 1;
      }
    } else {
      const int k = 1 + static_cast<int>(rng.Below(2));
      for (int j = 0; j < k; ++j) {
        const size_t i = rng.Below(np);
        c[i] = static_cast<int>(rng.Below(space.params[i].values.size()));
      }
    }
    if (!seen.contains(c)) break;
  }
  return c;
}

}  // namespace

Result<TuneResult> Tune(const TuneOptions& o) {
  if (auto r = CheckTuneOptions(o); !r) return std::unexpected(r.error());
  const size_t np = o.space.params.size();
  const int threads = std::clamp(o.threads, 1, 16);
  Prng rng(o.seed ^ 0x9E3779B97F4A7C15ull);
  TuneResult res;
  res.best_policy = *o.start;
  if (o.fleet != nullptr) res.best_routing = o.fleet->routing;
  std::set<std::vector<int>> seen;
  std::vector<TuneCandidate> batch(1);
  batch[0].choice.assign(np, -1);
  seen.insert(batch[0].choice);
  Evaluate(o, batch, res);
  while (static_cast<int>(res.candidates.size()) < o.budget) {
    batch.clear();
    const int want = std::min<int>(threads, o.budget - static_cast<int>(res.candidates.size()));
    for (int b = 0; b < want; ++b) {
      std::vector<int> c = Propose(res, o.space, seen, rng);
      if (seen.contains(c)) continue;  // space exhausted around the best
      seen.insert(c);
      TuneCandidate t;
      t.choice = c;
      batch.push_back(std::move(t));
    }
    if (batch.empty()) break;
    Evaluate(o, batch, res);
  }
  return res;
}

std::string ParetoTable(const TuneResult& r, const TuneSpace& space) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TuneScore& a = r.candidates[i].score;
    if (!a.valid || !a.feasible) continue;
    bool dominated = false;
    for (const TuneCandidate& other : r.candidates) {
      const TuneScore& b = other.score;
      if (!b.valid || !b.feasible) continue;
      const bool le = b.critical_misses <= a.critical_misses &&
                      P95Key(b.normal_p95_s) <= P95Key(a.normal_p95_s) &&
                      b.quality_loss <= a.quality_loss;
      const bool lt = b.critical_misses < a.critical_misses ||
                      P95Key(b.normal_p95_s) < P95Key(a.normal_p95_s) ||
                      b.quality_loss < a.quality_loss;
      if (le && lt) {
        dominated = true;
        break;
      }
    }
    for (size_t r2 : rows) {  // equal scores: keep the first candidate only
      const TuneScore& b = r.candidates[r2].score;
      if (b.critical_misses == a.critical_misses &&
          P95Key(b.normal_p95_s) == P95Key(a.normal_p95_s) && b.quality_loss == a.quality_loss) {
        dominated = true;
      }
    }
    if (!dominated) rows.push_back(i);
  }
  if (std::find(rows.begin(), rows.end(), 0) == rows.end()) rows.push_back(0);
  if (std::find(rows.begin(), rows.end(), r.best) == rows.end()) rows.push_back(r.best);
  std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) {
    return r.candidates[a].score.BetterThan(r.candidates[b].score, 0);
  });
  std::string s = "  #   crit.miss  NORMAL p95 (s)  quality loss  peak (C)  energy (J)  changes\n";
  char line[160];
  for (size_t i : rows) {
    const TuneCandidate& c = r.candidates[i];
    const TuneScore& t = c.score;
    std::snprintf(line, sizeof(line), "%c%3zu  %9d  %14.2f  %12.3f  %8.2f  %10.0f  ",
                  i == r.best ? '*' : ' ', i, t.critical_misses, t.normal_p95_s, t.quality_loss,
                  t.peak_c, t.energy_j);
    s += line;
    s += c.error.empty() ? Changes(c, space) : "invalid: " + c.error;
    if (t.valid && !t.feasible) s += " [over peak limit]";
    s += "\n";
  }
  return s;
}

std::string DiffLines(std::string_view before, std::string_view after) {
  auto lines = [](std::string_view t) {
    std::vector<std::string_view> v;
    while (!t.empty()) {
      const size_t e = t.find('\n');
      v.push_back(t.substr(0, e));
      if (e == std::string_view::npos) break;
      t.remove_prefix(e + 1);
    }
    return v;
  };
  const auto a = lines(before), b = lines(after);
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  // Edit script, deletions before insertions.
  struct Op {
    char kind;    // ' ', '-', '+'
    size_t a, b;  // line indexes (0-based) in before / after
  };
  std::vector<Op> ops;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ops.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', i++, j});
    } else {
      ops.push_back({'+', i, j++});
    }
  }
  // Hunks with 3 lines of context, headed "@@ -line +line @@" (1-based).
  constexpr size_t kContext = 3;
  std::string out;
  for (size_t k = 0; k < ops.size();) {
    if (ops[k].kind == ' ') {
      ++k;
      continue;
    }
    size_t first = k >= kContext ? k - kContext : 0;
    size_t last = k;  // extend while changes are within 2 x context of each other
    for (size_t q = k; q < ops.size(); ++q) {
      if (ops[q].kind != ' ')
        last = q;
      else if (q - last > 2 * kContext)
        break;
    }
    const size_t end = std::min(ops.size(), last + kContext + 1);
    out += "@@ -" + std::to_string(ops[first].a + 1) + " +" + std::to_string(ops[first].b + 1) +
           " @@\n";
    for (size_t q = first; q < end; ++q) {
      const std::string_view line = ops[q].kind == '+' ? b[ops[q].b] : a[ops[q].a];
      out += ops[q].kind;
      out += ' ';
      out += line;
      out += '\n';
    }
    k = end;
  }
  return out;
}

}  // namespace ari::sim
