// GGUF writer -> reader round trips, hand-made v2/nested-array files and the real vocab files.
#include "runtime/gguf/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <numeric>

#include "tests/common/test_util.h"
#include "tests/runtime/gguf_builder.h"

namespace ari::runtime {
namespace {

using ::ari::testing::ByteBuilder;

TEST(GgufTest, RoundTripEveryScalarType) {
  GgufWriter w;
  w.SetUint8("u8", 200);
  w.SetInt8("i8", -100);
  w.SetUint16("u16", 60000);
  w.SetInt16("i16", -30000);
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetUint64("u64", std::numeric_limits<uint64_t>::max());
  w.SetInt64("i64", std::numeric_limits<int64_t>::min());
  w.SetFloat32("f32", 1.5f);
  w.SetFloat64("f64", -2.25);
  w.SetBool("bt", true);
  w.SetBool("bf", false);
  w.SetString("s", "hello");
  w.SetString("empty", "");
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img) << img.error().ToString();
  auto f = GgufFile::Parse(*img, "mem");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 14u);
  EXPECT_EQ(*f->GetUint("u8"), 200u);
  EXPECT_EQ(*f->GetInt("i8"), -100);
  EXPECT_EQ(*f->GetUint("u16"), 60000u);
  EXPECT_EQ(*f->GetInt("i16"), -30000);
  EXPECT_EQ(*f->GetUint("u32"), 4000000000u);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetUint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f->GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f->GetFloat("f32"), 1.5f);
  EXPECT_EQ(*f->GetFloat("f64"), -2.25f);
  EXPECT_TRUE(*f->GetBool("bt"));
  EXPECT_FALSE(*f->GetBool("bf"));
  EXPECT_EQ(*f->GetString("s"), "hello");
  EXPECT_EQ(*f->GetString("empty"), "");
  EXPECT_EQ(f->Find("u8")->type, GgufValueType::kUint8);
  EXPECT_EQ(f->Find("f64")->type, GgufValueType::kFloat64);
  EXPECT_EQ(std::get<double>(f->Find("f64")->value), -2.25);
  // Order is preserved.
  EXPECT_EQ(f->metadata().front().key, "u8");
  EXPECT_EQ(f->metadata().back().key, "empty");
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->data_offset(), img->size());
}

TEST(GgufTest, GetterErrors) {
  GgufWriter w;
  w.SetInt32("neg", -5);
  w.SetString("s", "x");
  w.SetUint64("big", std::numeric_limits<uint64_t>::max());
  w.SetFloat32("f", 0.5f);
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img);
  auto f = GgufFile::Parse(*img, "model.gguf");
  ASSERT_TRUE(f);
  auto missing = f->GetUint("nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);
  EXPECT_NE(missing.error().message.find("model.gguf"), std::string::npos);
  auto wrong = f->GetUint("s");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kFormat);
  EXPECT_NE(wrong.error().message.find("'s' has type string"), std::string::npos);
  EXPECT_FALSE(f->GetUint("neg"));
  EXPECT_EQ(*f->GetInt("neg"), -5);
  EXPECT_FALSE(f->GetInt("big"));
  EXPECT_FALSE(f->GetString("f"));
  EXPECT_FALSE(f->GetBool("f"));
  EXPECT_FALSE(f->GetFloat("s"));
  EXPECT_FALSE(f->GetArray("s"));
  EXPECT_FALSE(f->GetStringArray("s"));
  EXPECT_EQ(*f->GetUintOr("absent", 7), 7u);
  EXPECT_EQ(*f->GetFloatOr("absent", 2.0f), 2.0f);
  EXPECT_EQ(*f->GetFloatOr("f", 2.0f), 0.5f);
  EXPECT_FALSE(f->GetFloatOr("s", 2.0f));  // wrong type is still an error
  EXPECT_FALSE(f->GetUintOr("s", 1));
  EXPECT_EQ(f->FindTensor("t"), nullptr);
  auto t = f->GetTensor("t");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
}

