// Scenario generators: the per-scenario parameters and the assembly of a log.
#include "sim/scenarios.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <vector>

#include "sim/drive_log.h"
#include "sim/prompts.h"
#include "sim/scenario_models.h"

namespace ari::sim {
namespace {

using internal::Job;
using internal::Round1;
namespace pol = ari::policy;

// Prompt categories in generation order, with their request defaults.
struct CategorySpec {
  dl::PromptCategory category;
  pol::Urgency urgency;
  const char* client;
  uint32_t default_max_tokens;
  uint32_t deadline_lo_ms, deadline_hi_ms;  // 0, 0 = class default
};
constexpr std::array<CategorySpec, 5> kCategories = {{
    {dl::NAVIGATION, pol::CRITICAL, "nav", 48, 1500, 3000},
    {dl::VEHICLE_FUNCTIONS, pol::HIGH, "vehicle", 32, 3000, 5000},
    {dl::CHAT, pol::NORMAL, "assistant", 128, 0, 0},
    {dl::EXPLANATION, pol::NORMAL, "assistant", 160, 0, 0},
    {dl::SUMMARY, pol::BACKGROUND, "summarizer", 128, 0, 0},
}};
enum Cat { kNav = 0, kVehicle, kChat, kExplain, kSummary };

using Rates = std::array<double, 5>;  // requests per minute, by Cat

struct Spec {
  internal::DriveSpec drive;
  internal::MemorySpec memory;
  internal::SocSpec soc;
  std::function<double(double)> ambient;  // true ambient (C) at t (s)
  std::function<Rates(double)> rates;     // request rates at t (s)
  double chat_session_gap_s = 180;        // a pause this long starts a new conversation
  // Navigation answers sized for the scenario (0 = the prompt's / category default).
  uint32_t nav_max_tokens = 0;
  uint32_t nav_deadline_lo_ms = 0, nav_deadline_hi_ms = 0;
  std::vector<double> nav_times_s;  // one navigation request at each (re-routes)
};

// Windows [start, start + length) of navigation bursts.
std::vector<std::pair<double, double>> BurstWindows(uint64_t duration_ms, Prng& rng) {
  std::vector<std::pair<double, double>> w;
  const double end_s = static_cast<double>(duration_ms) / 1000.0;
  for (double t = rng.Uniform(60, 180); t < end_s; t += rng.Uniform(360, 600)) {
    w.emplace_back(t, 30.0);
  }
  return w;
}

Spec TrafficJamHeat(uint64_t duration_ms, Prng& layout) {
  Spec s;
  s.drive = {internal::DrivePattern::kCity, 10, false};  // stop-and-go
  s.soc = {52, 4.0};  // midday sun on the dashboard; A/C and cameras on
  s.ambient = [](double t) { return 40.0 + 5.0 * std::min(1.0, t / 1200.0); };  // 40 -> 45 C
  s.rates = [](double) { return Rates{0.1, 0.3, 0.5, 0.1, 0.0}; };              // a long chat runs
  // The navigation re-routes every 2.5..5 min: one prompt each.
  const double end_s = static_cast<double>(duration_ms) / 1000.0;
  for (double t = layout.Uniform(30, 90); t < end_s; t += layout.Uniform(150, 300)) {
    s.nav_times_s.push_back(t);
  }
  s.chat_session_gap_s = 600;
  // A re-route announcement ("Re-routing via the ring road, 6 minutes longer") is short;
  // in a jam the car is crawling, so it may take a few seconds.
  s.nav_max_tokens = 12;
  s.nav_deadline_lo_ms = 8000;
  s.nav_deadline_hi_ms = 12000;
  return s;
}

Spec MakeSpec(std::string_view name, uint64_t duration_ms, Prng& layout) {
  if (name == "traffic-jam-heat") return TrafficJamHeat(duration_ms, layout);
  Spec s;
  if (name == "city-commute") {
    s.drive = {internal::DrivePattern::kCity, 10, false};
    s.soc = {24, 2.0};
    s.ambient = [](double t) { return 18.0 + std::min(6.0, t / 600.0); };  // morning warms up
    s.rates = [](double t) {
      return t < 120 ? Rates{3.0, 1.0, 0.3, 0.1, 0.0} : Rates{0.6, 0.5, 0.8, 0.3, 0.2};
    };
  } else if (name == "summer-heat-soak") {
    s.drive = {internal::DrivePattern::kHighway, 10, false};
    s.soc = {55, 3.5};  // parked in the sun; A/C and cameras heat the ECU bay too
    s.ambient = [](double t) { return 45.0 + 0.3 * std::sin(t / 900.0); };
    s.rates = [](double) { return Rates{0.4, 0.4, 0.5, 0.2, 0.1}; };
    // A highway manoeuvre ("In 2 km, take exit 23 towards Lyon") is announced well before
    // the exit: a short answer that may take a few seconds (head-unit sized; the dev VM
    // meets it easily, a 4-8 tokens/s SoC only when the governor keeps a core free).
    s.nav_max_tokens = 12;
    s.nav_deadline_lo_ms = 8000;
    s.nav_deadline_hi_ms = 12000;
  } else if (name == "mountain-pass") {
    s.drive = {internal::DrivePattern::kMountain, 10, false};
    s.soc = {22, 2.5};
    s.ambient = [](double t) { return std::max(0.0, 20.0 - 0.5 * t / 60.0); };  // climbing
    s.rates = [](double) { return Rates{0.8, 0.4, 2.5, 1.0, 0.5}; };
  } else if (name == "cold-start") {
    s.drive = {internal::DrivePattern::kCity, 60, true};
    s.soc = {-15, 1.5};
    s.ambient = [](double t) { return 18.0 - 33.0 * std::exp(-t / 600.0); };  // cabin heater
    s.rates = [](double t) {
      return t < 180 ? Rates{2.0, 3.0, 0.2, 0.5, 0.0} : Rates{0.4, 0.4, 0.6, 0.5, 0.2};
    };
  } else if (name == "memory-squeeze") {
    s.drive = {internal::DrivePattern::kCity, 10, false};
    s.memory.squeeze = true;
    s.soc = {28, 2.0};
    s.ambient = [](double) { return 25.0; };
    s.rates = [](double) { return Rates{0.5, 0.4, 1.0, 0.4, 0.4}; };
  } else if (name == "nav-burst-during-chat") {
    s.drive = {internal::DrivePattern::kCity, 10, false};
    s.soc = {26, 2.0};
    s.ambient = [](double) { return 22.0; };
    auto bursts = BurstWindows(duration_ms, layout);
    s.rates = [bursts](double t) {
      double nav = 0.2;
      for (const auto& [b, len] : bursts) {
        if (t >= b && t < b + len) nav = 16.0;
      }
      return Rates{nav, 0.2, 3.0, 0.3, 0.2};
    };
    s.chat_session_gap_s = 300;
  }
  return s;
}

constexpr std::array<ScenarioInfo, 7> kScenarios = {{
    {"city-commute",
     "stop-and-go city drive, 18->24 C, destination burst at the start, mixed load"},
    {"summer-heat-soak", "highway at 45 C ambient, SoC soaked to 55 C and heating under load"},
    {"mountain-pass", "sustained chat/explanation load while the ambient falls 0.5 C/min to 0 C"},
    {"cold-start", "-15 C start, ignition sequence, cabin warming, early burst of requests"},
    {"memory-squeeze", "another app takes memory in waves (250..450 MB left) every few minutes"},
    {"nav-burst-during-chat",
     "continuous chat with 30 s bursts of navigation prompts every 6..10 min"},
    {"traffic-jam-heat",
     "stop-and-go jam at 40->45 C, navigation re-routes every 2.5..5 min during a long chat"},
}};

uint32_t PickDeadline(const CategorySpec& c, Prng& rng) {
  if (c.deadline_hi_ms == 0) return 0;
  const uint32_t steps = (c.deadline_hi_ms - c.deadline_lo_ms) / 100;
  return c.deadline_lo_ms + 100 * static_cast<uint32_t>(rng.Below(steps + 1));
}

// One request event of category c at t (s).
dl::Event RequestEvent(const Spec& spec, size_t c, double t, const dl::Prompt& prompt,
                       uint32_t deadline) {
  const CategorySpec& cs = kCategories[c];
  if (c == kNav && spec.nav_deadline_hi_ms > 0) {  // the category's range, rescaled
    deadline =
        spec.nav_deadline_lo_ms + (deadline - cs.deadline_lo_ms) *
                                      (spec.nav_deadline_hi_ms - spec.nav_deadline_lo_ms) /
                                      std::max<uint32_t>(1, cs.deadline_hi_ms - cs.deadline_lo_ms);
  }
  dl::Event e;
  e.set_t_ms(static_cast<uint64_t>(t * 1000.0));
  auto* r = e.mutable_request();
  r->set_client(cs.client);
  r->set_urgency(cs.urgency);
  r->set_prompt(prompt.text());
  r->set_max_tokens(c == kNav && spec.nav_max_tokens ? spec.nav_max_tokens
                    : prompt.max_tokens()            ? prompt.max_tokens()
                                                     : cs.default_max_tokens);
  r->set_deadline_ms(deadline);
  r->set_category(cs.category);
  r->set_response_format(prompt.response_format());
  return e;
}

// Poisson arrivals per category (thinning against the maximum rate), as events; plus the
// scenario's fixed navigation times.
Result<std::vector<dl::Event>> GenerateRequests(const Spec& spec, const dl::PromptSet& prompts,
                                                uint64_t duration_ms, uint64_t seed) {
  std::vector<dl::Event> out;
  const double end_s = static_cast<double>(duration_ms) / 1000.0;
  uint64_t next_session = 1;
  for (size_t c = 0; c < kCategories.size(); ++c) {
    const CategorySpec& cs = kCategories[c];
    double max_rate = 0;
    for (double t = 0; t <= end_s; t += 1.0) max_rate = std::max(max_rate, spec.rates(t)[c]);
    if (max_rate <= 0) continue;
    std::vector<const dl::Prompt*> pool;
    for (const auto& p : prompts.prompt()) {
      if (p.category() == cs.category) pool.push_back(&p);
    }
    if (pool.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "prompt set has no " + dl::PromptCategory_Name(cs.category) + " prompts");
    }
    Prng rng(SubSeed(seed, 100 + c));
    uint64_t session = 0;
    double last_chat_s = -1e9;
    for (double t = rng.Exponential(60.0 / max_rate); t <= end_s;
         t += rng.Exponential(60.0 / max_rate)) {
      const double accept = rng.Uniform();
      const dl::Prompt& prompt = *pool[rng.Below(pool.size())];
      const uint32_t deadline = PickDeadline(cs, rng);
      const bool new_conversation = rng.Bernoulli(0.15);
      if (accept * max_rate >= spec.rates(t)[c]) continue;
      dl::Event e = RequestEvent(spec, c, t, prompt, deadline);
      if (c == kChat) {
        if (session == 0 || new_conversation || t - last_chat_s > spec.chat_session_gap_s) {
          session = next_session++;
        }
        last_chat_s = t;
        e.mutable_request()->set_session_id(session);
      }
      out.push_back(std::move(e));
    }
    for (const double t : c == kNav ? spec.nav_times_s : std::vector<double>{}) {
      const dl::Prompt& prompt = *pool[rng.Below(pool.size())];
      out.push_back(RequestEvent(spec, c, t, prompt, PickDeadline(cs, rng)));
    }
  }
  return out;
}

// Streams derive from the seed and the scenario name (FNV-1a), so two
// scenarios with the same seed do not share noise.
uint64_t ScenarioSeed(std::string_view name, uint64_t seed) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 0x100000001B3ull;
  return h ^ seed;
}

