// The ari-sim tool's shared parts (sim/tools/sim_*.cc): the subcommands' arguments, exit
// codes, error line and whole-file helpers. sim_main.cc has the command table.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/error.h"

namespace ari::sim_cli {

using ari::sim::Result;

// Exit codes: 0 ok, 1 error (message on stderr), 2 usage error, 3 done but the log had
// problems (corrupt records skipped, invalid events).
inline constexpr int kOk = 0, kError = 1, kUsage = 2, kProblems = 3;

// Parsed command line of one subcommand: --flag value pairs and positionals.
struct Args {
  std::vector<std::pair<std::string, std::string>> flags;
  std::vector<std::string> positional;

  std::optional<std::string> Get(std::string_view name) const {
    for (const auto& [k, v] : flags) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
};

// Every flag takes a value ("--seed 7" or "--seed=7"); "-o" is "--output". A flag not in
// `known` is an error.
Result<Args> ParseArgs(std::span<char* const> argv, std::span<const std::string_view> known);

// Prints "ari-sim CMD: message" to stderr; returns kError.
int Fail(std::string_view cmd, const std::string& message);

Result<std::string> ReadFile(const std::string& path);
Result<void> WriteFile(const std::string& path, const std::string& text);

// ari-sim replay (sim_replay.cc).
int CmdReplay(std::span<char* const> argv);

}  // namespace ari::sim_cli
