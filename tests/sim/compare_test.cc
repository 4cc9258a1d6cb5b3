// ari-sim compare: the ordering the simulator exists to show (governor vs baselines on
// a head-unit profile), the JSON, and the HTML page rendered in headless Chromium.
#include "sim/compare.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "sim/hardware_profile.h"
#include "sim/scenarios.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

struct Fixture {
  dl::DriveLog log;
  std::vector<qos::Policy> policies;
  HardwareProfile hardware;
  CostModel cost;
  std::string name;  // the log's name in the report
};

// traffic-jam-heat (or another scenario), 30 min (seed 1), on a76-4gb with the 1.5b model:
// the short version of the docs/tuning.md comparison (a few tens of milliseconds of replay).
Fixture Make(const char* scenario = "traffic-jam-heat") {
  Fixture f;
  ScenarioOptions so;
  so.scenario = scenario;
  f.name = std::string(scenario) + "-30m";
  so.duration_ms = uint64_t{30} * 60 * 1000;
  so.seed = 1;
  auto log = GenerateScenario(so);
  EXPECT_TRUE(log.has_value());
  f.log = std::move(*log);
  for (const char* p : {"policy_default", "policy_static_performance", "policy_static_eco",
                        "policy_a76_4gb_tuned"}) {
    auto policy =
        qos::LoadPolicyFile(ari::testing::SourceDir() / "config" / (std::string(p) + ".textproto"));
    EXPECT_TRUE(policy.has_value()) << p << ": " << policy.error().ToString();
    f.policies.push_back(std::move(*policy));
  }
  auto hp = FindHardwareProfile("a76-4gb");
  EXPECT_TRUE(hp.has_value());
  f.hardware = std::move(*hp);
  auto cost = ProfileCostModel(f.hardware, "1.5b");
  EXPECT_TRUE(cost.has_value());
  f.cost = std::move(*cost);
  return f;
}

Result<CompareReport> RunAll(const Fixture& f) {
  CompareInput in;
  in.logs = {&f.log};
  in.log_names = {f.name};
  for (const auto& p : f.policies) in.policies.push_back(&p);
  ApplyHardwareProfile(f.hardware, in.base);
  in.base.cost = &f.cost;
  in.hardware = f.hardware.name();
  in.model = "1.5b";
  return RunCompare(in, 2);
}

// The property docs/tuning.md shows: static-performance runs into the SoC's hardware
// throttling and misses CRITICAL deadlines; the default policy misses none and stays
// below its own limit (its hottest band) without ever reaching a trip point.
class CompareOnHeadUnit : public ::testing::TestWithParam<const char*> {};

TEST_P(CompareOnHeadUnit, GovernorBeatsStaticPerformance) {
  const Fixture f = Make(GetParam());
  auto r = RunAll(f);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->runs.size(), 4u);
  const CompareRun& def = r->Run(0, 0);
  const CompareRun& perf = r->Run(0, 1);
  ASSERT_EQ(def.policy, "default");
  ASSERT_EQ(perf.policy, "static-performance");
  const int crit = qos::Rank(qos::Urgency::kCritical);
  EXPECT_GT(def.report.classes[crit].requests, 3);
  EXPECT_EQ(def.report.classes[crit].deadline_misses, 0);
  EXPECT_LT(def.report.summary.peak_die_c, def.limit_c);
  EXPECT_EQ(def.report.summary.hw_throttle_s, 0);
  EXPECT_GT(perf.report.summary.hw_throttle_s, 0);
  EXPECT_GT(perf.report.classes[crit].deadline_misses, 0);
  EXPECT_GT(perf.report.summary.peak_die_c, def.report.summary.peak_die_c);
  // The policy ari-tune made for this profile (config/policy_a76_4gb_tuned.textproto) holds
  // the same line.
  const CompareRun& tuned = r->Run(0, 3);
  ASSERT_EQ(tuned.policy, "a76-4gb-tuned");
  EXPECT_EQ(tuned.report.classes[crit].deadline_misses, 0);
  EXPECT_LT(tuned.report.summary.peak_die_c, tuned.limit_c);
  EXPECT_EQ(tuned.report.summary.hw_throttle_s, 0);
}

