// Binary drive logs: record framing, writer, reader with resynchronization.
#include "sim/drive_log.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>

#include "sim/crc32.h"

namespace ari::sim {
namespace {

using google::protobuf::io::ArrayInputStream;
using google::protobuf::io::StringOutputStream;
using google::protobuf::util::ParseDelimitedFromZeroCopyStream;
using google::protobuf::util::SerializeDelimitedToZeroCopyStream;

constexpr size_t kMaxVarintBytes = 5;  // lengths are < 2^32
constexpr size_t kScanChunk = size_t{64} * 1024;

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

std::string Hex(uint8_t b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

}  // namespace

// --- Framing ----------------------------------------------------------------

std::string DriveLogPreamble() {
  std::string out(kDriveLogMagic, sizeof(kDriveLogMagic));
  PutU32(kDriveLogVersion, &out);
  return out;
}

Result<void> AppendRecord(char kind, const google::protobuf::MessageLite& message,
                          std::string* out) {
  const size_t size = message.ByteSizeLong();
  if (size > kMaxRecordBytes) {
    return MakeError(ErrorCode::kInvalidArgument, "record of " + std::to_string(size) +
                                                      " bytes exceeds the limit of " +
                                                      std::to_string(kMaxRecordBytes));
  }
  out->append(kRecordMarker, sizeof(kRecordMarker));
  const size_t crc_begin = out->size();
  out->push_back(kind);
  {
    StringOutputStream stream(out);
    if (!SerializeDelimitedToZeroCopyStream(message, &stream)) {
      return MakeError(ErrorCode::kInternal, "protobuf serialization failed");
    }
  }  // the stream trims *out to what was written when destroyed
  PutU32(Crc32(std::string_view(*out).substr(crc_begin)), out);
  return {};
}

std::string CorruptRecord::ToString() const {
  return "offset " + std::to_string(offset) + ": " + reason + " (skipped " +
         std::to_string(skipped_bytes) + " byte" + (skipped_bytes == 1 ? "" : "s") + ")";
}

// --- Writer -----------------------------------------------------------------

DriveLogWriter::DriveLogWriter(DriveLogWriter&&) noexcept = default;
DriveLogWriter& DriveLogWriter::operator=(DriveLogWriter&&) noexcept = default;
DriveLogWriter::~DriveLogWriter() {
  if (out_ && !closed_) out_->flush();
}

Result<DriveLogWriter> DriveLogWriter::Create(const std::filesystem::path& path,
                                              const dl::Header& header) {
  auto file = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*file) {
    return MakeError(ErrorCode::kIo,
                     "cannot create " + path.string() + ": " + std::strerror(errno));
  }
  std::ostream* raw = file.get();
  auto writer = Create(raw, header);
  if (!writer) return writer;
  writer->owned_ = std::move(file);
  writer->path_ = path.string();
  return writer;
}

Result<DriveLogWriter> DriveLogWriter::Create(std::ostream* out, const dl::Header& header) {
  DriveLogWriter w;
  w.out_ = out;
  w.path_ = "<stream>";
  std::string bytes = DriveLogPreamble();
  if (auto r = AppendRecord(kHeaderKind, header, &bytes); !r) return std::unexpected(r.error());
  if (auto r = w.Write(bytes); !r) return std::unexpected(r.error());
  return w;
}

Result<void> DriveLogWriter::Write(const std::string& bytes) {
  out_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!*out_) return MakeError(ErrorCode::kIo, "write to " + path_ + " failed");
  bytes_ += bytes.size();
  return {};
}