TEST(GgufTest, RoundTripArrays) {
  GgufWriter w;
  w.SetStringArray("strs", {"a", "", "hello world", std::string("\0x", 2)});
  w.SetStringArray("no_strs", {});
  w.SetFloat32Array("floats", {1.0f, -2.5f, 3.25f});
  w.SetFloat32Array("no_floats", {});
  w.SetInt32Array("ints", {-1, 0, 2147483647});
  w.SetUint32Array("uints", {1, 2, 4000000000u});
  w.SetUint32Array("small_uints", {1, 2, 3});
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img);
  auto f = GgufFile::Parse(*img, "mem");
  ASSERT_TRUE(f) << f.error().ToString();
  auto strs = f->GetStringArray("strs");
  ASSERT_TRUE(strs);
  ASSERT_EQ(strs->size(), 4u);
  EXPECT_EQ((*strs)[0], "a");
  EXPECT_EQ((*strs)[1], "");
  EXPECT_EQ((*strs)[2], "hello world");
  EXPECT_EQ((*strs)[3], std::string_view("\0x", 2));
  EXPECT_TRUE(f->GetStringArray("no_strs")->empty());
  EXPECT_EQ(*f->GetFloatArray("floats"), (std::vector<float>{1.0f, -2.5f, 3.25f}));
  EXPECT_TRUE(f->GetFloatArray("no_floats")->empty());
  EXPECT_EQ(*f->GetInt32Array("ints"), (std::vector<int32_t>{-1, 0, 2147483647}));
  EXPECT_EQ(*f->GetInt32Array("small_uints"), (std::vector<int32_t>{1, 2, 3}));
  auto too_big = f->GetInt32Array("uints");
  ASSERT_FALSE(too_big);
  EXPECT_NE(too_big.error().message.find("element 2"), std::string::npos);
  auto arr = f->GetArray("uints");
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->elem_type, GgufValueType::kUint32);
  EXPECT_EQ(arr->count, 3u);
  EXPECT_EQ(arr->bytes.size(), 12u);
  EXPECT_FALSE(f->GetFloatArray("strs"));
  EXPECT_FALSE(f->GetStringArray("floats"));
  EXPECT_FALSE(f->GetInt32Array("floats"));
  EXPECT_EQ(f->ValueToString(*f->Find("floats")), "[f32 x 3] [1, -2.5, 3.25]");
  EXPECT_EQ(f->ValueToString(*f->Find("strs"), 2), "[string x 4] [\"a\", \"\", ...]");
  EXPECT_EQ(f->ValueToString(*f->Find("no_strs")), "[string x 0] []");
}

TEST(GgufTest, SetTwiceReplacesAndCopyMetadata) {
  GgufWriter src_w;
  src_w.SetString("tokenizer.ggml.model", "llama");
  src_w.SetStringArray("tokenizer.ggml.tokens", {"<s>", "a"});
  src_w.SetBool("tokenizer.ggml.add_bos_token", true);
  src_w.SetUint32("general.x", 1);
  src_w.SetUint32("general.x", 2);
  auto src_img = src_w.WriteToMemory();
  ASSERT_TRUE(src_img);
  auto src = GgufFile::Parse(*src_img, "src");
  ASSERT_TRUE(src);
  EXPECT_EQ(src->metadata().size(), 4u);
  EXPECT_EQ(*src->GetUint("general.x"), 2u);

  GgufWriter w(64);
  w.CopyMetadata(*src, "tokenizer.");
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img);
  auto f = GgufFile::Parse(*img, "dst");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->metadata().size(), 4u);  // general.alignment + 3 tokenizer keys
  EXPECT_FALSE(f->Has("general.x"));
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->at(1), "a");
  EXPECT_TRUE(*f->GetBool("tokenizer.ggml.add_bos_token"));
}

struct TensorCase {
  const char* name;
  TensorType type;
  std::vector<int64_t> ne;
};

class GgufTensorTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufTensorTest, RoundTripEveryTensorType) {
  const uint32_t alignment = GetParam();
  const std::vector<TensorCase> cases = {
      {"f32", TensorType::kF32, {3}},
      {"f16", TensorType::kF16, {5, 3}},
      {"bf16", TensorType::kBF16, {7, 1, 2}},
      {"q8_0", TensorType::kQ8_0, {64, 2}},
      {"q4_0", TensorType::kQ4_0, {32, 3, 1, 2}},
      {"f32_172", TensorType::kF32, {172, 2}},
  };
  GgufWriter w(alignment);
  w.SetString("general.architecture", "llama");
  std::vector<std::vector<std::byte>> payloads;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto n = TensorBytes(cases[i].type, cases[i].ne);
    ASSERT_TRUE(n);
    std::vector<std::byte> data(*n);
    for (size_t j = 0; j < data.size(); ++j) data[j] = static_cast<std::byte>(j * 7 + i);
    ASSERT_TRUE(w.AddTensor(cases[i].name, cases[i].type, cases[i].ne, data));
    payloads.push_back(std::move(data));
  }
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img);
  EXPECT_EQ(img->size(), w.EstimatedFileSize());
  auto f = GgufFile::Parse(*img, "mem");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->alignment(), alignment);
  EXPECT_EQ(f->Has("general.alignment"), alignment != 32);
  EXPECT_EQ(f->data_offset() % alignment, 0u);
  ASSERT_EQ(f->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(f->FindTensor(cases[i].name), &t);
    EXPECT_EQ(t.type, cases[i].type);
    EXPECT_EQ(t.n_dims, cases[i].ne.size());
    for (size_t d = 0; d < 4; ++d) {
      EXPECT_EQ(t.ne[d], d < cases[i].ne.size() ? cases[i].ne[d] : 1);
    }
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(static_cast<uint64_t>(t.data - img->data()), f->data_offset() + t.offset);
    ASSERT_EQ(t.nbytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(t.data, payloads[i].data(), t.nbytes), 0);
    EXPECT_EQ(t.NumElements(), std::accumulate(cases[i].ne.begin(), cases[i].ne.end(), int64_t{1},
                                               std::multiplies<>()));
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufTensorTest, ::testing::Values(32u, 64u, 1u, 4096u));

TEST(GgufTest, WriteFileStreamingAndOpen) {
  const auto dir = ::ari::testing::TempDir("gguf_test");
  const auto path = dir / "stream.gguf";
  GgufWriter w(64);
  w.SetString("general.name", "stream");
  const std::vector<int64_t> ne = {64, 3};
  int calls = 0;
  ASSERT_TRUE(
      w.AddTensor("lazy", TensorType::kF32, ne, [&](std::span<std::byte> out) -> Result<void> {
        ++calls;
        std::vector<float> v(out.size() / 4);
        std::iota(v.begin(), v.end(), 0.0f);
        std::memcpy(out.data(), v.data(), out.size());
        return {};
      }));
  std::vector<std::byte> eager(34, std::byte{0x11});
  ASSERT_TRUE(w.AddTensor("eager", TensorType::kQ8_0, std::vector<int64_t>{32}, eager));
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(w.WriteFile(path));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), w.EstimatedFileSize());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->name(), path.string());
  auto lazy = f->GetTensor("lazy");
  ASSERT_TRUE(lazy);
  float v[192];
  std::memcpy(v, (*lazy)->data, sizeof v);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[191], 191.0f);
  EXPECT_EQ(std::to_integer<int>(f->FindTensor("eager")->data[33]), 0x11);
  // Moving the file keeps tensor pointers valid (they point into the shared mapping).
  const std::byte* before = f->FindTensor("eager")->data;
  GgufFile moved = std::move(*f);
  EXPECT_EQ(moved.FindTensor("eager")->data, before);

  // A failing filler aborts the write and leaves no file behind.
  GgufWriter bad;
  ASSERT_TRUE(bad.AddTensor("x", TensorType::kF32, std::vector<int64_t>{4},
                            [](std::span<std::byte>) -> Result<void> {
                              return MakeError(ErrorCode::kInternal, "filler failed");
                            }));
  auto res = bad.WriteFile(dir / "bad.gguf");
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message, "filler failed");
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.gguf.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(GgufTest, WriterRejectsBadTensors) {
  GgufWriter w;
  std::vector<std::byte> four(4);
  ASSERT_TRUE(w.AddTensor("a", TensorType::kF32, std::vector<int64_t>{1}, four));
  EXPECT_FALSE(w.AddTensor("a", TensorType::kF32, std::vector<int64_t>{1}, four));  // duplicate
  EXPECT_FALSE(w.AddTensor("b", TensorType::kF32, std::vector<int64_t>{2}, four));  // size
  EXPECT_FALSE(w.AddTensor("c", TensorType::kQ8_0, std::vector<int64_t>{33}, four));
  EXPECT_FALSE(w.AddTensor("d", TensorType::kF32, std::vector<int64_t>{}, four));
  EXPECT_FALSE(w.AddTensor("e", TensorType::kF32, std::vector<int64_t>{1, 1, 1, 1, 1}, four));
  EXPECT_FALSE(w.AddTensor("f", TensorType::kF32, std::vector<int64_t>{0}, four));
  EXPECT_FALSE(w.AddTensor("g", TensorType::kF32, std::vector<int64_t>{-1}, four));
  EXPECT_FALSE(
      w.AddTensor("h", TensorType::kF32, std::vector<int64_t>{1}, GgufWriter::TensorFiller{}));
  GgufWriter misaligned(48);
  EXPECT_FALSE(misaligned.WriteToMemory());
  EXPECT_FALSE(GgufWriter(0).WriteToMemory());
  auto io = GgufWriter().WriteFile("/nonexistent-dir/x.gguf");
  ASSERT_FALSE(io);
  EXPECT_EQ(io.error().code, ErrorCode::kIo);
}

