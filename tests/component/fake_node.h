// Test support for component tests: a child process that runs the REAL NodeTransport
// (DDS part real) with FakeEngine, a test double for the ENGINE only, and helpers to
// fork it and talk to it over pipes.
//
// FakeEngine answers by prompt:
//   "stream:N"     N chunks ("t<i> ", token 1000+i), then a terminal DONE
//   "reject"       one terminal REJECTED chunk
//   "deadline"     one terminal DEADLINE_MISSED chunk
//   "wait-cancel"  a chunk every 5 ms until the request is cancelled -> CANCELLED
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

#include "ari.h"
#include "component/node/node_transport.h"

namespace ari::testing {

namespace dds = ari::component::dds;

// What the child node reports back when told to stop.
struct NodeReport {
  int chunk_shm = -1;    // dds_is_shared_memory_available(chunk writer)
  int request_shm = -1;  // dds_is_shared_memory_available(request reader)
  uint64_t requests = 0;
  uint64_t cancels = 0;
  uint64_t chunks = 0;
  uint64_t chunks_loaned = 0;
};

struct FakeNodeConfig {
  dds::DomainOptions domain;
  std::string node_id = "fake-node";
  uint32_t status_seq = 1;
  int ready_fd = -1;    // child writes 1 byte once it serves (status published)
  int control_fd = -1;  // child stops when this reaches EOF
  int report_fd = -1;   // child writes a NodeReport before exiting
};

class FakeEngine {
 public:
  explicit FakeEngine(component::NodeTransport* t) : transport_(t), thread_([this] { Run(); }) {}
  ~FakeEngine() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void OnRequest(const ari_Request& r) {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(r);
    cv_.notify_all();
  }
  void OnCancel(const ari_Cancel& c) {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_.insert(std::string(dds::FixedView(c.request_id)));
    cv_.notify_all();
  }

 private:
  void Send(const ari_Request& r, uint32_t seq, bool terminal, ari_ChunkStatus status,
            const std::string& text, int token, const char* message = "") {
    auto sent = transport_->PublishInPlace([&](ari_TokenChunk& c) {
      std::memset(&c, 0, sizeof c);
      c.key_hi = r.key_hi;
      c.key_lo = r.key_lo;
      std::memcpy(c.request_id, r.request_id, sizeof c.request_id);
      std::memcpy(c.client_id, r.client_id, sizeof c.client_id);
      c.sequence_number = seq;
      c.terminal = terminal;
      c.status = status;
      dds::CopyFixed(text, c.text);
      c.text_len = static_cast<uint32_t>(text.size());
      if (token >= 0) {
        c.n_tokens = 1;
        c.token_ids[0] = token;
      }
      dds::CopyFixed(message, c.message);
      dds::CopyFixed("test-double/full", c.decision);
      c.timing.tokens_generated = seq;
      c.timing.queue_wait_us = 7;
    });
    if (!sent) ADD_FAILURE() << "test double: chunk not published: " << sent.error().ToString();
  }
  void Serve(const ari_Request& r) {
    const std::string prompt(r.prompt, r.prompt_len);
    const std::string id(dds::FixedView(r.request_id));
    if (prompt.rfind("stream:", 0) == 0) {
      const int n = std::stoi(prompt.substr(7));
      for (int i = 0; i < n; ++i)
        Send(r, i, false, ari_STATUS_OK, "t" + std::to_string(i) + " ", 1000 + i);
      Send(r, n, true, ari_STATUS_DONE, "", -1);
    } else if (prompt == "reject") {
      Send(r, 0, true, ari_STATUS_REJECTED, "", -1, "test double rejects");
    } else if (prompt == "deadline") {
      Send(r, 0, true, ari_STATUS_DEADLINE_MISSED, "", -1, "deadline 1 ms passed");
    } else if (prompt == "wait-cancel") {
      for (uint32_t i = 0; i < 4000; ++i) {
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_for(l, std::chrono::milliseconds(5),
                         [&] { return cancelled_.count(id) > 0 || stop_; })) {
          l.unlock();
          Send(r, i, true, ari_STATUS_CANCELLED, "", -1, "cancelled by client");
          return;
        }
        l.unlock();
        Send(r, i, false, ari_STATUS_OK, "x", 1);
      }
      Send(r, 4000, true, ari_STATUS_DONE, "", -1);
    } else {
      Send(r, 0, true, ari_STATUS_INVALID, "", -1, "unknown test prompt");
    }
  }
  void Run() {
    for (;;) {
      ari_Request r;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        r = queue_.front();
        queue_.pop_front();
      }
      Serve(r);
    }
  }

  component::NodeTransport* transport_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ari_Request> queue_;
  std::set<std::string> cancelled_;
  bool stop_ = false;
  std::thread thread_;
};

