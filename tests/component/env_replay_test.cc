// Environment replay (ari/v2/sim_environment, sensor kind SENSOR_DDS_REPLAY): the source's
// fault states and staleness, the memory reading, delivery over DDS, and end to end with
// a real ari-node: a node configured for it takes the replayed temperature and memory;
// a node configured otherwise has no reader for the topic and ignores it.
#include "component/node/env_replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"
#include "thermal/clock.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using component::EnvReplay;
using component::EnvReplayOptions;
using namespace std::chrono_literals;

ari_SimEnvironment Sample(float celsius, uint64_t memory = 0) {
  ari_SimEnvironment s{};
  dds::CopyFixed("test", s.source_id);
  s.soc_temperature_c = celsius;
  s.ambient_c = 30;
  s.memory_available_bytes = memory;
  return s;
}

TEST(EnvReplaySource, StatesAndStaleness) {
  thermal::ManualClock clock(1'000'000'000);
  EnvReplayOptions o;
  o.clock = &clock;
  o.max_age_ns = 1'000'000'000;
  o.memory_fallback = false;
  EnvReplay env(o);
  auto src = env.TemperatureSource();
  EXPECT_EQ(src->Read().state, thermal::SensorState::kNoSensor);  // nothing received yet
  EXPECT_FALSE(env.Memory().has_value());

  env.Apply(Sample(NAN));  // the simulator has no temperature yet
  EXPECT_NE(src->Read().state, thermal::SensorState::kOk);

  env.Apply(Sample(45.5f, 300'000'000));
  auto r = src->Read();
  EXPECT_EQ(r.state, thermal::SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 45.5);
  EXPECT_EQ(r.source, "dds-replay");
  ASSERT_TRUE(env.Memory().has_value());
  EXPECT_EQ(env.Memory()->available_bytes, 300'000'000u);

  clock.AdvanceSeconds(0.5);
  EXPECT_EQ(src->Read().state, thermal::SensorState::kOk);
  clock.AdvanceSeconds(1.0);  // 1.5 s since the last sample > max age 1 s
  EXPECT_EQ(src->Read().state, thermal::SensorState::kStale);
  EXPECT_FALSE(env.Memory().has_value());  // stale memory: unknown

  env.Apply(Sample(200.0f));  // out of range
  EXPECT_EQ(src->Read().state, thermal::SensorState::kInvalid);
  env.Apply(Sample(91.0f));
  EXPECT_EQ(src->Read().state, thermal::SensorState::kOk);
  EXPECT_FALSE(env.Memory().has_value());  // memory 0 = unknown, no fallback monitor
  EXPECT_EQ(env.Latest().samples, 4u);
}

TEST(EnvReplaySource, ReceivesOverDds) {
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto domain = dds::Domain::Create(d);
  ASSERT_TRUE(domain.has_value()) << domain.error().ToString();
  std::mutex mu;
  std::condition_variable cv;
  float last = 0;
  EnvReplayOptions o;
  o.memory_fallback = false;
  o.on_sample = [&](const component::EnvSnapshot& e) {
    std::lock_guard<std::mutex> l(mu);
    last = static_cast<float>(e.soc_celsius);
    cv.notify_all();
  };
  EnvReplay env(o);
  ASSERT_TRUE(env.Start(*domain).has_value());
  auto pp = dds::Participant::Create(*domain);
  ASSERT_TRUE(pp.has_value());
  auto topic = dds::Topic::Create(*pp, dds::TopicKind::kSimEnvironment);
  ASSERT_TRUE(topic.has_value());
  auto writer = dds::Writer::Create(*pp, *topic);
  ASSERT_TRUE(writer.has_value());
  // Publish until the sample arrived (the reader may match a little later); each wait
  // is on the condition variable the receive thread signals.
  bool got = false;
  for (int i = 0; i < 100 && !got; ++i) {
    ari_SimEnvironment s = Sample(77.0f, 123'000'000);
    ASSERT_TRUE(writer->Write(&s).has_value());
    std::unique_lock<std::mutex> l(mu);
    got = cv.wait_for(l, 100ms, [&] { return last == 77.0f; });
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(env.TemperatureSource()->Read().state, thermal::SensorState::kOk);
  EXPECT_EQ(env.Memory()->available_bytes, 123'000'000u);
  env.Stop();
}

// A node process with the given sensor line; the test's own domain and loopback config.
class EnvNode : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("env_replay");
    model_ = Stories260K(dir_);
    if (model_.empty()) {
      GTEST_SKIP() << "stories260K absent under " << ModelsDir();
    }
  }
  void TearDown() override {
    if (node_) {
      EXPECT_EQ(node_->Stop(SIGTERM), 0) << node_->Log();
    }
    node_.reset();
    client_.reset();
    writer_.reset();
    topic_.reset();
    pp_.reset();
    domain_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartNode(const std::string& sensor_line) {
    auto cfg = WriteNodeConfig(dir_, model_);
    std::ifstream in(cfg);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const std::string from = "sensor { kind: SENSOR_NONE }";
    text.replace(text.find(from), from.size(), sensor_line);
    std::ofstream(cfg) << text;
    node_ = std::make_unique<NodeProcess>();
    ASSERT_TRUE(node_->Start(cfg, dir_ / "node.log"));
    dds::DomainOptions d;
    d.domain_id = static_cast<uint32_t>(TestDomainId());
    d.config = LoopbackConfigUri();
    auto dom = dds::Domain::Create(d);
    ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
    domain_ = *dom;
    component::ClientOptions co;
    co.client_id = "env-test";
    co.node_timeout = 20s;
    auto c = component::Client::Connect(domain_, co);
    ASSERT_TRUE(c.has_value());
    client_ = std::move(*c);
    ASSERT_TRUE(client_->WaitForNode(20s).has_value()) << node_->Log();
    auto pp = dds::Participant::Create(domain_);
    ASSERT_TRUE(pp.has_value());
    pp_ = std::make_unique<dds::Participant>(std::move(*pp));
    auto t = dds::Topic::Create(*pp_, dds::TopicKind::kSimEnvironment);
    ASSERT_TRUE(t.has_value());
    topic_ = std::make_unique<dds::Topic>(std::move(*t));
    auto w = dds::Writer::Create(*pp_, *topic_);
    ASSERT_TRUE(w.has_value());
    writer_ = std::make_unique<dds::Writer>(std::move(*w));
  }
  // One short request (the node's scheduler reads its sensors when it steps).
  void Ask() {
    component::AskParams a;
    a.prompt = "Once upon a time";
    a.max_tokens = 2;
    auto s = client_->Ask(a);
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    auto r = s->Wait({}, 20s);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
  }

  std::filesystem::path dir_, model_;
  std::unique_ptr<NodeProcess> node_;
  std::shared_ptr<dds::Domain> domain_;
  std::unique_ptr<component::Client> client_;
  std::unique_ptr<dds::Participant> pp_;
  std::unique_ptr<dds::Topic> topic_;
  std::unique_ptr<dds::Writer> writer_;
};

TEST_F(EnvNode, ConfiguredNodeUsesReplayedTemperatureAndMemory) {
  StartNode("sensor { kind: SENSOR_DDS_REPLAY dds_replay_max_age_ms: 5000 }");
  bool seen = false;
  for (int i = 0; i < 40 && !seen; ++i) {
    ari_SimEnvironment s = Sample(88.0f, 150'000'000);
    ASSERT_TRUE(writer_->Write(&s).has_value());
    Ask();
    seen = client_
               ->WaitForNode(300ms,
                             [](const ari_NodeStatus& st) {
                               return std::fabs(st.temperature_c - 88.0f) < 0.01f &&
                                      st.memory_available_bytes == 150'000'000u;
                             })
               .has_value();
  }
  EXPECT_TRUE(seen) << node_->Log();
  const auto view = client_->Node();
  ASSERT_TRUE(view.status.has_value());
  EXPECT_EQ(view.status->sensor_state, ari_SENSOR_SIMULATED);
  EXPECT_NE(std::string(dds::FixedView(view.status->reason)).find("band hot"), std::string::npos)
      << dds::FixedView(view.status->reason);
  EXPECT_GE(writer_->MatchedReaders().value_or(0), 1u);
  EXPECT_NE(node_->Log().find("SENSOR_DDS_REPLAY"), std::string::npos);
}

TEST_F(EnvNode, UnconfiguredNodeIgnoresTheTopic) {
  StartNode("sensor { kind: SENSOR_NONE }");
  for (int i = 0; i < 5; ++i) {
    ari_SimEnvironment s = Sample(88.0f, 150'000'000);
    ASSERT_TRUE(writer_->Write(&s).has_value());
    Ask();  // a completed request: discovery has long finished, the node has stepped
  }
  auto st = client_->WaitForNode(5s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(std::isnan(st->temperature_c)) << st->temperature_c;
  EXPECT_EQ(st->sensor_state, ari_SENSOR_MISSING);
  EXPECT_NE(st->memory_available_bytes, 150'000'000u);
  EXPECT_EQ(writer_->MatchedReaders().value_or(99), 0u);  // no reader for the topic at all
}

}  // namespace
}  // namespace ari::testing
