// Corrupt binary drive logs: every flipped byte, every truncation, absurd
// lengths, garbage and random damage. The reader reports the byte offset of
// the bad record, skips it and recovers every intact record after it.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <sstream>

#include "sim/drive_log.h"
#include "sim/prng.h"
#include "tests/sim/sample_log.h"

namespace ari::sim {
namespace {

using google::protobuf::util::MessageDifferencer;

// The sample log's bytes and where each record starts (record 0 = header).
struct Encoded {
  dl::DriveLog log;
  std::string bytes;
  std::vector<size_t> starts;  // starts[k] = offset of record k; starts.back() = end

  size_t RecordAt(size_t offset) const {
    size_t k = 0;
    while (starts[k + 1] <= offset) ++k;
    return k;
  }
};

Encoded Encode(int events = 18) {
  Encoded e;
  e.log = testing::SampleLog(events);
  e.bytes = DriveLogPreamble();
  e.starts.push_back(e.bytes.size());
  EXPECT_TRUE(AppendRecord(kHeaderKind, e.log.header(), &e.bytes));
  e.starts.push_back(e.bytes.size());
  for (const auto& ev : e.log.event()) {
    EXPECT_TRUE(AppendRecord(kEventKind, ev, &e.bytes));
    e.starts.push_back(e.bytes.size());
  }
  EXPECT_EQ(e.bytes, *EncodeDriveLog(e.log));
  return e;
}

// The original log without record k (0 = header).
dl::DriveLog Without(const dl::DriveLog& log, size_t k) {
  dl::DriveLog out = log;
  if (k == 0) {
    out.clear_header();
  } else {
    out.mutable_event()->DeleteSubrange(static_cast<int>(k - 1), 1);
  }
  return out;
}

TEST(DriveLogCorrupt, EveryFlippedByteIsReportedAtItsRecordAndSkipped) {
  const Encoded enc = Encode();
  for (const uint8_t mask : {uint8_t{0xFF}, uint8_t{0x01}, uint8_t{0x80}}) {
    for (size_t off = 0; off < enc.bytes.size(); ++off) {
      std::string bytes = enc.bytes;
      bytes[off] = static_cast<char>(static_cast<uint8_t>(bytes[off]) ^ mask);
      std::vector<CorruptRecord> corrupt;
      auto log = DecodeDriveLog(bytes, {}, &corrupt);
      if (off < kPreambleBytes) {  // magic or version: not a drive log any more
        ASSERT_FALSE(log) << off;
        EXPECT_EQ(log.error().code, ErrorCode::kFormat);
        continue;
      }
      ASSERT_TRUE(log) << "offset " << off << ": " << log.error().ToString();
      const size_t k = enc.RecordAt(off);
      ASSERT_EQ(corrupt.size(), 1u) << "flip at " << off;
      EXPECT_EQ(corrupt[0].offset, enc.starts[k])
          << "flip at " << off << ": " << corrupt[0].ToString();
      EXPECT_EQ(corrupt[0].skipped_bytes, enc.starts[k + 1] - enc.starts[k]) << off;
      EXPECT_TRUE(MessageDifferencer::Equals(*log, Without(enc.log, k)))
          << "flip at " << off << " (record " << k << ")";
    }
  }
}

TEST(DriveLogCorrupt, TruncationAtEveryOffset) {
  const Encoded enc = Encode();
  for (size_t len = 0; len < enc.bytes.size(); ++len) {
    std::vector<CorruptRecord> corrupt;
    auto log = DecodeDriveLog(std::string_view(enc.bytes).substr(0, len), {}, &corrupt);
    if (len < kPreambleBytes) {
      ASSERT_FALSE(log) << len;
      EXPECT_EQ(log.error().code, ErrorCode::kFormat);
      continue;
    }
    ASSERT_TRUE(log) << len << ": " << log.error().ToString();
    // Complete records before the cut are all there.
    size_t complete = 0;
    while (complete + 1 < enc.starts.size() && enc.starts[complete + 1] <= len) ++complete;
    const int events = complete == 0 ? 0 : static_cast<int>(complete - 1);
    ASSERT_EQ(log->event_size(), events) << len;
    for (int i = 0; i < events; ++i) {
      EXPECT_TRUE(MessageDifferencer::Equals(log->event(i), enc.log.event(i))) << len << " " << i;
    }
    const bool at_boundary = enc.starts[complete] == len;
    if (at_boundary && complete > 0) {
      EXPECT_TRUE(corrupt.empty()) << len;
    } else {
      ASSERT_EQ(corrupt.size(), 1u) << len;
      EXPECT_EQ(corrupt[0].offset, enc.starts[complete]) << len;
      EXPECT_EQ(corrupt[0].skipped_bytes, len - enc.starts[complete]) << len;
    }
  }
}

// A record header with an arbitrary varint length, then nothing else.
std::string BadLengthRecord(std::initializer_list<uint8_t> varint) {
  std::string r(kRecordMarker, 4);
  r.push_back(kEventKind);
  for (uint8_t b : varint) r.push_back(static_cast<char>(b));
  return r;
}

TEST(DriveLogCorrupt, AbsurdLengthsAreRejectedAndFollowingRecordsRecovered) {
  const Encoded enc = Encode(6);
  struct Case {
    std::string record;
    const char* reason;
  };
  const Case cases[] = {
      {BadLengthRecord({0xFF, 0xFF, 0xFF, 0xFF, 0x0F}), "record length 4294967295 > limit"},
      {BadLengthRecord({0x81, 0x80, 0x40}), "record length 1048577 > limit"},
      {BadLengthRecord({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}),
       "varint longer"},
      // A plausible length whose bytes are not there: costs a look-ahead, not a crash.
      {BadLengthRecord({0x80, 0x80, 0x40}), "runs past the end of the file"},
      // A small length: its "payload" overlaps the next record, the CRC cannot match.
      {BadLengthRecord({0x14}), "CRC mismatch"},
  };
  for (const auto& c : cases) {
    // Insert the bad record between event records 3 and 4.
    const size_t at = enc.starts[4];
    std::string bytes = enc.bytes.substr(0, at) + c.record + enc.bytes.substr(at);
    std::vector<CorruptRecord> corrupt;
    auto log = DecodeDriveLog(bytes, {}, &corrupt);
    ASSERT_TRUE(log) << log.error().ToString();
    ASSERT_EQ(corrupt.size(), 1u) << c.reason;
    EXPECT_EQ(corrupt[0].offset, at);
    EXPECT_EQ(corrupt[0].skipped_bytes, c.record.size());
    EXPECT_NE(corrupt[0].reason.find(c.reason), std::string::npos) << corrupt[0].reason;
    EXPECT_TRUE(MessageDifferencer::Equals(*log, enc.log)) << c.reason;
  }
}

TEST(DriveLogCorrupt, GarbageAndFakeMarkersBetweenRecords) {
  const Encoded enc = Encode(12);
  Prng rng(99);
  std::string garbage;
  for (int i = 0; i < 5000; ++i) {
    garbage.push_back(static_cast<char>(rng.NextU64() & 0xFF));
    if (i % 97 == 0) garbage.append(kRecordMarker, 4);  // fake sync markers
    if (i % 331 == 0)
      garbage += std::string(kRecordMarker, 4) +
                 "E\x05"
                 "abcde"
                 "\x01\x02\x03\x04";
  }
  // Garbage after records 2 and 7 and at the end.
  std::string bytes = enc.bytes.substr(0, enc.starts[2]) + garbage +
                      enc.bytes.substr(enc.starts[2], enc.starts[7] - enc.starts[2]) + garbage +
                      enc.bytes.substr(enc.starts[7]) + garbage;
  std::vector<CorruptRecord> corrupt;
  auto log = DecodeDriveLog(bytes, {}, &corrupt);
  ASSERT_TRUE(log) << log.error().ToString();
  EXPECT_TRUE(MessageDifferencer::Equals(*log, enc.log));
  ASSERT_EQ(corrupt.size(), 3u);
  EXPECT_EQ(corrupt[0].offset, enc.starts[2]);
  EXPECT_EQ(corrupt[0].skipped_bytes, garbage.size());
  EXPECT_EQ(corrupt[1].offset, enc.starts[7] + garbage.size());
  EXPECT_EQ(corrupt[2].offset, enc.bytes.size() + 2 * garbage.size());
  EXPECT_EQ(corrupt[2].skipped_bytes, garbage.size());

  // Pure garbage after the preamble: no events, one corrupt stretch, no crash.
  std::vector<CorruptRecord> c2;
  auto only = DecodeDriveLog(DriveLogPreamble() + garbage, {}, &c2);
  ASSERT_TRUE(only);
  EXPECT_EQ(only->event_size(), 0);
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].offset, kPreambleBytes);
  EXPECT_EQ(c2[0].skipped_bytes, garbage.size());
}

