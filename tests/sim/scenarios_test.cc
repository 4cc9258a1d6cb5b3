// Scenario generators: every scenario yields a valid, time-ordered log with
// its characteristic; same seed -> same bytes; the prompt set loads.
#include "sim/scenarios.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/crc32.h"
#include "sim/drive_log.h"
#include "sim/prompts.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

constexpr uint64_t kHour = uint64_t{3600} * 1000;
constexpr double kMiB = 1024.0 * 1024.0;

dl::DriveLog Gen(const std::string& name, uint64_t duration_ms = kHour, uint64_t seed = 11) {
  auto log = GenerateScenario({.scenario = name, .duration_ms = duration_ms, .seed = seed});
  EXPECT_TRUE(log) << name << ": " << log.error().ToString();
  return log ? *log : dl::DriveLog();
}

// (t_ms, value) series of one event kind.
std::vector<std::pair<uint64_t, double>> Series(const dl::DriveLog& log, dl::Event::KindCase kind) {
  std::vector<std::pair<uint64_t, double>> out;
  for (const auto& e : log.event()) {
    if (e.kind_case() != kind) continue;
    double v = 0;
    switch (kind) {
      case dl::Event::kSocTemperature: v = e.soc_temperature().celsius(); break;
      case dl::Event::kAmbientTemperature: v = e.ambient_temperature().celsius(); break;
      case dl::Event::kMemoryAvailable:
        v = static_cast<double>(e.memory_available().bytes()) / kMiB;
        break;
      case dl::Event::kVehicleState: v = e.vehicle_state().speed_kmh(); break;
      default: break;
    }
    out.emplace_back(e.t_ms(), v);
  }
  return out;
}

double Mean(const std::vector<std::pair<uint64_t, double>>& s, uint64_t from_ms, uint64_t to_ms) {
  double sum = 0;
  int n = 0;
  for (const auto& [t, v] : s) {
    if (t >= from_ms && t < to_ms) sum += v, ++n;
  }
  return n ? sum / n : 0.0;
}

std::vector<const dl::Request*> Requests(const dl::DriveLog& log, ari::policy::Urgency u,
                                         std::vector<uint64_t>* times = nullptr) {
  std::vector<const dl::Request*> out;
  for (const auto& e : log.event()) {
    if (e.has_request() && e.request().urgency() == u) {
      out.push_back(&e.request());
      if (times) times->push_back(e.t_ms());
    }
  }
  return out;
}

TEST(PromptSet, ShippedFileLoadsAndMatchesBuiltin) {
  auto file = LoadPromptSet(ari::testing::SourceDir() / "sim" / "prompts.textproto");
  ASSERT_TRUE(file) << file.error().ToString();
  EXPECT_GE(file->prompt_size(), 60);
  for (auto c : {dl::NAVIGATION, dl::VEHICLE_FUNCTIONS, dl::CHAT, dl::EXPLANATION}) {
    EXPECT_GE(CountPrompts(*file, c), 12) << dl::PromptCategory_Name(c);
  }
  EXPECT_GE(CountPrompts(*file, dl::SUMMARY), 5);
  std::set<std::string> texts;
  for (const auto& p : file->prompt()) EXPECT_TRUE(texts.insert(p.text()).second) << p.text();
  auto builtin = BuiltinPromptSet();
  ASSERT_TRUE(builtin) << builtin.error().ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*file, *builtin))
      << "rebuild: the compiled-in copy differs from sim/prompts.textproto";
}

