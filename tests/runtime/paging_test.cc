// Paging: page-range math, mincore residency before/after touching a mapped file, madvise
// and mlock errors as values, the mlock budget, and per-region hints on a GGUF file.
#include "runtime/engine/paging.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "tests/runtime/engine_fixture.h"
#include "tests/runtime/paging_fixture.h"

namespace ari::runtime {
namespace {

TEST(PageMathTest, CoverRoundsOutward) {
  constexpr size_t kPage = 4096;
  auto r = PageCover(0x1001, 1, kPage);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->begin, 0x1000u);
  EXPECT_EQ(r->size, kPage);
  r = PageCover(0x1000, kPage, kPage);
  EXPECT_EQ(r->begin, 0x1000u);
  EXPECT_EQ(r->size, kPage);
  r = PageCover(0x1fff, 2, kPage);  // straddles a boundary: two pages
  EXPECT_EQ(r->begin, 0x1000u);
  EXPECT_EQ(r->size, 2 * kPage);
  r = PageCover(0x1234, 0, kPage);
  EXPECT_TRUE(r->empty());
  const uintptr_t max = ~uintptr_t{0};
  EXPECT_FALSE(PageCover(max - 10, 100, kPage));  // end overflows
  EXPECT_FALSE(PageCover(max - 10, 5, kPage));    // rounded end overflows
  auto bad = PageCover(0x1000, 10, 3000);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(PageMathTest, InteriorIntersectMerge) {
  constexpr size_t kPage = 4096;
  ByteRange in = PageInterior(0x1001, 3 * kPage, kPage);
  EXPECT_EQ(in.begin, 0x2000u);
  EXPECT_EQ(in.size, 2 * kPage);
  EXPECT_TRUE(PageInterior(0x1001, 100, kPage).empty());
  EXPECT_TRUE(PageInterior(0x1000, 0, kPage).empty());
  ByteRange x = Intersect({100, 100}, {150, 1000});
  EXPECT_EQ(x.begin, 150u);
  EXPECT_EQ(x.size, 50u);
  EXPECT_TRUE(Intersect({0, 10}, {10, 10}).empty());
  auto m = MergeRanges({{300, 10}, {100, 50}, {150, 20}, {160, 5}, {500, 0}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].begin, 100u);
  EXPECT_EQ(m[0].size, 70u);
  EXPECT_EQ(m[1].begin, 300u);
}

// A disk file of `pages` pages, dropped from the page cache, mapped read-only.
class MappedTempFile : public ::testing::Test {
 protected:
  static constexpr size_t kPages = 64;
  void SetUp() override {
    page_ = PageSize();
    dir_ = testing::DiskTempDir("paging");
    path_ = dir_ / "pages.bin";
    {
      std::ofstream f(path_, std::ios::binary);
      std::vector<char> buf(page_ * kPages);
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 7);
      f.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
    ASSERT_TRUE(testing::DropFileCache(path_));
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    void* p = ::mmap(nullptr, page_ * kPages, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    ASSERT_NE(p, MAP_FAILED);
    base_ = static_cast<std::byte*>(p);
  }
  void TearDown() override {
    if (base_ != nullptr) ::munmap(base_, page_ * kPages);
    std::filesystem::remove_all(dir_);
  }
  ByteRange Pages(size_t first, size_t count) const {
    return {reinterpret_cast<uintptr_t>(base_) + first * page_, count * page_};
  }
  size_t page_ = 0;
  std::filesystem::path dir_, path_;
  std::byte* base_ = nullptr;  // a PROT_READ mapping
};

TEST_F(MappedTempFile, ResidentBytesBeforeAndAfterTouching) {
  ASSERT_TRUE(Advise(base_, page_ * kPages, Advice::kRandom));  // no read-around
  auto before = ResidentBytes(base_, page_ * kPages);
  ASSERT_TRUE(before) << before.error().ToString();
  EXPECT_EQ(*before, 0u) << "pages still cached after POSIX_FADV_DONTNEED";
  volatile std::byte sink{};
  sink = base_[5 * page_ + 3];
  sink = base_[40 * page_];
  (void)sink;
  auto after = ResidentBytes(base_, page_ * kPages);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, 2 * page_);
  // Exact over partial pages: 50 bytes inside page 5, 10 bytes at the end of page 39
  // (not resident) plus 10 at the start of page 40.
  EXPECT_EQ(*ResidentBytes(base_ + 5 * page_ + 100, 50), 50u);
  EXPECT_EQ(*ResidentBytes(base_ + 40 * page_ - 10, 20), 10u);
  EXPECT_EQ(*ResidentBytes(base_, 0), 0u);
}

TEST_F(MappedTempFile, MlockBudgetIsRespected) {
  // A: 4 pages, B: 4 pages, C: 2 pages, D: overlaps A's last page and adds one more.
  const std::vector<ByteRange> ranges = {
      Pages(0, 4), Pages(10, 4), Pages(20, 2), {Pages(3, 1).begin + 100, page_}};
  const uint64_t budget = 8 * page_;
  HotSetLock lock = HotSetLock::Lock(ranges, budget);
  const LockReport& r = lock.report();
  if (r.first_errno == EPERM || r.first_errno == ENOMEM || r.first_errno == EAGAIN) {
    GTEST_SKIP() << "mlock not permitted here (RLIMIT_MEMLOCK / CAP_IPC_LOCK): " << r.ToString();
  }
  EXPECT_EQ(r.first_errno, 0) << r.ToString();
  EXPECT_LE(r.locked_bytes, budget);
  // A (4) and B (4) fill the budget; C (2) is then skipped; D needs only page 4 (page 3 is
  // A's, not counted twice) and is skipped too.
  EXPECT_EQ(r.locked_bytes, 8 * page_) << r.ToString();
  EXPECT_EQ(r.ranges_locked, 2);
  EXPECT_EQ(r.ranges_skipped, 2);
  EXPECT_EQ(r.skipped_bytes, 3 * page_);
  // mlock faults the pages in.
  EXPECT_EQ(*ResidentBytes(base_, 4 * page_), 4 * page_);
  EXPECT_EQ(*ResidentBytes(base_ + 10 * page_, 4 * page_), 4 * page_);

  // Overlapping ranges count shared pages once: [0, 1.5p) and [1p + 10, 3p) lock 3 pages.
  HotSetLock small =
      HotSetLock::Lock(std::vector<ByteRange>{{Pages(30, 0).begin, page_ + page_ / 2},
                                              {Pages(31, 0).begin + 10, 2 * page_ - 10}},
                       3 * page_);
  EXPECT_EQ(small.report().locked_bytes, 3 * page_) << small.report().ToString();
  EXPECT_EQ(small.report().ranges_locked, 2);

  HotSetLock moved = std::move(lock);
  // NOLINTNEXTLINE(bugprone-use-after-move): checks the documented moved-from state
  EXPECT_TRUE(lock.locked().empty());
  EXPECT_EQ(moved.locked().size(), 2u);
  moved.Release();
  EXPECT_TRUE(moved.locked().empty());
}

TEST(PagingErrorsTest, UnmappedRangesAreReportedNotFatal) {
  const size_t page = PageSize();
  void* p = ::mmap(nullptr, 3 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* base = static_cast<std::byte*>(p);
  ASSERT_EQ(::munmap(base + page, page), 0);  // a hole in the middle
  auto a = Advise(base, 3 * page, Advice::kWillNeed);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kIo);
  EXPECT_NE(a.error().message.find("errno " + std::to_string(ENOMEM)), std::string::npos)
      << a.error().message;
  auto r = ResidentBytes(base, 3 * page);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  HotSetLock lock = HotSetLock::Lock(
      std::vector<ByteRange>{{reinterpret_cast<uintptr_t>(base + page), page}}, 4 * page);
  EXPECT_EQ(lock.report().locked_bytes, 0u);
  EXPECT_NE(lock.report().first_errno, 0);
  EXPECT_EQ(lock.report().ranges_skipped, 1);
  ::munmap(base, page);
  ::munmap(base + 2 * page, page);
}

// Per-region hints on a GGUF file: embedding, two layers, an output head.
TEST(PagingAdvisorTest, RegionsAndHintsOnAGgufFile) {
  const auto dir = testing::DiskTempDir("paging_gguf");
  const auto path = dir / "layers.gguf";
  GgufWriter w;
  auto add = [&](const std::string& name, int64_t cols, int64_t rows) {
    std::vector<std::byte> data(static_cast<size_t>(cols * rows) * 4, std::byte{1});
    const int64_t ne[2] = {cols, rows};
    ASSERT_TRUE(w.AddTensor(name, TensorType::kF32, ne, data));
  };
  add("token_embd.weight", 64, 1000);  // 256000 bytes
  add("blk.0.attn_q.weight", 64, 64);  // contiguous with the next: one range
  add("blk.0.ffn_up.weight", 64, 128);
  add("blk.1.attn_q.weight", 64, 512);  // 128 KiB
  add("blk.x.odd", 64, 1);              // not a layer number: "other"
  add("output.weight", 64, 100);
  ASSERT_TRUE(w.WriteFile(path));
  ASSERT_TRUE(testing::DropFileCache(path));
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f) << f.error().ToString();
  PagingAdvisor adv(*f);
  const ModelRegions& reg = adv.regions();
  ASSERT_EQ(adv.num_layers(), 2);
  EXPECT_EQ(PagingAdvisor::TotalBytes(reg.embedding), 256000u);
  EXPECT_EQ(reg.layers[0].size(), 1u);
  EXPECT_EQ(PagingAdvisor::TotalBytes(reg.layers[0]), 64u * 192 * 4);
  EXPECT_EQ(PagingAdvisor::TotalBytes(reg.layers[1]), 64u * 512 * 4);
  EXPECT_EQ(PagingAdvisor::TotalBytes(reg.other), 64u * 4 + 64u * 100 * 4);

