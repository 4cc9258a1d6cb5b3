// Detokenized text equals llama.cpp's for the same model, prompt and ids, the space after the
// prompt included: the continuation of a prompt keeps the leading space of its first piece
// (the SPM "strip the first piece's space" rule applies only when nothing before has text).
// Checked on every path that streams text: Generate (ari-run's default path), the Engine
// (ari-run --memory-plan, ari-node's chunks), the ari-run binary, and StreamDecoder on the
// llama.cpp SPM and GPT-2 vocabularies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/convert/llama2c_import.h"
#include "runtime/core/utf8.h"
#include "runtime/engine/engine.h"
#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

constexpr const char* kPrompt = "The car turned left at the";
// stdout of llama.cpp c392e5094 (b4747) on the GGUF ari-convert makes of stories260K:
//   ari-convert --checkpoint llama2c/stories260K/stories260K.bin
//               --tokenizer llama2c/stories260K/tok512.bin -o stories260K.gguf
//   LD_LIBRARY_PATH=peers/llama.cpp/bin llama-simple -m stories260K.gguf -n 16
//       "The car turned left at the"    (one command line)
// llama-simple prints each prompt piece (control tokens as text, no space stripped), then
// each generated piece, then a newline.
constexpr const char* kLlamaSimple =
    "<s> The car turned left at the park. It was a big, red ball. The\n";
constexpr int kTokens = 16;

class Stories260KText : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ckpt = testing::ModelFile("llama2c/stories260K/stories260K.bin");
    const auto tok = testing::ModelFile("llama2c/stories260K/tok512.bin");
    if (ckpt.empty() || tok.empty()) {
      GTEST_SKIP() << "stories260K absent under " << testing::ModelsDir();
    }
    dir_ = testing::TempDir("detokenize_golden");
    gguf_ = dir_ / "stories260K.gguf";
    auto r = ConvertLlama2c(ckpt, tok, gguf_);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    auto m = Model::Load(gguf_);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = std::move(*m);
    auto ids = model_->tokenizer()->Encode(kPrompt, EncodeOptions{});
    ASSERT_TRUE(ids.has_value());
    prompt_ids_ = *ids;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // What llama-simple prints for the prompt: every piece as is, control tokens included.
  std::string LlamaStylePrompt() const {
    std::string s;
    for (TokenId id : prompt_ids_) s += model_->tokenizer()->Piece(id, /*special=*/true);
    return s;
  }

  std::filesystem::path dir_, gguf_;
  std::unique_ptr<Model> model_;
  std::vector<TokenId> prompt_ids_;
};

TEST_F(Stories260KText, GenerateContinuationEqualsLlamaSimple) {
  auto session = Session::Create(*model_, SessionOptions{});
  ASSERT_TRUE(session.has_value()) << session.error().ToString();
  SamplingParams sp;
  sp.temperature = 0;
  Sampler sampler(model_->config().vocab_size, sp);
  GenerateOptions go;
  go.max_tokens = kTokens;
  std::string streamed;
  auto res = Generate(**session, sampler, prompt_ids_, go, [&](std::string_view piece) {
    streamed += piece;
    return true;
  });
  ASSERT_TRUE(res.has_value()) << res.error().ToString();
  EXPECT_EQ(streamed, res->text);
  EXPECT_EQ(LlamaStylePrompt() + res->text + "\n", kLlamaSimple);
  EXPECT_EQ(res->text.substr(0, 5), " park");
}

TEST_F(Stories260KText, EngineChunksEqualLlamaSimple) {
  EngineOptions eo;
  eo.model_path = gguf_;
  eo.slots = 1;
  eo.context_length = 512;
  eo.max_output = 64;
  eo.threads = 1;
  eo.require_tokenizer = true;
  auto engine = Engine::Create(eo);
  ASSERT_TRUE(engine.has_value()) << engine.error().ToString();
  for (bool keep : {false, true}) {  // a fresh slot, then a second turn continuing the first
    TurnSpec turn;
    turn.prompt = prompt_ids_;
    turn.max_tokens = kTokens;
    turn.keep_context = keep;
    ASSERT_TRUE((*engine)->StartTurn(0, turn).has_value());
    ChunkKnobs knobs;
    knobs.prefill_tokens = 4;  // several prefill chunks before the first token
    std::string text;
    for (int i = 0; i < 100; ++i) {
      auto r = (*engine)->RunChunk(0, knobs);
      ASSERT_TRUE(r.has_value()) << r.error().ToString();
      text += r->text;
      if (r->finished) break;
    }
    if (!keep) {
      EXPECT_EQ(LlamaStylePrompt() + text + "\n", kLlamaSimple);
    } else {
      EXPECT_EQ(text.front(), ' ') << text;  // the continuation of a non-empty context
    }
  }
}

