// Scoring through the packed forward pass (runtime/eval/packed_scorer.h, quality_table.h,
// FastForward::RunAllLogits) on stories260K: a pack at W8A16 drop 0 scores the held-out text
// like the fp32 reference path on the plain file; layer drop skips the reference's blocks;
// a file of the wrong kind is refused by the library and by the tools.
#include "runtime/eval/packed_scorer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>

#include "runtime/core/thread_pool.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/eval/layer_calibration.h"
#include "runtime/eval/perplexity.h"
#include "runtime/eval/quality_table.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"

namespace ari::runtime {
namespace {

// W8A16 at drop 0 against the fp32 reference: perplexity within 1% (measured 0.13% on
// tests/data/evaluation.txt), top-1 agreement at least 95% (measured 98.7%).
constexpr double kPackVsReferencePplRelTol = 0.01;
constexpr double kPackVsReferenceMinTop1 = 0.95;
// All-position logits against Run()'s last-token logits (GEMM vs GEMV accumulation).
constexpr float kAllLogitsTol = 2e-3f;

PerplexityOptions Window256(std::vector<int32_t> skip = {}) {
  PerplexityOptions o;
  o.window = 256;
  o.skip_layers = std::move(skip);
  return o;
}

ScorerOptions Scorer(int threads = 1) {
  ScorerOptions o;
  o.window = 256;
  o.threads = threads;
  return o;
}

std::vector<TokenId> Tokenize(const Model& m, const char* rel, size_t max) {
  std::ifstream f(testing::SourceDir() / rel);
  std::stringstream ss;
  ss << f.rdbuf();
  auto ids = m.tokenizer()->Encode(ss.str(), EncodeOptions{});
  if (!ids) return {};
  if (ids->size() > max) ids->resize(max);
  return *ids;
}

class PackedStories : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ck = testing::ModelFile("llama2c/stories260K/stories260K.bin");
    const auto tk = testing::ModelFile("llama2c/stories260K/tok512.bin");
    if (ck.empty() || tk.empty())
      GTEST_SKIP() << "stories260K not found under " << testing::ModelsDir();
    auto mem = testing::ConvertAndLoad(ck, tk);
    ASSERT_TRUE(mem) << mem.error().ToString();
    dir_ = testing::TempDir("packed_scorer");
    plain_path_ = dir_ / "s.gguf";
    pack_path_ = dir_ / "s.pack.gguf";
    {
      const auto bytes = (*mem)->file().bytes();
      std::ofstream out(plain_path_, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      ASSERT_TRUE(out.good());
    }
    const auto calib = Tokenize(**mem, "tests/data/calibration.txt", 600);
    ASSERT_GT(calib.size(), 500u) << "tests/data/calibration.txt missing";
    auto imp = CalibrateLayerImportance(**mem, calib, CalibrationOptions{256});
    ASSERT_TRUE(imp) << imp.error().ToString();
    importance_ = *imp;
    PackOptions po;
    po.layer_importance = importance_;
    ASSERT_TRUE(WritePack(plain_path_, pack_path_, po));
    auto plain = Model::Load(plain_path_);
    auto pack = Model::Load(pack_path_);
    ASSERT_TRUE(plain && pack);
    plain_ = std::move(*plain);
    pack_ = std::move(*pack);
    eval_ = Tokenize(*plain_, "tests/data/evaluation.txt", 700);
    ASSERT_GT(eval_.size(), 600u) << "tests/data/evaluation.txt missing";
  }
  std::filesystem::path dir_, plain_path_, pack_path_;
  std::vector<float> importance_;
  std::unique_ptr<Model> plain_, pack_;
  std::vector<TokenId> eval_;
};

TEST_F(PackedStories, W8A16Drop0MatchesReferencePerplexity) {
  auto ref = ComputePerplexity(*plain_, eval_, Window256());
  ASSERT_TRUE(ref) << ref.error().ToString();
  auto sc = PackedScorer::Create(*pack_, Scorer());
  ASSERT_TRUE(sc) << sc.error().ToString();
  auto w8 = ComputePackedPerplexity(**sc, eval_, kernels::PackedPrecision::kW8);
  ASSERT_TRUE(w8) << w8.error().ToString();
  EXPECT_EQ(w8->predictions, ref->predictions);
  EXPECT_NEAR(w8->perplexity, ref->perplexity, kPackVsReferencePplRelTol * ref->perplexity);
  EXPECT_GE(Top1Agreement(ref->top1, w8->top1), kPackVsReferenceMinTop1);
  // W4A8 really computes something else (and stays a usable model).
  auto w4 = ComputePackedPerplexity(**sc, eval_, kernels::PackedPrecision::kW4);
  ASSERT_TRUE(w4);
  EXPECT_NE(w4->perplexity, w8->perplexity);
  EXPECT_LT(w4->perplexity, 2 * ref->perplexity);
}

TEST_F(PackedStories, DropLevelSkipsTheReferencesBlocks) {
  auto sc = PackedScorer::Create(*pack_, Scorer(2));
  ASSERT_TRUE(sc);
  EXPECT_EQ((*sc)->max_drop_level(), 3);
  auto blocks = (*sc)->SetDropLevel(1);
  ASSERT_TRUE(blocks) << blocks.error().ToString();
  const std::vector<int32_t> skip(blocks->begin(), blocks->end());
  EXPECT_EQ(skip, DropOrder(importance_, 1));
  auto ref = ComputePerplexity(*plain_, eval_, Window256(skip));
  auto w8 = ComputePackedPerplexity(**sc, eval_, kernels::PackedPrecision::kW8);
  ASSERT_TRUE(ref && w8);
  EXPECT_NEAR(w8->perplexity, ref->perplexity, kPackVsReferencePplRelTol * ref->perplexity);
  auto full = ComputePerplexity(*plain_, eval_, Window256());
  ASSERT_TRUE(full);
  EXPECT_GT(w8->perplexity, 1.5 * full->perplexity);  // the drop is real
}

TEST_F(PackedStories, QualityTableRowsAndJson) {
  QualityTableOptions o;
  o.last_drop = 9;  // clamped to the pack's maximum, 3
  o.reference = plain_.get();
  auto t = MeasureQualityTable(*pack_, eval_, o);
  ASSERT_TRUE(t) << t.error().ToString();
  ASSERT_EQ(t->rows.size(), 8u);  // {W8A16, W4A8} x drop 0..3
  EXPECT_TRUE(t->against_fp32);
  EXPECT_GE(t->rows[0].top1_agreement, kPackVsReferenceMinTop1);
  EXPECT_LT(t->rows[1].top1_agreement, t->rows[0].top1_agreement);
  EXPECT_LT(t->rows[4].top1_agreement, t->rows[0].top1_agreement);  // W4A8 drop 0
  const std::string j = t->ToJson();
  EXPECT_NE(j.find("\"format\": \"ari-quality-table-1\""), std::string::npos);
  EXPECT_NE(j.find("\"precision\": \"w4a8\", \"drop\": 3"), std::string::npos);
}

TEST_F(PackedStories, AllLogitsLastRowMatchesRun) {
  const ModelConfig& c = pack_->config();
  auto packed = BindPack(pack_->file(), c);
  ASSERT_TRUE(packed);
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool);
  const int32_t n = 40;
  const uint64_t ws = FastForward::WorkspaceBytes(c, n, n, 2, 128);
  const uint64_t kvb = KvCacheView::Bytes(c, KvType::kF16, n);
  auto* w = static_cast<std::byte*>(::operator new(ws, std::align_val_t(128)));
  auto* kv = static_cast<std::byte*>(::operator new(kvb, std::align_val_t(128)));
  FastForward ff;
  ASSERT_TRUE(ff.Init(*pack_, *packed, w, ws, n, n, 2, 128));
  const KvCacheView view{KvType::kF16, kv, kv + kvb / 2, n};
  const std::span<const TokenId> toks(eval_.data(), n);
  std::vector<float> all(static_cast<size_t>(n) * c.vocab_size);
  for (auto p : {kernels::PackedPrecision::kW8, kernels::PackedPrecision::kW4}) {
    ASSERT_TRUE(ff.RunAllLogits(toks, 0, view, p, nullptr, **pool, 2, all));
    EXPECT_FALSE(ff.RunAllLogits(toks, 0, view, p, nullptr, **pool, 2,
                                 std::span<float>(all).first(all.size() - 1)));  // too small
    auto last = ff.Run(toks, 0, view, p, nullptr, **pool, 2);
    ASSERT_TRUE(last);
    float max_diff = 0;
    for (int32_t i = 0; i < c.vocab_size; ++i) {
      max_diff = std::max(max_diff, std::fabs(all[(n - 1) * c.vocab_size + i] - (*last)[i]));
    }
    EXPECT_LT(max_diff, kAllLogitsTol);
  }
  ::operator delete(w, std::align_val_t(128));
  ::operator delete(kv, std::align_val_t(128));
}

