// A small drive log with every event kind, shared by the sim tests.
#pragma once

#include <string>

#include "idl/drive_log.pb.h"

namespace ari::sim::testing {

inline ari::drivelog::DriveLog SampleLog(int events = 24) {
  namespace dl = ari::drivelog;
  dl::DriveLog log;
  auto* h = log.mutable_header();
  h->set_vehicle("test-car");
  h->set_soc("test-soc");
  h->set_ambient_celsius(21.5);
  h->set_model("tiny.gguf");
  h->set_notes("unit test log, UTF-8: 45 °C");
  h->set_scenario("unit");
  h->set_seed(42);
  h->set_duration_ms(static_cast<uint64_t>(events) * 250 + 1000);
  h->set_memory_total_bytes(8ull << 30);
  uint64_t request_id = 1;
  for (int i = 0; i < events; ++i) {
    dl::Event* e = log.add_event();
    e->set_t_ms(static_cast<uint64_t>(i) * 250);
    switch (i % 6) {
      case 0: {
        auto* r = e->mutable_request();
        r->set_request_id(request_id++);
        r->set_client(i % 12 == 0 ? "nav" : "assistant");
        r->set_urgency(i % 12 == 0 ? ari::policy::CRITICAL : ari::policy::NORMAL);
        r->set_prompt("Prompt number " + std::to_string(i) + ": how far is the next charger?");
        r->set_max_tokens(32 + static_cast<uint32_t>(i));
        r->set_deadline_ms(i % 12 == 0 ? 2000 : 0);
        r->set_session_id(i % 12 == 0 ? 0 : 7);
        r->set_category(i % 12 == 0 ? dl::NAVIGATION : dl::CHAT);
        break;
      }
      case 1:
        e->mutable_soc_temperature()->set_celsius(50.0 + i * 0.1);
        e->mutable_soc_temperature()->set_sensor("soc-die");
        break;
      case 2: e->mutable_ambient_temperature()->set_celsius(21.5 - i * 0.05); break;
      case 3:
        e->mutable_memory_available()->set_bytes((2000ull + static_cast<uint64_t>(i)) << 20);
        break;
      case 4: {
        auto* c = e->mutable_cpu_frequency_cap()->add_clusters();
        c->set_cluster(1);
        c->set_name("big");
        c->set_max_khz(1600000);
        break;
      }
      case 5: {
        auto* v = e->mutable_vehicle_state();
        v->set_speed_kmh(40.0 + i);
        v->set_ignition(dl::IGNITION_ON);
        v->set_gear(dl::GEAR_DRIVE);
        break;
      }
    }
  }
  return log;
}

}  // namespace ari::sim::testing
