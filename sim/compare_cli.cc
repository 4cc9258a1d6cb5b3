// ari-sim compare as a library call; see compare_cli.h.
#include "sim/compare_cli.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "qos/shipped_config.h"
#include "sim/compare.h"
#include "sim/drive_log.h"
#include "sim/hardware_profile.h"
#include "sim/quality_table.h"

namespace ari::sim {
namespace {

Result<void> WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return MakeError(ErrorCode::kIo, "cannot write " + path);
  return {};
}

Result<qos::Policy> PolicyOrError(qos::Result<qos::Policy> p) {
  if (!p) return MakeError(ErrorCode::kInvalidArgument, p.error().ToString());
  return std::move(*p);
}

}  // namespace

Result<qos::Policy> LoadPolicyByName(const std::string& arg) {
  if (arg.find('/') != std::string::npos || arg.ends_with(".textproto")) {
    return PolicyOrError(qos::LoadPolicyFile(arg));
  }
  std::string file = "policy_" + arg + ".textproto";
  std::replace(file.begin(), file.end(), '-', '_');
  auto found = qos::FindShippedConfig(file);
  if (!found) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown policy '" + arg + "': " + found.error().message);
  }
  return PolicyOrError(qos::LoadPolicyFile(*found));
}

Result<std::string> RunCompareCli(const CompareCliArgs& a) {
  std::vector<std::string> names = a.policies;
  if (names.empty()) names = {"default", "static-performance", "static-eco"};
  std::vector<qos::Policy> policies;
  for (const auto& n : names) {
    auto p = LoadPolicyByName(n);
    if (!p) return MakeError(p.error().code, "policy: " + p.error().message);
    policies.push_back(std::move(*p));
  }
  auto hardware = FindHardwareProfile(a.hardware);
  if (!hardware) return MakeError(hardware.error().code, "hardware: " + hardware.error().message);
  const std::string model = a.model.empty() ? hardware->proto.default_model() : a.model;
  auto cost = ProfileCostModel(*hardware, model);
  if (!cost) return std::unexpected(cost.error());
  std::optional<QualityTable> quality;
  if (!a.quality.empty()) {
    auto t = LoadQualityTable(a.quality);
    if (!t) return std::unexpected(t.error());
    quality = std::move(*t);
  }
  std::vector<dl::DriveLog> logs;
  CompareInput in;
  for (const auto& path : a.logs) {
    auto log = LoadDriveLog(path);
    if (!log) return std::unexpected(log.error());
    logs.push_back(std::move(*log));
    in.log_names.push_back(std::filesystem::path(path).filename().string());
  }
  for (const auto& l : logs) in.logs.push_back(&l);
  for (const auto& p : policies) in.policies.push_back(&p);
  ApplyHardwareProfile(*hardware, in.base);
  in.base.cost = &*cost;
  in.base.quality = quality ? &*quality : nullptr;
  if (a.slots > 0) in.base.slots = a.slots;
  if (a.park_areas >= 0) in.base.park_areas = a.park_areas;
  in.hardware = hardware->name();
  in.model = model;
  auto report = RunCompare(in, a.threads);
  if (!report) return std::unexpected(report.error());
  if (!a.json.empty()) {
    if (auto r = WriteText(a.json, CompareToJson(*report)); !r) return std::unexpected(r.error());
  }
  if (!a.html.empty()) {
    if (auto r = WriteText(a.html, CompareToHtml(*report)); !r) return std::unexpected(r.error());
  }
  return CompareToText(*report);
}

}  // namespace ari::sim
