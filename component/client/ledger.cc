#include "component/client/ledger.h"

#include <chrono>
#include <cstdio>
#include <cstring>

namespace ari::component {
namespace {

constexpr dds_attach_t kCookieData = 1;
constexpr dds_attach_t kCookieStop = 2;
constexpr size_t kMaxExamples = 8;

}  // namespace

std::string LedgerReport::ToString() const {
  std::string s = "expected " + std::to_string(expected) + ", with terminal " +
                  std::to_string(with_terminal) + ", missing " + std::to_string(missing) +
                  ", duplicates " + std::to_string(duplicates) + ", stray " +
                  std::to_string(stray) + ", bad sequence " + std::to_string(bad_sequence) +
                  ", chunks " + std::to_string(chunks) + ", terminals " +
                  std::to_string(terminals) + "; by status:";
  static constexpr const char* kNames[kWireStatusCount] = {
      "OK",   "DONE",    "CANCELLED", "DEADLINE_MISSED", "REJECTED",
      "BUSY", "INVALID", "FORBIDDEN", "FAILED",          "SHUTDOWN"};
  for (int i = 0; i < kWireStatusCount; ++i) {
    if (by_status[i]) s += std::string(" ") + kNames[i] + "=" + std::to_string(by_status[i]);
  }
  for (const auto& e : examples) s += "\n  " + e;
  return s;
}

Result<std::unique_ptr<ChunkLedger>> ChunkLedger::Create(std::shared_ptr<dds::Domain> domain,
                                                         std::string client_prefix) {
  std::unique_ptr<ChunkLedger> l(new ChunkLedger());
  l->prefix_ = std::move(client_prefix);
  auto pp = dds::Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  l->participant_ = std::move(*pp);
  auto t = dds::Topic::Create(l->participant_, dds::TopicKind::kTokenChunk);
  if (!t) return std::unexpected(t.error());
  l->topic_ = std::move(*t);
  auto r = dds::Reader::Create(l->participant_, l->topic_);
  if (!r) return std::unexpected(r.error());
  l->reader_ = std::move(*r);
  auto c = dds::ReadCondition::Create(l->reader_);
  if (!c) return std::unexpected(c.error());
  l->cond_ = std::move(*c);
  auto g = dds::GuardCondition::Create(l->participant_);
  if (!g) return std::unexpected(g.error());
  l->stop_ = std::move(*g);
  auto ws = dds::WaitSet::Create(l->participant_);
  if (!ws) return std::unexpected(ws.error());
  l->waitset_ = std::move(*ws);
  if (auto a = l->waitset_.Attach(l->cond_.handle(), kCookieData); !a) {
    return std::unexpected(a.error());
  }
  if (auto a = l->waitset_.Attach(l->stop_.handle(), kCookieStop); !a) {
    return std::unexpected(a.error());
  }
  l->thread_ = std::thread([raw = l.get()] { raw->Loop(); });
  return l;
}

ChunkLedger::~ChunkLedger() {
  if (thread_.joinable()) {
    if (auto r = stop_.Trigger(); !r) {
      std::fprintf(stderr, "ari: chunk ledger stop: %s\n", r.error().ToString().c_str());
    }
    thread_.join();
  }
}

void ChunkLedger::Loop() {
  dds_attach_t fired[2];
  for (;;) {
    auto n = waitset_.Wait(fired, dds::Duration::max());
    if (!n) return;
    bool stop = false;
    for (size_t i = 0; i < *n; ++i) {
      if (fired[i] == kCookieStop) stop = true;
    }
    for (;;) {
      auto got = reader_.TakeLoaned(16, [&](const void* sample, const dds_sample_info_t&) {
        if (sample != nullptr) OnChunk(*static_cast<const ari_TokenChunk*>(sample));
      });
      if (!got || *got == 0) break;
    }
    if (stop) return;
  }
}

void ChunkLedger::OnChunk(const ari_TokenChunk& c) {
  const std::string_view client = dds::FixedView(c.client_id);
  if (!prefix_.empty() && client.substr(0, prefix_.size()) != prefix_) return;
  std::string id(dds::FixedView(c.request_id));
  std::lock_guard<std::mutex> l(mu_);
  ++chunks_;
  Entry& e = ids_[std::move(id)];
  if (!c.terminal) {
    ++e.chunks;
    return;
  }
  ++terminals_;
  if (c.sequence_number != e.chunks) e.bad_sequence = true;
  int32_t status = dds::RawEnum(c.status);
  if (status >= 0 && status < kWireStatusCount) ++by_status_[status];
  if (++e.terminals == 1 && e.expected) {
    ++complete_;
    cv_.notify_all();
  }
}

Result<void> ChunkLedger::WaitMatched(dds::Duration timeout, uint32_t writers) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto m = reader_.MatchedWriters();
    if (!m) return std::unexpected(m.error());
    if (*m >= writers) return {};
    if (std::chrono::steady_clock::now() >= until) {
      return MakeError(ErrorCode::kTimeout, "ledger: chunk writer not matched in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ChunkLedger::Expect(std::string_view request_id) {
  std::lock_guard<std::mutex> l(mu_);
  Entry& e = ids_[std::string(request_id)];
  if (e.expected) return;
  e.expected = true;
  ++expected_;
  if (e.terminals > 0) {
    ++complete_;
    cv_.notify_all();
  }
}

bool ChunkLedger::WaitComplete(dds::Duration timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return complete_ == expected_; });
}

LedgerReport ChunkLedger::Report() const {
  std::lock_guard<std::mutex> l(mu_);
  LedgerReport r;
  r.expected = expected_;
  r.chunks = chunks_;
  r.terminals = terminals_;
  r.by_status = by_status_;
  for (const auto& [id, e] : ids_) {
    std::string what;
    if (e.expected && e.terminals == 0) {
      ++r.missing;
      what = "no terminal";
    }
    if (e.expected && e.terminals > 0) ++r.with_terminal;
    if (e.terminals > 1) {
      ++r.duplicates;
      what = std::to_string(e.terminals) + " terminals";
    }
    if (!e.expected && e.terminals > 0) {
      ++r.stray;
      what = "terminal for an id never sent";
    }
    if (e.bad_sequence) {
      ++r.bad_sequence;
      what = "terminal sequence number != chunks before it";
    }
    if (!what.empty() && r.examples.size() < kMaxExamples) {
      std::string example = id;
      example.append(": ").append(what);
      r.examples.push_back(std::move(example));
    }
  }
  return r;
}

}  // namespace ari::component
