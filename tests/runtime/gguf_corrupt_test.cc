// Corrupt and truncated GGUF images: every case must be a specific error naming the file and
// the byte offset, never a crash or an out-of-bounds read (this also runs under ASan+UBSan).
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>

#include "runtime/gguf/gguf.h"
#include "tests/common/test_util.h"
#include "tests/runtime/gguf_builder.h"

namespace ari::runtime {
namespace {

using ::ari::testing::ByteBuilder;
constexpr uint64_t kHuge = uint64_t{1} << 63;

// Parses a heap copy of exactly `bytes` (so ASan sees any read past the end).
Result<GgufFile> ParseCopy(const std::vector<std::byte>& bytes, std::vector<std::byte>* keep) {
  *keep = bytes;
  keep->shrink_to_fit();
  return GgufFile::Parse(*keep, "bad.gguf");
}

void ExpectError(const std::vector<std::byte>& bytes, uint64_t offset, std::string_view what,
                 ErrorCode code = ErrorCode::kFormat) {
  std::vector<std::byte> keep;
  auto f = ParseCopy(bytes, &keep);
  ASSERT_FALSE(f) << "expected an error containing '" << what << "'";
  EXPECT_EQ(f.error().code, code) << f.error().ToString();
  const std::string prefix = "bad.gguf: offset " + std::to_string(offset) + ": ";
  EXPECT_EQ(f.error().message.rfind(prefix, 0), 0u) << f.error().message;
  EXPECT_NE(f.error().message.find(what), std::string::npos) << f.error().message;
}

// A small valid file: every metadata kind, two tensors; the last tensor fills its
// aligned slot, so cutting any byte off the end removes real data.
std::vector<std::byte> ValidFile() {
  GgufWriter w(32);
  w.SetString("general.architecture", "llama");
  w.SetUint32("llama.block_count", 2);
  w.SetBool("flag", true);
  w.SetFloat64("f64", 0.25);
  w.SetStringArray("tokenizer.ggml.tokens", {"<s>", "", "hello"});
  w.SetFloat32Array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  w.SetInt32Array("empty", {});
  std::vector<std::byte> q8(34, std::byte{1});
  EXPECT_TRUE(w.AddTensor("q", TensorType::kQ8_0, std::vector<int64_t>{32}, q8));
  std::vector<std::byte> f32(32, std::byte{2});
  EXPECT_TRUE(w.AddTensor("f", TensorType::kF32, std::vector<int64_t>{4, 2}, f32));
  return *w.WriteToMemory();
}

TEST(GgufCorruptTest, ValidFileParses) {
  std::vector<std::byte> keep;
  auto f = ParseCopy(ValidFile(), &keep);
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[1].data + 32, keep.data() + keep.size());
}

TEST(GgufCorruptTest, TruncatedAtEveryOffsetIsAnError) {
  const std::vector<std::byte> full = ValidFile();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<std::byte> keep;
    auto f = ParseCopy(cut, &keep);
    ASSERT_FALSE(f) << "truncated at " << n << " parsed";
    ASSERT_EQ(f.error().code, ErrorCode::kFormat) << n << ": " << f.error().message;
    ASSERT_EQ(f.error().message.rfind("bad.gguf: offset ", 0), 0u) << f.error().message;
  }
}

TEST(GgufCorruptTest, EveryByteFlippedNeverCrashes) {
  const std::vector<std::byte> full = ValidFile();
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::vector<std::byte> bad = full;
      bad[i] ^= std::byte{x};
      std::vector<std::byte> keep;
      auto f = ParseCopy(bad, &keep);
      if (f) {  // still valid: every view must stay inside the image
        for (const TensorInfo& t : f->tensors()) {
          ASSERT_GE(t.data, keep.data());
          ASSERT_LE(t.data + t.nbytes, keep.data() + keep.size());
        }
        for (const GgufMetadata& m : f->metadata()) (void)f->ValueToString(m, 100);
      } else {
        ASSERT_NE(f.error().message.find("offset "), std::string::npos);
      }
    }
  }
}

TEST(GgufCorruptTest, HeaderErrors) {
  ExpectError({}, 0, "truncated: need 4 bytes for magic");
  ByteBuilder magic;
  magic.U32(0x46554747u ^ 0x20);
  magic.U32(3);
  ExpectError(magic.bytes(), 0, "bad magic");
  ByteBuilder v1;
  v1.Header(1, 0, 0);
  ExpectError(v1.bytes(), 4, "version 1 is not supported", ErrorCode::kUnsupported);
  ByteBuilder v4;
  v4.Header(4, 0, 0);
  ExpectError(v4.bytes(), 4, "unsupported GGUF version 4", ErrorCode::kUnsupported);
  ByteBuilder be;
  be.Header(0x03000000u, 0, 0);
  ExpectError(be.bytes(), 4, "big-endian", ErrorCode::kUnsupported);
  ByteBuilder many_kv;
  many_kv.Header(3, 0, kHuge);
  ExpectError(many_kv.bytes(), 16, "metadata count 9223372036854775808");
  ByteBuilder many_t;
  many_t.Header(3, kHuge, 0);
  ExpectError(many_t.bytes(), 8, "tensor count 9223372036854775808");
  ByteBuilder short_counts;
  short_counts.Magic();
  short_counts.U32(3);
  short_counts.U32(0);
  ExpectError(short_counts.bytes(), 8, "need 8 bytes for tensor count");
}

