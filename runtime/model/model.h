// A loaded model: the mapped GGUF file, its blueprint (ModelConfig), const views of its
// weights (ModelWeights) and its tokenizer. Immutable after Load; shared by sessions.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_weights.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {

struct ModelLoadOptions {
  // A model without tokenizer metadata loads only when this is false (tests with
  // synthetic weights); tokenizer() is then null.
  bool require_tokenizer = true;
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> Load(const std::filesystem::path& path,
                                             const ModelLoadOptions& opts = {});
  // From a GGUF image in memory (the model keeps the bytes).
  static Result<std::unique_ptr<Model>> FromBytes(std::vector<std::byte> bytes, std::string name,
                                                  const ModelLoadOptions& opts = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const GgufFile& file() const { return file_; }
  // Null only when loaded with require_tokenizer = false from a file without vocab.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

 private:
  Model(GgufFile file, std::vector<std::byte> owned);
  static Result<std::unique_ptr<Model>> Init(std::unique_ptr<Model> m,
                                             const ModelLoadOptions& opts);

  std::vector<std::byte> owned_bytes_;  // backing store for FromBytes (empty for mmap)
  GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

}  // namespace ari::runtime