  EXPECT_TRUE(adv.AdviseEmbedding());
  EXPECT_TRUE(adv.PrefetchLayer(0));
  EXPECT_FALSE(adv.PrefetchLayer(2));
  EXPECT_FALSE(adv.PrefetchLayer(-1));
  // WILLNEED starts reading layer 1 without touching it (completion is asynchronous).
  const uint64_t layer1 = PagingAdvisor::TotalBytes(reg.layers[1]);
  ASSERT_TRUE(adv.PrefetchLayer(1));
  uint64_t resident = 0;
  for (int i = 0; i < 500 && resident < layer1; ++i) {
    resident = *adv.Resident(reg.layers[1]);
    if (resident < layer1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(resident, layer1);
  std::filesystem::remove_all(dir);
}

// kAuto decides per precision: a pack whose W8 matrices are in the page cache and whose W4
// matrices are not prefetches the W4A8 layers only (the madvise walks the page cache of a
// whole layer even when it is resident, so a resident precision must not pay for it).
TEST(LayerPrefetchTest, AutoDecidesPerPrecision) {
  testing::TinySpec spec;  // matrices of several pages each: 256 x 256 W4 is 36 KiB
  spec.dim = 256;
  spec.ffn = 768;
  spec.n_heads = 4;
  spec.n_kv_heads = 4;
  const auto mp = testing::TinyPair(spec, "prefetch_auto");
  ASSERT_TRUE(mp.ok);
  const auto dir = testing::DiskTempDir("prefetch_auto");
  const auto pack = dir / "p.pack.gguf";
  std::filesystem::copy_file(mp.pack, pack);
  ASSERT_TRUE(testing::DropFileCache(pack));
  {  // the whole file into the page cache by read(), not mapped: fadvise can drop it again
    std::ifstream in(pack, std::ios::binary);
    std::vector<char> all(std::filesystem::file_size(pack));
    ASSERT_TRUE(in.read(all.data(), static_cast<std::streamsize>(all.size())));
  }
  {  // ... then the W4 matrices out of it
    auto f = GgufFile::Open(pack);
    ASSERT_TRUE(f) << f.error().ToString();
    const int fd = ::open(pack.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    int w4 = 0;
    for (const TensorInfo& t : f->tensors()) {
      if (!t.name.ends_with(".w4")) continue;
      ++w4;
      const uint64_t off = static_cast<uint64_t>(t.data - f->bytes().data());
      EXPECT_EQ(::posix_fadvise(fd, static_cast<off_t>(off), static_cast<off_t>(t.nbytes),
                                POSIX_FADV_DONTNEED),
                0);
    }
    ::close(fd);
    ASSERT_GT(w4, 0) << "no .w4 tensors in the pack";
  }
  EngineOptions o;
  o.model_path = pack;
  o.max_chunk = 8;
  o.context_length = 64;
  o.threads = 1;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e) << e.error().ToString();
  const std::string plan = (*e)->memory_plan().ToString();
  std::printf("%s", plan.c_str());
  EXPECT_NE(
      plan.find("layer prefetch (MADV_WILLNEED on the next layer) on for W4A8, off for W8A16"),
      std::string::npos);
  e->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
