// ari_client: what an in-vehicle app links to talk to an ARI node over DDS.
//
//   ari::component::ClientOptions options;       // loopback config, domain 0
//   auto client = ari::component::Client::Connect(options);
//   ari::component::AskParams ask;
//   ask.prompt = "Nearest charger?";
//   ask.urgency = ari_URGENCY_HIGH;
//   auto stream = (*client)->Ask(ask);
//   for (const ari_TokenChunk& c : *stream) fwrite(c.text, 1, c.text_len, stdout);
//   if (stream->error()) ...             // rejected, deadline missed, node lost...
//
// One background thread per client waits on a DDS waitset (never sleep-polls) for
// chunks, NodeStatus and liveliness changes, and routes chunks to their streams.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"
#include "component/client/routing.h"

namespace ari::component {

struct ClientOptions {
  dds::DomainOptions domain;             // used when Connect creates the domain
  std::string client_id = "ari-client";  // 1..31 bytes, no spaces
  // Ask fails with kNodeAbsent when no node's request reader and chunk writer are
  // matched within this time.
  dds::Duration node_timeout = std::chrono::seconds(5);
  // With several nodes on the domain, each Ask goes to the node this rule picks
  // (docs/routing.md); with one node, to that node.
  RoutingWeights routing;
};

struct Turn {
  ari_TurnRole role = ari_ROLE_USER;
  std::string text;
};

// A request is plain (prompt alone) or chat form: the node renders chat turns with the
// model's chat template, roles kept (docs/interface.md). Chat form is sent as
//   [system as a ROLE_SYSTEM turn] + turns + [prompt as the last ROLE_USER turn]
// with the empty parts left out; at most ari_kMaxTurns turns in all.
struct AskParams {
  std::string prompt;       // alone: a plain prompt; with system/turns: the last user turn
  std::string system;       // system prompt (makes the request chat form)
  std::vector<Turn> turns;  // chat turns, in order (a conversation so far)
  ari_UrgencyClass urgency = ari_URGENCY_NORMAL;
  uint32_t max_tokens = 128;
  uint32_t deadline_ms = 0;       // 0 = the node's default for the urgency class
  uint64_t session_id = 0;        // 0 = stateless
  ari_SamplingParams sampling{};  // zero = greedy
  // The node that must answer (NodeStatus.node_id, <= 31 bytes); "" = the client routes
  // (docs/routing.md). Request.target_node_id.
  std::string target_node;
  // Only a node running this model may answer: its name (NodeStatus.model) or content
  // hash (NodeStatus.model_hash, 16 hex digits); "" = any model.
  std::string target_model;
  // When the answering node's liveliness is lost: a request it had not started is sent
  // once to another node (same request id) unless pinned; one it was streaming is
  // restarted there (the answer starts over, Stream::restarts() counts it) when this is
  // on, else it ends with a terminal STATUS_NODE_LOST. nullopt: on for stateless
  // CRITICAL requests, off otherwise (docs/routing.md "Failover").
  std::optional<bool> restart_on_node_loss;
  // Structured output (docs/structured_output.md): at most one of these. The answer is
  // then constrained; the terminal chunk's format_state says whether it is complete.
  std::string schema_name;  // a schema registered in the node config (<= 31 bytes)
  std::string json_schema;  // inline JSON Schema text (<= ari_kFormatTextLen bytes)
  std::string grammar;      // inline grammar text, GBNF-like (<= ari_kFormatTextLen bytes)
};

// "system:TEXT", "user:TEXT" or "assistant:TEXT" -> Turn (kInvalidArgument otherwise).
Result<Turn> ParseTurn(std::string_view spec);

// The turns a chat-form request carries (see AskParams); empty for a plain prompt.
std::vector<Turn> ChatTurns(const AskParams& params);

// Validates and encodes params into a Request sample (no DDS involved).
Result<void> EncodeRequest(const AskParams& params, std::string_view request_id,
                           std::string_view client_id, ari_Request* out);

enum class NodeLiveliness { kUnknown, kAlive, kLost };

struct NodeView {
  NodeLiveliness liveliness = NodeLiveliness::kUnknown;
  std::optional<ari_NodeStatus> status;  // latest received
  uint32_t alive_writers = 0;            // NodeStatus writers currently alive
  uint64_t lost_events = 0;              // times liveliness dropped to zero
};

struct StreamSummary {
  ari_ChunkStatus status = ari_STATUS_OK;
  std::string text;  // concatenated chunk texts
  std::vector<int32_t> tokens;
  uint32_t chunks = 0;
  uint32_t gaps = 0;         // missing sequence numbers (should be 0)
  ari_ChunkTiming timing{};  // from the terminal chunk
  std::string message;
  // Constrained requests: FORMAT_COMPLETE when the text is a complete, valid answer;
  // FORMAT_INCOMPLETE when it stopped before (max_tokens, ...). FORMAT_NONE otherwise.
  ari_FormatState format_state = ari_FORMAT_NONE;
};

// "none", "complete", "incomplete".
std::string_view FormatStateName(ari_FormatState s);

// Maps a terminal status to the client error it means (nullopt for DONE).
std::optional<Error> TerminalError(const ari_TokenChunk& terminal);

class ClientCore;
struct StreamState;

class Stream {
 public:
  Stream(std::shared_ptr<ClientCore> core, std::shared_ptr<StreamState> state);
  ~Stream();
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const std::string& request_id() const;
  // The node the request was addressed to (Request.target_node_id); "" = any node (one
  // node on the domain, or its NodeStatus not received yet).
  const std::string& node_id() const;
  // Times the answer started over on another node after its node was lost (0 or 1).
  uint32_t restarts() const;
  // Iterator style: the next chunk (the terminal one included); then kClosed.
  // kTimeout when nothing arrives in time, kNodeLost when the node died mid-stream.
  Result<ari_TokenChunk> Next(dds::Duration timeout = dds::Duration::max());
  // Callback style: every chunk to on_chunk until the terminal one; the summary for
  // DONE, an error (kRejected/kDeadlineMissed/kCancelled/kFailed with .status) else.
  Result<StreamSummary> Wait(const std::function<void(const ari_TokenChunk&)>& on_chunk = {},
                             dds::Duration timeout = dds::Duration::max());
  bool finished() const;
  // Set when iteration stopped on an error or a non-DONE terminal status.
  const std::optional<Error>& error() const { return error_; }

