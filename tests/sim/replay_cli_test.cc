// ari-sim replay / cost and ari-tune end to end.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "qos/policy.h"
#include "sim/cost_model.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

std::filesystem::path Bin(const char* name) {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  return std::filesystem::path(bin ? bin : ".") / "sim" / name;
}

std::filesystem::path Tmp() {
  static const auto dir = ari::testing::TempDir("sim_replay_cli");
  return dir;
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun Exec(const std::filesystem::path& tool, const std::string& args) {
  const auto out = Tmp() / "stdout.txt", err = Tmp() / "stderr.txt";
  const std::string cmd = "cd " + ari::testing::SourceDir().string() + " && " + tool.string() +
                          " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
}

class ReplayCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Bin("ari-sim")) || !std::filesystem::exists(Bin("ari-tune"))) {
      GTEST_SKIP() << "ari-sim / ari-tune not built in " << Bin("");
    }
  }
};

TEST_F(ReplayCli, ReplayWritesReports) {
  const auto log = Tmp() / "burst.pb";
  ASSERT_EQ(Exec(Bin("ari-sim"),
                 "gen --scenario nav-burst-during-chat --duration 4m --seed 3 -o " + log.string())
                .code,
            0);
  const auto json = Tmp() / "r.json", html = Tmp() / "r.html";
  CliRun r = Exec(Bin("ari-sim"), "replay --log " + log.string() + " --mode model --json " +
                                      json.string() + " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("CRITICAL"), std::string::npos);
  EXPECT_NE(r.out.find("peak die"), std::string::npos);
  EXPECT_NE(Slurp(json).find("\"format\":\"ari-sim-report-1\""), std::string::npos);
  EXPECT_NE(Slurp(html).find("function tempPlot"), std::string::npos);
  // Same log, same report bytes.
  const auto json2 = Tmp() / "r2.json";
  ASSERT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --json " + json2.string()).code,
            0);
  EXPECT_EQ(Slurp(json), Slurp(json2));
  // Errors: bad live-mode options (usage, before any DDS), live flags in model mode,
  // missing log. (Live mode against a real node: tests/sim/live_replay_test.cc.)
  EXPECT_EQ(
      Exec(Bin("ari-sim"), "replay --log " + log.string() + " --mode live --time-scale 0").code, 2);
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --mode live --domain 999").code,
            2);
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --time-scale 2").code, 2);
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --mode bogus").code, 2);
  CliRun missing = Exec(Bin("ari-sim"), "replay --log /nonexistent.pb");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("nonexistent"), std::string::npos);
}

TEST_F(ReplayCli, CostFromBenchJson) {
  const auto bench = Tmp() / "bench.json", cost = Tmp() / "cost.json";
  std::ofstream(bench)
      << "{\"model\":\"m\",\"precision\":\"w8a16\",\"threads\":1,\"prompt\":[{\"tokens\":64,"
         "\"tps\":{\"median\":40}},{\"tokens\":128,\"tps\":{\"median\":50}}],\"decode_tps\":{"
         "\"median\":9}}\n"
         "{\"model\":\"m\",\"precision\":\"w4a8\",\"threads\":1,\"prompt\":[{\"tokens\":64,"
         "\"tps\":{\"median\":80}}],\"decode_tps\":{\"median\":18}}\n";
  CliRun r = Exec(Bin("ari-sim"), "cost " + bench.string() + " --layers 12 -o " + cost.string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto m = LoadCostModel(cost);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->entries.size(), 2u);
  EXPECT_EQ(m->layers, 12);
  // The file drives a replay.
  const auto log = Tmp() / "city.pb";
  ASSERT_EQ(
      Exec(Bin("ari-sim"), "gen --scenario city-commute --duration 2m -o " + log.string()).code, 0);
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --cost " + cost.string()).code,
            0);
}

