// Drive logs on disk (binary and text) and in memory. Messages are defined in
// idl/drive_log.proto; docs/drive_logs.md describes the format.
//
// Binary file (little-endian):
//   preamble  8 bytes magic 89 'A' 'R' 'I' 'D' 'L' 'O' 'G', then uint32 version (= 1)
//   records   one per message, the Header first, then every Event in time order:
//     4 bytes  sync marker FF 'D' 'L' 'R'
//     1 byte   kind: 'H' (ari.drivelog.Header) or 'E' (ari.drivelog.Event)
//     varint   payload length N (protobuf's delimited framing), N <= kMaxRecordBytes
//     N bytes  the serialized message
//     4 bytes  CRC-32 (IEEE) of kind byte + varint + payload
//
// Corrupt records: a record whose marker, kind, length, CRC or payload fails its
// check is reported with the byte offset where it starts. The reader then
// resynchronizes: it scans forward from the next byte for a sync marker that
// starts a record passing every check (a false match needs the 4 marker bytes
// and a 32-bit CRC to agree by chance) and resumes there; the bytes in between
// are skipped. A length varint that is damaged therefore costs at most the
// records it overlaps. Lengths above kMaxRecordBytes are rejected before any
// allocation, so garbage never makes the reader allocate more than about
// kMaxRecordBytes; it never crashes on any input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idl/drive_log.pb.h"
#include "sim/error.h"

namespace ari::sim {

namespace dl = ari::drivelog;

inline constexpr char kDriveLogMagic[8] = {'\x89', 'A', 'R', 'I', 'D', 'L', 'O', 'G'};
inline constexpr uint32_t kDriveLogVersion = 1;
inline constexpr size_t kPreambleBytes = 12;
inline constexpr char kRecordMarker[4] = {'\xFF', 'D', 'L', 'R'};
inline constexpr char kHeaderKind = 'H';
inline constexpr char kEventKind = 'E';
inline constexpr uint32_t kMaxRecordBytes = 1u << 20;  // 1 MiB per message

// The 12 preamble bytes.
std::string DriveLogPreamble();
// Appends one framed record (marker, kind, varint length, payload, CRC) to *out.
// Fails when the message is larger than kMaxRecordBytes.
Result<void> AppendRecord(char kind, const google::protobuf::MessageLite& message,
                          std::string* out);

// --- Writing -------------------------------------------------------------

class DriveLogWriter {
 public:
  // Writes the preamble and the header record. The path form owns its file;
  // the stream form writes to *out, which must outlive the writer.
  static Result<DriveLogWriter> Create(const std::filesystem::path& path, const dl::Header& header);
  static Result<DriveLogWriter> Create(std::ostream* out, const dl::Header& header);

  DriveLogWriter(const DriveLogWriter&) = delete;
  DriveLogWriter& operator=(const DriveLogWriter&) = delete;
  DriveLogWriter(DriveLogWriter&&) noexcept;
  DriveLogWriter& operator=(DriveLogWriter&&) noexcept;
  ~DriveLogWriter();

  // Appends one event. kInvalidLog when it has no payload or its t_ms is before
  // the previous event's (nothing is written then); kIo on a write failure.
  Result<void> Append(const dl::Event& event);
  // Flushes (and closes an owned file). Further Appends fail.
  Result<void> Close();

  uint64_t bytes_written() const { return bytes_; }
  uint64_t events_written() const { return events_; }

 private:
  DriveLogWriter() = default;
  Result<void> Write(const std::string& bytes);

  std::unique_ptr<std::ostream> owned_;
  std::ostream* out_ = nullptr;
  std::string path_;  // for messages
  std::string buffer_;
  uint64_t bytes_ = 0;
  uint64_t events_ = 0;
  uint64_t last_t_ms_ = 0;
  bool closed_ = false;
};

// --- Reading -------------------------------------------------------------

// One corrupt stretch of a binary log.
struct CorruptRecord {
  uint64_t offset = 0;         // byte offset where the bad record starts
  uint64_t skipped_bytes = 0;  // bytes skipped until the next good record (or the end)
  std::string reason;          // "CRC mismatch", "record length 3000000 > 1048576", ...

  std::string ToString() const;  // "offset 1234: CRC mismatch (skipped 57 bytes)"
};

struct ReaderOptions {
  // true: corrupt records are reported (corruptions(), on_corrupt) and skipped.
  // false: Open/Next return kCorrupt for them; calling Next again continues
  // after the skipped bytes.
  bool skip_corrupt = true;
  // Next returns kInvalidLog for an event whose t_ms is before the previous
  // event's (the event is dropped; calling Next again continues).
  bool check_order = true;
  // Called once per corrupt stretch, in file order (also with skip_corrupt = false).
  std::function<void(const CorruptRecord&)> on_corrupt;
};

class DriveLogReader {
 public:
  // Checks the preamble (kFormat if it is not a drive log or of another
  // version) and reads the header record. A missing or corrupt header is a
  // corruption like any other: skipped (has_header() false) or kCorrupt.
  static Result<DriveLogReader> Open(const std::filesystem::path& path, ReaderOptions options = {});
  // Reads from *in, which must outlive the reader. `origin` names it in messages.
  static Result<DriveLogReader> Open(std::istream* in, ReaderOptions options = {},
                                     std::string origin = "<stream>");