// One key/value pair whose value bytes are written by `fill`.
template <class Fill>
std::vector<std::byte> OneKv(uint32_t type, Fill fill, std::string_view key = "k") {
  ByteBuilder b;
  b.Header(3, 0, 1);
  b.Str(key);
  b.U32(type);
  fill(b);
  b.Zeros(64);  // slack, so errors are about the field, not the end of the file
  return b.bytes();
}

TEST(GgufCorruptTest, MetadataErrors) {
  // Layout: header 24 bytes, key "k" at 24 (8 + 1), type at 33, value at 37.
  ByteBuilder key_len;
  key_len.Header(3, 0, 1);
  key_len.U64(kHuge);
  key_len.Zeros(64);
  ExpectError(key_len.bytes(), 24, "string length 9223372036854775808");
  ExpectError(OneKv(13, [](ByteBuilder&) {}), 33, "unknown value type 13");
  ExpectError(OneKv(0xffffffffu, [](ByteBuilder&) {}), 33, "unknown value type 4294967295");
  ExpectError(OneKv(8, [](ByteBuilder& b) { b.U64(kHuge); }), 37, "string length");
  ExpectError(OneKv(8, [](ByteBuilder& b) { b.U64(65); }), 37, "exceeds the 64 bytes left");
  ExpectError(OneKv(7, [](ByteBuilder& b) { b.U8(2); }), 37, "bool value is 2");
  // Arrays: element type at 37, count at 41, elements at 49.
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(13);
                      b.U64(1);
                    }),
              37, "unknown array element type 13");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(0);
                      b.U64(kHuge);
                    }),
              41, "9223372036854775808 elements of u8");
  // 2^61 u64 elements: count * 8 wraps to 0 in 64 bits and must still be caught.
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(10);
                      b.U64(uint64_t{1} << 61);
                    }),
              41, "elements of u64");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(8);
                      b.U64(kHuge);
                    }),
              41, "string elements cannot fit");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(9);
                      b.U64(kHuge);
                    }),
              41, "array elements cannot fit");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(8);
                      b.U64(2);
                      b.Str("a");
                      b.U64(kHuge);
                    }),
              58, "string length 9223372036854775808");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(7);
                      b.U64(3);
                      b.U8(1);
                      b.U8(0);
                      b.U8(9);
                    }),
              51, "bool element is 9");
  // Nested: outer [array x 1] holding [u8 x 2^63] -> error at the inner count (49 + 4).
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(9);
                      b.U64(1);
                      b.U32(0);
                      b.U64(kHuge);
                    }),
              53, "elements of u8");
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      b.U32(9);
                      b.U64(1);
                      b.U32(77);
                      b.U64(0);
                    }),
              49, "unknown nested array element type 77");
  // Nesting deeper than the limit.
  ExpectError(OneKv(9,
                    [](ByteBuilder& b) {
                      for (int i = 0; i < 20; ++i) {
                        b.U32(9);
                        b.U64(1);
                      }
                      b.Zeros(64);
                    }),
              37 + 8 * 12, "nested deeper than 8");
  // Duplicate key: second key at 24 + 9 + 4 + 4 = 41.
  ByteBuilder dup;
  dup.Header(3, 0, 2);
  dup.Str("k");
  dup.U32(4);
  dup.U32(1);
  dup.Str("k");
  dup.U32(4);
  dup.U32(2);
  ExpectError(dup.bytes(), 41, "duplicate metadata key 'k'");
  // general.alignment: value at 24 + 8 + 17 + 4 = 53.
  const std::string ak = "general.alignment";
  ExpectError(OneKv(
                  4, [](ByteBuilder& b) { b.U32(0); }, ak),
              53, "not a power of two");
  ExpectError(OneKv(
                  4, [](ByteBuilder& b) { b.U32(48); }, ak),
              53, "not a power of two");
  ExpectError(OneKv(
                  8, [](ByteBuilder& b) { b.Str("32"); }, ak),
              53, "expected u32");
  // Truncated value of a fixed-size type.
  ByteBuilder short_val;
  short_val.Header(3, 0, 1);
  short_val.Str("k");
  short_val.U32(10);
  short_val.U32(0);
  ExpectError(short_val.bytes(), 37, "need 8 bytes for value of key 'k'");
}

struct TensorSpec {
  std::string name = "t";
  uint32_t n_dims = 1;
  std::vector<uint64_t> ne = {32};
  uint32_t type = 0;
  uint64_t offset = 0;
  size_t data_bytes = 128;
  bool pad = true;  // pad the header to the alignment
};

