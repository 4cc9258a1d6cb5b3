// Test support for the multi-process ari-node tests: find the ari-node binary of this
// build, convert the real stories260K model once, write a temp config, fork+exec the
// node on loopback with the test's own domain id, stop it by PID.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/convert/llama2c_import.h"
#include "runtime/eval/layer_calibration.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "tests/common/dds_test_util.h"
#include "tests/common/test_util.h"

namespace ari::testing {

// <build>/component/ari-node: ARI_BINARY_DIR (ctest) or relative to this executable
// (<build>/tests/component/<exe>).
inline std::filesystem::path NodeBinary() {
  if (const char* env = std::getenv("ARI_BINARY_DIR"); env && *env) {
    return std::filesystem::path(env) / "component" / "ari-node";
  }
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return exe.parent_path().parent_path().parent_path() / "component" / "ari-node";
}

// stories260K converted to GGUF in `dir` (empty when the real model is absent).
inline std::filesystem::path Stories260K(const std::filesystem::path& dir) {
  auto ckpt = ModelFile("llama2c/stories260K/stories260K.bin");
  auto tok = ModelFile("llama2c/stories260K/tok512.bin");
  if (ckpt.empty() || tok.empty()) return {};
  auto out = dir / "stories260K.gguf";
  if (!std::filesystem::exists(out)) {
    if (!runtime::ConvertLlama2c(ckpt, tok, out)) return {};
  }
  return out;
}

// stories260K as a calibrated pack in `dir` (layer importance from tests/data/calibration.txt,
// so layer drop works): what a deployment ships. Empty when the real model is absent.
inline std::filesystem::path Stories260KPack(const std::filesystem::path& dir) {
  const auto plain = Stories260K(dir);
  if (plain.empty()) return {};
  auto out = dir / "stories260K.pack.gguf";
  if (std::filesystem::exists(out)) return out;
  auto model = runtime::Model::Load(plain);
  if (!model) return {};
  std::ifstream in(SourceDir() / "tests" / "data" / "calibration.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  auto ids = (*model)->tokenizer()->Encode(ss.str(), {});
  if (!ids) return {};
  auto imp = runtime::CalibrateLayerImportance(**model, *ids);
  if (!imp) return {};
  runtime::PackOptions po;
  po.layer_importance = *imp;
  if (!runtime::WritePack(plain, out, po)) return {};
  return out;
}

// The policy text of config/policy_default.textproto, with `from` replaced by `to`.
inline std::string DefaultPolicyWith(const std::string& from = "", const std::string& to = "") {
  std::ifstream in(SourceDir() / "config" / "policy_default.textproto");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!from.empty()) {
    if (auto pos = text.find(from); pos != std::string::npos) text.replace(pos, from.size(), to);
  }
  return text;
}

// The policy text with every band's min_dwell_ms set to 300 (tests move through bands
// in seconds, not minutes).
inline std::string ShortDwells(std::string text) {
  const std::string key = "min_dwell_ms: ";
  for (size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos)) {
    pos += key.size();
    size_t end = pos;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    text.replace(pos, end - pos, "300");
  }
  return text;
}

// Writes node.textproto (+ policy.textproto) into dir; `extra` is appended verbatim,
// `dds_extra` inside the dds { } block (e.g. `node_id: "n1"`).
inline std::filesystem::path WriteNodeConfig(const std::filesystem::path& dir,
                                             const std::filesystem::path& model,
                                             const std::string& extra = "",
                                             const std::string& policy_text = DefaultPolicyWith(),
                                             const std::string& dds_extra = "") {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "policy.textproto") << policy_text;
  auto path = dir / "node.textproto";
  std::ofstream out(path);
  out << "model_path: \"" << model.string() << "\"\n"
      << "policy_path: \"policy.textproto\"\n"
      << "dds { domain_id: " << TestDomainId() << " cyclone_config: \""
      << (SourceDir() / "config" / "cyclonedds-lo.xml").string() << "\" liveliness_lease_ms: 500 "
      << dds_extra << " }\n"
      << "session_slots: 4\nmax_context: 512\n"
      << "limits { max_prompt_bytes: 512 max_max_tokens: 256 client_rate_per_s: 50 "
         "client_burst: 20 }\n"
      << "sensor { kind: SENSOR_NONE }\nstatus_period_ms: 200\nthreads: 1\n"
      << extra;
  return path;
}

class NodeProcess {
 public:
  NodeProcess() = default;
  NodeProcess(const NodeProcess&) = delete;
  NodeProcess& operator=(const NodeProcess&) = delete;
  ~NodeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool Start(const std::filesystem::path& config, const std::filesystem::path& log) {
    log_ = log;
    const std::string bin = NodeBinary().string();
    const std::string cfg = config.string();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log.c_str(), "a");
      if (f) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      execl(bin.c_str(), bin.c_str(), "--config", cfg.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid_ > 0;
  }
  // Sends `sig` and waits up to `timeout` for the exit; the exit code, or -1 on timeout
  // (then the process is killed), or 128 + signal when it died of a signal.
  int Stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }
  // Waits up to `timeout` for the process to exit on its own: its exit code (as Stop).
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    if (pid_ <= 0) return -1;
    const auto end = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Stop(SIGKILL);
  }
  pid_t pid() const { return pid_; }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
};

}  // namespace ari::testing