TEST(PromptSet, ErrorsNameTheLine) {
  auto syntax =
      ParsePromptSet("prompt { category: NAVIGATION text: \"a\" }\nprompt { oops }\n", "p");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.error().code, ErrorCode::kParse);
  EXPECT_NE(syntax.error().message.find("p:2:"), std::string::npos) << syntax.error().message;
  auto semantic =
      ParsePromptSet("prompt { category: CHAT text: \"a\" }\n\nprompt { text: \"b\" }\n", "p");
  ASSERT_FALSE(semantic);
  EXPECT_NE(semantic.error().message.find("p:3: prompt 1: prompt without category"),
            std::string::npos)
      << semantic.error().message;
  dl::PromptSet no_nav = *ParsePromptSet("prompt { category: CHAT text: \"hi\" }", "p");
  auto r = GenerateScenario({.scenario = "city-commute", .duration_ms = 60000, .prompts = &no_nav});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("NAVIGATION"), std::string::npos) << r.error().message;
}

TEST(Scenarios, EveryScenarioIsValidAndComplete) {
  ASSERT_GE(Scenarios().size(), 6u);
  for (const auto& info : Scenarios()) {
    SCOPED_TRACE(std::string(info.name));
    const dl::DriveLog log = Gen(std::string(info.name), uint64_t{20} * 60 * 1000);
    EXPECT_TRUE(ValidateDriveLog(log));
    EXPECT_EQ(log.header().scenario(), info.name);
    EXPECT_EQ(log.header().seed(), 11u);
    EXPECT_EQ(log.header().duration_ms(), 20u * 60 * 1000);
    std::map<dl::Event::KindCase, int> kinds;
    uint64_t prev = 0;
    for (const auto& e : log.event()) {
      ASSERT_GE(e.t_ms(), prev);
      prev = e.t_ms();
      ++kinds[e.kind_case()];
    }
    EXPECT_EQ(kinds[dl::Event::kSocTemperature], 1201);  // every second incl. both ends
    EXPECT_EQ(kinds[dl::Event::kMemoryAvailable], 1201);
    EXPECT_EQ(kinds[dl::Event::kAmbientTemperature], 121);
    EXPECT_GE(kinds[dl::Event::kVehicleState], 241);
    EXPECT_GE(kinds[dl::Event::kCpuFrequencyCap], 1);
    EXPECT_GE(kinds[dl::Event::kRequest], 20);
    // Class conventions.
    for (const auto& e : log.event()) {
      if (!e.has_request()) continue;
      const auto& r = e.request();
      switch (r.category()) {
        case dl::NAVIGATION:
          EXPECT_EQ(r.urgency(), ari::policy::CRITICAL);
          if (info.name == "traffic-jam-heat") {  // short re-route announcements, 8..12 s
            EXPECT_GE(r.deadline_ms(), 8000u);
            EXPECT_LE(r.deadline_ms(), 12000u);
            EXPECT_EQ(r.max_tokens(), 12u);
          } else if (info.name == "summer-heat-soak") {  // highway manoeuvres, 8..12 s
            EXPECT_GE(r.deadline_ms(), 8000u);
            EXPECT_LE(r.deadline_ms(), 12000u);
            EXPECT_EQ(r.max_tokens(), 12u);
          } else {
            EXPECT_GE(r.deadline_ms(), 1500u);
            EXPECT_LE(r.deadline_ms(), 3000u);
          }
          break;
        case dl::VEHICLE_FUNCTIONS: EXPECT_EQ(r.urgency(), ari::policy::HIGH); break;
        case dl::CHAT:
          EXPECT_EQ(r.urgency(), ari::policy::NORMAL);
          EXPECT_GT(r.session_id(), 0u);
          break;
        case dl::EXPLANATION: EXPECT_EQ(r.urgency(), ari::policy::NORMAL); break;
        case dl::SUMMARY: EXPECT_EQ(r.urgency(), ari::policy::BACKGROUND); break;
        default: ADD_FAILURE() << "request without category";
      }
    }
    // The binary form round-trips.
    auto bytes = EncodeDriveLog(log);
    ASSERT_TRUE(bytes);
    auto back = DecodeDriveLog(*bytes);
    ASSERT_TRUE(back);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(log, *back));
  }
}