Result<void> DriveLogWriter::Append(const dl::Event& event) {
  if (closed_ || !out_) return MakeError(ErrorCode::kInvalidArgument, "writer is closed");
  if (event.kind_case() == dl::Event::KIND_NOT_SET) {
    return MakeError(ErrorCode::kInvalidLog, "event " + std::to_string(events_) + " (t_ms " +
                                                 std::to_string(event.t_ms()) + "): no payload");
  }
  if (events_ > 0 && event.t_ms() < last_t_ms_) {
    return MakeError(ErrorCode::kInvalidLog,
                     "event " + std::to_string(events_) + " (t_ms " + std::to_string(event.t_ms()) +
                         "): before the previous event (t_ms " + std::to_string(last_t_ms_) + ")");
  }
  buffer_.clear();
  if (auto r = AppendRecord(kEventKind, event, &buffer_); !r) return r;
  if (auto r = Write(buffer_); !r) return r;
  ++events_;
  last_t_ms_ = event.t_ms();
  return {};
}

Result<void> DriveLogWriter::Close() {
  if (closed_ || !out_) return {};
  closed_ = true;
  out_->flush();
  bool ok = static_cast<bool>(*out_);
  if (owned_) {
    if (auto* f = dynamic_cast<std::ofstream*>(owned_.get())) {
      f->close();
      ok = ok && !f->fail();
    }
  }
  if (!ok) return MakeError(ErrorCode::kIo, "flushing " + path_ + " failed");
  return {};
}

// --- Reader window --------------------------------------------------------------

// A sliding buffer over the input: bytes from the cursor on, refilled on
// demand. Holds at most about one maximal record plus one read chunk.
class DriveLogReader::Window {
 public:
  explicit Window(std::istream* in) : in_(in) {}

  // Makes up to n bytes from the cursor available; returns how many are.
  size_t Ensure(size_t n) {
    while (buf_.size() - pos_ < n && !eof_) {
      if (pos_ > 0) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
        base_ += pos_;
        pos_ = 0;
      }
      const size_t want = std::max(n - buf_.size(), kScanChunk);
      const size_t old = buf_.size();
      buf_.resize(old + want);
      in_->read(reinterpret_cast<char*>(buf_.data() + old), static_cast<std::streamsize>(want));
      const size_t got = static_cast<size_t>(std::max<std::streamsize>(in_->gcount(), 0));
      buf_.resize(old + got);
      if (got < want) eof_ = true;
    }
    return std::min(n, buf_.size() - pos_);
  }
  const uint8_t* data() const { return buf_.data() + pos_; }
  void Advance(size_t n) { pos_ += std::min(n, buf_.size() - pos_); }
  uint64_t offset() const { return base_ + pos_; }

 private:
  std::istream* in_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;
  uint64_t base_ = 0;  // file offset of buf_[0]
  bool eof_ = false;
};

// --- Reader -------------------------------------------------------------------

DriveLogReader::DriveLogReader(DriveLogReader&&) noexcept = default;
DriveLogReader& DriveLogReader::operator=(DriveLogReader&&) noexcept = default;
DriveLogReader::~DriveLogReader() = default;

uint64_t DriveLogReader::offset() const { return window_ ? window_->offset() : 0; }

Result<DriveLogReader> DriveLogReader::Open(const std::filesystem::path& path,
                                            ReaderOptions options) {
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*file) {
    return MakeError(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
  }
  std::istream* raw = file.get();
  auto reader = Open(raw, std::move(options), path.string());
  if (!reader) return reader;
  reader->owned_ = std::move(file);
  return reader;
}

