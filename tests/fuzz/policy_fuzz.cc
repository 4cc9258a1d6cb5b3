// libFuzzer target: the QoS policy parser (protobuf text format + validation) on
// arbitrary text. A policy that parses must survive the round trip to text and back.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "qos/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = ari::qos::ParsePolicyText(text, "fuzz.textproto");
  static const bool verbose = std::getenv("ARI_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "policy_fuzz: %s\n",
                 policy ? ("ok: " + policy->name).c_str() : policy.error().ToString().c_str());
  }
  if (!policy) {
    if (policy.error().message.empty()) __builtin_trap();  // errors must say what is wrong
    return 0;
  }
  // Everything a valid policy offers to its users must be safe to call.
  for (size_t band = 0; band < policy->knobs.size(); ++band) {
    for (ari::qos::Urgency u : ari::qos::kAllUrgencies) {
      char buf[160];
      ari::qos::FormatKnobs(policy->KnobsFor(u, band), buf, sizeof(buf));
      (void)ari::qos::KnobsToString(policy->KnobsFor(u, band));
    }
  }
  for (const auto& band : policy->thermal_bands) {
    if (policy->ThermalBandIndex(band.name) < 0) __builtin_trap();
  }
  // Round trip: the text the tuner would write is accepted again and means the same.
  const std::string text2 = ari::qos::PolicyToText(*policy);
  auto again = ari::qos::ParsePolicyText(text2, "roundtrip");
  if (!again) __builtin_trap();
  if (again->knobs != policy->knobs || again->conservative != policy->conservative) {
    __builtin_trap();
  }
  return 0;
}