TEST(Scenarios, DeterministicPerSeed) {
  for (const auto& info : Scenarios()) {
    const std::string name(info.name);
    const auto a = EncodeDriveLog(Gen(name, uint64_t{10} * 60 * 1000, 5));
    const auto b = EncodeDriveLog(Gen(name, uint64_t{10} * 60 * 1000, 5));
    const auto c = EncodeDriveLog(Gen(name, uint64_t{10} * 60 * 1000, 6));
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(*a, *b) << name << ": same seed, different bytes";
    EXPECT_NE(*a, *c) << name << ": different seeds, same bytes";
  }
}

// Golden: pins the generators' output (PRNG, distributions, models, encoding)
// so a platform or library that changes it is noticed. Update the constants
// only when a generator is changed on purpose (and say so in the commit).
TEST(Scenarios, GoldenBytes) {
  struct Golden {
    const char* scenario;
    uint32_t crc;
    size_t size;
  };
  const Golden goldens[] = {
      {"city-commute", 0x082c6e77u, 20592},  // response_format on prompts
      {"memory-squeeze", 0x8f722b17u, 21120},
  };
  for (const auto& g : goldens) {
    auto bytes = EncodeDriveLog(Gen(g.scenario, uint64_t{5} * 60 * 1000, 1));
    ASSERT_TRUE(bytes);
    EXPECT_EQ(Crc32(*bytes), g.crc) << g.scenario << std::hex << " crc 0x" << Crc32(*bytes)
                                    << std::dec << " size " << bytes->size();
    EXPECT_EQ(bytes->size(), g.size) << g.scenario;
  }
}

TEST(Scenarios, SummerHeatSoak) {
  const auto log = Gen("summer-heat-soak");
  const auto ambient = Series(log, dl::Event::kAmbientTemperature);
  for (const auto& [t, v] : ambient) {
    EXPECT_GE(v, 44.0) << t;
    EXPECT_LE(v, 46.0) << t;
  }
  EXPECT_NEAR(log.header().ambient_celsius(), 45.0, 0.5);
  const auto soc = Series(log, dl::Event::kSocTemperature);
  const double first_min = Mean(soc, 0, 60000);
  const double last_10min = Mean(soc, kHour - 600000, kHour + 1);
  EXPECT_GE(first_min, 50.0);              // soaked before the drive
  EXPECT_GT(last_10min, first_min + 8.0);  // heats under load
  EXPECT_GT(last_10min, 45.0 + 20.0);      // well above ambient
}

TEST(Scenarios, MountainPassFallingAmbientSustainedLoad) {
  const auto log = Gen("mountain-pass");
  const auto ambient = Series(log, dl::Event::kAmbientTemperature);
  EXPECT_GT(Mean(ambient, 0, 120000), Mean(ambient, kHour - 120000, kHour + 1) + 15.0);
  size_t requests = 0;
  for (const auto& e : log.event()) requests += e.has_request() ? 1 : 0;
  EXPECT_GE(requests, 60u * 4);  // >= 4 requests per minute on average
  const auto soc = Series(log, dl::Event::kSocTemperature);
  EXPECT_GT(Mean(soc, 600000, kHour), Mean(ambient, 600000, kHour) + 15.0);
}

TEST(Scenarios, ColdStart) {
  const auto log = Gen("cold-start");
  const auto soc = Series(log, dl::Event::kSocTemperature);
  const auto ambient = Series(log, dl::Event::kAmbientTemperature);
  EXPECT_LE(soc.front().second, -10.0);
  EXPECT_LE(ambient.front().second, -10.0);
  EXPECT_GT(ambient.back().second, 10.0);  // the cabin warms up
  std::vector<dl::Ignition> sequence;
  for (const auto& e : log.event()) {
    if (e.has_vehicle_state() &&
        (sequence.empty() || sequence.back() != e.vehicle_state().ignition())) {
      sequence.push_back(e.vehicle_state().ignition());
    }
  }
  EXPECT_EQ(sequence, (std::vector<dl::Ignition>{dl::IGNITION_OFF, dl::IGNITION_ACCESSORY,
                                                 dl::IGNITION_CRANKING, dl::IGNITION_ON}));
  int early = 0;
  for (const auto& e : log.event()) early += e.has_request() && e.t_ms() < 180000 ? 1 : 0;
  EXPECT_GE(early, 6);
}

