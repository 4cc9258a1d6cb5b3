// Drive logs: binary and text round trips, streaming writer/reader, validation,
// text syntax errors with line:column, CRC-32 and duration parsing.
#include "sim/drive_log.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/crc32.h"
#include "sim/scenarios.h"
#include "tests/common/test_util.h"
#include "tests/sim/sample_log.h"

namespace ari::sim {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::SampleLog;

std::filesystem::path Tmp() {
  static const auto dir = ari::testing::TempDir("sim_drive_log");
  return dir;
}

TEST(Crc32, KnownValues) {
  EXPECT_EQ(Crc32(std::string_view("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32(std::string_view("")), 0u);
  EXPECT_EQ(Crc32(std::string_view("6789"), Crc32(std::string_view("12345"))), 0xCBF43926u);
}

TEST(DriveLog, BinaryRoundTripInMemory) {
  const dl::DriveLog log = SampleLog();
  auto bytes = EncodeDriveLog(log);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  EXPECT_EQ(bytes->substr(0, 8), std::string(kDriveLogMagic, 8));
  std::vector<CorruptRecord> corrupt;
  auto back = DecodeDriveLog(*bytes, {}, &corrupt);
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_TRUE(corrupt.empty());
  EXPECT_TRUE(MessageDifferencer::Equals(log, *back)) << back->DebugString();
}

TEST(DriveLog, StreamingWriterMatchesEncoderAndReaderStreams) {
  const dl::DriveLog log = SampleLog();
  std::ostringstream out;
  auto writer = DriveLogWriter::Create(&out, log.header());
  ASSERT_TRUE(writer) << writer.error().ToString();
  for (const auto& e : log.event()) ASSERT_TRUE(writer->Append(e));
  ASSERT_TRUE(writer->Close());
  EXPECT_EQ(writer->events_written(), static_cast<uint64_t>(log.event_size()));
  EXPECT_EQ(writer->bytes_written(), out.str().size());
  EXPECT_EQ(out.str(), *EncodeDriveLog(log));

  std::istringstream in(out.str());
  auto reader = DriveLogReader::Open(&in);
  ASSERT_TRUE(reader) << reader.error().ToString();
  ASSERT_TRUE(reader->has_header());
  EXPECT_TRUE(MessageDifferencer::Equals(reader->header(), log.header()));
  dl::Event e;
  int i = 0;
  while (true) {
    auto more = reader->Next(&e);
    ASSERT_TRUE(more) << more.error().ToString();
    if (!*more) break;
    ASSERT_LT(i, log.event_size());
    EXPECT_TRUE(MessageDifferencer::Equals(e, log.event(i))) << i;
    ++i;
  }
  EXPECT_EQ(i, log.event_size());
  EXPECT_EQ(reader->offset(), out.str().size());
  EXPECT_TRUE(reader->corruptions().empty());
}

TEST(DriveLog, FileRoundTripBinaryAndText) {
  const dl::DriveLog log = SampleLog();
  const auto bin = Tmp() / "log.pb";
  const auto txt = Tmp() / "log.textproto";
  ASSERT_TRUE(WriteDriveLog(bin, log));
  ASSERT_TRUE(WriteDriveLogText(txt, log));
  auto b = ReadDriveLog(bin);
  ASSERT_TRUE(b) << b.error().ToString();
  EXPECT_TRUE(MessageDifferencer::Equals(log, *b));
  auto t = ReadDriveLogText(txt);
  ASSERT_TRUE(t) << t.error().ToString();
  EXPECT_TRUE(MessageDifferencer::Equals(log, *t));
  // LoadDriveLog tells them apart by the magic.
  for (const auto& p : {bin, txt}) {
    auto l = LoadDriveLog(p);
    ASSERT_TRUE(l) << p << ": " << l.error().ToString();
    EXPECT_TRUE(MessageDifferencer::Equals(log, *l)) << p;
  }
}

TEST(DriveLog, TextRoundTripOfGeneratedScenario) {
  auto log =
      GenerateScenario({.scenario = "nav-burst-during-chat", .duration_ms = 120000, .seed = 3});
  ASSERT_TRUE(log) << log.error().ToString();
  const std::string text = FormatDriveLogText(*log);
  auto back = ParseDriveLogText(text, "gen");
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_TRUE(MessageDifferencer::Equals(*log, *back));
  // One line per event.
  size_t lines = 0;
  for (size_t pos = 0; (pos = text.find("\nevent { ", pos)) != std::string::npos; ++pos) ++lines;
  EXPECT_EQ(lines, static_cast<size_t>(log->event_size()));
}

// A binary log from a newer writer (fields this schema does not know) validates and decodes
// with the fields kept; its text form must still parse back (tests/fuzz/drive_log_fuzz.cc).
TEST(DriveLog, UnknownFieldsDoNotBreakTheTextRoundTrip) {
  dl::DriveLog log = SampleLog();
  log.mutable_event(0)
      ->GetReflection()
      ->MutableUnknownFields(log.mutable_event(0))
      ->AddVarint(999, 7);
  log.mutable_header()
      ->GetReflection()
      ->MutableUnknownFields(log.mutable_header())
      ->AddVarint(998, 1);
  auto bytes = EncodeDriveLog(log);
  ASSERT_TRUE(bytes) << bytes.error().ToString();
  auto back = DecodeDriveLog(*bytes);
  ASSERT_TRUE(back) << back.error().ToString();
  ASSERT_TRUE(ValidateDriveLog(*back));
  const std::string text = FormatDriveLogText(*back);
  auto parsed = ParseDriveLogText(text, "unknown", true);
  ASSERT_TRUE(parsed) << parsed.error().ToString() << "\n" << text;
  EXPECT_EQ(FormatDriveLogText(*parsed), text);
}

TEST(DriveLog, HandWrittenTextParses) {
  const std::string text = R"(# a hand-written scenario
header { scenario: "hand" ambient_celsius: 30 duration_ms: 10000 }
event { t_ms: 0 ambient_temperature { celsius: 30 } }
event { t_ms: 0 soc_temperature { celsius: 41.5 } }
event { t_ms: 500
        request { request_id: 1 client: "nav" urgency: CRITICAL
                  prompt: "Route home" max_tokens: 32 deadline_ms: 1500 category: NAVIGATION } }
event { t_ms: 2000 memory_available { bytes: 300000000 } }
event { t_ms: 2000 cpu_frequency_cap { clusters { cluster: 1 max_khz: 1200000 } } }
event { t_ms: 9000 vehicle_state { speed_kmh: 50 ignition: IGNITION_ON gear: GEAR_DRIVE } }
)";
  auto log = ParseDriveLogText(text, "hand.textproto");
  ASSERT_TRUE(log) << log.error().ToString();
  ASSERT_EQ(log->event_size(), 6);
  EXPECT_EQ(log->event(2).request().urgency(), ari::policy::CRITICAL);
  EXPECT_EQ(log->event(4).cpu_frequency_cap().clusters(0).max_khz(), 1200000u);
}

TEST(DriveLog, TextSyntaxErrorNamesLineAndColumn) {
  const std::string text =
      "header { scenario: \"x\" }\n"
      "event { t_ms: 0 ambient_temperature { celsius: 20 } }\n"
      "event { t_ms: 5 soc_temperature { celcius: 40 } }\n";
  auto log = ParseDriveLogText(text, "bad.textproto");
  ASSERT_FALSE(log);
  EXPECT_EQ(log.error().code, ErrorCode::kParse);
  EXPECT_NE(log.error().message.find("bad.textproto:3:"), std::string::npos) << log.error().message;
  EXPECT_NE(log.error().message.find("celcius"), std::string::npos) << log.error().message;

  auto bad_enum =
      ParseDriveLogText("event {\n  t_ms: 1\n  request { urgency: URGENT }\n}\n", "enum.textproto");
  ASSERT_FALSE(bad_enum);
  EXPECT_NE(bad_enum.error().message.find("enum.textproto:3:"), std::string::npos)
      << bad_enum.error().message;
}

TEST(DriveLog, ValidationReportsFirstViolationWithLine) {
  const std::string text =
      "header { duration_ms: 100000 }\n"
      "event { t_ms: 0 ambient_temperature { celsius: 20 } }\n"
      "event { t_ms: 3000 ambient_temperature { celsius: 20 } }\n"
      "event { t_ms: 2000 ambient_temperature { celsius: 20 } }\n"
      "event { t_ms: 1000 ambient_temperature { celsius: 20 } }\n";
  auto log = ParseDriveLogText(text, "order.textproto");
  ASSERT_FALSE(log);
  EXPECT_EQ(log.error().code, ErrorCode::kInvalidLog);
  EXPECT_NE(
      log.error().message.find("order.textproto:4:1: event 2 (t_ms 2000): time goes backwards"),
      std::string::npos)
      << log.error().message;
  // Without validation it parses; ValidateDriveLog names the same event.
  auto raw = ParseDriveLogText(text, "order.textproto", /*validate=*/false);
  ASSERT_TRUE(raw);
  auto v = ValidateDriveLog(*raw);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("event 2 (t_ms 2000)"), std::string::npos) << v.error().message;
}

TEST(DriveLog, ValidationCatchesBadFields) {
  struct Case {
    const char* event_text;
    const char* expect;
  };
  const Case cases[] = {
      {"t_ms: 1", "no payload"},
      {"request { request_id: 1 client: \"c\" prompt: \"p\" max_tokens: 1 }", "urgency"},
      {"request { request_id: 1 client: \"c\" urgency: HIGH max_tokens: 1 }", "prompt"},
      {"request { request_id: 1 client: \"c\" urgency: HIGH prompt: \"p\" }", "max_tokens"},
      {"request { client: \"c\" urgency: HIGH prompt: \"p\" max_tokens: 1 }", "request_id"},
      {"request { request_id: 1 urgency: HIGH prompt: \"p\" max_tokens: 1 }", "client"},
      {"soc_temperature { celsius: 250 }", "outside"},
      {"soc_temperature { celsius: nan }", "outside"},
      {"ambient_temperature { celsius: -90 }", "outside"},
      {"vehicle_state { speed_kmh: -1 }", "speed_kmh"},
      {"cpu_frequency_cap { clusters { cluster: 1 } clusters { cluster: 1 } }", "twice"},
      {"t_ms: 999999 memory_available { bytes: 1 }", "after the end"},
  };
  for (const auto& c : cases) {
    const std::string text =
        std::string("header { duration_ms: 5000 }\nevent { ") + c.event_text + " }\n";
    auto log = ParseDriveLogText(text, "case");
    ASSERT_FALSE(log) << c.event_text;
    EXPECT_EQ(log.error().code, ErrorCode::kInvalidLog) << c.event_text;
    EXPECT_NE(log.error().message.find(c.expect), std::string::npos)
        << c.event_text << " -> " << log.error().message;
  }
  dl::DriveLog dup = SampleLog();
  dup.mutable_event(6)->mutable_request()->set_request_id(1);
  auto v = ValidateDriveLog(dup);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("used twice"), std::string::npos) << v.error().message;
  EXPECT_FALSE(EncodeDriveLog(dup));  // the encoder validates first
}

TEST(DriveLog, WriterRejectsOutOfOrderAndEmptyEvents) {
  std::ostringstream out;
  dl::Header header;
  auto writer = DriveLogWriter::Create(&out, header);
  ASSERT_TRUE(writer);
  dl::Event e;
  e.set_t_ms(1000);
  e.mutable_ambient_temperature()->set_celsius(20);
  ASSERT_TRUE(writer->Append(e));
  const size_t size = out.str().size();
  e.set_t_ms(999);
  auto r = writer->Append(e);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidLog);
  EXPECT_NE(r.error().message.find("before the previous event"), std::string::npos);
  dl::Event empty;
  empty.set_t_ms(2000);
  EXPECT_FALSE(writer->Append(empty));
  EXPECT_EQ(out.str().size(), size);  // nothing written
  e.set_t_ms(1000);                   // equal times are fine
  EXPECT_TRUE(writer->Append(e));
  ASSERT_TRUE(writer->Close());
  EXPECT_FALSE(writer->Append(e));
}

