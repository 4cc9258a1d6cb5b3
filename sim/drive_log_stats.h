// Summary statistics of a drive log (ari-sim stats): counts per event kind,
// requests per urgency / category / client, time span, value ranges.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "idl/drive_log.pb.h"

namespace ari::sim {

struct Range {
  uint64_t count = 0;
  double min = 0, max = 0, sum = 0;
  void Add(double v);
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

class DriveLogStats {
 public:
  void SetHeader(const ari::drivelog::Header& header) { header_ = header; }
  void Add(const ari::drivelog::Event& event);
  void AddCorrupt(uint64_t skipped_bytes) {
    ++corrupt_records_;
    corrupt_bytes_ += skipped_bytes;
  }

  uint64_t events() const { return events_; }
  uint64_t first_t_ms() const { return first_t_ms_; }
  uint64_t last_t_ms() const { return last_t_ms_; }
  // By EventKindName ("request", "soc_temperature", ...).
  const std::map<std::string, uint64_t>& by_kind() const { return by_kind_; }
  // By urgency name ("CRITICAL", ...), category name, client.
  const std::map<std::string, uint64_t>& by_urgency() const { return by_urgency_; }
  const std::map<std::string, uint64_t>& by_category() const { return by_category_; }
  const std::map<std::string, uint64_t>& by_client() const { return by_client_; }
  const Range& soc_celsius() const { return soc_; }
  const Range& ambient_celsius() const { return ambient_; }
  const Range& memory_mib() const { return memory_mib_; }
  const Range& speed_kmh() const { return speed_; }
  uint64_t corrupt_records() const { return corrupt_records_; }

  // Human-readable multi-line report.
  std::string ToText() const;

 private:
  ari::drivelog::Header header_;
  uint64_t events_ = 0;
  uint64_t first_t_ms_ = 0, last_t_ms_ = 0;
  std::map<std::string, uint64_t> by_kind_, by_urgency_, by_category_, by_client_;
  Range soc_, ambient_, memory_mib_, speed_, max_tokens_, deadline_ms_;
  uint64_t sessions_ = 0;
  std::map<uint64_t, bool> session_seen_;
  uint64_t cap_events_ = 0, capped_events_ = 0;
  uint64_t corrupt_records_ = 0, corrupt_bytes_ = 0;
};

}  // namespace ari::sim
