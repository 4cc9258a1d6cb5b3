#include "component/node/privileges.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // Landlock ABI 3 (Linux 6.2)
#endif

namespace ari::component {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

int LandlockAbi() {
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

// Every access right that creates, changes or removes a file, for the kernel's ABI.
uint64_t WriteRights(int abi) {
  uint64_t r = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
               LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
               LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
               LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
               LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) r |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) r |= LANDLOCK_ACCESS_FS_TRUNCATE;
  return r;
}

struct Fd {
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
};

Result<void> ApplyLandlock(int abi, const std::vector<std::filesystem::path>& dirs,
                           std::string* note) {
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = WriteRights(abi);
  Fd ruleset{static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0))};
  if (ruleset.fd < 0) return MakeError(ErrorCode::kInternal, Errno("landlock_create_ruleset"));
  std::string allowed;
  for (const auto& dir : dirs) {
    Fd d{::open(dir.c_str(), O_PATH | O_CLOEXEC | O_DIRECTORY)};
    if (d.fd < 0) {
      *note += "; writable dir " + dir.string() + " skipped (" + std::strerror(errno) + ")";
      continue;
    }
    landlock_path_beneath_attr rule{};
    rule.allowed_access = attr.handled_access_fs;
    rule.parent_fd = d.fd;
    if (::syscall(SYS_landlock_add_rule, ruleset.fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
      return MakeError(ErrorCode::kInternal, Errno(("landlock_add_rule " + dir.string()).c_str()));
    }
    allowed += (allowed.empty() ? "" : ", ") + dir.string();
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.fd, 0) != 0) {
    return MakeError(ErrorCode::kInternal, Errno("landlock_restrict_self"));
  }
  *note += "; landlock ABI " + std::to_string(abi) + ": file writes only below [" + allowed + "]";
  return {};
}

}  // namespace

Result<SandboxReport> EnterSandbox(const SandboxOptions& options) {
  SandboxReport r;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return MakeError(ErrorCode::kInternal, Errno("prctl(PR_SET_NO_NEW_PRIVS)"));
  }
  r.no_new_privs = true;
  r.note = "no_new_privs";
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {  // before Linux 4.3
    r.note += std::string("; ambient capabilities not cleared (") + std::strerror(errno) + ")";
  }
  // Needs CAP_SETPCAP (root); without it the bounding set is left as it is.
  for (int cap = 0; cap <= 63; ++cap) {
    if (cap == CAP_SETUID || cap == CAP_SETGID) continue;
    if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1) continue;  // absent or unknown
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) ++r.bounding_dropped;
  }
  r.note += "; bounding set: " + std::to_string(r.bounding_dropped) + " capabilities dropped";
  ::umask(077);
  if (options.landlock) {
    r.landlock_abi = LandlockAbi();
    if (r.landlock_abi <= 0) {
      r.note += "; landlock unavailable in this kernel (file writes not restricted)";
    } else {
      if (auto l = ApplyLandlock(r.landlock_abi, options.writable_dirs, &r.note); !l) {
        return std::unexpected(l.error());
      }
      r.landlock_enforced = true;
    }
  } else {
    r.note += "; landlock off (config)";
  }
  return r;
}

Result<std::string> DropUser(const std::string& user) {
  if (::geteuid() != 0 && ::getuid() != 0) return std::string("not root: user unchanged");
  if (user.empty()) {
    return std::string("WARNING: running as root (set privileges.run_as_user to drop root)");
  }
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return MakeError(ErrorCode::kConfig, "run_as_user: unknown user '" + user + "'");
  }
  const uid_t uid = pw.pw_uid;
  const gid_t gid = pw.pw_gid;
  if (uid == 0) return MakeError(ErrorCode::kConfig, "run_as_user: '" + user + "' is root");
  // Order matters: groups and gid while still root, the uid last.
  if (::setgroups(1, &gid) != 0) return MakeError(ErrorCode::kInternal, Errno("setgroups"));
  if (::setresgid(gid, gid, gid) != 0) return MakeError(ErrorCode::kInternal, Errno("setresgid"));
  if (::setresuid(uid, uid, uid) != 0) return MakeError(ErrorCode::kInternal, Errno("setresuid"));
  // Must not be able to get root back.
  if (::setuid(0) == 0 || ::geteuid() == 0 || ::getegid() == 0) {
    return MakeError(ErrorCode::kInternal, "privilege drop did not stick (root regained)");
  }
  return "running as " + user + " (uid " + std::to_string(uid) + ", gid " + std::to_string(gid) +
         "), no capabilities";
}

}  // namespace ari::component
