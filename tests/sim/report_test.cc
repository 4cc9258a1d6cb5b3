// Replay report: JSON content, HTML page, and the page rendered in headless Chromium
// (skipped when /usr/bin/chromium is absent).
#include "sim/report.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "sim/cost_model.h"
#include "sim/scenarios.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

namespace pb = google::protobuf;

ReplayReport MakeReport() {
  ScenarioOptions so;
  so.scenario = "nav-burst-during-chat";
  so.duration_ms = uint64_t{5} * 60 * 1000;
  so.seed = 2;
  auto log = GenerateScenario(so);
  EXPECT_TRUE(log.has_value());
  auto policy =
      qos::LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  EXPECT_TRUE(policy.has_value());
  auto cost = BuiltinCostModel();
  EXPECT_TRUE(cost.has_value());
  ReplayOptions o;
  o.policy = &*policy;
  o.cost = &*cost;
  auto r = ReplayModel(*log, o);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  r->log_name = "burst </script> \"test\".pb";  // must not break the page
  return *r;
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Report, JsonIsValidAndComplete) {
  const ReplayReport r = MakeReport();
  const std::string json = ReportToJson(r);
  pb::Value v;
  ASSERT_TRUE(pb::util::JsonStringToMessage(json, &v).ok());
  const auto& f = v.struct_value().fields();
  for (const char* k : {"summary", "classes", "requests", "samples", "decisions", "bands"}) {
    EXPECT_TRUE(f.contains(k)) << k;
  }
  EXPECT_EQ(f.at("classes").list_value().values_size(), 4);
  EXPECT_EQ(static_cast<size_t>(f.at("requests").list_value().values_size()), r.requests.size());
  const auto& req0 = f.at("requests").list_value().values(0).struct_value().fields();
  for (const char* k :
       {"queue_wait_s", "ttft_s", "completion_s", "deadline_s", "decisions", "status"}) {
    EXPECT_TRUE(req0.contains(k)) << k;
  }
  EXPECT_EQ(f.at("log").string_value(), r.log_name);
  EXPECT_NE(ReportToText(r).find("CRITICAL"), std::string::npos);
}

TEST(Report, HtmlIsSelfContained) {
  const std::string html = ReportToHtml(MakeReport());
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  // Exactly one script block: the data cannot close it early.
  size_t n = 0;
  for (size_t p = html.find("</script"); p != std::string::npos; p = html.find("</script", p + 1))
    ++n;
  EXPECT_EQ(n, 1u);
  EXPECT_NE(html.find("document.title = \"ok\""), std::string::npos);
}

int RunShell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Report, RendersInHeadlessChromium) {
  const std::filesystem::path chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) {
    GTEST_SKIP() << "/usr/bin/chromium not installed (Debian package 'chromium'): browser "
                    "rendering of the report not checked";
  }
  const auto dir = ari::testing::TempDir("sim_report_html");
  const auto page = dir / "report.html", blank = dir / "blank.html";
  std::ofstream(page) << ReportToHtml(MakeReport());
  std::ofstream(blank) << "<!DOCTYPE html><html><head><title>ok</title></head><body></body></html>";
  // No network: a dead proxy and no name resolution; a private profile directory.
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
  ASSERT_EQ(shot(page, dir / "report.png"), 0);
  ASSERT_EQ(shot(blank, dir / "blank.png"), 0);
  const std::string png = Slurp(dir / "report.png"), blank_png = Slurp(dir / "blank.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  // Non-blank: plots and text compress far worse than an empty page of the same size.
  EXPECT_GT(png.size(), 3 * blank_png.size()) << png.size() << " vs blank " << blank_png.size();
  // No script error: the page sets its title to "ok" only after drawing every plot.
  const auto dom = dir / "dom.html";
  ASSERT_EQ(RunShell(chromium.string() + " " + flags + " --dump-dom file://" + page.string() +
                     " >" + dom.string() + " 2>/dev/null"),
            0);
  const std::string d = Slurp(dom);
  EXPECT_NE(d.find("<title>ok</title>"), std::string::npos) << d.substr(0, 400);
}

// Without a browser: runs the page's script under Node.js with a stub DOM (canvas calls
// recorded, non-finite coordinates rejected), so script errors are still caught.
TEST(Report, ScriptRunsWithStubDom) {
  const std::filesystem::path node = "/usr/bin/node";
  if (!std::filesystem::exists(node)) GTEST_SKIP() << "/usr/bin/node not installed";
  const auto dir = ari::testing::TempDir("sim_report_node");
  const auto page = dir / "report.html", stub = dir / "stub.js", out = dir / "out.txt";
  std::ofstream(page) << ReportToHtml(MakeReport());
  std::ofstream(stub) << R"JS(
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const m = /<script>([\s\S]*)<\/script>/.exec(html);
let ops = 0;
const ctx = new Proxy({}, {
  get: (t, k) => (k in t ? t[k] : (typeof k === 'string' && /^[a-z]/.test(k) ? (...a) => {
    ops++;
    for (const x of a) if (typeof x === 'number' && !isFinite(x)) throw new Error('non-finite argument to ' + k);
  } : undefined)),
  set: (t, k, v) => { t[k] = v; return true; }});
const els = {};
global.document = { title: 'drawing', getElementById: id =>
  (els[id] = els[id] || {width: 1100, height: 300, innerHTML: '', getContext: () => ctx}) };
global.window = {};
try { eval(m[1]); } catch (e) { document.title = 'error: ' + e.message; }
console.log(document.title + ' ' + ops);
)JS";
  ASSERT_EQ(RunShell(node.string() + " " + stub.string() + " " + page.string() + " >" +
                     out.string() + " 2>&1"),
            0);
  const std::string result = Slurp(out);
  EXPECT_EQ(result.rfind("ok ", 0), 0u) << result;
  EXPECT_GT(std::atoi(result.c_str() + 3), 1000) << result;  // the plots drew something
}

}  // namespace
}  // namespace ari::sim
