// ari-node: the ARI DDS component. See docs/interface.md.
//   ari-node --config config/node.textproto [--model PATH] [--policy PATH]
//            [--domain N] [--cyclone-config PATH] [--pack-cache DIR]
// Signals: SIGTERM/SIGINT stop (finish or cancel in-flight per config, exit 0),
// SIGHUP reloads the policy. Exit codes: 0 clean stop, 1 bad usage/config, 2 start-up failed.
// Privileges (docs/reliability.md): sandboxed (no_new_privs, Landlock) before start-up,
// root given up (privileges.run_as_user) once serving.
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "component/node/node.h"
#include "component/node/privileges.h"
#include "runtime/kernels/tier_choice.h"

namespace {

void Usage(FILE* out = stderr) {
  std::fprintf(out,
               "usage: ari-node --config FILE [--model PATH] [--policy PATH] [--domain N]\n"
               "                [--cyclone-config PATH] [--pack-cache DIR]\n"
               "  --pack-cache DIR: where a plain GGUF model's automatic pack is kept\n"
               "    (default: the config's pack_cache_dir, $ARI_PACK_CACHE,\n"
               "    $CACHE_DIRECTORY/packs, ~/.cache/ari/packs)\n");
}

struct NodeArgs {
  std::string config_path;
  ari::component::NodeOverrides ov;
};

// Stores the value of option `flag`; false when `flag` is not an option with a value.
bool ApplyOption(const std::string& flag, const char* value, NodeArgs& args) {
  ari::component::NodeOverrides& ov = args.ov;
  if (flag == "--config") {
    args.config_path = value;
  } else if (flag == "--model") {
    ov.model = value;
  } else if (flag == "--policy") {
    ov.policy = value;
  } else if (flag == "--domain") {
    ov.domain_id = std::atoi(value);
  } else if (flag == "--cyclone-config") {
    ov.cyclone_config = value;
  } else if (flag == "--pack-cache") {
    ov.pack_cache = value;
  } else {
    return false;
  }
  return true;
}

// The exit code when the tool stops here (--help: 0, bad usage: 1); nullopt to go on.
std::optional<int> ParseArgs(int argc, char** argv, NodeArgs& args) {
  // Every argument but --help is an option followed by its value.
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 0;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr || !ApplyOption(a, v, args)) {
      std::fprintf(stderr, "ari-node: bad argument '%s'\n", a.c_str());
      Usage();
      return 1;
    }
  }
  if (args.config_path.empty()) {
    Usage();
    return 1;
  }
  return std::nullopt;
}

// Sandbox while still single-threaded: every thread started later inherits it. False
// when it failed (said on stderr).
bool EnterNodeSandbox(const ari::config::NodeConfig& config,
                      const ari::component::NodeOverrides& ov) {
  using namespace ari::component;
  const std::filesystem::path& base_dir = ov.base_dir;
  // The host's kernel tier timings (read, or measured and shared): the file is outside
  // the sandbox's writable folders (runtime/kernels/tier_timings_file.h).
  [[maybe_unused]] const auto& timings = ari::runtime::kernels::ProcessTierTimings();
  SandboxOptions sandbox;
  // A plain GGUF model is packed into the pack cache at start-up: it must be writable (and
  // exist, for the Landlock rule). A failure here is reported by the model load.
  if (const auto cache = ResolvePackCacheDir(config, ov); !cache.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache, ec);
    if (!ec) sandbox.writable_dirs.push_back(cache);
  }
  if (const auto prefixes = ResolvePrefixCacheDir(config, ov);
      config.prefix_cache().system_prompts_size() > 0 && !prefixes.empty()) {
    std::error_code ec;  // written at start-up (a failure is logged by the registration)
    std::filesystem::create_directories(prefixes, ec);
    if (!ec) sandbox.writable_dirs.push_back(prefixes);
  }
  if (const auto spill = ResolveSpillDir(config, ov);
      config.parking().spill_idle_sessions() && !spill.empty()) {
    std::error_code ec;  // idle sessions are written there while serving
    std::filesystem::create_directories(spill, ec);
    if (!ec) sandbox.writable_dirs.push_back(spill);
  }
  sandbox.landlock = !config.privileges().no_landlock();
  for (const auto& d : config.privileges().writable_dirs()) {
    std::filesystem::path p(d);
    sandbox.writable_dirs.push_back(p.is_absolute() ? p : base_dir / p);
  }
  if (config.dds().shared_memory()) {  // iceoryx: shared memory files + RouDi sockets
    sandbox.writable_dirs.push_back("/dev/shm");
    sandbox.writable_dirs.push_back("/tmp");
    // iceoryx names its threads (pthread_setname_np writes /proc/<pid>/task/<tid>/comm)
    // and aborts when that fails (EACCES under Landlock).
    sandbox.writable_dirs.push_back("/proc/self");
  }
  auto sandboxed = EnterSandbox(sandbox);
  if (!sandboxed) {
    std::fprintf(stderr, "ari-node: sandbox: %s\n", sandboxed.error().ToString().c_str());
    return false;
  }
  std::fprintf(stderr, "[ari-node] sandbox: %s\n", sandboxed->note.c_str());
  return true;
}

// Signals are handled synchronously through a signalfd: nothing runs in a handler.
// Returns the signalfd, -1 when it failed (said on stderr).
int BlockSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  if (pthread_sigmask(SIG_BLOCK, &mask, nullptr) != 0) {
    std::fprintf(stderr, "ari-node: cannot block signals\n");
    return -1;
  }
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (sfd < 0) {
    std::fprintf(stderr, "ari-node: signalfd: %s\n", std::strerror(errno));
    return -1;
  }
  return sfd;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ari::component;
  NodeArgs args;
  if (const std::optional<int> rc = ParseArgs(argc, argv, args)) return *rc;
  NodeOverrides& ov = args.ov;
  auto config = LoadNodeConfig(args.config_path);
  if (!config) {
    std::fprintf(stderr, "ari-node: %s\n", config.error().ToString().c_str());
    return 1;
  }
  ov.base_dir = std::filesystem::absolute(args.config_path).parent_path();
  if (!EnterNodeSandbox(*config, ov)) return 2;
  const int sfd = BlockSignals();
  if (sfd < 0) return 2;
  auto node = Node::Create(*config, ov);
  if (!node) {
    std::fprintf(stderr, "ari-node: %s\n", node.error().ToString().c_str());
    close(sfd);
    return 2;
  }
  // Start-up is over (model mapped, DDS up): give up root if we have it.
  auto dropped = DropUser(config->privileges().run_as_user());
  if (!dropped) {
    std::fprintf(stderr, "ari-node: %s\n", dropped.error().ToString().c_str());
    node->reset();
    close(sfd);
    return 2;
  }
  std::fprintf(stderr, "[ari-node] privileges: %s\n", dropped->c_str());
  const int rc = (*node)->Serve(sfd);
  node->reset();
  close(sfd);
  return rc;
}
