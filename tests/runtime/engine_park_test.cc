// Slot parking in the real engine (stories260K): a turn parked mid-prefill or mid-decode,
// another turn run in the freed slot, then resumed into another slot continues token for
// token as if never parked (sampled at a fixed seed, KV F16, F32, INT8 and an F16 slot
// converted to INT8 in place; the fp32 reference path too); full park areas and bad ids
// are error values; park + resume perform no heap allocation after warm-up.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/common/counting_allocator.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

const std::vector<TokenId> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 290, 300};
const std::vector<TokenId> kOther = {1, 320, 270, 402, 301};

struct Out {
  std::vector<TokenId> tokens;
  std::string text;
  StopReason stop = StopReason::kMaxTokens;
};

TurnSpec Turn(std::span<const TokenId> prompt, uint64_t seed) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 48;
  t.keep_context = false;
  t.sampling.temperature = 0.9f;
  t.sampling.top_k = 40;
  t.sampling.top_p = 0.95f;
  t.sampling.repeat_penalty = 1.1f;
  t.sampling.seed = seed;
  return t;
}

// The knobs of chunk c: `convert_at` >= 0 turns the INT8 knob on from that chunk.
ChunkKnobs Knobs(int c, KvType home, int convert_at) {
  ChunkKnobs k;
  k.prefill_tokens = 3;
  k.decode_tokens = 4;
  k.threads = 1;
  k.kv_type = convert_at >= 0 && c >= convert_at ? KvType::kInt8 : home;
  return k;
}

// Runs chunks of `slot` from chunk `c` until the turn finishes (or `until` chunks ran).
int RunChunks(Engine& e, int slot, int c, int until, KvType home, int convert_at, Out& out) {
  for (; c < until; ++c) {
    auto r = e.RunChunk(slot, Knobs(c, home, convert_at));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) return until;
    out.tokens.insert(out.tokens.end(), r->tokens.begin(), r->tokens.end());
    out.text += r->text;
    if (r->finished) {
      out.stop = r->stop_reason;
      return -1;
    }
  }
  return c;
}

Result<std::unique_ptr<Engine>> MakeEngine(const std::filesystem::path& path, KvType kv,
                                           bool reference, int park_areas = 1) {
  EngineOptions o;
  o.model_path = path;
  o.context_length = 256;
  o.threads = 1;
  o.kv_type = kv;
  o.park_areas = park_areas;
  o.plain_gguf = reference ? PlainGguf::kReference : PlainGguf::kAutoPack;
  return Engine::Create(o);
}

struct Case {
  std::string name;
  bool reference = false;
  KvType home = KvType::kF16;
  int convert_at = -1;  // chunk from which the INT8 knob is on
};

// Parks after `park_after` chunks, runs another turn in the freed slot 0 and in slot 1,
// resumes into slot 1 and finishes: the output equals the unparked run's.
void CheckParkResume(const Case& cs, const std::filesystem::path& path, int park_after) {
  SCOPED_TRACE(cs.name + " park after " + std::to_string(park_after));
  auto ref = MakeEngine(path, cs.home, cs.reference);
  ASSERT_TRUE(ref.has_value()) << ref.error().ToString();
  Out want;
  ASSERT_TRUE((*ref)->StartTurn(0, Turn(kPrompt, 7)).has_value());
  ASSERT_EQ(RunChunks(**ref, 0, 0, 1000, cs.home, cs.convert_at, want), -1);
  ASSERT_GT(want.tokens.size(), 8u);

  auto e = MakeEngine(path, cs.home, cs.reference);
  ASSERT_TRUE(e.has_value());
  Engine& eng = **e;
  Out got, other;
  ASSERT_TRUE(eng.StartTurn(0, Turn(kPrompt, 7)).has_value());
  const int c = RunChunks(eng, 0, 0, park_after, cs.home, cs.convert_at, got);
  ASSERT_EQ(c, park_after);
  const int32_t pos = eng.SlotPosition(0);
  const KvType kv = eng.SlotKvType(0);
  auto id = eng.ParkSlot(0);
  ASSERT_TRUE(id.has_value()) << id.error().ToString();
  EXPECT_EQ(eng.SlotPosition(0), 0);  // the slot is free
  // Other turns overwrite both slots' KV meanwhile.
  for (int slot : {0, 1}) {
    ASSERT_TRUE(eng.StartTurn(slot, Turn(kOther, 99)).has_value());
    ASSERT_EQ(RunChunks(eng, slot, 0, 1000, cs.home, -1, other), -1);
  }
  ASSERT_TRUE(eng.ResumeParked(*id, 1).has_value());
  EXPECT_EQ(eng.SlotPosition(1), pos);
  EXPECT_EQ(eng.SlotKvType(1), kv);
  ASSERT_EQ(RunChunks(eng, 1, c, 1000, cs.home, cs.convert_at, got), -1);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.stop, want.stop);
}

