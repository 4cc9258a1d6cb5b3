// One topic read on its own participant and receive thread: a reader, its read condition
// and a stop guard in a waitset; every valid sample is handed to a callback on that thread
// (as a loaned sample, valid during the call). RAII: Stop() (or the destructor) joins the
// thread before the entities go. Used by the node for ari/v2/control (ControlReceiver) and
// ari/v2/sim_environment (EnvReplay).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "component/client/dds.h"
#include "component/client/error.h"

namespace ari::component::dds {

class Subscription {
 public:
  using OnSample = std::function<void(const void* sample)>;
  Subscription() = default;
  ~Subscription() { Stop(); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // Subscribes to `kind` on `domain` (reader QoS of the topic table) and starts the thread.
  // `tag` names it in the error lines the thread prints ("[ari-node] <tag>: ...").
  Result<void> Start(std::shared_ptr<Domain> domain, TopicKind kind, OnSample on_sample,
                     std::string tag);
  void Stop();  // idempotent

 private:
  void ReceiveLoop();

  OnSample on_sample_;
  std::string tag_;
  Participant participant_;
  Topic topic_;
  Reader reader_;
  ReadCondition cond_;
  GuardCondition stop_;
  WaitSet waitset_;
  std::thread thread_;
};

}  // namespace ari::component::dds