// One tensor, no metadata. Tensor info starts at 24; name "t" (9 bytes), n_dims at 33,
// ne at 37; type and offset follow the dims.
std::vector<std::byte> OneTensor(const TensorSpec& s, const TensorSpec* second = nullptr) {
  ByteBuilder b;
  b.Header(3, second ? 2 : 1, 0);
  for (const TensorSpec* t : {&s, second}) {
    if (!t) continue;
    b.Str(t->name);
    b.U32(t->n_dims);
    for (uint64_t d : t->ne) b.U64(d);
    b.U32(t->type);
    b.U64(t->offset);
  }
  if (s.pad) b.PadTo(32);
  b.Zeros(s.data_bytes);
  return b.bytes();
}

TEST(GgufCorruptTest, TensorInfoErrors) {
  {
    std::vector<std::byte> keep;
    ASSERT_TRUE(ParseCopy(OneTensor({}), &keep));
  }
  ExpectError(OneTensor({.n_dims = 0, .ne = {}}), 33, "n_dims 0 not in 1..4");
  ExpectError(OneTensor({.n_dims = 5, .ne = {1, 1, 1, 1, 1}}), 33, "n_dims 5 not in 1..4");
  ExpectError(OneTensor({.ne = {0}}), 37, "ne[0] = 0 is out of range");
  ExpectError(OneTensor({.ne = {kHuge}}), 37, "ne[0] = 9223372036854775808 is out of range");
  ExpectError(OneTensor({.n_dims = 3, .ne = {1u << 31, 1u << 31, 1u << 31}}), 53,
              "element count overflows");
  // Elements fit int64 but bytes do not: 2^62 F32 elements.
  ExpectError(OneTensor({.n_dims = 2, .ne = {uint64_t{1} << 31, uint64_t{1} << 31}}), 53,
              "overflows");
  ExpectError(OneTensor({.type = 10}), 45, "unsupported tensor type 10",  // Q2_K
              ErrorCode::kUnsupported);
  ExpectError(OneTensor({.type = 99}), 45, "unsupported tensor type 99", ErrorCode::kUnsupported);
  ExpectError(OneTensor({.ne = {33}, .type = 8}), 45, "not a multiple of 32");
  ExpectError(OneTensor({.ne = {33}, .type = 3}), 45, "not a multiple of 32 for type Q4_1");
  // K-quants need rows of whole 256-element super-blocks: 32 (fine for Q4_0) is not.
  ExpectError(OneTensor({.ne = {32}, .type = 12}), 45, "tensor 't'");
  ExpectError(OneTensor({.ne = {32}, .type = 12}), 45, "not a multiple of 256 for type Q4_K");
  ExpectError(OneTensor({.ne = {512}, .type = 14}), 49, "extends past the end of the file");
  ExpectError(OneTensor({.offset = 1}), 49, "not a multiple of the alignment 32");
  ExpectError(OneTensor({.offset = 128}), 49, "extends past the end of the file");
  ExpectError(OneTensor({.data_bytes = 127}), 49, "extends past the end of the file");
  ExpectError(OneTensor({.offset = ~uint64_t{31}}), 49, "extends past the end of the file");
  ExpectError(OneTensor({.data_bytes = 0, .pad = false}), 57, "starts past the end of the file");
  ExpectError(OneTensor({.data_bytes = 0}), 49, "extends past the end of the file");
  ByteBuilder long_name;
  long_name.Header(3, 1, 0);
  long_name.U64(kHuge);
  long_name.Zeros(64);
  ExpectError(long_name.bytes(), 24, "name of tensor 0: string length");
  TensorSpec second;
  ExpectError(OneTensor({}, &second), 57, "duplicate tensor 't'");
  second.name = "u";
  std::vector<std::byte> keep;
  EXPECT_TRUE(ParseCopy(OneTensor({}, &second), &keep));  // overlap is allowed
}

TEST(GgufCorruptTest, FileErrors) {
  const auto dir = ::ari::testing::TempDir("gguf_corrupt");
  auto missing = GgufFile::Open(dir / "missing.gguf");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
  EXPECT_NE(missing.error().message.find("missing.gguf: open: No such file"), std::string::npos);
  auto is_dir = MappedFile::Open(dir);
  ASSERT_FALSE(is_dir);
  EXPECT_EQ(is_dir.error().code, ErrorCode::kIo);
  const auto empty = dir / "empty.gguf";
  std::ofstream(empty).close();
  auto mapped = MappedFile::Open(empty);
  ASSERT_TRUE(mapped) << mapped.error().ToString();
  EXPECT_EQ(mapped->size(), 0u);
  EXPECT_TRUE(mapped->bytes().empty());
  MappedFile moved = std::move(*mapped);
  EXPECT_EQ(moved.path(), empty);
  auto f = GgufFile::Open(empty);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message,
            empty.string() + ": offset 0: truncated: need 4 bytes for magic, only 0 left");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::runtime
