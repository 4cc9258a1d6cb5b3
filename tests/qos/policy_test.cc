// Policy loading and validation: the shipped default policy, syntax errors with
// line:column, and one test per semantic error (field path + line in the message).
#include "qos/policy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "idl/ari_policy.pb.h"
#include "tests/common/test_util.h"

namespace ari::qos {
namespace {

std::filesystem::path DefaultPolicyPath() {
  return ari::testing::SourceDir() / "config" / "policy_default.textproto";
}

std::string DefaultText() {
  std::ifstream in(DefaultPolicyPath());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 1-based number of the first line containing `anchor`, 0 if none.
int LineOf(const std::string& text, const std::string& anchor) {
  const size_t pos = text.find(anchor);
  if (pos == std::string::npos) return 0;
  return 1 + static_cast<int>(
                 std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

// Replaces `from` by `to` inside the first line that contains `anchor`.
std::string EditLine(const std::string& text, const std::string& anchor, const std::string& from,
                     const std::string& to) {
  const size_t a = text.find(anchor);
  EXPECT_NE(a, std::string::npos) << anchor;
  const size_t begin = text.rfind('\n', a) + 1;
  const size_t end = text.find('\n', a);
  std::string line = text.substr(begin, end - begin);
  const size_t f = line.find(from);
  EXPECT_NE(f, std::string::npos) << from << " not in: " << line;
  line.replace(f, from.size(), to);
  return text.substr(0, begin) + line + text.substr(end);
}

std::string DropLine(const std::string& text, const std::string& anchor) {
  const size_t a = text.find(anchor);
  EXPECT_NE(a, std::string::npos) << anchor;
  const size_t begin = text.rfind('\n', a) + 1;
  const size_t end = text.find('\n', a);
  return text.substr(0, begin) + text.substr(end + 1);
}

// "p.textproto:<line>:" (built by appending: GCC 12 warns on "lit" + string temporaries).
std::string At(int line) {
  std::string s = "p.textproto:";
  s.append(std::to_string(line)).append(":");
  return s;
}

// Parses `text`, expects kInvalidPolicy with a message naming `path` at `line`.
void ExpectInvalid(const std::string& text, const std::string& path, int line,
                   const std::string& what) {
  auto r = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(r.has_value()) << "expected an error at " << path;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidPolicy) << r.error().ToString();
  const std::string want = At(line).append(" ").append(path).append(": ");
  EXPECT_NE(r.error().message.find(want), std::string::npos) << "want \"" << want << "\" in:\n"
                                                             << r.error().message;
  EXPECT_NE(r.error().message.find(what), std::string::npos) << "want \"" << what << "\" in:\n"
                                                             << r.error().message;
}

constexpr char kNormalHot[] = "urgency: NORMAL band: \"hot\"";  // knobs[10]

TEST(PolicyTest, ShippedDefaultParsesAndValidates) {
  auto r = LoadPolicyFile(DefaultPolicyPath());
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const Policy& p = *r;
  EXPECT_EQ(p.name, "default");
  ASSERT_EQ(p.thermal_bands.size(), 4u);
  EXPECT_EQ(p.thermal_bands[1].name, "warm");
  EXPECT_DOUBLE_EQ(p.thermal_bands[2].enter_c, 85.0);
  EXPECT_DOUBLE_EQ(p.thermal_bands[2].exit_c, 82.0);
  ASSERT_EQ(p.memory_bands.size(), 3u);
  EXPECT_EQ(p.memory_bands[0].enter_below_bytes, 500ull << 20);
  EXPECT_EQ(p.memory_bands[1].enter_below_bytes, 200ull << 20);
  EXPECT_EQ(p.memory_bands[2].enter_below_bytes, 100ull << 20);
  EXPECT_TRUE(p.memory_bands[2].actions.use_fallback_model);
  EXPECT_EQ(p.Class(Urgency::kCritical).aging_step_ms, 0u);
  EXPECT_GT(p.Class(Urgency::kBackground).aging_step_ms, 0u);

  const size_t last = p.thermal_bands.size() - 1;
  for (size_t b = 0; b < p.thermal_bands.size(); ++b) {
    const Knobs& crit = p.KnobsFor(Urgency::kCritical, b);
    const Knobs& chat = p.KnobsFor(Urgency::kNormal, b);
    EXPECT_EQ(crit.core_class, CoreClass::kPerformance) << b;
    EXPECT_EQ(crit.precision, b == 0 ? WeightPrecision::kW8A16 : WeightPrecision::kW4A8) << b;
    EXPECT_EQ(chat.core_class, CoreClass::kEfficiency) << b;
    EXPECT_EQ(chat.precision, WeightPrecision::kW4A8) << b;
    EXPECT_GT(chat.pause_ms, 0u) << b;
    for (Urgency u : kAllUrgencies) {
      EXPECT_EQ(p.KnobsFor(u, b).layer_drop > 0, b == last) << UrgencyName(u) << " band " << b;
    }
  }
  // Above the hot threshold chunks get smaller and pauses longer.
  const Knobs& cool = p.KnobsFor(Urgency::kNormal, 0);
  const Knobs& hot = p.KnobsFor(Urgency::kNormal, 2);
  EXPECT_LT(hot.prefill_chunk, cool.prefill_chunk);
  EXPECT_LT(hot.decode_tokens_per_chunk, cool.decode_tokens_per_chunk);
  EXPECT_GT(hot.pause_ms, cool.pause_ms);
}

TEST(PolicyTest, TextRoundTrip) {
  auto a = LoadPolicyFile(DefaultPolicyPath());
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  const std::string text = PolicyToText(*a);
  auto b = ParsePolicyText(text, "roundtrip");
  ASSERT_TRUE(b.has_value()) << b.error().ToString() << "\n" << text;
  EXPECT_EQ(PolicyToText(*b), text);
  EXPECT_EQ(b->knobs, a->knobs);
  EXPECT_EQ(b->conservative, a->conservative);
  EXPECT_EQ(b->fault_window_ms, a->fault_window_ms);
  EXPECT_EQ(b->memory_bands.size(), a->memory_bands.size());
}

// conservative.fault_window_ms: unset = 60000; set values (0 included) survive
// text -> Policy -> proto -> Policy and Policy -> text -> Policy.
TEST(PolicyTest, FaultWindowRoundTrips) {
  const std::string text = DefaultText();
  auto unset = ParsePolicyText(DropLine(text, "fault_window_ms:"), "p");
  ASSERT_TRUE(unset.has_value()) << unset.error().ToString();
  EXPECT_EQ(unset->fault_window_ms, kDefaultFaultWindowMs);
  for (const char* ms : {"0", "12345", "3600000"}) {
    auto p = ParsePolicyText(EditLine(text, "fault_window_ms:", "60000", ms), "p");
    ASSERT_TRUE(p.has_value()) << p.error().ToString();
    EXPECT_EQ(p->fault_window_ms, std::stoll(ms));
    ari::policy::Policy proto;
    PolicyToProto(*p, &proto);
    auto back = PolicyFromProto(proto);
    ASSERT_TRUE(back.has_value()) << back.error().ToString();
    EXPECT_EQ(back->fault_window_ms, p->fault_window_ms) << ms;
    auto again = ParsePolicyText(PolicyToText(*p), "again");
    ASSERT_TRUE(again.has_value()) << again.error().ToString();
    EXPECT_EQ(again->fault_window_ms, p->fault_window_ms) << ms;
  }
}

TEST(PolicyTest, NegativeOrHugeFaultWindow) {
  const std::string anchor = "fault_window_ms:";
  std::string text = EditLine(DefaultText(), anchor, "60000", "-1");
  ExpectInvalid(text, "conservative.fault_window_ms", LineOf(text, anchor),
                "-1 is negative (0 = only the band in force at the fault)");
  text = EditLine(DefaultText(), anchor, "60000", "3600001");
  ExpectInvalid(text, "conservative.fault_window_ms", LineOf(text, anchor),
                "3600001 is above the maximum 3600000");
}

TEST(PolicyTest, AtMostSixteenThermalBands) {
  auto a = LoadPolicyFile(DefaultPolicyPath());
  ASSERT_TRUE(a.has_value());
  ari::policy::Policy proto;
  PolicyToProto(*a, &proto);
  for (int i = 0; i < 13; ++i) *proto.add_thermal_bands() = proto.thermal_bands(3);
  auto r = PolicyFromProto(proto);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("thermal_bands: 17 bands, at most 16"), std::string::npos)
      << r.error().message;
}

TEST(PolicyTest, MissingFileIsIoError) {
  auto r = LoadPolicyFile(ari::testing::SourceDir() / "config" / "absent.textproto");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find("absent.textproto"), std::string::npos);
  auto dir = LoadPolicyFile(ari::testing::SourceDir() / "config");
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().code, ErrorCode::kIo);
}

TEST(PolicyTest, SyntaxErrorNamesLineAndColumn) {
  const std::string text =
      "name: \"x\"\nclasses {\n  urgency: CRITICAL\n  default_deadline_ms 2000\n}\n";
  auto r = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kParse);
  EXPECT_NE(r.error().message.find("p.textproto:4:"), std::string::npos) << r.error().message;
}

