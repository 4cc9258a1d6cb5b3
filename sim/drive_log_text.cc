// Drive logs as a whole: text format, validation, whole-file helpers.
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "runtime/core/utf8.h"
#include "sim/drive_log.h"

namespace ari::sim {
namespace {

using google::protobuf::TextFormat;

constexpr uint64_t kMaxTextBytes = 1ull << 30;  // refuse text logs above 1 GiB
constexpr size_t kMaxClientBytes = 31;          // DDS ari::Request client_id (32 with NUL)
constexpr size_t kMaxPromptBytes = 2047;        // DDS ari::Request prompt (2048 with NUL)

// Keeps the first syntax error as "origin:line:column: message" (1-based).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstError(std::string_view origin) : origin_(origin) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    ++count_;
    if (text_.empty()) {
      text_ = origin_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
              message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string text() const {
    return count_ > 1 ? text_ + " (and " + std::to_string(count_ - 1) + " more)" : text_;
  }

 private:
  std::string origin_;
  std::string text_;
  int count_ = 0;
};

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return MakeError(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxTextBytes) {
    return MakeError(ErrorCode::kInvalidArgument, path.string() + ": text log larger than 1 GiB");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, "reading " + path.string() + " failed");
  return ss.str();
}

Result<void> WriteFile(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return MakeError(ErrorCode::kIo,
                     "cannot create " + path.string() + ": " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (out.fail()) return MakeError(ErrorCode::kIo, "writing " + path.string() + " failed");
  return {};
}

bool InRange(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

std::string Num(double v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

std::optional<std::string> NotUtf8(std::string_view what, const std::string& value) {
  // proto3 string fields must hold UTF-8: the text format accepts any bytes (octal
  // escapes), but binary parsing rejects them, so such a log would not survive being
  // written in binary form (found by drive_log_fuzz). Same rules as protobuf's check.
  if (runtime::IsValidUtf8(value)) return std::nullopt;
  return std::string(what) + " is not valid UTF-8";
}

std::optional<std::string> CheckRequest(const dl::Request& r) {
  if (r.request_id() == 0) return "request: request_id must be > 0";
  if (auto bad = NotUtf8("request: client", r.client())) return bad;
  if (auto bad = NotUtf8("request: prompt", r.prompt())) return bad;
  if (r.client().empty() || r.client().size() > kMaxClientBytes) {
    return "request: client must be 1.." + std::to_string(kMaxClientBytes) + " bytes (got " +
           std::to_string(r.client().size()) + ")";
  }
  if (r.urgency() == ari::policy::URGENCY_UNSPECIFIED ||
      !ari::policy::Urgency_IsValid(r.urgency())) {
    return "request: urgency must be CRITICAL, HIGH, NORMAL or BACKGROUND";
  }
  if (r.prompt().empty() || r.prompt().size() > kMaxPromptBytes) {
    return "request: prompt must be 1.." + std::to_string(kMaxPromptBytes) + " bytes (got " +
           std::to_string(r.prompt().size()) + ")";
  }
  if (r.max_tokens() == 0) return "request: max_tokens must be > 0";
  if (!dl::PromptCategory_IsValid(r.category())) return "request: unknown category";
  const std::string& f = r.response_format();
  const bool name_ok = f.size() <= 31 && std::all_of(f.begin(), f.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                       });
  if (!name_ok) return "request: response_format must be a schema name, <= 31 bytes of [a-z0-9_]";
  return std::nullopt;
}

}  // namespace

std::string_view EventKindName(const dl::Event& event) {
  switch (event.kind_case()) {
    case dl::Event::kRequest: return "request";
    case dl::Event::kSocTemperature: return "soc_temperature";
    case dl::Event::kAmbientTemperature: return "ambient_temperature";
    case dl::Event::kMemoryAvailable: return "memory_available";
    case dl::Event::kCpuFrequencyCap: return "cpu_frequency_cap";
    case dl::Event::kVehicleState: return "vehicle_state";
    case dl::Event::KIND_NOT_SET: break;
  }
  return "none";
}

std::optional<std::string> CheckEvent(const dl::Event& e, uint64_t previous_t_ms) {
  if (e.t_ms() < previous_t_ms) {
    return "time goes backwards (previous event at t_ms " + std::to_string(previous_t_ms) + ")";
  }
  switch (e.kind_case()) {
    case dl::Event::KIND_NOT_SET: return "no payload (one of request, soc_temperature, ...)";
    case dl::Event::kRequest: return CheckRequest(e.request());
    case dl::Event::kSocTemperature:
      if (auto bad = NotUtf8("soc_temperature: sensor", e.soc_temperature().sensor())) return bad;
      if (!InRange(e.soc_temperature().celsius(), -70, 200)) {
        return "soc_temperature: celsius " + Num(e.soc_temperature().celsius()) +
               " outside -70..200";
      }
      return std::nullopt;
    case dl::Event::kAmbientTemperature:
      if (!InRange(e.ambient_temperature().celsius(), -70, 100)) {
        return "ambient_temperature: celsius " + Num(e.ambient_temperature().celsius()) +
               " outside -70..100";
      }
      return std::nullopt;
    case dl::Event::kMemoryAvailable: return std::nullopt;
    case dl::Event::kCpuFrequencyCap: {
      uint64_t seen = 0;
      for (const auto& c : e.cpu_frequency_cap().clusters()) {
        if (auto bad = NotUtf8("cpu_frequency_cap: name", c.name())) return bad;
        if (c.cluster() >= 64)
          return "cpu_frequency_cap: cluster index " + std::to_string(c.cluster()) + " >= 64";
        if (seen & (1ull << c.cluster())) {
          return "cpu_frequency_cap: cluster " + std::to_string(c.cluster()) + " listed twice";
        }
        seen |= 1ull << c.cluster();
      }
      return std::nullopt;
    }
    case dl::Event::kVehicleState: {
      const auto& v = e.vehicle_state();
      if (!InRange(v.speed_kmh(), 0, 500))
        return "vehicle_state: speed_kmh " + Num(v.speed_kmh()) + " outside 0..500";
      if (!dl::Ignition_IsValid(v.ignition())) return "vehicle_state: unknown ignition value";
      if (!dl::Gear_IsValid(v.gear())) return "vehicle_state: unknown gear value";
      return std::nullopt;
    }
  }
  return "unknown payload";
}

std::optional<LogViolation> FirstViolation(const dl::DriveLog& log) {
  const dl::Header& h = log.header();
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"vehicle", &h.vehicle()},
        {"soc", &h.soc()},
        {"model", &h.model()},
        {"notes", &h.notes()},
        {"scenario", &h.scenario()},
        {"generator", &h.generator()}}) {
    if (auto bad = NotUtf8(std::string("header: ") + name, *value)) return LogViolation{-1, *bad};
  }
  if (!InRange(h.ambient_celsius(), -70, 100)) {
    return LogViolation{
        -1, "header: ambient_celsius " + Num(h.ambient_celsius()) + " outside -70..100"};
  }
  std::unordered_set<uint64_t> ids;
  uint64_t previous = 0;
  for (int i = 0; i < log.event_size(); ++i) {
    const dl::Event& e = log.event(i);
    std::optional<std::string> problem = CheckEvent(e, previous);
    if (!problem && h.duration_ms() > 0 && e.t_ms() > h.duration_ms()) {
      problem =
          "after the end of the log (header duration_ms " + std::to_string(h.duration_ms()) + ")";
    }
    if (!problem && e.has_request() && !ids.insert(e.request().request_id()).second) {
      problem = "request: request_id " + std::to_string(e.request().request_id()) + " used twice";
    }
    if (!problem && e.has_memory_available() && h.memory_total_bytes() > 0 &&
        e.memory_available().bytes() > h.memory_total_bytes()) {
      problem = "memory_available: " + std::to_string(e.memory_available().bytes()) +
                " bytes > header memory_total_bytes";
    }
    if (problem) return LogViolation{i, *problem};
    previous = e.t_ms();
  }
  return std::nullopt;
}