TEST_F(ReplayCli, TuneWritesValidPolicyAndDiff) {
  const auto log = Tmp() / "heat.pb", out = Tmp() / "tuned.textproto";
  ASSERT_EQ(Exec(Bin("ari-sim"),
                 "gen --scenario summer-heat-soak --duration 3m --seed 2 -o " + log.string())
                .code,
            0);
  CliRun r = Exec(Bin("ari-tune"), "--logs " + log.string() +
                                       " --space config/tune_space.textproto "
                                       "--budget 6 --seed 3 -o " +
                                       out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Pareto table"), std::string::npos) << r.out;
  auto p = qos::LoadPolicyFile(out);
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  EXPECT_TRUE(std::filesystem::exists(out.string() + ".diff"));
  // Deterministic for a seed.
  const std::string first = Slurp(out);
  ASSERT_EQ(Exec(Bin("ari-tune"), "--logs " + log.string() +
                                      " --space config/tune_space.textproto "
                                      "--budget 6 --seed 3 -o " +
                                      out.string())
                .code,
            0);
  EXPECT_EQ(Slurp(out), first);
  EXPECT_EQ(Exec(Bin("ari-tune"), "--budget 2").code, 2);  // no --logs
  // Without --space / --policy the shipped files are found (qos/shipped_config.h), from
  // any working folder.
  const auto dflt = out.parent_path() / "default_space.textproto";
  const auto run = Exec("cd / && " + Bin("ari-tune").string(),
                        "--logs " + log.string() + " --budget 2 -o " + dflt.string());
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(qos::LoadPolicyFile(dflt).has_value());
}

// --nodes: ari-sim replays a fleet, ari-tune tunes the routing weights with the shipped
// fleet space and writes them next to the policy.
TEST_F(ReplayCli, FleetReplayAndRoutingTuning) {
  const auto log = Tmp() / "jam.pb", out = Tmp() / "fleet.textproto";
  ASSERT_EQ(Exec(Bin("ari-sim"),
                 "gen --scenario traffic-jam-heat --duration 4m --seed 4 -o " + log.string())
                .code,
            0);
  CliRun r = Exec(Bin("ari-sim"), "replay --log " + log.string() +
                                      " --nodes 3 --ambient-offsets 0,10,30 "
                                      "--routing hot_celsius=80,turn_tokens=32");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* n : {"node n1:", "node n2:", "node n3:", "on 3 nodes"}) {
    EXPECT_NE(r.out.find(n), std::string::npos) << n << "\n" << r.out;
  }
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --nodes 2 --routing x=1").code,
            2);
  EXPECT_EQ(
      Exec(Bin("ari-sim"), "replay --log " + log.string() + " --nodes 2 --ambient-offsets a").code,
      2);
  r = Exec(Bin("ari-tune"), "--logs " + log.string() +
                                " --space config/tune_space_routing.textproto --nodes 2 "
                                "--ambient-offsets 0,20 --budget 4 --seed 2 -o " +
                                out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fleet: 2 simulated nodes"), std::string::npos) << r.out;
  EXPECT_TRUE(qos::LoadPolicyFile(out).has_value());
  const std::string routing = Slurp(out.string() + ".routing");
  EXPECT_NE(routing.find("hot_celsius="), std::string::npos) << routing;
  // Routing parameters need several nodes.
  EXPECT_EQ(Exec(Bin("ari-tune"), "--logs " + log.string() +
                                      " --space config/tune_space_routing.textproto --budget 2 "
                                      "-o " +
                                      out.string())
                .code,
            1);
}