inline ari_NodeStatus MakeStatus(uint32_t seq) {
  ari_NodeStatus s{};
  s.state = ari_NODE_READY;
  s.status_seq = seq;
  s.temperature_c = 61.5f;
  s.sensor_state = ari_SENSOR_SIMULATED;
  dds::CopyFixed("W8A16 all cores", s.decision);
  dds::CopyFixed("cool and idle", s.reason);
  s.queue_depth[ari_URGENCY_NORMAL] = 2;
  s.sessions_total = 4;
  s.memory_available_bytes = 1ull << 30;
  dds::CopyFixed("tiny-test-model", s.model);
  dds::CopyFixed("w8+w4", s.pack);
  return s;
}

// Body of the child process; returns its exit code.
inline int RunFakeNode(const FakeNodeConfig& cfg) {
  component::NodeTransportOptions opt;
  opt.node_id = cfg.node_id;
  auto t = component::NodeTransport::Create(cfg.domain, opt);
  if (!t) return 20;
  int rc = 0;
  {
    FakeEngine engine(t->get());
    if (!(*t)->Start(
            [&](const ari_Request& r, const component::RequestInfo&) { engine.OnRequest(r); },
            [&](const ari_Cancel& c) { engine.OnCancel(c); })) {
      return 21;
    }
    if (!(*t)->PublishStatus(MakeStatus(cfg.status_seq))) return 22;
    if (cfg.ready_fd >= 0 && write(cfg.ready_fd, "R", 1) != 1) return 23;
    char buf[8];
    while (cfg.control_fd >= 0 && read(cfg.control_fd, buf, sizeof buf) > 0) {
    }
    (*t)->Stop();
  }
  NodeReport rep;
  rep.chunk_shm = (*t)->chunk_shared_memory() ? 1 : 0;
  rep.request_shm = (*t)->request_shared_memory() ? 1 : 0;
  const auto st = (*t)->stats();
  rep.requests = st.requests;
  rep.cancels = st.cancels;
  rep.chunks = st.chunks;
  rep.chunks_loaned = st.chunks_loaned;
  t->reset();
  if (cfg.report_fd >= 0 && write(cfg.report_fd, &rep, sizeof rep) != sizeof rep) rc = 24;
  return rc;
}