TEST(DriveLog, ReaderReportsTimeGoingBackwardsAndContinues) {
  std::string bytes = DriveLogPreamble();
  ASSERT_TRUE(AppendRecord(kHeaderKind, dl::Header(), &bytes));
  for (uint64_t t : {100, 300, 200, 400}) {
    dl::Event e;
    e.set_t_ms(t);
    e.mutable_memory_available()->set_bytes(t);
    ASSERT_TRUE(AppendRecord(kEventKind, e, &bytes));
  }
  std::istringstream in(bytes);
  auto reader = DriveLogReader::Open(&in);
  ASSERT_TRUE(reader);
  dl::Event e;
  ASSERT_TRUE(*reader->Next(&e));
  ASSERT_TRUE(*reader->Next(&e));
  auto bad = reader->Next(&e);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidLog);
  EXPECT_NE(bad.error().message.find("t_ms 200"), std::string::npos) << bad.error().message;
  auto next = reader->Next(&e);
  ASSERT_TRUE(next && *next);
  EXPECT_EQ(e.t_ms(), 400u);
  EXPECT_FALSE(*reader->Next(&e));
  EXPECT_FALSE(DecodeDriveLog(bytes));  // whole-log decoding refuses it
  ReaderOptions lax;
  lax.check_order = false;
  auto all = DecodeDriveLog(bytes, lax);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->event_size(), 4);
}

