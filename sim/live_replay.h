// Live-mode replay of a drive log against a RUNNING ari-node over DDS.
//
// The log's requests are published (one ari_client Client per log client name) at the
// log's times divided by time_scale; every TokenChunk of every answer is recorded with
// its reception time. The log's environment (soc_temperature, ambient_temperature,
// memory_available, cpu_frequency_cap) is published on ari/v2/sim_environment as the
// state in force, at each change and every env_period_ms (so a node configured with
// sensor { kind: SENSOR_DDS_REPLAY } sees fresh samples; any other node ignores the
// topic). The result is the same ReplayReport as model mode (sim/report.h), from
// measured data:
//  - arrival_s, samples[].t_s, decisions[].t_s: LOG time (wall time x time_scale);
//  - queue_wait_s (the node's figure: admission -> first scheduled), ttft_s (publication
//    -> first chunk with tokens received), completion_s (publication -> terminal
//    received): REAL seconds; deadlines are sent unscaled, so they are real time too;
//  - samples: every sample_period_ms of log time, the node's NodeStatus (its temperature
//    reading, band from its reason text, busy = a session in use or a queue non-empty)
//    and the replayed ambient; power and energy are not measured (0);
//  - summary: tokens per precision and drop level from the chunks' decision texts.
// A request whose terminal chunk did not arrive by the end of the drain gets status
// "NO_TERMINAL" (counted as a deadline miss).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "component/client/dds.h"
#include "qos/policy.h"
#include "sim/drive_log.h"
#include "sim/error.h"
#include "sim/replay.h"

namespace ari::sim {

struct LiveReplayOptions {
  component::dds::DomainOptions domain;              // loopback config + domain id of the node
  const qos::Policy* policy = nullptr;               // required: the node's policy (class default
                                                     //   deadlines, band names and thresholds)
  double time_scale = 1.0;                           // > 0: the log runs this many times faster
  bool send_environment = true;                      // publish ari/v2/sim_environment
  std::string source_id = "ari-sim";                 // SimEnvironment key
  int64_t env_period_ms = 250;                       // republish period of the environment (wall)
  int64_t sample_period_ms = 1000;                   // timeline sample period (log time)
  std::chrono::milliseconds node_timeout{20000};     // node must answer this soon
  std::chrono::milliseconds drain_timeout{120000};   // after the log's end (wall)
  std::function<void(const std::string&)> progress;  // optional progress lines
  // Fills RequestReport::prompt_tokens (null: 0 = unknown), e.g. the model's tokenizer.
  std::function<int(const std::string& prompt)> prompt_tokens;
};

Result<ReplayReport> ReplayLive(const dl::DriveLog& log, const LiveReplayOptions& options);

// Wire status name ("DONE", "DEADLINE_MISSED", ...) as in model-mode reports.
std::string WireStatusName(int32_t status);
// "band <name>" in a governor reason -> the policy's band index; -1 when absent.
int BandFromReason(const qos::Policy& policy, std::string_view reason);

}  // namespace ari::sim
