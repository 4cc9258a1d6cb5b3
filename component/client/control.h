// A controller of nodes' memory (docs/memory.md "Memory yield"): writes STANDBY / RESUME
// on topic ari/v2/control to one node. Used by the platform's memory manager, ari-cli
// control and the tests. Under DDS Security only identities granted publish on
// ari/v2/control may create the writer (scripts/security/gen.sh --controller); others get
// an error naming DDS Security, and nothing is sent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"

namespace ari::component {

class ControlSender {
 public:
  static Result<std::unique_ptr<ControlSender>> Create(std::shared_ptr<dds::Domain> domain,
                                                       std::string sender_id);
  // Waits up to `match_timeout` for a control reader (a node that accepts commands), then
  // writes one command addressed to `node_id`. kTimeout when no reader matched.
  Result<void> Send(std::string_view node_id, ari_ControlCommand command,
                    dds::Duration match_timeout);

 private:
  ControlSender() = default;
  std::string sender_id_;
  uint32_t seq_ = 0;
  dds::Participant participant_;
  dds::Topic topic_;
  dds::Writer writer_;
};

}  // namespace ari::component