// Child side of FakeNodeProcess: when this executable is started with
// ARI_FAKE_NODE_CHILD=1 it runs the fake node before main() and exits. Fresh process
// (fork + exec): no DDS or iceoryx state inherited from the test process.
inline int MaybeRunFakeNodeChild() {
  const char* flag = std::getenv("ARI_FAKE_NODE_CHILD");
  if (flag == nullptr || std::strcmp(flag, "1") != 0) return 0;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  FakeNodeConfig cfg;
  cfg.domain.domain_id = static_cast<uint32_t>(std::atoi(env("ARI_FAKE_NODE_DOMAIN").c_str()));
  cfg.domain.config = env("ARI_FAKE_NODE_CONFIG");
  cfg.domain.shared_memory = env("ARI_FAKE_NODE_SHM") == "off" ? dds::SharedMemoryMode::kOff
                                                               : dds::SharedMemoryMode::kFromConfig;
  cfg.node_id = env("ARI_FAKE_NODE_ID");
  cfg.status_seq = static_cast<uint32_t>(std::atoi(env("ARI_FAKE_NODE_SEQ").c_str()));
  cfg.ready_fd = 3;
  cfg.control_fd = 4;
  cfg.report_fd = 5;
  // exit(), not _exit(): static destructors deregister from iox-roudi (else RouDi
  // later tries to kill the gone process and aborts at its own shutdown).
  std::exit(RunFakeNode(cfg));
}
inline const int kFakeNodeChildHook = MaybeRunFakeNodeChild();

// A fake node in a child process (fork + exec of this test executable). Stop() =
// orderly (EOF on the control pipe) and collects the report; Kill() = SIGKILL by PID.
// The destructor kills what is left.
class FakeNodeProcess {
 public:
  explicit FakeNodeProcess(const FakeNodeConfig& cfg) {
    // Everything that allocates happens before fork (the parent has DDS threads).
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("ARI_FAKE_NODE_CHILD=1");
    env_strings.push_back("ARI_FAKE_NODE_DOMAIN=" + std::to_string(cfg.domain.domain_id));
    env_strings.push_back("ARI_FAKE_NODE_CONFIG=" + cfg.domain.config);
    env_strings.push_back(
        std::string("ARI_FAKE_NODE_SHM=") +
        (cfg.domain.shared_memory == dds::SharedMemoryMode::kOff ? "off" : "config"));
    env_strings.push_back("ARI_FAKE_NODE_ID=" + cfg.node_id);
    env_strings.push_back("ARI_FAKE_NODE_SEQ=" + std::to_string(cfg.status_seq));
    std::vector<char*> envp;
    envp.reserve(env_strings.size() + 1);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};

    int ready[2], control[2], report[2];
    if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(control, O_CLOEXEC) != 0 ||
        pipe2(report, O_CLOEXEC) != 0) {
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      // dup2 clears O_CLOEXEC on the copies; everything else closes at exec.
      const int r = fcntl(ready[1], F_DUPFD_CLOEXEC, 10);
      const int c = fcntl(control[0], F_DUPFD_CLOEXEC, 10);
      const int p = fcntl(report[1], F_DUPFD_CLOEXEC, 10);
      if (r < 0 || c < 0 || p < 0 || dup2(r, 3) != 3 || dup2(c, 4) != 4 || dup2(p, 5) != 5)
        _exit(30);
      execve(exe, argv, envp.data());
      _exit(31);
    }
    close(ready[1]);
    close(control[0]);
    close(report[1]);
    ready_fd_ = ready[0];
    control_fd_ = control[1];
    report_fd_ = report[0];
  }
  ~FakeNodeProcess() {
    if (pid_ > 0) Kill();
    for (int fd : {ready_fd_, control_fd_, report_fd_}) {
      if (fd >= 0) close(fd);
    }
  }
  FakeNodeProcess(const FakeNodeProcess&) = delete;
  FakeNodeProcess& operator=(const FakeNodeProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Blocks until the child serves (true) or died (false).
  bool WaitReady() {
    char c = 0;
    return pid_ > 0 && read(ready_fd_, &c, 1) == 1;
  }
  // Orderly stop; returns the child's exit code (or -1) and fills *report.
  int Stop(NodeReport* report) {
    if (pid_ <= 0) return -1;
    close(control_fd_);
    control_fd_ = -1;
    NodeReport rep;
    const bool got = read(report_fd_, &rep, sizeof rep) == sizeof rep;
    if (got && report) *report = rep;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_ = -1;
  int ready_fd_ = -1, control_fd_ = -1, report_fd_ = -1;
};

}  // namespace ari::testing