Result<DriveLogReader> DriveLogReader::Open(std::istream* in, ReaderOptions options,
                                            std::string origin) {
  DriveLogReader r;
  r.window_ = std::make_unique<Window>(in);
  r.options_ = std::move(options);
  r.origin_ = std::move(origin);
  Window& w = *r.window_;
  const size_t have = w.Ensure(kPreambleBytes);
  if (have < kPreambleBytes || std::memcmp(w.data(), kDriveLogMagic, sizeof(kDriveLogMagic)) != 0) {
    return MakeError(
        ErrorCode::kFormat,
        r.origin_ + ": not a binary drive log (" +
            (have < kPreambleBytes ? "shorter than the 12-byte preamble" : "bad magic") + ")");
  }
  const uint32_t version = GetU32(w.data() + sizeof(kDriveLogMagic));
  if (version != kDriveLogVersion) {
    return MakeError(ErrorCode::kFormat, r.origin_ + ": drive log version " +
                                             std::to_string(version) + " (this build reads " +
                                             std::to_string(kDriveLogVersion) + ")");
  }
  w.Advance(kPreambleBytes);

  // The header record, or the first event when it is missing.
  while (true) {
    Record rec;
    bool corrupt = false;
    const size_t corrupt_before = r.corruptions_.size();
    auto more = r.NextRecord(&rec, &corrupt);
    if (!more) return std::unexpected(more.error());
    if (!*more) {
      if (r.corruptions_.size() == corrupt_before && r.corruptions_.empty()) {
        if (auto c = r.Corrupt(w.offset(), 0, "missing header record"); !c) {
          return std::unexpected(c.error());
        }
      }
      break;
    }
    ArrayInputStream stream(w.data() + rec.begin, static_cast<int>(rec.size));
    if (rec.kind == kHeaderKind) {
      const bool ok = ParseDelimitedFromZeroCopyStream(&r.header_, &stream, nullptr);
      w.Advance(rec.total);
      if (ok) {
        r.has_header_ = true;
        break;
      }
      r.header_.Clear();
      if (auto c = r.Corrupt(rec.offset, rec.total, "payload is not an ari.drivelog.Header"); !c) {
        return std::unexpected(c.error());
      }
      continue;
    }
    // An intact event first: the header is missing; keep the event for Next().
    if (r.corruptions_.empty()) {
      if (auto c = r.Corrupt(rec.offset, 0, "missing header record"); !c) {
        return std::unexpected(c.error());
      }
    }
    break;
  }
  return r;
}

DriveLogReader::Status DriveLogReader::DecodeAt(size_t pos, Record* rec, std::string* reason) {
  Window& w = *window_;
  size_t have = w.Ensure(pos + sizeof(kRecordMarker) + 1 + kMaxVarintBytes);
  if (have <= pos) return Status::kEnd;
  const uint8_t* p = w.data() + pos;
  have -= pos;
  auto truncated = [&](size_t need) {
    *reason = "record runs past the end of the file (" + std::to_string(have) + " bytes left" +
              (need ? ", need " + std::to_string(need) : std::string()) + ")";
    return Status::kBad;
  };
  const size_t marker_cmp = std::min(have, sizeof(kRecordMarker));
  if (std::memcmp(p, kRecordMarker, marker_cmp) != 0) {
    *reason = "no record marker";
    return Status::kBad;
  }
  if (have < sizeof(kRecordMarker) + 1) return truncated(0);
  const char kind = static_cast<char>(p[4]);
  if (kind != kHeaderKind && kind != kEventKind) {
    *reason = "bad record kind " + Hex(p[4]);
    return Status::kBad;
  }
  uint64_t length = 0;
  size_t varint_bytes = 0;
  for (size_t i = 0;; ++i) {
    if (i >= kMaxVarintBytes) {
      *reason = "bad record length (varint longer than 5 bytes)";
      return Status::kBad;
    }
    if (5 + i >= have) return truncated(0);
    const uint8_t b = p[5 + i];
    length |= static_cast<uint64_t>(b & 0x7Fu) << (7 * i);
    if ((b & 0x80u) == 0) {
      varint_bytes = i + 1;
      break;
    }
  }
  if (length > kMaxRecordBytes) {
    *reason =
        "record length " + std::to_string(length) + " > limit " + std::to_string(kMaxRecordBytes);
    return Status::kBad;
  }
  const size_t total = 5 + varint_bytes + static_cast<size_t>(length) + 4;
  have = w.Ensure(pos + total) - pos;
  p = w.data() + pos;
  if (have < total) return truncated(total);
  const size_t crc_len = 1 + varint_bytes + static_cast<size_t>(length);
  const uint32_t stored = GetU32(p + 4 + crc_len);
  const uint32_t actual = Crc32(std::span<const uint8_t>(p + 4, crc_len));
  if (stored != actual) {
    *reason = "CRC mismatch";
    return Status::kBad;
  }
  rec->kind = kind;
  rec->offset = w.offset() + pos;
  rec->begin = pos + 5;
  rec->size = varint_bytes + static_cast<size_t>(length);
  rec->total = total;
  return Status::kOk;
}