// Ambient temperature every 10 s, with a slow random drift (sampled every second).
void GenerateAmbient(const Spec& spec, uint64_t duration, uint64_t seed,
                     std::vector<dl::Event>* events) {
  Prng ambient_rng(SubSeed(seed, 2));
  double drift = 0;
  for (uint64_t t_ms = 0; t_ms <= duration; t_ms += 1000) {
    drift = 0.98 * drift + ambient_rng.Normal(0, 0.03);
    if (t_ms % 10000 != 0) continue;
    dl::Event e;
    e.set_t_ms(t_ms);
    e.mutable_ambient_temperature()->set_celsius(
        Round1(spec.ambient(static_cast<double>(t_ms) / 1000.0) + drift));
    events->push_back(std::move(e));
  }
}

// The SoC's jobs (arrival, estimated compute seconds) from the requests, for its load.
std::vector<Job> JobsOf(const std::vector<dl::Event>& requests) {
  std::vector<Job> jobs;
  for (const auto& e : requests) {
    const auto& r = e.request();
    const double prefill_s = 0.002 * static_cast<double>(r.prompt().size()) / 4.0;
    jobs.push_back({static_cast<double>(e.t_ms()) / 1000.0, prefill_s + 0.040 * r.max_tokens()});
  }
  return jobs;
}

