// libFuzzer target: the drive-log readers (sim/drive_log.h) on arbitrary bytes.
// Binary (framed, CRC'd, delimited protobuf records with resynchronization):
//   - DecodeDriveLog skipping corrupt records: corruptions are reported in file order,
//     inside the input, with a reason; a decoded log that validates re-encodes to a
//     log that decodes to the same messages without corruptions;
//   - the streaming DriveLogReader with skip_corrupt = false (kCorrupt, then Next
//     continues): it must deliver the same events as the skipping decode.
// Text (protobuf text format of DriveLog), for inputs without the binary magic:
//   - ParseDriveLogText with and without validation (errors carry a message); a valid
//     log survives Format -> Parse and Encode -> Decode unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/drive_log.h"

namespace {

namespace sim = ari::sim;
namespace dl = ari::drivelog;

bool Verbose() {
  static const bool verbose = std::getenv("ARI_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

void CheckCorruptions(const std::vector<sim::CorruptRecord>& list, size_t size) {
  uint64_t last_end = 0;
  for (const auto& c : list) {
    if (c.reason.empty()) __builtin_trap();
    if (c.offset < last_end || c.offset > size) __builtin_trap();  // file order, inside
    if (c.offset + c.skipped_bytes > size) __builtin_trap();
    last_end = c.offset + c.skipped_bytes;
    (void)c.ToString();
  }
}

// A validated log: binary and text round trips mean the same log.
void RoundTrip(const dl::DriveLog& log) {
  auto bytes = sim::EncodeDriveLog(log);
  if (!bytes) __builtin_trap();  // it validated, so it must encode
  std::vector<sim::CorruptRecord> corrupt;
  auto again = sim::DecodeDriveLog(*bytes, {}, &corrupt);
  if (!again || !corrupt.empty()) __builtin_trap();
  // Same header and events (a log without a header record comes back with an empty
  // one, so the messages are compared part by part, not as a whole).
  if (again->header().SerializeAsString() != log.header().SerializeAsString()) __builtin_trap();
  if (again->event_size() != log.event_size()) __builtin_trap();
  for (int i = 0; i < log.event_size(); ++i) {
    if (again->event(i).SerializeAsString() != log.event(i).SerializeAsString()) __builtin_trap();
  }
  const std::string text = sim::FormatDriveLogText(log);
  auto parsed = sim::ParseDriveLogText(text, "roundtrip", true);
  if (!parsed) {
    std::fprintf(stderr, "text round trip failed: %s\n%s\n", parsed.error().ToString().c_str(),
                 text.c_str());
    __builtin_trap();
  }
  if (sim::FormatDriveLogText(*parsed) != text) __builtin_trap();
}

void FuzzBinary(std::string_view input) {
  std::vector<sim::CorruptRecord> corrupt;
  auto log = sim::DecodeDriveLog(input, {}, &corrupt);
  if (Verbose()) {
    std::fprintf(stderr, "drive_log_fuzz: binary %s, %zu corrupt\n",
                 log ? (std::to_string(log->event_size()) + " events").c_str()
                     : log.error().ToString().c_str(),
                 corrupt.size());
  }
  if (!log) {
    if (log.error().message.empty()) __builtin_trap();
    return;
  }
  CheckCorruptions(corrupt, input.size());
  if (sim::ValidateDriveLog(*log)) RoundTrip(*log);

  // Streaming, corruptions as errors: the same events as the skipping decode.
  std::istringstream in{std::string(input)};
  sim::ReaderOptions strict;
  strict.skip_corrupt = false;
  size_t reported = 0;
  strict.on_corrupt = [&](const sim::CorruptRecord&) { ++reported; };
  auto reader = sim::DriveLogReader::Open(&in, strict, "fuzz");
  if (!reader) {
    if (reader.error().code != sim::ErrorCode::kCorrupt) __builtin_trap();  // header only
    return;
  }
  int index = 0;
  dl::Event event;
  for (size_t guard = 0; guard <= input.size() + 1; ++guard) {
    auto more = reader->Next(&event);
    if (!more) {
      if (more.error().message.empty()) __builtin_trap();
      continue;  // kCorrupt / out of order: Next goes on after it
    }
    if (!*more) break;
    if (index >= log->event_size()) __builtin_trap();
    if (event.SerializeAsString() != log->event(index).SerializeAsString()) __builtin_trap();
    ++index;
  }
  if (index != log->event_size()) __builtin_trap();
  if (reported != reader->corruptions().size()) __builtin_trap();
  if (reported != corrupt.size()) __builtin_trap();
}

void FuzzText(std::string_view input) {
  auto raw = sim::ParseDriveLogText(input, "fuzz.textproto", false);
  auto valid = sim::ParseDriveLogText(input, "fuzz.textproto", true);
  if (Verbose()) {
    std::fprintf(stderr, "drive_log_fuzz: text %s\n",
                 valid ? "valid" : valid.error().ToString().c_str());
  }
  if (!valid && valid.error().message.empty()) __builtin_trap();
  if (!raw) {
    if (raw.error().message.empty() || valid) __builtin_trap();
    return;
  }
  (void)sim::FirstViolation(*raw);
  for (const auto& e : raw->event()) (void)sim::EventKindName(e);
  if (valid) {
    if (valid->SerializeAsString() != raw->SerializeAsString()) __builtin_trap();
    RoundTrip(*valid);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.size() >= sizeof(sim::kDriveLogMagic) &&
      std::memcmp(input.data(), sim::kDriveLogMagic, sizeof(sim::kDriveLogMagic)) == 0) {
    FuzzBinary(input);
  } else {
    FuzzText(input);
  }
  return 0;
}