namespace {
std::string DescribeViolation(const dl::DriveLog& log, const LogViolation& v) {
  if (v.event_index < 0) return v.message;
  return "event " + std::to_string(v.event_index) + " (t_ms " +
         std::to_string(log.event(v.event_index).t_ms()) + "): " + v.message;
}
}  // namespace

Result<void> ValidateDriveLog(const dl::DriveLog& log) {
  if (auto v = FirstViolation(log))
    return MakeError(ErrorCode::kInvalidLog, DescribeViolation(log, *v));
  return {};
}

// --- Text ---------------------------------------------------------------------

Result<dl::DriveLog> ParseDriveLogText(std::string_view text, std::string_view origin,
                                       bool validate) {
  dl::DriveLog log;
  FirstError errors(origin);
  TextFormat::ParseInfoTree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (text.size() > kMaxTextBytes)
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(origin) + ": text log larger than 1 GiB");
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (!parser.Parse(&input, &log)) return MakeError(ErrorCode::kParse, errors.text());
  if (validate) {
    if (auto v = FirstViolation(log)) {
      const auto* desc = dl::DriveLog::descriptor();
      const auto loc = v->event_index < 0
                           ? tree.GetLocation(desc->FindFieldByName("header"), -1)
                           : tree.GetLocation(desc->FindFieldByName("event"), v->event_index);
      std::string where(origin);
      if (loc.line >= 0)
        where += ":" + std::to_string(loc.line + 1) + ":" + std::to_string(loc.column + 1);
      return MakeError(ErrorCode::kInvalidLog, where + ": " + DescribeViolation(log, *v));
    }
  }
  return log;
}

