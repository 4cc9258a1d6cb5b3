// Admission checks for ari-node, free of DDS entities and clocks so they can be unit
// tested and fuzzed: ValidateRequest (pure: one sample -> verdict), RateLimiter (token
// bucket per client, time passed in) and RecentIds (duplicate request ids).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ari.h"

namespace ari::component {

struct RequestLimits {
  uint32_t max_prompt_bytes = 2047;  // plain prompt, and the sum of all chat turns
  uint32_t min_max_tokens = 1;
  uint32_t max_max_tokens = 256;
};

struct Verdict {
  ari_ChunkStatus status = ari_STATUS_OK;  // OK = admissible; else the terminal status
  std::string message;                     // why (fits ari kMessageLen when truncated)
  bool ok() const { return status == ari_STATUS_OK; }
};

// Checks one Request sample: ids (non-empty, NUL-terminated, no control bytes),
// urgency and role enums, exactly one of prompt / turns, length fields within the
// arrays, prompt size (empty, > limit), UTF-8, max_tokens range, sampling values, the
// response format's kind, schema name and inline text length (its text is compiled by the
// node: component/node/structured_output.h).
// Never reads beyond the sample; any byte pattern is safe to pass.
Verdict ValidateRequest(const ari_Request& request, const RequestLimits& limits);

// Token bucket per client id: `rate_per_s` tokens per second, at most `burst`.
// rate_per_s <= 0 disables limiting. Remembers at most `max_clients` clients (the
// least recently seen is forgotten first).
class RateLimiter {
 public:
  RateLimiter(double rate_per_s, uint32_t burst, size_t max_clients = 1024);
  // Takes one token for `client` at time now_ns; false when the bucket is empty.
  bool Allow(std::string_view client, int64_t now_ns);

 private:
  struct Bucket {
    double tokens = 0.0;
    int64_t last_ns = 0;
  };
  double rate_per_s_;
  double burst_;
  size_t max_clients_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::deque<std::string> order_;  // insertion order for forgetting
};

// Request ids seen recently (live and the last `capacity` finished ones).
class RecentIds {
 public:
  explicit RecentIds(size_t capacity = 4096) : capacity_(capacity) {}
  // False when `id` was seen before (duplicate); else remembers it.
  bool Insert(std::string_view id);
  bool Contains(std::string_view id) const { return set_.contains(std::string(id)); }
  void Erase(std::string_view id);

 private:
  size_t capacity_;
  std::unordered_set<std::string> set_;
  std::deque<std::string> order_;
};

}  // namespace ari::component
