// ari-sim end to end: gen, cat, stats, error messages and exit codes.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/drive_log.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

struct CliRun {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::filesystem::path Tool() {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  return std::filesystem::path(bin ? bin : ".") / "sim" / "ari-sim";
}

std::filesystem::path Tmp() {
  static const auto dir = ari::testing::TempDir("sim_cli");
  return dir;
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun Exec(const std::string& args) {
  const auto out = Tmp() / "stdout.txt", err = Tmp() / "stderr.txt";
  const std::string cmd = Tool().string() + " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

class SimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Tool())) GTEST_SKIP() << "ari-sim not built at " << Tool();
  }
};

TEST_F(SimCli, GenCatStats) {
  const auto pb = Tmp() / "heat.pb", txt = Tmp() / "heat.textproto";
  CliRun gen = Exec("gen --scenario summer-heat-soak --duration 5m --seed 9 -o " + pb.string() +
                    " --text " + txt.string());
  ASSERT_EQ(gen.code, 0) << gen.err;
  EXPECT_NE(gen.err.find("events"), std::string::npos) << gen.err;
  auto bin = ReadDriveLog(pb);
  auto text = ReadDriveLogText(txt);
  ASSERT_TRUE(bin && text);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*bin, *text));
  EXPECT_EQ(bin->header().duration_ms(), 300000u);

  CliRun cat = Exec("cat " + pb.string());
  ASSERT_EQ(cat.code, 0) << cat.err;
  EXPECT_EQ(cat.out, Slurp(txt));  // cat prints exactly the text form

  CliRun stats = Exec("stats " + pb.string());
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find("summer-heat-soak (seed 9)"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("soc_temperature     301"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("urgency CRITICAL"), std::string::npos) << stats.out;
  CliRun stats_text = Exec("stats " + txt.string());
  EXPECT_EQ(stats_text.code, 0);
  EXPECT_EQ(stats_text.out, stats.out);
}

TEST_F(SimCli, CatReportsAndSkipsCorruptRecords) {
  const auto pb = Tmp() / "city.pb";
  ASSERT_EQ(Exec("gen --scenario city-commute --duration 90s -o " + pb.string()).code, 0);
  std::string bytes = Slurp(pb);
  const size_t at = bytes.size() / 2;
  bytes[at] = static_cast<char>(bytes[at] ^ 0xFF);
  const auto bad = Tmp() / "city-bad.pb";
  std::ofstream(bad, std::ios::binary) << bytes;
  CliRun cat = Exec("cat " + bad.string());
  EXPECT_EQ(cat.code, 3);
  EXPECT_NE(cat.err.find("corrupt record at offset "), std::string::npos) << cat.err;
  EXPECT_NE(cat.out.find("# corrupt record skipped: offset "), std::string::npos);
  CliRun stats = Exec("stats " + bad.string());
  EXPECT_EQ(stats.code, 3);
  EXPECT_NE(stats.out.find("CORRUPT records       1 ("), std::string::npos) << stats.out;
}

TEST_F(SimCli, ErrorsAreOneLineWithExitCodes) {
  struct Case {
    std::string args;
    int code;
    std::string expect;
  };
  const Case cases[] = {
      {"", 2, "usage: ari-sim"},
      {"fly", 2, "unknown command 'fly'"},
      {"gen --duration 1h -o x.pb", 2, "--scenario NAME is required"},
      {"gen --scenario nowhere -o " + (Tmp() / "x.pb").string(), 1, "unknown scenario 'nowhere'"},
      {"gen --scenario cold-start --duration 5 -o x.pb", 2, "needs a unit"},
      {"gen --scenario cold-start --seed -3 -o x.pb", 2, "bad --seed"},
      {"gen --scenario cold-start --colour red", 2, "unknown option --colour"},
      {"gen --scenario cold-start", 2, "give -o"},
      {"cat", 2, "usage: ari-sim cat LOG"},
      {"cat /nonexistent/log.pb", 1, "cannot open /nonexistent/log.pb"},
      {"stats " + (ari::testing::SourceDir() / "sim" / "prompts.textproto").string(), 1,
       "no field named"},
  };
  for (const auto& c : cases) {
    CliRun r = Exec(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
    if (c.code != 2 || !c.args.empty()) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << "\n" << r.err;
    }
  }
}

}  // namespace
}  // namespace ari::sim