// --quality: the measured table of config/quality/ becomes the quality term; a file that
// is not a quality table is an error naming it.
TEST_F(ReplayCli, TuneReadsTheMeasuredQualityTable) {
  const auto log = Tmp() / "heat_q.pb", out = Tmp() / "tuned_q.textproto";
  ASSERT_EQ(Exec(Bin("ari-sim"),
                 "gen --scenario summer-heat-soak --duration 3m --seed 2 -o " + log.string())
                .code,
            0);
  const std::string args = "--logs " + log.string() +
                           " --space config/tune_space.textproto --budget 2 -o " + out.string();
  CliRun proxy = Exec(Bin("ari-tune"), args);
  CliRun measured = Exec(Bin("ari-tune"), args + " --quality config/quality/stories260K.json");
  ASSERT_EQ(proxy.code, 0) << proxy.err;
  ASSERT_EQ(measured.code, 0) << measured.err;
  EXPECT_NE(proxy.out.find("quality term: proxy"), std::string::npos) << proxy.out;
  EXPECT_NE(measured.out.find("quality term: measured table"), std::string::npos) << measured.out;
  auto loss = [](const std::string& o) {
    const size_t at = o.find("start: ");
    const size_t q = o.find("quality loss ", at);
    return q == std::string::npos ? -1.0 : std::stod(o.substr(q + 13));
  };
  EXPECT_GT(loss(proxy.out), 0);
  EXPECT_GT(loss(measured.out), 0);
  EXPECT_NE(loss(proxy.out), loss(measured.out));
  CliRun bad = Exec(Bin("ari-tune"), args + " --quality config/tune_space.textproto");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("tune_space.textproto"), std::string::npos) << bad.err;
}

// --hardware: replay, compare and tune on a shipped head-unit profile; a profile file
// with an impossible value is refused naming its line.
TEST_F(ReplayCli, HardwareProfilesAndCompare) {
  const auto log = Tmp() / "jam.pb", json = Tmp() / "cmp.json", html = Tmp() / "cmp.html";
  ASSERT_EQ(Exec(Bin("ari-sim"),
                 "gen --scenario traffic-jam-heat --duration 10m --seed 1 -o " + log.string())
                .code,
            0);
  CliRun replay = Exec(Bin("ari-sim"), "replay --log " + log.string() +
                                           " --hardware a76-4gb --model 3b --policy "
                                           "config/policy_static_performance.textproto");
  ASSERT_EQ(replay.code, 0) << replay.err;
  EXPECT_NE(replay.out.find("hardware a76-4gb: throttled"), std::string::npos) << replay.out;
  CliRun cmp = Exec(Bin("ari-sim"), "compare --log " + log.string() +
                                        " --hardware a76-4gb --model 1.5b --json " + json.string() +
                                        " --html " + html.string());
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  for (const char* p : {"default", "static-performance", "static-eco"}) {
    EXPECT_NE(cmp.out.find(p), std::string::npos) << cmp.out;
  }
  EXPECT_NE(Slurp(json).find("\"format\":\"ari-sim-compare-1\""), std::string::npos);
  EXPECT_NE(Slurp(html).find("function tempPlot"), std::string::npos);
  EXPECT_EQ(Exec(Bin("ari-sim"), "compare --log " + log.string() + " --hardware no-such").code, 1);
  EXPECT_EQ(Exec(Bin("ari-sim"), "replay --log " + log.string() + " --model 1.5b").code, 2);
  // A broken copy of a shipped profile: the error names the file and the line.
  std::string text = Slurp(ari::testing::SourceDir() / "config" / "hardware" / "rpi5.textproto");
  const size_t at = text.find("memory_mb: 8192");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 15, "memory_mb: -8");
  const auto bad = Tmp() / "bad_board.textproto";
  std::ofstream(bad) << text;
  CliRun refused =
      Exec(Bin("ari-sim"), "replay --log " + log.string() + " --hardware " + bad.string());
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("bad_board.textproto:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(": memory_mb: must be > 0"), std::string::npos) << refused.err;
  CliRun tune =
      Exec(Bin("ari-tune"), "--logs " + log.string() + " --hardware a76-4gb --budget 3 -o " +
                                (Tmp() / "tuned_hw.textproto").string());
  ASSERT_EQ(tune.code, 0) << tune.err;
  EXPECT_NE(tune.out.find("hardware: a76-4gb, model 1.5b"), std::string::npos) << tune.out;
}

}  // namespace
}  // namespace ari::sim