TEST_F(PackedStories, WrongKindOfFileIsRefused) {
  auto on_pack = ComputePerplexity(*pack_, eval_, Window256());
  ASSERT_FALSE(on_pack);
  EXPECT_EQ(on_pack.error().code, ErrorCode::kFormat);
  EXPECT_FALSE(CalibrateLayerImportance(*pack_, eval_, CalibrationOptions{256}));
  auto sc = PackedScorer::Create(*plain_, {});
  ASSERT_FALSE(sc);
  EXPECT_EQ(sc.error().code, ErrorCode::kFormat);
  QualityTableOptions o;
  o.reference = pack_.get();  // the reference must be the plain file
  EXPECT_FALSE(MeasureQualityTable(*pack_, eval_, o));
  EXPECT_FALSE(MeasureQualityTable(*plain_, eval_, {}));
  // A pack without importance has no drop levels.
  const auto bare = dir_ / "bare.pack.gguf";
  ASSERT_TRUE(WritePack(plain_path_, bare));
  auto bm = Model::Load(bare);
  ASSERT_TRUE(bm);
  auto bs = PackedScorer::Create(**bm, {});
  ASSERT_TRUE(bs);
  EXPECT_TRUE((*bs)->SetDropLevel(0));
  auto d1 = (*bs)->SetDropLevel(1);
  ASSERT_FALSE(d1);
  EXPECT_EQ(d1.error().code, ErrorCode::kUnsupported);
}