// The command-line tool, both of its generation paths (skipped when not built).
TEST_F(Stories260KText, AriRunPrintsTheSpaceAfterThePrompt) {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  const auto run = bin ? std::filesystem::path(bin) / "runtime" / "ari-run" : "";
  if (run.empty() || !std::filesystem::exists(run)) GTEST_SKIP() << "ari-run not built";
  for (const char* extra : {"", " --memory-plan"}) {
    const auto out = dir_ / "out.txt";
    const std::string cmd = run.string() + " -m " + gguf_.string() + " -p '" + kPrompt +
                            "' -n 16 --temp 0" + extra + " >" + out.string() + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream f(out);
    const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // ari-run echoes the prompt as typed (no "<s>", no piece spaces), then the text.
    EXPECT_EQ("<s> " + got, kLlamaSimple) << extra;
  }
}

std::unique_ptr<Tokenizer> LoadVocab(const std::filesystem::path& p) {
  auto file = GgufFile::Open(p);
  if (!file) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  return tok ? std::move(*tok) : nullptr;
}

// The inputs of llama.cpp's tokenizer test vector (<vocab>.inp).
std::vector<std::string> VocabInputs(const std::filesystem::path& inp) {
  std::ifstream f(inp);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t b = 0; b <= all.size();) {
    const size_t e = all.find(sep, b);
    out.push_back(all.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + sep.size();
  }
  return out;
}

// For every split of every input, a stream continuing the prefix gives exactly the rest of
// the whole-sequence decode: Decode(prefix) + stream(rest) == Decode(all).
void CheckContinuations(const std::string& vocab) {
  const auto path = testing::ModelFile("vocab/" + vocab);
  if (path.empty()) GTEST_SKIP() << "vocab/" << vocab << " absent";
  auto tok = LoadVocab(path);
  ASSERT_NE(tok, nullptr);
  const auto inputs = VocabInputs(path.string() + ".inp");
  ASSERT_GT(inputs.size(), 40u);
  int checked = 0;
  for (const std::string& s : inputs) {
    auto ids = tok->Encode(s, EncodeOptions{});
    ASSERT_TRUE(ids.has_value());
    const std::string whole = tok->Decode(*ids);
    if (!IsValidUtf8(whole)) continue;
    for (size_t k = 0; k <= ids->size(); ++k) {
      const std::vector<TokenId> head(ids->begin(), ids->begin() + static_cast<ptrdiff_t>(k));
      const std::string before = tok->Decode(head);
      if (!IsValidUtf8(before)) continue;  // a split inside a character
      StreamDecoder dec(*tok);
      dec.Reset(head);
      std::string rest;
      for (size_t i = k; i < ids->size(); ++i) dec.Push((*ids)[i], rest);
      dec.Flush(rest);
      EXPECT_EQ(before + rest, whole) << vocab << " input '" << s << "' split at " << k;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(StreamContinuation, LlamaSpmVocab) { CheckContinuations("ggml-vocab-llama-spm.gguf"); }
TEST(StreamContinuation, Gpt2Vocab) { CheckContinuations("ggml-vocab-gpt-2.gguf"); }

// The llama.cpp case by hand: a prompt, then its continuation " park".
TEST(StreamContinuation, FirstGeneratedPieceKeepsItsSpace) {
  for (const char* vocab : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    const auto path = testing::ModelFile(std::string("vocab/") + vocab);
    if (path.empty()) GTEST_SKIP() << "vocab/" << vocab << " absent";
    auto tok = LoadVocab(path);
    ASSERT_NE(tok, nullptr);
    auto prompt = tok->Encode(kPrompt, EncodeOptions{});
    auto full = tok->Encode(std::string(kPrompt) + " park", EncodeOptions{});
    ASSERT_TRUE(prompt.has_value() && full.has_value());
    ASSERT_EQ(full->size(), prompt->size() + 1) << vocab;
    StreamDecoder dec(*tok);
    dec.Reset(*prompt);
    std::string out;
    dec.Push(full->back(), out);
    EXPECT_EQ(out, " park") << vocab;
    // A stream with nothing before it (or BOS alone) still starts without the SPM space.
    dec.Reset();
    out.clear();
    dec.Push(full->back(), out);
    EXPECT_EQ(out, tok->AddSpacePrefix() ? "park" : " park") << vocab;
    if (tok->Bos() >= 0) {
      const std::vector<TokenId> bos = {tok->Bos()};
      dec.Reset(bos);
      out.clear();
      dec.Push(full->back(), out);
      EXPECT_EQ(out, tok->AddSpacePrefix() ? "park" : " park") << vocab;
    }
  }
}

}  // namespace
}  // namespace ari::runtime