// The header and the events in time order, requests numbered from 1.
dl::DriveLog AssembleLog(const ScenarioInfo& info, const ScenarioOptions& options, const Spec& spec,
                         std::vector<dl::Event>& events) {
  dl::DriveLog log;
  dl::Header* h = log.mutable_header();
  h->set_vehicle("sim-sedan");
  h->set_soc("sim-soc (RC model defaults)");
  h->set_ambient_celsius(Round1(spec.ambient(0)));
  h->set_notes(std::string(info.description));
  h->set_scenario(std::string(info.name));
  h->set_seed(options.seed);
  h->set_duration_ms(options.duration_ms);
  h->set_generator("ari-sim gen (drive log v" + std::to_string(kDriveLogVersion) + ")");
  h->set_memory_total_bytes(8ull << 30);
  uint64_t next_id = 1;
  log.mutable_event()->Reserve(static_cast<int>(events.size()));
  for (auto& e : events) {
    if (e.has_request()) e.mutable_request()->set_request_id(next_id++);
    *log.add_event() = std::move(e);
  }
  return log;
}

}  // namespace

std::span<const ScenarioInfo> Scenarios() { return kScenarios; }

double ScenarioBasePowerW(std::string_view scenario) {
  for (const auto& info : kScenarios) {
    if (info.name == scenario) {
      Prng layout(0);
      return MakeSpec(info.name, 1000, layout).soc.base_power_w;
    }
  }
  return internal::SocSpec{}.base_power_w;
}

