// The node side of topic ari/v2/control (memory yield on command, docs/memory.md "Memory
// yield"): a receive thread waits on a DDS waitset for Control samples and hands those
// addressed to this node (Control.node_id equal to it) to a handler, which only forwards
// them to the scheduler (Scheduler::RequestStandby / RequestResume act at its next chunk
// boundary). Who may write the topic is DDS access control's decision under DDS Security
// (the permissions document's publish grant, scripts/security/gen.sh --controller); the
// node creates this reader only when its config enables standby (component/node/node.cc
// checks the security half of that).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"
#include "component/client/subscription.h"

namespace ari::component {

class ControlReceiver {
 public:
  using Handler = std::function<void(const ari_Control&)>;
  ControlReceiver(std::string node_id, Handler handler)
      : node_id_(std::move(node_id)), handler_(std::move(handler)) {}
  ~ControlReceiver();
  ControlReceiver(const ControlReceiver&) = delete;
  ControlReceiver& operator=(const ControlReceiver&) = delete;

  // Subscribes to ari/v2/control on `domain` (its own participant) and starts the thread.
  // Under DDS Security a node whose permissions lack the subscribe grant gets the error.
  Result<void> Start(std::shared_ptr<dds::Domain> domain);
  void Stop();  // joins the thread (idempotent; the destructor calls it)

  uint64_t received() const { return received_.load(); }        // addressed to this node
  uint64_t other_nodes() const { return other_nodes_.load(); }  // addressed elsewhere

 private:
  void Receive(const ari_Control& c);  // the subscription's thread

  std::string node_id_;
  Handler handler_;
  std::atomic<uint64_t> received_{0}, other_nodes_{0};
  dds::Subscription subscription_;  // last member: its thread stops first
};

}  // namespace ari::component
