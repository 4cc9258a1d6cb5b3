// Stream and Client: the public API of client.h over ClientCore (client_core.h).
#include <cstdio>
#include <cstring>

#include "component/client/client_core.h"

namespace ari::component {

using internal::WaitUntil;

// ------------------------------------------------------------------ stream
Stream::Stream(std::shared_ptr<ClientCore> core, std::shared_ptr<StreamState> state)
    : core_(std::move(core)), state_(std::move(state)) {}

Stream::Stream(Stream&& o) noexcept
    : core_(std::move(o.core_)),
      state_(std::move(o.state_)),
      error_(std::move(o.error_)),
      done_(o.done_) {}

Stream::~Stream() {
  if (core_ && state_ && !done_) core_->Forget(state_->request_id);
}

const std::string& Stream::request_id() const { return state_->request_id; }

const std::string& Stream::node_id() const { return state_->node_id; }

uint32_t Stream::restarts() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->restarts;
}

bool Stream::finished() const { return done_; }

Result<ari_TokenChunk> Stream::Next(dds::Duration timeout) {
  if (done_ || !state_) return MakeError(ErrorCode::kClosed, "stream already finished");
  std::unique_lock<std::mutex> lock(state_->mutex);
  WaitUntil(state_->cv, lock, timeout,
            [&] { return !state_->queue.empty() || state_->node_lost || state_->closed; });
  // Failover (docs/routing.md): once per request, to another live node, when the lost
  // node had not started it or a restart is allowed.
  if (state_->queue.empty() && state_->node_lost && !state_->closed && state_->resubmits == 0 &&
      (!state_->any_chunk || state_->restart_ok)) {
    lock.unlock();
    const auto moved = core_->Resubmit(*state_);
    lock.lock();
    if (moved) {
      state_->node_lost = false;
      if (state_->any_chunk) ++state_->restarts;  // the answer starts over
      state_->any_chunk = false;
      state_->next_seq = 0;
      lock.unlock();
      return Next(timeout);
    }
    std::fprintf(stderr, "ari client: %s not moved off lost node '%s': %s\n",
                 state_->request_id.c_str(), state_->lost_node.c_str(),
                 moved.error().ToString().c_str());
  }
  if (!state_->queue.empty()) {
    ari_TokenChunk c = state_->queue.front();
    state_->queue.pop_front();
    if (c.sequence_number > state_->next_seq) state_->gaps += c.sequence_number - state_->next_seq;
    state_->next_seq = c.sequence_number + 1;
    if (c.terminal) {
      done_ = true;
      error_ = TerminalError(c);
      lock.unlock();
      core_->Forget(state_->request_id);  // end the request instance now
    }
    return c;
  }
  if (state_->node_lost) {
    error_ = Error{ErrorCode::kNodeLost,
                   "node liveliness lost during request " + state_->request_id, 0, -1};
    if (!state_->lost_node.empty()) {  // one node of several: the stream's own terminal
      ari_TokenChunk c{};
      dds::CopyFixed(state_->request_id, c.request_id);
      c.sequence_number = state_->next_seq;
      c.terminal = true;
      c.status = ari_STATUS_NODE_LOST;
      dds::CopyFixed("node '" + state_->lost_node.substr(0, 60) + "' lost (liveliness)", c.message);
      error_ = TerminalError(c);
      done_ = true;
      lock.unlock();
      core_->Forget(state_->request_id);
      return c;
    }
  } else if (state_->closed) {
    error_ = Error{ErrorCode::kClosed, "client shut down", 0, -1};
  } else {
    return MakeError(ErrorCode::kTimeout, "no chunk for " + state_->request_id + " in time");
  }
  done_ = true;
  lock.unlock();
  core_->Forget(state_->request_id);  // a restarted node must not get it again
  return std::unexpected(*error_);
}