// A hand-made v2 file with nested arrays (arrays of arrays are legal GGUF).
TEST(GgufTest, ReadsV2AndNestedArrays) {
  ByteBuilder b;
  b.Header(2, 0, 2);
  b.Str("nested");
  b.U32(9);  // array
  b.U32(9);  // of arrays
  b.U64(2);
  b.U32(4);  // [u32 x 2]
  b.U64(2);
  b.U32(7);
  b.U32(8);
  b.U32(8);  // [string x 1]
  b.U64(1);
  b.Str("in");
  b.Str("after");
  b.U32(8);
  b.Str("ok");
  auto f = GgufFile::Parse(b.bytes(), "v2");
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(*f->GetString("after"), "ok");
  auto arr = f->GetArray("nested");
  ASSERT_TRUE(arr);
  EXPECT_EQ(arr->elem_type, GgufValueType::kArray);
  EXPECT_EQ(arr->count, 2u);
  EXPECT_EQ(f->ValueToString(*f->Find("nested")), "[array x 2] [[7, 8], [\"in\"]]");
  EXPECT_EQ(f->ValueToString(*f->Find("nested"), 1), "[array x 2] [[7, ...], ...]");
  EXPECT_EQ(f->header_size(), b.size());
}

struct VocabCase {
  const char* file;
  const char* model;
  size_t n_tokens;
  size_t n_merges;  // 0: no merges key
};

class GgufVocabTest : public ::testing::TestWithParam<VocabCase> {};

TEST_P(GgufVocabTest, ReadsRealVocabFile) {
  const VocabCase& c = GetParam();
  ARI_REQUIRE_MODEL(path, std::string("vocab/") + c.file);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f) << f.error().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->header_size(), std::filesystem::file_size(path));  // header is the whole file
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), c.model);
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->size(), c.n_tokens);
  if (c.n_merges > 0) {
    auto merges = f->GetStringArray("tokenizer.ggml.merges");
    ASSERT_TRUE(merges);
    EXPECT_EQ(merges->size(), c.n_merges);
  }
  if (f->Has("tokenizer.ggml.scores")) {
    EXPECT_EQ(f->GetFloatArray("tokenizer.ggml.scores")->size(), c.n_tokens);
  }
  if (f->Has("tokenizer.ggml.token_type")) {
    EXPECT_EQ(f->GetInt32Array("tokenizer.ggml.token_type")->size(), c.n_tokens);
  }
  for (const GgufMetadata& m : f->metadata()) EXPECT_FALSE(f->ValueToString(m).empty());
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GgufVocabTest,
                         ::testing::Values(VocabCase{"ggml-vocab-llama-spm.gguf", "llama", 32000,
                                                     0},
                                           VocabCase{"ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50000},
                                           VocabCase{"ggml-vocab-phi-3.gguf", "llama", 32064, 0}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           std::string out;
                           for (char ch : n.substr(11, n.size() - 16))
                             out += std::isalnum(ch) ? ch : '_';
                           return out;
                         });

}  // namespace
}  // namespace ari::runtime
