// Parked turns on disk in the real engine (stories260K pack): a turn parked mid-decode is
// offloaded (OffloadParked: its KV rows and history written as a ".kvpark" file in the
// spill folder, the area's KV pages released), other turns run in both slots, and the
// resumed turn continues token for token as if never parked (sampled at a fixed seed, F16
// and INT8 KV). A corrupt or missing file makes the resume an error value (the turn
// cannot continue; nothing wrong is produced); without a spill folder the turn stays in
// RAM (kUnsupported) and resumes as usual. Free areas' pages are handed back on request.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;

const std::vector<TokenId> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 290, 300};
const std::vector<TokenId> kOther = {1, 320, 270, 402, 301};

TurnSpec Turn(std::span<const TokenId> prompt, uint64_t seed) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 48;
  t.sampling.temperature = 0.9f;
  t.sampling.top_k = 40;
  t.sampling.seed = seed;
  return t;
}

ChunkKnobs Knobs(KvType kv) {
  ChunkKnobs k;
  k.prefill_tokens = 4;
  k.decode_tokens = 4;
  k.threads = 1;
  k.kv_type = kv;
  return k;
}

// Runs `slot` for at most `chunks` chunks (-1: to the end); the tokens.
std::vector<TokenId> RunSlot(Engine& e, int32_t slot, KvType kv, int chunks = -1) {
  std::vector<TokenId> out;
  for (int c = 0; chunks < 0 || c < chunks; ++c) {
    auto r = e.RunChunk(slot, Knobs(kv));
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

std::unique_ptr<Engine> Make(const fs::path& pack, KvType kv, const fs::path& dir) {
  EngineOptions o;
  o.model_path = pack;
  o.context_length = 256;
  o.threads = 1;
  o.kv_type = kv;
  o.park_areas = 2;
  o.spill.dir = dir;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  return e ? std::move(*e) : nullptr;
}

std::vector<fs::path> ParkFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    if (f.path().extension() == ".kvpark") files.push_back(f.path());
  }
  return files;
}

TEST(EngineParkDisk, OffloadedTurnContinuesTokenForToken) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (KvType kv : {KvType::kF16, KvType::kInt8}) {
    SCOPED_TRACE(kv == KvType::kF16 ? "F16" : "INT8");
    const fs::path dir = ari::testing::TempDir("park_disk") / (kv == KvType::kF16 ? "f16" : "i8");
    auto ref = Make(mp.pack, kv, {});
    ASSERT_TRUE(ref);
    ASSERT_TRUE(ref->StartTurn(0, Turn(kPrompt, 7)).has_value());
    const std::vector<TokenId> want = RunSlot(*ref, 0, kv);
    ASSERT_GT(want.size(), 12u);

    auto e = Make(mp.pack, kv, dir);
    ASSERT_TRUE(e);
    ASSERT_TRUE(e->StartTurn(0, Turn(kPrompt, 7)).has_value());
    std::vector<TokenId> got = RunSlot(*e, 0, kv, 6);  // mid-decode
    auto id = e->ParkSlot(0);
    ASSERT_TRUE(id.has_value()) << id.error().ToString();
    auto n = e->OffloadParked(*id);
    ASSERT_TRUE(n.has_value()) << n.error().ToString();
    EXPECT_GT(*n, 0u);
    EXPECT_EQ(ParkFiles(dir).size(), 1u);
    auto again = e->OffloadParked(*id);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, 0u);                     // already on disk
    EXPECT_GT(e->ReleaseFreeParkAreas(), 0u);  // the second area holds no turn
    for (int32_t slot : {0, 1}) {              // other turns overwrite both slots meanwhile
      ASSERT_TRUE(e->StartTurn(slot, Turn(kOther, 99)).has_value());
      EXPECT_FALSE(RunSlot(*e, slot, kv).empty());
    }
    ASSERT_TRUE(e->ResumeParked(*id, 1).has_value());
    EXPECT_TRUE(ParkFiles(dir).empty());  // read back and deleted
    const std::vector<TokenId> rest = RunSlot(*e, 1, kv);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, want);
    EXPECT_EQ(e->Counters().parks_offloaded, 1u);
    EXPECT_EQ(e->Counters().parks_reloaded, 1u);
    EXPECT_EQ(e->Counters().spills, 0u);  // not counted as sessions
    fs::remove_all(dir);
  }
}

TEST(EngineParkDisk, CorruptOrMissingFileIsAnErrorNotWrongText) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  const fs::path dir = ari::testing::TempDir("park_disk_bad");
  auto e = Make(mp.pack, KvType::kF16, dir);
  ASSERT_TRUE(e);
  for (bool remove : {false, true}) {
    ASSERT_TRUE(e->StartTurn(0, Turn(kPrompt, 7)).has_value());
    RunSlot(*e, 0, KvType::kF16, 6);
    auto id = e->ParkSlot(0);
    ASSERT_TRUE(id.has_value());
    ASSERT_TRUE(e->OffloadParked(*id).has_value());
    const auto files = ParkFiles(dir);
    ASSERT_EQ(files.size(), 1u);
    if (remove) {
      fs::remove(files[0]);
    } else {
      std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(100);
      f.put('\x5a');
    }
    auto r = e->ResumeParked(*id, 0);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kIo);
    EXPECT_NE(r.error().message.find("cannot be read back"), std::string::npos)
        << r.error().message;
    e->DropParked(*id);  // the scheduler abandons the turn (FAILED)
    EXPECT_TRUE(ParkFiles(dir).empty());
  }
  fs::remove_all(dir);
}

TEST(EngineParkDisk, WithoutSpillFolderTheTurnStaysInRam) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  auto e = Make(mp.pack, KvType::kF16, {});
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->StartTurn(0, Turn(kPrompt, 7)).has_value());
  std::vector<TokenId> got = RunSlot(*e, 0, KvType::kF16, 6);
  auto id = e->ParkSlot(0);
  ASSERT_TRUE(id.has_value());
  auto n = e->OffloadParked(*id);
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.error().code, ErrorCode::kUnsupported);
  ASSERT_TRUE(e->ResumeParked(*id, 0).has_value());
  EXPECT_FALSE(RunSlot(*e, 0, KvType::kF16).empty());
}

}  // namespace
}  // namespace ari::runtime