TEST(Scenarios, MemorySqueezeWavesBelow500MB) {
  const auto log = Gen("memory-squeeze");
  const auto mem = Series(log, dl::Event::kMemoryAvailable);
  int waves = 0;
  bool in_wave = false;  // hysteresis: a wave starts below 500 MiB, ends above 1500 MiB
  double lowest = 1e18;
  int high_samples = 0;
  for (const auto& [t, mib] : mem) {
    if (!in_wave && mib < 500) {
      ++waves;
      in_wave = true;
    } else if (in_wave && mib > 1500) {
      in_wave = false;
    }
    lowest = std::min(lowest, mib);
    high_samples += mib > 2000 ? 1 : 0;
  }
  EXPECT_GE(waves, 6);  // a wave every 4..8 minutes
  EXPECT_LE(waves, 20);
  EXPECT_GE(lowest, 150.0);
  EXPECT_GT(high_samples, static_cast<int>(mem.size()) / 2);  // recovers between waves
  // Other scenarios keep memory comfortable.
  for (const char* name : {"city-commute", "summer-heat-soak"}) {
    const auto other = Series(Gen(name, uint64_t{20} * 60 * 1000), dl::Event::kMemoryAvailable);
    for (const auto& [t, mib] : other) ASSERT_GT(mib, 1500.0) << name << " " << t;
  }
}

TEST(Scenarios, NavBurstDuringChat) {
  const auto log = Gen("nav-burst-during-chat");
  std::vector<uint64_t> nav_t, chat_t;
  Requests(log, ari::policy::CRITICAL, &nav_t);
  Requests(log, ari::policy::NORMAL, &chat_t);
  int bursts_with_chat = 0;
  for (size_t i = 0; i < nav_t.size(); ++i) {
    size_t j = i;
    while (j < nav_t.size() && nav_t[j] < nav_t[i] + 30000) ++j;
    if (j - i < 4) continue;  // not a burst
    const bool chat_around = std::any_of(chat_t.begin(), chat_t.end(), [&](uint64_t t) {
      return t + 60000 >= nav_t[i] && t <= nav_t[i] + 90000;
    });
    bursts_with_chat += chat_around ? 1 : 0;
    i = j;  // next burst
  }
  EXPECT_GE(bursts_with_chat, 4);
  EXPECT_GE(chat_t.size(), 120u);  // chat runs all the time (~3 per minute)
}

TEST(Scenarios, CityCommuteStopsAndGoes) {
  const auto log = Gen("city-commute");
  int stopped_in_drive = 0;
  double top = 0;
  for (const auto& e : log.event()) {
    if (!e.has_vehicle_state()) continue;
    top = std::max(top, e.vehicle_state().speed_kmh());
    stopped_in_drive +=
        e.vehicle_state().gear() == dl::GEAR_DRIVE && e.vehicle_state().speed_kmh() == 0;
  }
  EXPECT_LE(top, 60.0);
  EXPECT_GE(stopped_in_drive, 20);
}

TEST(Scenarios, BadOptions) {
  auto unknown = GenerateScenario({.scenario = "moon-landing"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.error().message.find("summer-heat-soak"), std::string::npos);
  EXPECT_FALSE(GenerateScenario({.scenario = "cold-start", .duration_ms = 0}));
  EXPECT_FALSE(
      GenerateScenario({.scenario = "cold-start", .duration_ms = kMaxScenarioDurationMs + 1}));
  auto tiny = GenerateScenario({.scenario = "cold-start", .duration_ms = 1000});
  ASSERT_TRUE(tiny) << tiny.error().ToString();
  EXPECT_TRUE(ValidateDriveLog(*tiny));
}

}  // namespace
}  // namespace ari::sim