Result<dl::DriveLog> ReadDriveLogText(const std::filesystem::path& path, bool validate) {
  auto text = ReadFile(path);
  if (!text) return std::unexpected(text.error());
  return ParseDriveLogText(*text, path.string(), validate);
}

// Fields this schema does not know (a newer writer's, kept by the binary decode) are left
// out of the text form: the printer would write them as field numbers, which the parser
// refuses (found by tests/fuzz/drive_log_fuzz.cc).
std::string FormatHeaderText(const dl::Header& header) {
  TextFormat::Printer printer;
  printer.SetHideUnknownFields(true);
  printer.SetUseUtf8StringEscaping(true);
  printer.SetInitialIndentLevel(1);
  std::string body;
  printer.PrintToString(header, &body);
  return "# ari.drivelog.DriveLog (text format; see docs/drive_logs.md)\nheader {\n" + body + "}\n";
}

std::string FormatEventText(const dl::Event& event) {
  TextFormat::Printer printer;
  printer.SetHideUnknownFields(true);
  printer.SetUseUtf8StringEscaping(true);
  printer.SetSingleLineMode(true);
  std::string line;
  printer.PrintToString(event, &line);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return "event { " + line + " }\n";
}

std::string FormatDriveLogText(const dl::DriveLog& log) {
  std::string out = FormatHeaderText(log.header());
  for (const auto& e : log.event()) out += FormatEventText(e);
  return out;
}

Result<void> WriteDriveLogText(const std::filesystem::path& path, const dl::DriveLog& log) {
  return WriteFile(path, FormatDriveLogText(log));
}

// --- Whole binary logs -----------------------------------------------------------

Result<std::string> EncodeDriveLog(const dl::DriveLog& log) {
  if (auto v = ValidateDriveLog(log); !v) return std::unexpected(v.error());
  std::string out = DriveLogPreamble();
  if (auto r = AppendRecord(kHeaderKind, log.header(), &out); !r) return std::unexpected(r.error());
  for (const auto& e : log.event()) {
    if (auto r = AppendRecord(kEventKind, e, &out); !r) return std::unexpected(r.error());
  }
  return out;
}

Result<void> WriteDriveLog(const std::filesystem::path& path, const dl::DriveLog& log) {
  auto bytes = EncodeDriveLog(log);
  if (!bytes) return std::unexpected(bytes.error());
  return WriteFile(path, *bytes);
}

namespace {
Result<dl::DriveLog> ReadAll(DriveLogReader& reader, std::vector<CorruptRecord>* corruptions) {
  dl::DriveLog log;
  if (reader.has_header()) *log.mutable_header() = reader.header();
  while (true) {
    auto more = reader.Next(log.add_event());
    if (!more) return std::unexpected(more.error());
    if (!*more) break;
  }
  log.mutable_event()->RemoveLast();
  if (corruptions) *corruptions = reader.corruptions();
  return log;
}
}  // namespace

Result<dl::DriveLog> DecodeDriveLog(std::string_view bytes, ReaderOptions options,
                                    std::vector<CorruptRecord>* corruptions) {
  std::istringstream in{std::string(bytes)};
  auto reader = DriveLogReader::Open(&in, std::move(options), "<bytes>");
  if (!reader) return std::unexpected(reader.error());
  return ReadAll(*reader, corruptions);
}

Result<dl::DriveLog> ReadDriveLog(const std::filesystem::path& path, ReaderOptions options,
                                  std::vector<CorruptRecord>* corruptions) {
  auto reader = DriveLogReader::Open(path, std::move(options));
  if (!reader) return std::unexpected(reader.error());
  return ReadAll(*reader, corruptions);
}

Result<dl::DriveLog> LoadDriveLog(const std::filesystem::path& path,
                                  std::vector<CorruptRecord>* corruptions) {
  char magic[sizeof(kDriveLogMagic)] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return MakeError(ErrorCode::kIo,
                       "cannot open " + path.string() + ": " + std::strerror(errno));
    in.read(magic, sizeof(magic));
  }
  if (std::memcmp(magic, kDriveLogMagic, sizeof(magic)) != 0) return ReadDriveLogText(path, true);
  auto log = ReadDriveLog(path, {}, corruptions);
  if (!log) return log;
  if (auto v = ValidateDriveLog(*log); !v) {
    return MakeError(ErrorCode::kInvalidLog, path.string() + ": " + v.error().message);
  }
  return log;
}

}  // namespace ari::sim