TEST(PolicyTest, UnknownEnumNameIsParseErrorWithLine) {
  const std::string text =
      EditLine(DefaultText(), kNormalHot, "precision: W4A8", "precision: W2A2");
  auto r = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kParse);
  const std::string want = At(LineOf(text, kNormalHot));
  EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("W2A2"), std::string::npos) << r.error().message;
}

TEST(PolicyTest, UnknownFieldIsParseErrorWithLine) {
  const std::string text = EditLine(DefaultText(), kNormalHot, "pause_ms:", "pause_msec:");
  auto r = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kParse);
  EXPECT_NE(r.error().message.find(At(LineOf(text, kNormalHot))), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("pause_msec"), std::string::npos) << r.error().message;
}

TEST(PolicyTest, UnknownEnumNumberIsRejected) {
  const std::string text = EditLine(DefaultText(), kNormalHot, "precision: W4A8", "precision: 7");
  ExpectInvalid(text, "knobs[10].knobs.precision", LineOf(text, kNormalHot), "unknown value 7");
}

TEST(PolicyTest, ExitNotBelowEnter) {
  const std::string anchor = "name: \"hot\"";
  const std::string text = EditLine(DefaultText(), anchor, "exit_c: 82", "exit_c: 85");
  ExpectInvalid(text, "thermal_bands[2].exit_c", LineOf(text, anchor),
                "exit_c 85.0 must be below enter_c 85.0");
}

