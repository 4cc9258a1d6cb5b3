// Calibration check: the same drive log replayed live (against a real ari-node) and
// in model mode; how far the model's predictions are from the measurements, per class.
//
//   auto live = ReplayLive(log, live_options);                    // measured
//   auto log2 = WithMeasuredTokens(log, *live);                   // same work per request
//   auto model = ReplayModel(log2, model_options);                // predicted
//   Calibration c = CompareReports(*live, *model);               // errors per class
//
// Figures per class, over the requests present in both reports (matched by request id)
// that have the figure in both:
//  - TTFT: mean time to first token (s);
//  - decode speed: mean of per-request (tokens - 1) / (completion_s - ttft_s) (tokens/s),
//    for DONE requests with at least 2 tokens and completion > TTFT (DecodeTps).
// error = model / live - 1 (signed; +0.10 = the model predicts 10 % more). A class is
// within the goal when both |errors| <= goal (classes without data do not count).
// WithMeasuredTokens sets every request's max_tokens to the tokens the live node really
// produced (an answer may end early at end-of-generation; model mode always runs to
// max_tokens), so both modes compute the same number of tokens.
#pragma once

#include <string>
#include <vector>

#include "sim/drive_log.h"
#include "sim/replay.h"

namespace ari::sim {

inline constexpr double kCalibrationGoal = 0.15;

struct ClassCalibration {
  std::string urgency;
  int ttft_n = 0;
  double live_ttft_s = 0, model_ttft_s = 0, ttft_error = 0;
  int decode_n = 0;
  double live_decode_tps = 0, model_decode_tps = 0, decode_error = 0;
  bool within_goal = true;  // both errors within the goal (true when no data)
};

struct Calibration {
  double goal = kCalibrationGoal;
  int matched = 0;                        // requests found in both reports
  std::vector<ClassCalibration> classes;  // CRITICAL..BACKGROUND
  bool within_goal = true;                // every class with data within the goal
};

// (tokens - 1) / (completion_s - ttft_s) for a DONE request with >= 2 tokens and
// completion_s > ttft_s >= 0; -1 otherwise.
double DecodeTps(const RequestReport& r);

Calibration CompareReports(const ReplayReport& live, const ReplayReport& model,
                           double goal = kCalibrationGoal);

dl::DriveLog WithMeasuredTokens(const dl::DriveLog& log, const ReplayReport& live);

std::string CalibrationToText(const Calibration& c);
std::string CalibrationToJson(const Calibration& c);

}  // namespace ari::sim
