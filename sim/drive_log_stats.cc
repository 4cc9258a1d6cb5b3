#include "sim/drive_log_stats.h"

#include <algorithm>
#include <cstdio>

#include "sim/drive_log.h"

namespace ari::sim {
namespace {

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

std::string Duration(uint64_t ms) {
  char buf[64];
  std::snprintf(
      buf, sizeof(buf), "%llu:%02llu:%02llu.%03llu", static_cast<unsigned long long>(ms / 3600000),
      static_cast<unsigned long long>(ms / 60000 % 60),
      static_cast<unsigned long long>(ms / 1000 % 60), static_cast<unsigned long long>(ms % 1000));
  return buf;
}

std::string RangeText(const Range& r, const char* unit) {
  if (r.count == 0) return "-";
  return Fmt("min %.1f  mean %.1f  max %.1f ", r.min, r.mean(), r.max) + unit + " (" +
         std::to_string(r.count) + " samples)";
}

}  // namespace

void Range::Add(double v) {
  if (count == 0) min = max = v;
  min = std::min(min, v);
  max = std::max(max, v);
  sum += v;
  ++count;
}

void DriveLogStats::Add(const dl::Event& e) {
  if (events_ == 0) first_t_ms_ = e.t_ms();
  first_t_ms_ = std::min(first_t_ms_, e.t_ms());
  last_t_ms_ = std::max(last_t_ms_, e.t_ms());
  ++events_;
  ++by_kind_[std::string(EventKindName(e))];
  switch (e.kind_case()) {
    case dl::Event::kRequest: {
      const auto& r = e.request();
      ++by_urgency_[ari::policy::Urgency_Name(r.urgency())];
      ++by_category_[dl::PromptCategory_Name(r.category())];
      ++by_client_[r.client()];
      max_tokens_.Add(r.max_tokens());
      if (r.deadline_ms() > 0) deadline_ms_.Add(r.deadline_ms());
      if (r.session_id() != 0 && !session_seen_[r.session_id()]) {
        session_seen_[r.session_id()] = true;
        ++sessions_;
      }
      break;
    }
    case dl::Event::kSocTemperature: soc_.Add(e.soc_temperature().celsius()); break;
    case dl::Event::kAmbientTemperature: ambient_.Add(e.ambient_temperature().celsius()); break;
    case dl::Event::kMemoryAvailable:
      memory_mib_.Add(static_cast<double>(e.memory_available().bytes()) / (1024.0 * 1024.0));
      break;
    case dl::Event::kVehicleState: speed_.Add(e.vehicle_state().speed_kmh()); break;
    case dl::Event::kCpuFrequencyCap: {
      ++cap_events_;
      const auto& cl = e.cpu_frequency_cap().clusters();
      if (std::any_of(cl.begin(), cl.end(), [](const auto& c) { return c.max_khz() > 0; })) {
        ++capped_events_;
      }
      break;
    }
    case dl::Event::KIND_NOT_SET: break;
  }
}

std::string DriveLogStats::ToText() const {
  std::string out;
  auto line = [&](const std::string& key, const std::string& value) {
    out += key + std::string(key.size() < 22 ? 22 - key.size() : 1, ' ') + value + "\n";
  };
  line("scenario", header_.scenario().empty()
                       ? "(recorded)"
                       : header_.scenario() + " (seed " + std::to_string(header_.seed()) + ")");
  line("vehicle / soc", header_.vehicle() + " / " + header_.soc());
  line("duration (header)", Duration(header_.duration_ms()));
  line("time span", events_ ? Duration(first_t_ms_) + " .. " + Duration(last_t_ms_) : "-");
  line("events", std::to_string(events_));
  for (const auto& [k, n] : by_kind_) line("  " + k, std::to_string(n));
  const uint64_t requests = by_kind_.contains("request") ? by_kind_.at("request") : 0;
  if (requests > 0) {
    const double minutes = std::max(1.0, static_cast<double>(last_t_ms_ - first_t_ms_) / 60000.0);
    line("requests per minute", Fmt("%.2f", static_cast<double>(requests) / minutes));
    for (const char* u : {"CRITICAL", "HIGH", "NORMAL", "BACKGROUND"}) {
      if (by_urgency_.contains(u))
        line("  urgency " + std::string(u), std::to_string(by_urgency_.at(u)));
    }
    for (const auto& [k, n] : by_category_) line("  category " + k, std::to_string(n));
    for (const auto& [k, n] : by_client_) line("  client " + k, std::to_string(n));
    line("  chat sessions", std::to_string(sessions_));
    line("  max_tokens", RangeText(max_tokens_, "tokens"));
    line("  deadline (explicit)", RangeText(deadline_ms_, "ms"));
  }
  line("soc temperature", RangeText(soc_, "C"));
  line("ambient temperature", RangeText(ambient_, "C"));
  line("memory available", RangeText(memory_mib_, "MiB"));
  line("speed", RangeText(speed_, "km/h"));
  line("cpu frequency caps",
       std::to_string(cap_events_) + " events, " + std::to_string(capped_events_) + " with a cap");
  if (corrupt_records_ > 0) {
    line("CORRUPT records", std::to_string(corrupt_records_) + " (" +
                                std::to_string(corrupt_bytes_) + " bytes skipped)");
  }
  return out;
}

}  // namespace ari::sim