TEST(PolicyTest, ThresholdsOutOfOrder) {
  const std::string anchor = "name: \"critical\"";
  const std::string text =
      EditLine(DefaultText(), anchor, "enter_c: 95 exit_c: 92", "enter_c: 80 exit_c: 78");
  ExpectInvalid(text, "thermal_bands[3].enter_c", LineOf(text, anchor), "out of order");
}

TEST(PolicyTest, OverlappingBands) {
  const std::string anchor = "name: \"hot\"";
  const std::string text = EditLine(DefaultText(), anchor, "exit_c: 82", "exit_c: 69");
  ExpectInvalid(text, "thermal_bands[2].exit_c", LineOf(text, anchor), "overlaps");
}

TEST(PolicyTest, BaseBandHasNoThresholds) {
  const std::string anchor = "name: \"normal\"";
  const std::string text =
      EditLine(DefaultText(), anchor, "min_dwell_ms", "enter_c: 10 min_dwell_ms");
  ExpectInvalid(text, "thermal_bands[0].enter_c", LineOf(text, anchor), "base");
}

TEST(PolicyTest, TemperatureOutOfRange) {
  const std::string anchor = "name: \"critical\"";
  const std::string text = EditLine(DefaultText(), anchor, "enter_c: 95", "enter_c: 200");
  ExpectInvalid(text, "thermal_bands[3].enter_c", LineOf(text, anchor), "outside");
}

TEST(PolicyTest, NegativeDwell) {
  const std::string anchor = "name: \"warm\"";
  const std::string text =
      EditLine(DefaultText(), anchor, "min_dwell_ms: 5000", "min_dwell_ms: -1");
  ExpectInvalid(text, "thermal_bands[1].min_dwell_ms", LineOf(text, anchor), "must be >= 0");
}

TEST(PolicyTest, DuplicateBandName) {
  const std::string anchor = "name: \"critical\"";
  const int line = LineOf(DefaultText(), anchor);
  const std::string text = EditLine(DefaultText(), anchor, "\"critical\"", "\"hot\"");
  ExpectInvalid(text, "thermal_bands[3].name", line, "duplicate band name \"hot\" (first at line");
}

TEST(PolicyTest, MissingKnobRule) {
  const std::string text = DropLine(DefaultText(), kNormalHot);
  ExpectInvalid(text, "knobs", LineOf(text, "name: \"hot\""),
                "missing rule for urgency NORMAL in band \"hot\"");
}

TEST(PolicyTest, DuplicateKnobRule) {
  const int line = LineOf(DefaultText(), kNormalHot);
  const std::string text = EditLine(DefaultText(), kNormalHot, "\"hot\"", "\"warm\"");
  ExpectInvalid(text, "knobs[10].urgency", line, "duplicate rule for NORMAL in band \"warm\"");
}

TEST(PolicyTest, UnknownBandInRule) {
  const std::string text = EditLine(DefaultText(), kNormalHot, "\"hot\"", "\"hott\"");
  ExpectInvalid(text, "knobs[10].band", LineOf(text, "band: \"hott\""), "unknown band \"hott\"");
}

TEST(PolicyTest, ZeroChunkSizes) {
  std::string text = EditLine(DefaultText(), kNormalHot, "prefill_chunk: 8 ", "prefill_chunk: 0 ");
  text = EditLine(text, kNormalHot, "decode_tokens_per_chunk: 1 ", "decode_tokens_per_chunk: 0 ");
  const int line = LineOf(text, kNormalHot);
  ExpectInvalid(text, "knobs[10].knobs.prefill_chunk", line, "0 must be >= 1");
  ExpectInvalid(text, "knobs[10].knobs.decode_tokens_per_chunk", line, "0 must be >= 1");
}

