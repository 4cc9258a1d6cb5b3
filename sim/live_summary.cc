// Live-mode replay, after the run: a request's figures from its chunks; see
// live_summary.h.
#include "sim/live_summary.h"

#include <algorithm>
#include <string>
#include <utility>

namespace ari::sim::live {

std::string_view DecisionClass(std::string_view d) {
  const size_t colon = d.find(':');
  return colon == std::string_view::npos ? std::string_view() : d.substr(0, colon);
}
std::string_view DecisionKnobs(std::string_view d) {
  const size_t colon = d.find(": ");
  return colon == std::string_view::npos ? d : d.substr(colon + 2);
}

void SummarizeRequest(double time_scale, std::string_view message, std::string_view wire_error,
                      RequestReport& r, ReplaySummary& sum, TokenTotals& totals) {
  const double arrival_log = r.arrival_s;
  std::string prev;
  for (const ChunkRecord& c : r.chunk_log) {
    if (!c.terminal) ++r.chunks;
    r.tokens += c.tokens;
    if (c.tokens > 0 && r.ttft_s < 0) r.ttft_s = c.t_s;
    if (c.tokens > 0) {
      // What ran (the chunk's trace), not what the decision text says: a plain GGUF runs
      // the reference path whatever the governor decided. A chunk with tokens always
      // carries its trace (docs/interface.md, "What ran").
      if (c.ran_precision == "W4A8") {
        sum.precision_tokens[1] += c.tokens;
      } else if (c.ran_precision == "W8A16") {
        sum.precision_tokens[0] += c.tokens;
      } else {
        sum.reference_tokens += c.tokens;
      }
      const int drop = std::max(0, c.ran_layers_dropped);
      if (static_cast<size_t>(drop) >= sum.drop_tokens.size()) {
        sum.drop_tokens.resize(static_cast<size_t>(drop) + 1, 0);
        sum.drop_busy_s.resize(static_cast<size_t>(drop) + 1, 0.0);
      }
      sum.drop_tokens[static_cast<size_t>(drop)] += c.tokens;
      totals.tokens += c.tokens;
      totals.dropped += static_cast<double>(drop) * c.tokens;
      ++sum.chunks;
    }
    if (!c.terminal && c.decision != prev) {
      DecisionRecord d;
      d.t_s = arrival_log + c.t_s * time_scale;
      d.urgency = std::string(DecisionClass(c.decision));
      d.idle = c.decision == "idle";
      d.band = c.band >= 0 ? c.band : 0;
      d.knobs = std::string(DecisionKnobs(c.decision));
      r.decisions.push_back(std::move(d));
      prev = c.decision;
    }
    if (c.terminal) {
      r.status = c.status;
      r.completion_s = c.t_s;
      r.queue_wait_s = c.node_queue_wait_s;
      if (c.node_tokens_generated > r.tokens) r.tokens = c.node_tokens_generated;
    }
  }
  r.message = message;
  if (r.status.empty()) {
    r.status = "NO_TERMINAL";
    r.message = wire_error.empty() ? "no terminal chunk received" : wire_error;
    r.deadline_missed = true;
    return;
  }
  r.deadline_missed =
      r.status != "DONE" || (r.deadline_s > 0 && r.completion_s > r.deadline_s + 1e-9);
  if (r.status != "DONE" && r.ttft_s < 0) r.ttft_s = -1;
}

void SummarizeQuality(const TokenTotals& totals, ReplaySummary& sum) {
  if (totals.tokens > 0) {
    sum.quality_loss =
        static_cast<double>(sum.precision_tokens[1]) / static_cast<double>(totals.tokens) +
        0.1 * totals.dropped / static_cast<double>(totals.tokens);
  }
}

}  // namespace ari::sim::live
