// The memory ladder's fallback model for ari-node: a second, small GGUF that the
// scheduler maps on first need (qos::FallbackEngineProvider) and unmaps when the
// pressure is gone. Requests are tokenized once, at admission, with the main model's
// tokenizer, so the fallback must use the same vocabulary: Acquire() checks it (token
// count, every token text, BOS/EOS) and refuses an incompatible model with a clear
// error (the scheduler then keeps new requests on the main model and says so). Like the
// main model, the mapped file is watched (model_guard.h): once it changes, every turn and
// chunk on the fallback fails with "model file changed" instead of touching the mapping.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "component/node/model_guard.h"
#include "qos/scheduler.h"
#include "runtime/engine/engine.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::component {

// Same vocabulary (what the node's admission-time token ids mean); the reason otherwise.
std::string TokenizerMismatch(const runtime::Tokenizer& main, const runtime::Tokenizer& other);

class FallbackModel final : public qos::FallbackEngineProvider {
 public:
  // `options.model_path` is the fallback GGUF; `main` must outlive this object.
  FallbackModel(runtime::EngineOptions options, const runtime::Tokenizer* main);
  ~FallbackModel() override = default;

  // Creates the engine (maps the file), checks the vocabulary, warms it up; returns the
  // engine behind the model-file guard.
  runtime::Result<runtime::ChunkRunner*> Acquire() override;
  void Release() override;  // destroys the engine: the file is unmapped

  bool mapped() const { return mapped_.load(); }
  std::string name() const { return options_.model_path.filename().string(); }
  const std::filesystem::path& path() const { return options_.model_path; }
  int acquisitions() const { return acquisitions_.load(); }

 private:
  runtime::EngineOptions options_;
  const runtime::Tokenizer* main_;
  std::mutex mu_;  // engine_, watch_, guarded_ (Acquire/Release: scheduler thread)
  std::unique_ptr<runtime::Engine> engine_;
  std::unique_ptr<ModelFileWatch> watch_;
  std::unique_ptr<GuardedRunner> guarded_;  // engine_ checked against watch_
  std::atomic<bool> mapped_{false};
  std::atomic<int> acquisitions_{0};
};

}  // namespace ari::component
