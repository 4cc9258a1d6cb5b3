// Privilege reduction for ari-node (docs/reliability.md "Privileges"). Two steps:
//
// 1. EnterSandbox(): first thing in main(), while the process has ONE thread (no_new_privs,
//    the Landlock domain and the capability bounding set are per thread and inherited by
//    threads created afterwards, so every DDS, scheduler and pool thread gets them):
//    - prctl(PR_SET_NO_NEW_PRIVS): no exec can ever gain privileges again (setuid
//      binaries, file capabilities);
//    - clears the ambient capabilities and drops every capability from the bounding set
//      except CAP_SETUID/CAP_SETGID (still needed by step 2; lost with it);
//    - Landlock (Linux >= 5.13, no seccomp): files may be created, written, truncated,
//      removed or linked only below `writable_dirs`; reading is not restricted (model,
//      config, policy, sysfs). An empty list means: nowhere. A kernel without Landlock
//      is reported, not an error (the other measures still apply);
//    - umask 077.
// 2. DropUser(): after start-up (model mapped, DDS up), when running as root, switches
//    every thread to `user` (setgroups, setgid, setuid: glibc applies them to all
//    threads) so the effective, permitted and ambient capability sets become empty, and
//    verifies that root cannot be regained.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "component/client/error.h"

namespace ari::component {

struct SandboxOptions {
  std::vector<std::filesystem::path> writable_dirs;  // nonexistent dirs are skipped (noted)
  bool landlock = true;                              // false: skip Landlock (debugging)
};

struct SandboxReport {
  bool no_new_privs = false;
  int landlock_abi = 0;  // 0: kernel without Landlock (or disabled)
  bool landlock_enforced = false;
  int bounding_dropped = 0;  // capabilities removed from the bounding set
  std::string note;          // human readable summary for the start-up log
};

// Call while single-threaded. Fails only when no_new_privs cannot be set or Landlock is
// available but refuses the rules (e.g. a writable dir that cannot be opened).
Result<SandboxReport> EnterSandbox(const SandboxOptions& options);

// Not root: no-op (returns "not root: unchanged"). Root and empty `user`: no change,
// returns a warning text. Root and a user: switches to it; error when the user is
// unknown or the switch did not stick.
Result<std::string> DropUser(const std::string& user);

}  // namespace ari::component
