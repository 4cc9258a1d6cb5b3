// proto3 string fields of a drive log must be UTF-8: the text format accepts any bytes
// (octal escapes), binary parsing does not, so validation refuses them (regression of
// a drive_log_fuzz finding: such a text log turned into a binary one with a "corrupt"
// header).
#include <gtest/gtest.h>

#include "sim/drive_log.h"

namespace ari::sim {
namespace {

TEST(DriveLogUtf8, TextWithInvalidUtf8IsRefused) {
  auto log = ParseDriveLogText("header { vehicle: \"v\" soc: \"\\377x\" }\n", "t", true);
  ASSERT_FALSE(log.has_value());
  EXPECT_EQ(log.error().code, ErrorCode::kInvalidLog);
  EXPECT_NE(log.error().message.find("header: soc is not valid UTF-8"), std::string::npos)
      << log.error().message;
  auto raw = ParseDriveLogText("header { soc: \"\\377x\" }\n", "t", false);
  ASSERT_TRUE(raw.has_value());
  EXPECT_FALSE(EncodeDriveLog(*raw).has_value());  // never written as a broken binary log
}

TEST(DriveLogUtf8, EventStringsAreChecked) {
  auto req = ParseDriveLogText(
      "event { t_ms: 1 request { request_id: 1 client: \"n\\300\\257\" urgency: HIGH "
      "prompt: \"x\" max_tokens: 1 } }\n",
      "t", true);
  ASSERT_FALSE(req.has_value());
  EXPECT_NE(req.error().message.find("request: client is not valid UTF-8"), std::string::npos);
  auto sensor = ParseDriveLogText(
      "event { t_ms: 1 soc_temperature { celsius: 40 sensor: \"\\355\\240\\200\" } }\n", "t", true);
  ASSERT_FALSE(sensor.has_value());
  EXPECT_NE(sensor.error().message.find("sensor is not valid UTF-8"), std::string::npos);
  auto ok = ParseDriveLogText(
      "header { notes: \"45 \\302\\260C \\360\\237\\232\\227\" }\n"
      "event { t_ms: 1 cpu_frequency_cap { clusters { cluster: 0 name: \"gro\\303\\237\" } } }\n",
      "t", true);
  EXPECT_TRUE(ok.has_value()) << ok.error().ToString();
}

}  // namespace
}  // namespace ari::sim
