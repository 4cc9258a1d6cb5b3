#include "runtime/model/model.h"

#include <utility>

namespace ari::runtime {

Model::Model(GgufFile file, std::vector<std::byte> owned)
    : owned_bytes_(std::move(owned)), file_(std::move(file)) {}

Result<std::unique_ptr<Model>> Model::Load(const std::filesystem::path& path,
                                           const ModelLoadOptions& opts) {
  auto file = GgufFile::Open(path);
  if (!file) return std::unexpected(file.error());
  return Init(std::unique_ptr<Model>(new Model(std::move(*file), {})), opts);
}

Result<std::unique_ptr<Model>> Model::FromBytes(std::vector<std::byte> bytes, std::string name,
                                                const ModelLoadOptions& opts) {
  // Moving a vector keeps its heap buffer, so the parsed views stay valid.
  auto file = GgufFile::Parse(bytes, std::move(name));
  if (!file) return std::unexpected(file.error());
  return Init(std::unique_ptr<Model>(new Model(std::move(*file), std::move(bytes))), opts);
}

Result<std::unique_ptr<Model>> Model::Init(std::unique_ptr<Model> m, const ModelLoadOptions& opts) {
  auto config = ModelConfig::FromGguf(m->file_);
  if (!config) return std::unexpected(config.error());
  m->config_ = std::move(*config);
  auto weights = ModelWeights::FromGguf(m->file_, m->config_);
  if (!weights) return std::unexpected(weights.error());
  m->weights_ = std::move(*weights);
  if (opts.require_tokenizer || m->file_.Has("tokenizer.ggml.model")) {
    auto tok = Tokenizer::FromGguf(m->file_);
    if (!tok) {
      return MakeError(tok.error().code, m->file_.name() + ": tokenizer: " + tok.error().message);
    }
    // More embedding rows than tokens (padded vocabularies) is fine; fewer is not.
    if ((*tok)->VocabSize() > m->config_.vocab_size) {
      return MakeError(ErrorCode::kFormat, m->file_.name() + ": tokenizer has " +
                                               std::to_string((*tok)->VocabSize()) +
                                               " tokens but token_embd.weight has only " +
                                               std::to_string(m->config_.vocab_size) + " rows");
    }
    m->tokenizer_ = std::move(*tok);
  }
  return m;
}

}  // namespace ari::runtime