// True when `p` can be exec'd from here: a test running under qemu-user (aarch64 cross
// build) spawns the host's shell, which cannot exec the cross-built tools (126: "Exec
// format error", 127: not found).
bool RunsHere(const std::filesystem::path& p) {
  const int status = std::system((p.string() + " --help >/dev/null 2>&1").c_str());
  return WIFEXITED(status) && WEXITSTATUS(status) != 126 && WEXITSTATUS(status) != 127;
}

std::filesystem::path Tool(const char* name) {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  if (!bin) return {};
  auto p = std::filesystem::path(bin) / "runtime" / name;
  return std::filesystem::exists(p) && RunsHere(p) ? p : std::filesystem::path();
}

int Exit(const std::string& cmd) { return WEXITSTATUS(std::system(cmd.c_str())); }

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST_F(PackedStories, ToolsRefuseTheWrongFileAndScorePacks) {
  const auto ppl = Tool("ari-ppl"), quality = Tool("ari-quality");
  if (ppl.empty() || quality.empty()) {
    GTEST_SKIP() << "ari-ppl/ari-quality not built for this machine";
  }
  const std::string text = (testing::SourceDir() / "tests/data/evaluation.txt").string();
  const auto out = dir_ / "out.txt", err = dir_ / "err.txt";
  const std::string redir = " >" + out.string() + " 2>" + err.string();
  EXPECT_EQ(
      Exit(ppl.string() + " -m " + pack_path_.string() + " -f " + text + " --reference" + redir),
      2);
  EXPECT_NE(Slurp(err).find("is a pack"), std::string::npos) << Slurp(err);
  EXPECT_EQ(Exit(ppl.string() + " -m " + plain_path_.string() + " -f " + text +
                 " --precision w4a8" + redir),
            2);
  EXPECT_NE(Slurp(err).find("is a plain GGUF"), std::string::npos) << Slurp(err);
  EXPECT_EQ(Exit(ppl.string() + " -m " + pack_path_.string() + " -f " + text + " --ref " +
                 pack_path_.string() + redir),
            2);
  EXPECT_EQ(Exit(quality.string() + " --ref " + pack_path_.string() + " --pack " +
                 pack_path_.string() + redir),
            1);
  EXPECT_NE(Slurp(err).find("is a pack"), std::string::npos) << Slurp(err);
  EXPECT_EQ(Exit(quality.string() + " --ref " + plain_path_.string() + " --pack " +
                 plain_path_.string() + redir),
            1);
  EXPECT_NE(Slurp(err).find("not a pack"), std::string::npos) << Slurp(err);
  // The pack through the packed path, with its JSON table.
  const auto json = dir_ / "q.json";
  ASSERT_EQ(Exit(ppl.string() + " -m " + pack_path_.string() + " --ref " + plain_path_.string() +
                 " -f " + text + " --table 1 --json " + json.string() + redir),
            0)
      << Slurp(err);
  EXPECT_NE(Slurp(out).find("| W4A8 | 1 |"), std::string::npos) << Slurp(out);
  EXPECT_NE(Slurp(json).find("ari-quality-table-1"), std::string::npos);
}

TEST(RuntimeTools, HelpWorksOnEveryTool) {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  if (!bin) GTEST_SKIP() << "ARI_BINARY_DIR not set";
  int found = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(bin) / "runtime")) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("ari-") || !e.is_regular_file()) continue;
    const std::string src = name.substr(4);
    std::string file = src;
    for (char& ch : file) ch = ch == '-' ? '_' : ch;
    if (!std::filesystem::exists(testing::SourceDir() / "runtime/tools" / (file + ".cc"))) continue;
    if (!RunsHere(e.path()))
      GTEST_SKIP() << name << " cannot be exec'd here (cross build under emulation)";
    ++found;
    EXPECT_EQ(Exit(e.path().string() + " --help >/dev/null 2>&1"), 0) << name << " --help";
  }
  EXPECT_GT(found, 0);
}

}  // namespace
}  // namespace ari::runtime