TEST(PolicyTest, ZeroThreads) {
  const std::string text = EditLine(DefaultText(), kNormalHot, "threads: 1", "threads: 0");
  ExpectInvalid(text, "knobs[10].knobs.threads", LineOf(text, kNormalHot), "0 must be >= 1");
}

TEST(PolicyTest, MissingEnumKnob) {
  const std::string text = EditLine(DefaultText(), kNormalHot, "isa: ISA_BEST ", "");
  ExpectInvalid(text, "knobs[10].knobs.isa", LineOf(text, kNormalHot), "missing (one of ISA_BEST");
}

TEST(PolicyTest, MemoryBandsOutOfOrder) {
  const std::string anchor = "enter_below_mb: 200";
  const std::string text = EditLine(DefaultText(), anchor, "enter_below_mb: 200 exit_above_mb: 300",
                                    "enter_below_mb: 700 exit_above_mb: 800");
  ExpectInvalid(text, "memory_bands[1].enter_below_mb", LineOf(text, "enter_below_mb: 700"),
                "out of order");
}

TEST(PolicyTest, MemoryExitNotAboveEnter) {
  const std::string anchor = "enter_below_mb: 100";
  const std::string text =
      EditLine(DefaultText(), anchor, "exit_above_mb: 150", "exit_above_mb: 90");
  ExpectInvalid(text, "memory_bands[2].exit_above_mb", LineOf(text, anchor), "hysteresis");
}

TEST(PolicyTest, MemoryBandsOverlap) {
  const std::string anchor = "enter_below_mb: 100";
  const std::string text =
      EditLine(DefaultText(), anchor, "exit_above_mb: 150", "exit_above_mb: 250");
  ExpectInvalid(text, "memory_bands[2].exit_above_mb", LineOf(text, anchor), "overlaps");
}

TEST(PolicyTest, PsiExitNotBelowEnter) {
  const std::string anchor = "psi_enter: 20";
  const std::string text = EditLine(DefaultText(), anchor, "psi_exit: 10", "psi_exit: 30");
  ExpectInvalid(text, "memory_bands[0].psi_exit", LineOf(text, anchor), "hysteresis");
}

TEST(PolicyTest, CriticalCannotAge) {
  const std::string anchor = "aging_step_ms: 0";
  const std::string text =
      EditLine(DefaultText(), anchor, "aging_step_ms: 0", "aging_step_ms: 100");
  ExpectInvalid(text, "classes[0].aging_step_ms", LineOf(text, "aging_step_ms: 100"),
                "CRITICAL cannot age");
}

TEST(PolicyTest, MissingClassAndZeroCapacity) {
  std::string text =
      EditLine(DefaultText(), "queue_capacity: 16", "queue_capacity: 16", "queue_capacity: 0");
  ExpectInvalid(text, "classes[1].queue_capacity", LineOf(text, "queue_capacity: 0"),
                "0 must be >= 1");
  text = EditLine(DefaultText(), "# driver-initiated", "HIGH", "NORMAL");
  ExpectInvalid(text, "classes[2].urgency", LineOf(text, "# chat"), "duplicate class NORMAL");
  ExpectInvalid(text, "classes", 1, "missing class HIGH");
}

TEST(PolicyTest, ConservativeNeedsEveryClass) {
  const std::string text = DropLine(DefaultText(), "knobs { urgency: BACKGROUND knobs {");
  ExpectInvalid(text, "conservative.knobs", LineOf(text, "conservative {"),
                "missing knobs for class BACKGROUND");
}

TEST(PolicyTest, ReportsAllErrorsAtOnce) {
  std::string text = EditLine(DefaultText(), kNormalHot, "threads: 1", "threads: 0");
  text = EditLine(text, "name: \"hot\"", "exit_c: 82", "exit_c: 90");
  auto r = ParsePolicyText(text, "p.textproto");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("2 policy errors"), std::string::npos) << r.error().message;
}

TEST(PolicyTest, FromProtoNamesFieldWithoutLine) {
  auto a = LoadPolicyFile(DefaultPolicyPath());
  ASSERT_TRUE(a.has_value());
  ari::policy::Policy proto;
  PolicyToProto(*a, &proto);
  ASSERT_TRUE(PolicyFromProto(proto).has_value());
  proto.mutable_knobs(3)->mutable_knobs()->set_threads(0);
  auto r = PolicyFromProto(proto);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("<policy>: knobs[3].knobs.threads: 0 must be >= 1"),
            std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace ari::qos
