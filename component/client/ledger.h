// ChunkLedger: an independent observer of the token-chunk topic that proves "every
// request id gets exactly one terminal chunk". It has its own participant and reader
// (RELIABLE, the topic's QoS), counts chunks and terminal chunks per request id, and is
// told which ids were sent (Expect). Used by the overload test and ari-soak.
//
//   auto ledger = ChunkLedger::Create(domain);
//   (*ledger)->WaitMatched(5s);            // the node's chunk writer is matched
//   (*ledger)->Expect(stream->request_id());
//   ...
//   (*ledger)->WaitComplete(30s);          // every expected id has a terminal
//   LedgerReport r = (*ledger)->Report();  // r.ok(): no missing, duplicate or stray ids
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"

namespace ari::component {

constexpr int kWireStatusCount = 10;  // ari_ChunkStatus values

struct LedgerReport {
  uint64_t expected = 0;       // ids announced with Expect()
  uint64_t with_terminal = 0;  // expected ids with >= 1 terminal chunk
  uint64_t missing = 0;        // expected ids without a terminal chunk
  uint64_t duplicates = 0;     // ids with more than one terminal chunk
  uint64_t stray = 0;          // ids with a terminal chunk that were never expected
  uint64_t chunks = 0;         // all chunks seen (terminal or not)
  uint64_t terminals = 0;      // all terminal chunks seen
  uint64_t bad_sequence = 0;   // terminal whose sequence number != chunks seen before it
  std::array<uint64_t, kWireStatusCount> by_status{};  // terminal statuses (ari_ChunkStatus)
  std::vector<std::string> examples;                   // a few offending ids with what is wrong

  bool ok() const { return missing == 0 && duplicates == 0 && stray == 0 && bad_sequence == 0; }
  std::string ToString() const;
};

class ChunkLedger {
 public:
  // `client_prefix`: count only chunks whose client id starts with it ("" = all).
  static Result<std::unique_ptr<ChunkLedger>> Create(std::shared_ptr<dds::Domain> domain,
                                                     std::string client_prefix = "");
  ~ChunkLedger();
  ChunkLedger(const ChunkLedger&) = delete;
  ChunkLedger& operator=(const ChunkLedger&) = delete;

  // Waits until at least `writers` chunk writers are matched.
  Result<void> WaitMatched(dds::Duration timeout, uint32_t writers = 1);
  // Announces an id that was sent (before or after its terminal arrived).
  void Expect(std::string_view request_id);
  // Waits until every expected id has a terminal chunk; false on timeout.
  bool WaitComplete(dds::Duration timeout);
  LedgerReport Report() const;

 private:
  struct Entry {
    uint32_t chunks = 0;  // non-terminal chunks
    uint32_t terminals = 0;
    bool expected = false;
    bool bad_sequence = false;
  };
  ChunkLedger() = default;
  void Loop();
  void OnChunk(const ari_TokenChunk& c);

  std::string prefix_;
  dds::Participant participant_;
  dds::Topic topic_;
  dds::Reader reader_;
  dds::ReadCondition cond_;
  dds::GuardCondition stop_;
  dds::WaitSet waitset_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Entry> ids_;
  uint64_t expected_ = 0, complete_ = 0, chunks_ = 0, terminals_ = 0;
  std::array<uint64_t, kWireStatusCount> by_status_{};
};

}  // namespace ari::component