Result<dl::DriveLog> GenerateScenario(const ScenarioOptions& options) {
  const auto it = std::find_if(kScenarios.begin(), kScenarios.end(),
                               [&](const ScenarioInfo& s) { return s.name == options.scenario; });
  if (it == kScenarios.end()) {
    std::string names;
    for (const auto& s : kScenarios) names += (names.empty() ? "" : ", ") + std::string(s.name);
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown scenario '" + options.scenario + "' (known: " + names + ")");
  }
  if (options.duration_ms < 1000 || options.duration_ms > kMaxScenarioDurationMs) {
    return MakeError(ErrorCode::kInvalidArgument, "duration must be 1 s .. 24 h");
  }
  dl::PromptSet builtin;
  const dl::PromptSet* prompts = options.prompts;
  if (!prompts) {
    auto b = BuiltinPromptSet();
    if (!b) return std::unexpected(b.error());
    builtin = std::move(*b);
    prompts = &builtin;
  }
  const uint64_t seed = ScenarioSeed(it->name, options.seed);
  const uint64_t duration = options.duration_ms;
  Prng layout(SubSeed(seed, 0));
  const Spec spec = MakeSpec(it->name, duration, layout);

  // Streams in tie-break order; each has its own PRNG stream.
  std::vector<dl::Event> events;
  Prng vehicle_rng(SubSeed(seed, 1));
  internal::GenerateVehicle(spec.drive, duration, vehicle_rng, &events);
  GenerateAmbient(spec, duration, seed, &events);
  auto requests = GenerateRequests(spec, *prompts, duration, seed);
  if (!requests) return std::unexpected(requests.error());
  std::stable_sort(requests->begin(), requests->end(),
                   [](const dl::Event& a, const dl::Event& b) { return a.t_ms() < b.t_ms(); });
  const std::vector<Job> jobs = JobsOf(*requests);
  Prng soc_rng(SubSeed(seed, 3));
  if (auto soc = internal::GenerateSoc(spec.soc, spec.ambient, jobs, duration, soc_rng, &events);
      !soc) {
    return MakeError(ErrorCode::kInternal, "scenario SoC model: " + soc.error().message);
  }
  Prng memory_rng(SubSeed(seed, 4));
  internal::GenerateMemory(spec.memory, duration, memory_rng, &events);
  for (auto& e : *requests) events.push_back(std::move(e));
  std::stable_sort(events.begin(), events.end(),
                   [](const dl::Event& a, const dl::Event& b) { return a.t_ms() < b.t_ms(); });

  dl::DriveLog log = AssembleLog(*it, options, spec, events);
  if (auto v = ValidateDriveLog(log); !v) {
    return MakeError(ErrorCode::kInternal, "generated log is invalid: " + v.error().message);
  }
  return log;
}

Result<uint64_t> ParseDuration(std::string_view text) {
  if (text.empty()) return MakeError(ErrorCode::kInvalidArgument, "empty duration");
  double total_ms = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    double value = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || !std::isfinite(value) || value < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "bad duration '" + std::string(text) + "' (examples: 90s, 30m, 1h, 1h30m)");
    }
    rest.remove_prefix(static_cast<size_t>(ptr - rest.data()));
    double unit = 0;
    for (auto [suffix, ms] : {std::pair{"ms", 1.0}, std::pair{"s", 1e3}, std::pair{"m", 60e3},
                              std::pair{"h", 3600e3}}) {
      if (rest.starts_with(suffix)) {
        unit = ms;
        rest.remove_prefix(std::string_view(suffix).size());
        break;
      }
    }
    if (unit == 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "duration '" + std::string(text) + "' needs a unit: ms, s, m or h");
    }
    total_ms += value * unit;
  }
  if (total_ms < 1 || total_ms > 1e12) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "duration '" + std::string(text) + "' out of range");
  }
  return static_cast<uint64_t>(std::llround(total_ms));
}

}  // namespace ari::sim
