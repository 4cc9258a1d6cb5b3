// Private to the node's .cc files (node*.cc): the "[ari-node] ..." log line on stderr, the
// node's steady clock and config paths. Not part of the API.
#pragma once

#include <stdio.h>  // flockfile, funlockfile (POSIX)

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "ari.h"
#include "qos/scheduler.h"
#include "thermal/clock.h"

namespace ari::component::node_internal {

// The process's resident set (/proc/self/statm; 0 when unreadable). No allocation.
uint64_t ResidentSetBytes();
ari_StandbyState WireStandby(qos::StandbyState s);  // node_standby.cc
qos::Urgency ToQos(ari_UrgencyClass u);             // node_admission.cc

// A config path: absolute as is, else relative to the config's folder (empty: empty).
inline std::filesystem::path Resolve(const std::filesystem::path& base, const std::string& p) {
  if (p.empty()) return {};
  std::filesystem::path path(p);
  return path.is_absolute() || base.empty() ? path : base / path;
}

inline int64_t NowNs() { return thermal::SteadyClock::Instance().NowNs(); }

// One whole line: the intake and scheduler threads log at once, and the terminal ledger
// ("[ari-node] <request id> CANCELLED ...") is read line by line. stderr is unbuffered,
// so each of the three calls is its own write; the stream lock keeps them together
// (tests/component/node_log_test.cc).
void Log(const char* fmt, auto... args) {
  flockfile(stderr);
  std::fputs("[ari-node] ", stderr);
  if constexpr (sizeof...(args) == 0) {
    std::fputs(fmt, stderr);  // clang: -Wformat-security on a non-literal without args
  } else {
    std::fprintf(stderr, fmt, args...);
  }
  std::fputc('\n', stderr);
  funlockfile(stderr);
}

}  // namespace ari::component::node_internal
