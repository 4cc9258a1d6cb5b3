// Replay reports as JSON and as a self-contained HTML page (inline data and script,
// canvas plots, no network): temperature + ambient over time with the thermal bands,
// the decision timeline, latency per request against its deadline, latency CDF per
// class. The page sets document.title to "ok" once every plot is drawn ("error: ..."
// on a script error), which the browser test reads back.
#pragma once

#include <string>

#include "sim/replay.h"

namespace ari::sim {

// Full report (per request with decision history, per class, summary, samples,
// decisions). Deterministic: the same replay gives the same bytes (wall time is left
// out unless include_wall_time).
std::string ReportToJson(const ReplayReport& report, bool include_wall_time = false);

// Human summary: per class table and totals.
std::string ReportToText(const ReplayReport& report);

std::string ReportToHtml(const ReplayReport& report);

// JSON string literal (quotes included) of UTF-8 text; control characters escaped,
// "</" written as "<\/" so the text can sit inside an HTML <script>.
std::string JsonString(std::string_view s);

}  // namespace ari::sim