TEST(EnginePark, ResumedTurnContinuesTokenForToken) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  const Case cases[] = {
      {"F16", false, KvType::kF16, -1},
      {"INT8", false, KvType::kInt8, -1},
      {"F32", false, KvType::kF32, -1},
      {"F16 converted to INT8 at chunk 2", false, KvType::kF16, 2},
      {"reference fp32", true, KvType::kF16, -1},
  };
  for (const Case& cs : cases) {
    // Mid-prefill (10 prompt tokens in chunks of 3) and mid-decode.
    for (int park_after : {2, 7}) {
      CheckParkResume(cs, cs.reference ? mp.plain : mp.pack, park_after);
    }
  }
}

TEST(EnginePark, FullParkAreasAndBadIdsAreErrors) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = MakeEngine(mp.pack, KvType::kF16, false, 1);
  ASSERT_TRUE(e.has_value());
  Engine& eng = **e;
  EXPECT_EQ(eng.num_park_areas(), 1);
  auto idle = eng.ParkSlot(0);  // no turn in progress
  ASSERT_FALSE(idle.has_value());
  EXPECT_EQ(idle.error().code, ErrorCode::kInvalidArgument);
  Out out;
  for (int slot : {0, 1}) {
    ASSERT_TRUE(eng.StartTurn(slot, Turn(kPrompt, 3)).has_value());
    ASSERT_EQ(RunChunks(eng, slot, 0, 2, KvType::kF16, -1, out), 2);
  }
  auto a = eng.ParkSlot(0);
  ASSERT_TRUE(a.has_value());
  auto full = eng.ParkSlot(1);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kOutOfMemory);
  EXPECT_EQ(eng.SlotPosition(1), 6);  // a refused park leaves the slot's turn running
  ASSERT_EQ(RunChunks(eng, 1, 2, 3, KvType::kF16, -1, out), 3);
  EXPECT_FALSE(eng.ResumeParked(*a + 1, 0).has_value());
  EXPECT_FALSE(eng.ResumeParked(*a, 5).has_value());
  eng.DropParked(*a);  // abandoned: the area is free again
  EXPECT_FALSE(eng.ResumeParked(*a, 0).has_value());
  EXPECT_TRUE(eng.ParkSlot(1).has_value());
  auto none = MakeEngine(mp.pack, KvType::kF16, false, 0);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ((*none)->num_park_areas(), 0);
  ASSERT_TRUE((*none)->StartTurn(0, Turn(kPrompt, 3)).has_value());
  EXPECT_FALSE((*none)->ParkSlot(0).has_value());
}

// Park, resume into the other slot, continue, repeatedly: no heap allocation after the
// first cycle (packed F16 and INT8, and the reference path's Session swap).
TEST(EnginePark, NoHeapAllocationForParkAndResume) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  struct Variant {
    bool reference;
    KvType kv;
  };
  for (const Variant v :
       {Variant{false, KvType::kF16}, Variant{false, KvType::kInt8}, Variant{true, KvType::kF16}}) {
    auto e = MakeEngine(v.reference ? mp.plain : mp.pack, v.kv, v.reference, 2);
    ASSERT_TRUE(e.has_value());
    Engine& eng = **e;
    Out out;
    auto cycle = [&](int turns) {
      for (int t = 0; t < turns; ++t) {
        ASSERT_TRUE(eng.StartTurn(0, Turn(kPrompt, 5 + static_cast<uint64_t>(t))).has_value());
        int slot = 0, c = 0;
        while (c >= 0) {
          c = RunChunks(eng, slot, c, c + 2, v.kv, -1, out);
          if (c < 0) break;
          auto id = eng.ParkSlot(slot);
          ASSERT_TRUE(id.has_value());
          slot = 1 - slot;
          ASSERT_TRUE(eng.ResumeParked(*id, slot).has_value());
        }
      }
    };
    cycle(1);  // warm-up
    out = Out{};
    out.tokens.reserve(4096);
    out.text.reserve(1 << 16);
    testing::CountAllocations allocations;
    cycle(3);
    EXPECT_EQ(allocations.count(), 0) << (v.reference ? "reference" : "packed");
  }
}

}  // namespace
}  // namespace ari::runtime