TEST(DriveLog, NotADriveLog) {
  for (const std::string& bytes : {std::string(), std::string("header { }"),
                                   std::string("\x89"
                                               "ARIDLO",
                                               7),
                                   std::string("\x89"
                                               "ARIDLOG\x02\x00\x00\x00",
                                               12)}) {
    auto r = DecodeDriveLog(bytes);
    ASSERT_FALSE(r) << bytes;
    EXPECT_EQ(r.error().code, ErrorCode::kFormat) << r.error().message;
  }
  auto missing = DriveLogReader::Open(Tmp() / "does-not-exist.pb");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
  EXPECT_NE(missing.error().message.find("does-not-exist.pb"), std::string::npos);
}

TEST(DriveLog, EmptyLogAndMissingHeader) {
  dl::DriveLog empty;
  empty.mutable_header()->set_scenario("empty");
  auto bytes = EncodeDriveLog(empty);
  ASSERT_TRUE(bytes);
  std::vector<CorruptRecord> corrupt;
  auto back = DecodeDriveLog(*bytes, {}, &corrupt);
  ASSERT_TRUE(back);
  EXPECT_TRUE(corrupt.empty());
  EXPECT_EQ(back->header().scenario(), "empty");

  // Preamble + events but no header record.
  std::string headless = DriveLogPreamble();
  dl::Event e;
  e.set_t_ms(5);
  e.mutable_ambient_temperature()->set_celsius(1);
  ASSERT_TRUE(AppendRecord(kEventKind, e, &headless));
  back = DecodeDriveLog(headless, {}, &corrupt);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->event_size(), 1);
  ASSERT_EQ(corrupt.size(), 1u);
  EXPECT_EQ(corrupt[0].offset, kPreambleBytes);
  EXPECT_EQ(corrupt[0].reason, "missing header record");
  ReaderOptions strict;
  strict.skip_corrupt = false;
  EXPECT_FALSE(DecodeDriveLog(headless, strict));
}