Result<void> DriveLogReader::Corrupt(uint64_t offset, uint64_t skipped, std::string reason) {
  corruptions_.push_back(CorruptRecord{offset, skipped, std::move(reason)});
  const CorruptRecord& c = corruptions_.back();
  if (options_.on_corrupt) options_.on_corrupt(c);
  if (!options_.skip_corrupt) return MakeError(ErrorCode::kCorrupt, origin_ + ": " + c.ToString());
  return {};
}

Result<bool> DriveLogReader::NextRecord(Record* rec, bool* corrupt) {
  Window& w = *window_;
  while (true) {
    std::string reason;
    const uint64_t start = w.offset();
    const Status st = DecodeAt(0, rec, &reason);
    if (st == Status::kOk) return true;
    if (st == Status::kEnd) return false;
    // Resynchronize: the next marker that starts an intact record.
    *corrupt = true;
    w.Advance(1);
    while (true) {
      const size_t have = w.Ensure(kScanChunk);
      if (have < sizeof(kRecordMarker)) {
        w.Advance(have);
        break;
      }
      const uint8_t* p = w.data();
      const uint8_t* end = p + have - (sizeof(kRecordMarker) - 1);
      const uint8_t* hit =
          std::search(p, p + have, kRecordMarker, kRecordMarker + sizeof(kRecordMarker),
                      [](uint8_t a, char b) { return a == static_cast<uint8_t>(b); });
      if (hit >= end) {  // none here: keep the last 3 bytes (a marker may straddle)
        w.Advance(have - (sizeof(kRecordMarker) - 1));
        continue;
      }
      w.Advance(static_cast<size_t>(hit - p));
      Record probe;
      std::string ignored;
      if (DecodeAt(0, &probe, &ignored) == Status::kOk) break;
      w.Advance(1);
    }
    if (auto r = Corrupt(start, w.offset() - start, std::move(reason)); !r) {
      return std::unexpected(r.error());
    }
  }
}

Result<bool> DriveLogReader::Next(dl::Event* event) {
  if (!window_) return MakeError(ErrorCode::kInvalidArgument, "reader is not open");
  Window& w = *window_;
  while (true) {
    Record rec;
    bool corrupt = false;
    auto more = NextRecord(&rec, &corrupt);
    if (!more) return std::unexpected(more.error());
    if (!*more) return false;
    ArrayInputStream stream(w.data() + rec.begin, static_cast<int>(rec.size));
    if (rec.kind == kHeaderKind) {
      w.Advance(rec.total);
      if (auto c = Corrupt(rec.offset, rec.total, "unexpected header record"); !c) {
        return std::unexpected(c.error());
      }
      continue;
    }
    event->Clear();
    const bool ok = ParseDelimitedFromZeroCopyStream(event, &stream, nullptr);
    w.Advance(rec.total);
    if (!ok) {
      if (auto c = Corrupt(rec.offset, rec.total, "payload is not an ari.drivelog.Event"); !c) {
        return std::unexpected(c.error());
      }
      continue;
    }
    if (options_.check_order && events_ > 0 && event->t_ms() < last_t_ms_) {
      return MakeError(ErrorCode::kInvalidLog, origin_ + ": offset " + std::to_string(rec.offset) +
                                                   ": event " + std::to_string(events_) +
                                                   " (t_ms " + std::to_string(event->t_ms()) +
                                                   ") is before the previous event (t_ms " +
                                                   std::to_string(last_t_ms_) + ")");
    }
    ++events_;
    last_t_ms_ = event->t_ms();
    return true;
  }
}

}  // namespace ari::sim
