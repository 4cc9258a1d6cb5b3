// The memory ladder's fallback model; see fallback_model.h.
#include "component/node/fallback_model.h"

#include <vector>

#include "runtime/model/model.h"

namespace ari::component {

std::string TokenizerMismatch(const runtime::Tokenizer& a, const runtime::Tokenizer& b) {
  if (a.VocabSize() != b.VocabSize()) {
    return "vocabulary size " + std::to_string(b.VocabSize()) + " != main model's " +
           std::to_string(a.VocabSize());
  }
  if (a.Bos() != b.Bos() || a.Eos() != b.Eos() || a.Model() != b.Model()) {
    return "tokenizer type or BOS/EOS ids differ from the main model's";
  }
  for (runtime::TokenId id = 0; id < a.VocabSize(); ++id) {
    if (a.TokenText(id) != b.TokenText(id)) {
      return "token " + std::to_string(id) + " differs from the main model's";
    }
  }
  return {};
}

FallbackModel::FallbackModel(runtime::EngineOptions options, const runtime::Tokenizer* main)
    : options_(std::move(options)), main_(main) {}

runtime::Result<runtime::ChunkRunner*> FallbackModel::Acquire() {
  std::lock_guard lk(mu_);
  if (guarded_) return guarded_.get();
  auto engine = runtime::Engine::Create(options_);
  if (!engine) return std::unexpected(engine.error());
  const runtime::Tokenizer* tok = (*engine)->model().tokenizer();
  if (tok == nullptr) {
    return runtime::MakeError(runtime::ErrorCode::kUnsupported,
                              options_.model_path.string() + " has no tokenizer");
  }
  if (main_ != nullptr) {
    if (std::string why = TokenizerMismatch(*main_, *tok); !why.empty()) {
      return runtime::MakeError(runtime::ErrorCode::kUnsupported,
                                options_.model_path.string() + ": " + why);
    }
  }
  // Warm-up: first-touch page faults and pool start-up now, not in a request's chunk.
  std::vector<runtime::TokenId> tiny = {tok->Bos() >= 0 ? tok->Bos() : 0};
  runtime::TurnSpec turn;
  turn.prompt = tiny;
  turn.max_tokens = 1;
  turn.keep_context = false;
  if (auto r = (*engine)->StartTurn(0, turn); !r) return std::unexpected(r.error());
  for (int i = 0; i < 4; ++i) {
    auto r = (*engine)->RunChunk(0, runtime::ChunkKnobs{});
    if (!r) return std::unexpected(r.error());
    if (r->finished) break;
  }
  (*engine)->ResetSlot(0);
  // Identity of the file as mapped now; from here on each turn and chunk checks it.
  auto watch = ModelFileWatch::Open(options_.model_path, (*engine)->model().file().bytes().size());
  if (!watch) {
    return runtime::MakeError(runtime::ErrorCode::kIo, watch.error().ToString());
  }
  engine_ = std::move(*engine);
  watch_ = std::move(*watch);
  guarded_ = std::make_unique<GuardedRunner>(*engine_, *watch_);
  mapped_.store(true);
  acquisitions_.fetch_add(1);
  return guarded_.get();
}

void FallbackModel::Release() {
  std::lock_guard lk(mu_);
  guarded_.reset();
  watch_.reset();
  engine_.reset();
  mapped_.store(false);
}

}  // namespace ari::component
