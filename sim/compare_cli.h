// What `ari-sim compare` does, as a library call (sim/tools/sim_main.cc parses the
// command line): loads the logs, policies (by shipped name or file), the hardware
// profile and its cost model, the quality table; replays; writes the JSON/HTML.
#pragma once

#include <string>
#include <vector>

#include "qos/policy.h"
#include "sim/error.h"

namespace ari::sim {

struct CompareCliArgs {
  std::vector<std::string> logs;
  std::vector<std::string> policies;       // empty: default, static-performance, static-eco
  std::string hardware = "dev-vm", model;  // model empty: the profile's default
  std::string quality, json, html;         // empty: none
  int threads = 2;
  int slots = 0;        // 0: the profile's kv_slots
  int park_areas = -1;  // slot parking areas; < 0: ReplayOptions' default
};

// A policy NAME (the shipped config/policy_<name>.textproto, '-' read as '_') or a FILE
// (contains '/' or ends in .textproto).
Result<qos::Policy> LoadPolicyByName(const std::string& name_or_file);

// Runs the comparison; returns the text table (CompareToText) after writing the files.
Result<std::string> RunCompareCli(const CompareCliArgs& args);

}  // namespace ari::sim