// Both head-unit scenarios of docs/tuning.md: the jam (re-routes while a long chat runs)
// and the summer heat soak (highway manoeuvres at 45 C ambient).
INSTANTIATE_TEST_SUITE_P(Scenarios, CompareOnHeadUnit,
                         ::testing::Values("traffic-jam-heat", "summer-heat-soak"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(Compare, JsonHasEveryRunSideBySide) {
  const Fixture f = Make();
  auto r = RunAll(f);
  ASSERT_TRUE(r.has_value());
  const std::string j = CompareToJson(*r);
  for (const char* key :
       {"\"format\":\"ari-sim-compare-1\"", "\"hardware\":\"a76-4gb\"", "\"model\":\"1.5b\"",
        "\"policy\":\"static-performance\"", "\"policy\":\"static-eco\"",
        "\"hw_throttle_s\":", "\"completion_p95_s\":", "\"ttft_p95_s\":", "\"temps\":[[",
        "\"decisions\":[[", "\"trips_c\":[85,95]", "\"quality_measured\":false", "\"energy_j\":"}) {
    EXPECT_NE(j.find(key), std::string::npos) << key;
  }
  EXPECT_NE(CompareToText(*r).find("static-performance"), std::string::npos);
  // Deterministic: the same inputs give the same bytes.
  auto again = RunAll(f);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(CompareToJson(*again), j);
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunShell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Compare, RendersInHeadlessChromium) {
  const std::filesystem::path chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) {
    GTEST_SKIP() << "/usr/bin/chromium not installed (Debian package 'chromium'): browser "
                    "rendering of the comparison not checked";
  }
  const Fixture f = Make();
  auto r = RunAll(f);
  ASSERT_TRUE(r.has_value());
  r->logs[0] = "jam </script> \"x\"";  // must not break the page
  for (auto& run : r->runs) run.log = r->logs[0];
  const auto dir = ari::testing::TempDir("sim_compare_html");
  const auto page = dir / "compare.html", blank = dir / "blank.html";
  std::ofstream(page) << CompareToHtml(*r);
  std::ofstream(blank) << "<!DOCTYPE html><html><head><title>ok</title></head><body></body></html>";
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions "
      "--disable-background-networking --proxy-server=127.0.0.1:9 "
      "--host-resolver-rules='MAP * ~NOTFOUND' --window-size=1200,1600 "
      "--virtual-time-budget=5000 --user-data-dir=" +
      (dir / "profile").string();
  auto shot = [&](const std::filesystem::path& html, const std::filesystem::path& png) {
    return RunShell(chromium.string() + " " + flags + " --screenshot=" + png.string() + " file://" +
                    html.string() + " >/dev/null 2>&1");
  };
  ASSERT_EQ(shot(page, dir / "compare.png"), 0);
  ASSERT_EQ(shot(blank, dir / "blank.png"), 0);
  const std::string png = Slurp(dir / "compare.png"), blank_png = Slurp(dir / "blank.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_GT(png.size(), 3 * blank_png.size()) << png.size() << " vs blank " << blank_png.size();
  const auto dom = dir / "dom.html";
  ASSERT_EQ(RunShell(chromium.string() + " " + flags + " --dump-dom file://" + page.string() +
                     " >" + dom.string() + " 2>/dev/null"),
            0);
  const std::string d = Slurp(dom);
  EXPECT_NE(d.find("<title>ok</title>"), std::string::npos) << d.substr(0, 400);
  EXPECT_NE(d.find("static-performance"), std::string::npos);  // the table was filled
  EXPECT_NE(d.find("Die temperature"), std::string::npos);
}

}  // namespace
}  // namespace ari::sim
