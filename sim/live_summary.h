// Private to the live replay (live_replay.cc, live_summary.cc): what a live replay's
// report takes from the node's texts and TokenChunks once the run is over. Not part of
// the API (see live_replay.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/replay.h"

namespace ari::sim::live {

// "NORMAL: 4P W8A16 ..." -> "NORMAL" (empty when there is no class); the knobs after it.
std::string_view DecisionClass(std::string_view decision);
std::string_view DecisionKnobs(std::string_view decision);

// Tokens of all the requests and their drop levels, for the summary's quality loss.
struct TokenTotals {
  int64_t tokens = 0;
  double dropped = 0;  // sum of drop level x tokens
};

// Fills one request's figures from its chunk log (r.chunk_log, as received) and the
// terminal's message, or NO_TERMINAL with wire_error when none arrived; counts its tokens
// into the summary (per precision and drop level) and `totals`.
void SummarizeRequest(double time_scale, std::string_view message, std::string_view wire_error,
                      RequestReport& r, ReplaySummary& sum, TokenTotals& totals);

// The summary's quality loss from `totals` (when any token was generated).
void SummarizeQuality(const TokenTotals& totals, ReplaySummary& sum);

}  // namespace ari::sim::live