TEST(DriveLog, RecordTooLargeIsRefusedByTheWriter) {
  dl::Event e;
  e.mutable_request()->set_prompt(std::string(kMaxRecordBytes + 1, 'x'));
  std::string out;
  auto r = AppendRecord(kEventKind, e, &out);
  ASSERT_FALSE(r);
  EXPECT_TRUE(out.empty());
}

TEST(DriveLog, LargestRecordRoundTrips) {
  dl::Header header;
  header.set_notes(std::string(kMaxRecordBytes - 8, 'n'));  // 4-byte varint + tag: just fits
  ASSERT_LE(header.ByteSizeLong(), kMaxRecordBytes);
  std::string bytes = DriveLogPreamble();
  ASSERT_TRUE(AppendRecord(kHeaderKind, header, &bytes));
  dl::Event e;
  e.set_t_ms(1);
  e.mutable_ambient_temperature()->set_celsius(3);
  ASSERT_TRUE(AppendRecord(kEventKind, e, &bytes));
  std::vector<CorruptRecord> corrupt;
  auto log = DecodeDriveLog(bytes, {}, &corrupt);
  ASSERT_TRUE(log) << log.error().ToString();
  EXPECT_TRUE(corrupt.empty());
  EXPECT_EQ(log->header().notes().size(), kMaxRecordBytes - 8);
  ASSERT_EQ(log->event_size(), 1);
}

TEST(ParseDuration, UnitsAndErrors) {
  EXPECT_EQ(*ParseDuration("90s"), 90000u);
  EXPECT_EQ(*ParseDuration("30m"), 1800000u);
  EXPECT_EQ(*ParseDuration("1h"), 3600000u);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400000u);
  EXPECT_EQ(*ParseDuration("1500ms"), 1500u);
  EXPECT_EQ(*ParseDuration("2.5h"), 9000000u);
  for (const char* bad : {"", "90", "h", "-1s", "1x", "0s", "1h-", "1e300h"}) {
    auto r = ParseDuration(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace ari::sim