  DriveLogReader(const DriveLogReader&) = delete;
  DriveLogReader& operator=(const DriveLogReader&) = delete;
  DriveLogReader(DriveLogReader&&) noexcept;
  DriveLogReader& operator=(DriveLogReader&&) noexcept;
  ~DriveLogReader();

  bool has_header() const { return has_header_; }
  const dl::Header& header() const { return header_; }

  // The next event in file order (= time order for a valid log): true and
  // *event filled, false at the end of the file, or an error (see options).
  Result<bool> Next(dl::Event* event);

  const std::vector<CorruptRecord>& corruptions() const { return corruptions_; }
  uint64_t events_read() const { return events_; }
  // Byte offset of the next record to read.
  uint64_t offset() const;

 private:
  class Window;
  enum class Status { kOk, kBad, kEnd };
  struct Record {
    char kind = 0;
    uint64_t offset = 0;
    size_t begin = 0;  // window index of the varint
    size_t size = 0;   // varint + payload bytes
    size_t total = 0;  // whole record
  };

  DriveLogReader() = default;
  Status DecodeAt(size_t pos, Record* rec, std::string* reason);
  // Reads the record at the current position; on a bad record resynchronizes
  // and reports. Returns false at the end. *corrupt set when it skipped bytes.
  Result<bool> NextRecord(Record* rec, bool* corrupt);
  Result<void> Corrupt(uint64_t offset, uint64_t skipped, std::string reason);

  std::unique_ptr<std::istream> owned_;
  std::unique_ptr<Window> window_;
  ReaderOptions options_;
  std::string origin_;
  dl::Header header_;
  bool has_header_ = false;
  std::vector<CorruptRecord> corruptions_;
  uint64_t events_ = 0;
  uint64_t last_t_ms_ = 0;
};

// --- Whole logs ------------------------------------------------------------

// Binary form of a whole log (validated first). Same log -> same bytes.
Result<std::string> EncodeDriveLog(const dl::DriveLog& log);
Result<void> WriteDriveLog(const std::filesystem::path& path, const dl::DriveLog& log);
// Reads a whole binary log (skipping corrupt records per options; a missing
// header leaves it empty). *corruptions, when given, receives what was skipped.
Result<dl::DriveLog> DecodeDriveLog(std::string_view bytes, ReaderOptions options = {},
                                    std::vector<CorruptRecord>* corruptions = nullptr);
Result<dl::DriveLog> ReadDriveLog(const std::filesystem::path& path, ReaderOptions options = {},
                                  std::vector<CorruptRecord>* corruptions = nullptr);

// Text format: the DriveLog message ("header { ... } event { ... } ...").
// Syntax errors: kParse "origin:line:column: message". With validate, semantic
// errors (ValidateDriveLog) are kInvalidLog and name the event's line too.
Result<dl::DriveLog> ParseDriveLogText(std::string_view text, std::string_view origin = "<text>",
                                       bool validate = true);
Result<dl::DriveLog> ReadDriveLogText(const std::filesystem::path& path, bool validate = true);
std::string FormatDriveLogText(const dl::DriveLog& log);
// The pieces of FormatDriveLogText, for streaming: "# ..." comment line plus
// "header {\n  ...\n}\n", and one line "event { t_ms: ... }\n" per event.
std::string FormatHeaderText(const dl::Header& header);
std::string FormatEventText(const dl::Event& event);
Result<void> WriteDriveLogText(const std::filesystem::path& path, const dl::DriveLog& log);

// Binary or text, by the first bytes; validated. Corrupt binary records are skipped.
Result<dl::DriveLog> LoadDriveLog(const std::filesystem::path& path,
                                  std::vector<CorruptRecord>* corruptions = nullptr);

// --- Validation ------------------------------------------------------------

struct LogViolation {
  int event_index = -1;  // -1: the header
  std::string message;
};
// First problem of one event (index only labels the message); `previous_t_ms`
// is the time of the event before it (0 for the first).
std::optional<std::string> CheckEvent(const dl::Event& event, uint64_t previous_t_ms);
// First problem of a log: header fields, every event (CheckEvent), request ids
// unique, t_ms <= header.duration_ms when that is set.
std::optional<LogViolation> FirstViolation(const dl::DriveLog& log);
// kInvalidLog "event 12 (t_ms 500): ..." for the first violation.
Result<void> ValidateDriveLog(const dl::DriveLog& log);

// Name of the event's payload ("request", "soc_temperature", ...; "none").
std::string_view EventKindName(const dl::Event& event);

}  // namespace ari::sim