TEST(DriveLogCorrupt, StrictModeReportsThenContinues) {
  const Encoded enc = Encode(8);
  std::string bytes = enc.bytes;
  const size_t bad = enc.starts[3] + 7;  // inside event record 2
  bytes[bad] = static_cast<char>(bytes[bad] ^ 0x5A);
  std::istringstream in(bytes);
  ReaderOptions options;
  options.skip_corrupt = false;
  std::vector<uint64_t> seen;
  options.on_corrupt = [&](const CorruptRecord& c) { seen.push_back(c.offset); };
  auto reader = DriveLogReader::Open(&in, options, "strict.pb");
  ASSERT_TRUE(reader) << reader.error().ToString();
  dl::Event e;
  std::vector<uint64_t> times;
  int errors = 0;
  while (true) {
    auto more = reader->Next(&e);
    if (!more) {
      ++errors;
      EXPECT_EQ(more.error().code, ErrorCode::kCorrupt);
      EXPECT_NE(more.error().message.find("strict.pb: offset " + std::to_string(enc.starts[3])),
                std::string::npos)
          << more.error().message;
      continue;
    }
    if (!*more) break;
    times.push_back(e.t_ms());
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(seen, std::vector<uint64_t>{enc.starts[3]});
  EXPECT_EQ(times.size(), 7u);
  EXPECT_EQ(reader->corruptions().size(), 1u);
}

TEST(DriveLogCorrupt, RandomDamageNeverCrashesAndYieldsOnlyOriginalEvents) {
  const Encoded enc = Encode(30);
  Prng rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    std::string bytes = enc.bytes;
    const int hits = 1 + static_cast<int>(rng.Below(6));
    for (int h = 0; h < hits; ++h) {
      const size_t pos = kPreambleBytes + rng.Below(bytes.size() - kPreambleBytes);
      switch (rng.Below(3)) {
        case 0: bytes[pos] = static_cast<char>(rng.NextU64()); break;
        case 1: bytes.erase(pos, 1 + rng.Below(20)); break;
        case 2:
          bytes.insert(pos, std::string(1 + rng.Below(20), static_cast<char>(rng.NextU64())));
          break;
      }
    }
    std::vector<CorruptRecord> corrupt;
    ReaderOptions lax;
    lax.check_order = false;
    auto log = DecodeDriveLog(bytes, lax, &corrupt);
    ASSERT_TRUE(log) << iter << ": " << log.error().ToString();
    // Decoded events are a subsequence of the original events.
    int j = 0;
    for (const auto& ev : log->event()) {
      while (j < enc.log.event_size() && !MessageDifferencer::Equals(ev, enc.log.event(j))) ++j;
      ASSERT_LT(j, enc.log.event_size())
          << "iteration " << iter << ": unknown event " << ev.DebugString();
      ++j;
    }
    for (size_t i = 1; i < corrupt.size(); ++i) {
      EXPECT_GE(corrupt[i].offset, corrupt[i - 1].offset + corrupt[i - 1].skipped_bytes);
    }
  }
}

}  // namespace
}  // namespace ari::sim