Result<StreamSummary> Stream::Wait(const std::function<void(const ari_TokenChunk&)>& on_chunk,
                                   dds::Duration timeout) {
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout == dds::Duration::max() || timeout.count() < 0;
  const auto until = forever ? Clock::time_point::max() : Clock::now() + timeout;
  StreamSummary sum;
  for (;;) {
    const dds::Duration left =
        forever ? dds::Duration::max()
                : std::max(dds::Duration::zero(), dds::Duration(until - Clock::now()));
    const uint32_t restarts = this->restarts();
    auto c = Next(left);
    if (!c) return std::unexpected(c.error());
    if (this->restarts() != restarts) sum = StreamSummary{};  // started over on another node
    if (on_chunk) on_chunk(*c);
    ++sum.chunks;
    sum.text.append(c->text, std::min<uint32_t>(c->text_len, ari_kChunkTextLen));
    sum.tokens.insert(sum.tokens.end(), c->token_ids,
                      c->token_ids + std::min<uint32_t>(c->n_tokens, ari_kChunkMaxTokens));
    if (c->terminal) {
      std::memcpy(&sum.status, &c->status, sizeof sum.status);  // no enum load of wire data
      sum.timing = c->timing;
      sum.message = std::string(dds::FixedView(c->message));
      std::memcpy(&sum.format_state, &c->format_state, sizeof sum.format_state);
      {
        std::lock_guard<std::mutex> lock(state_->mutex);
        sum.gaps = state_->gaps;
      }
      if (error_) return std::unexpected(*error_);
      return sum;
    }
  }
}

void Stream::Iterator::Advance() {
  if (stream_ == nullptr) return;
  if (stream_->finished()) {
    stream_ = nullptr;
    return;
  }
  auto c = stream_->Next();
  if (!c) {
    stream_ = nullptr;
    return;
  }
  chunk_ = *c;
}

// ------------------------------------------------------------------ client
Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto domain = dds::Domain::Create(options.domain);
  if (!domain) return std::unexpected(domain.error());
  return Connect(std::move(*domain), options);
}

Result<std::unique_ptr<Client>> Client::Connect(std::shared_ptr<dds::Domain> domain,
                                                const ClientOptions& options) {
  auto core = ClientCore::Create(std::move(domain), options);
  if (!core) return std::unexpected(core.error());
  return std::unique_ptr<Client>(new Client(std::move(*core)));
}

Client::~Client() { core_->Shutdown(); }

Result<Stream> Client::Ask(const AskParams& params) { return core_->Ask(core_, params); }

Result<void> Client::Cancel(std::string_view request_id) { return core_->Cancel(request_id); }

NodeView Client::Node() const {
  std::lock_guard<std::mutex> lock(core_->mutex_);
  return core_->view_;
}

std::vector<RouteNode> Client::Nodes() const {
  std::lock_guard<std::mutex> lock(core_->mutex_);
  return core_->RouteNodes(dds_time());
}

Result<ari_NodeStatus> Client::WaitForNode(
    dds::Duration timeout, const std::function<bool(const ari_NodeStatus&)>& accept) {
  std::unique_lock<std::mutex> lock(core_->mutex_);
  auto ok = [&] {
    return core_->view_.status.has_value() && (!accept || accept(*core_->view_.status));
  };
  if (!WaitUntil(core_->view_cv_, lock, timeout, [&] { return ok() || core_->closed_; }) || !ok()) {
    return MakeError(ErrorCode::kNodeAbsent, "no NodeStatus received in time");
  }
  return *core_->view_.status;
}

Result<void> Client::WaitForLiveliness(NodeLiveliness want, dds::Duration timeout) {
  std::unique_lock<std::mutex> lock(core_->mutex_);
  if (!WaitUntil(core_->view_cv_, lock, timeout,
                 [&] { return core_->view_.liveliness == want || core_->closed_; }) ||
      core_->view_.liveliness != want) {
    return MakeError(ErrorCode::kTimeout, "node liveliness did not reach the wanted state in time");
  }
  return {};
}

const std::string& Client::client_id() const { return core_->options_.client_id; }
const dds::Domain& Client::domain() const { return core_->participant_.domain(); }
bool Client::request_shared_memory() const { return core_->request_writer_.shared_memory(); }
bool Client::chunk_shared_memory() const { return core_->chunk_reader_.shared_memory(); }
dds::WriterStats Client::request_stats() const {
  dds::WriterStats s = core_->request_writer_.stats();
  if (core_->critical_writer_.handle() > 0) {
    const dds::WriterStats c = core_->critical_writer_.stats();
    s.writes += c.writes;
    s.loaned_writes += c.loaned_writes;
  }
  return s;
}
dds::ReaderStats Client::chunk_stats() const { return core_->chunk_reader_.stats(); }

}  // namespace ari::component