  class Iterator {
   public:
    using value_type = ari_TokenChunk;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(Stream* s) : stream_(s) { Advance(); }
    const ari_TokenChunk& operator*() const { return chunk_; }
    const ari_TokenChunk* operator->() const { return &chunk_; }
    Iterator& operator++() {
      Advance();
      return *this;
    }
    bool operator==(const Iterator& o) const { return stream_ == o.stream_; }

   private:
    void Advance();
    Stream* stream_ = nullptr;
    ari_TokenChunk chunk_{};
  };
  Iterator begin() { return Iterator(this); }
  Iterator end() { return Iterator(); }

 private:
  std::shared_ptr<ClientCore> core_;
  std::shared_ptr<StreamState> state_;
  std::optional<Error> error_;
  bool done_ = false;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  // Shares a Domain already created in this process (e.g. with a NodeTransport).
  static Result<std::unique_ptr<Client>> Connect(std::shared_ptr<dds::Domain> domain,
                                                 const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Publishes a request with a fresh id "<client id>-<counter>-<random hex>". CRITICAL
  // goes through a second writer in DDS partition ari-critical (dds::kCriticalPartition);
  // when DDS Security refused that writer at connect (this identity lacks the grant),
  // CRITICAL returns kRejected (status FORBIDDEN, dds_rc NOT_ALLOWED_BY_SECURITY) at
  // once, and other urgencies work as usual.
  Result<Stream> Ask(const AskParams& params);
  Result<void> Cancel(std::string_view request_id);
  NodeView Node() const;
  // Every node whose NodeStatus this client holds, as the routing rule sees it now
  // (impossible samples left out), in node id order.
  std::vector<RouteNode> Nodes() const;
  // Blocks until a NodeStatus arrived (transient-local: at once when a node runs) that
  // `accept` accepts (default: any), e.g. the first status of a restarted node.
  Result<ari_NodeStatus> WaitForNode(dds::Duration timeout,
                                     const std::function<bool(const ari_NodeStatus&)>& accept = {});
  // Blocks until liveliness is `want` (e.g. kLost after the node died).
  Result<void> WaitForLiveliness(NodeLiveliness want, dds::Duration timeout);

  const std::string& client_id() const;
  const dds::Domain& domain() const;
  bool request_shared_memory() const;      // request writer goes through iceoryx
  bool chunk_shared_memory() const;        // chunk reader gets samples through iceoryx
  dds::WriterStats request_stats() const;  // both request writers (default + ari-critical)
  dds::ReaderStats chunk_stats() const;

 private:
  explicit Client(std::shared_ptr<ClientCore> core) : core_(std::move(core)) {}
  std::shared_ptr<ClientCore> core_;
};

}  // namespace ari::component
