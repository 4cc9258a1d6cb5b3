#include "component/node/structured_output.h"

#include <fstream>
#include <sstream>

#include "component/client/dds.h"
#include "runtime/grammar/json_schema.h"

namespace ari::component {
namespace {

bool ValidName(std::string_view n) {
  if (n.empty() || n.size() >= ari_kSchemaNameLen) return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

Result<std::shared_ptr<const runtime::CompiledGrammar>> CompileFile(
    const config::RegisteredSchema& entry, const std::filesystem::path& path) {
  const std::string where =
      "structured_output: schema '" + entry.name() + "' (" + path.string() + "): ";
  const std::string ext = path.extension().string();
  if (ext != ".json" && ext != ".gbnf") {
    return MakeError(ErrorCode::kConfig,
                     where + "unknown file type (want .json: JSON Schema, .gbnf: grammar)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kConfig, where + "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto g = ext == ".json" ? runtime::CompileJsonSchema(ss.str())
                          : runtime::CompiledGrammar::Parse(ss.str());
  if (!g) return MakeError(ErrorCode::kConfig, where + g.error().message);
  return std::move(*g);
}

}  // namespace

ConstraintPool::ConstraintPool(std::shared_ptr<const runtime::TokenTrie> trie,
                               std::shared_ptr<const runtime::CompiledGrammar> initial,
                               int32_t size) {
  all_.reserve(static_cast<size_t>(size));
  free_.reserve(static_cast<size_t>(size));
  used_.assign(static_cast<size_t>(size), 0);
  for (int32_t i = 0; i < size; ++i) {
    all_.push_back(std::make_unique<runtime::TokenConstraint>(initial, trie));
    free_.push_back(size - 1 - i);  // slot 0 first
  }
}

int32_t ConstraintPool::Acquire(std::shared_ptr<const runtime::CompiledGrammar> grammar) {
  int32_t slot = -1;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (free_.empty()) return -1;
    slot = free_.back();
    free_.pop_back();
    used_[static_cast<size_t>(slot)] = 1;
  }
  // Owned by the caller now: rebind outside the lock (the old grammar is released here).
  all_[static_cast<size_t>(slot)]->Rebind(std::move(grammar));
  return slot;
}

void ConstraintPool::Release(int32_t slot) {
  if (slot < 0 || slot >= size()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (used_[static_cast<size_t>(slot)] == 0) return;
  used_[static_cast<size_t>(slot)] = 0;
  free_.push_back(slot);  // within the reserved capacity: no allocation
}

int32_t ConstraintPool::in_use() const {
  std::lock_guard<std::mutex> l(mu_);
  return size() - static_cast<int32_t>(free_.size());
}

Result<std::unique_ptr<StructuredOutput>> StructuredOutput::Create(
    const config::StructuredOutputConfig& c, const std::filesystem::path& base_dir,
    const runtime::Tokenizer& tokenizer) {
  std::unique_ptr<StructuredOutput> so(new StructuredOutput());
  if (c.max_inline_bytes() > ari_kFormatTextLen) {
    return MakeError(ErrorCode::kConfig,
                     "structured_output: max_inline_bytes " + std::to_string(c.max_inline_bytes()) +
                         " > the IDL bound " + std::to_string(ari_kFormatTextLen));
  }
  if (c.max_inline_bytes() > 0) so->limits_.max_inline_bytes = c.max_inline_bytes();
  if (c.max_constrained_in_flight() > 1024) {
    return MakeError(ErrorCode::kConfig, "structured_output: max_constrained_in_flight > 1024");
  }
  if (c.max_constrained_in_flight() > 0) {
    so->limits_.max_in_flight = static_cast<int32_t>(c.max_constrained_in_flight());
  }
  for (const auto& entry : c.schemas()) {
    if (!ValidName(entry.name())) {
      return MakeError(ErrorCode::kConfig, "structured_output: schema name '" + entry.name() +
                                               "' must be 1..31 bytes of [A-Za-z0-9_.-]");
    }
    if (so->registry_.contains(entry.name())) {
      return MakeError(ErrorCode::kConfig,
                       "structured_output: schema name '" + entry.name() + "' registered twice");
    }
    if (entry.path().empty()) {
      return MakeError(ErrorCode::kConfig,
                       "structured_output: schema '" + entry.name() + "' has no path");
    }
    std::filesystem::path p(entry.path());
    if (p.is_relative() && !base_dir.empty()) p = base_dir / p;
    auto g = CompileFile(entry, p);
    if (!g) return std::unexpected(g.error());
    so->registry_.emplace(entry.name(), std::move(*g));
  }
  auto trie = runtime::TokenTrie::Build(tokenizer);
  if (!trie) {
    return MakeError(ErrorCode::kConfig, "structured_output: token trie: " + trie.error().message);
  }
  so->trie_ = std::move(*trie);
  std::shared_ptr<const runtime::CompiledGrammar> initial;
  if (!so->registry_.empty()) {
    initial = so->registry_.begin()->second;
  } else {
    auto g = runtime::CompiledGrammar::Parse("root ::= \"{}\"");
    if (!g) return MakeError(ErrorCode::kInternal, "structured_output: " + g.error().message);
    initial = std::move(*g);
  }
  so->pool_ = std::make_unique<ConstraintPool>(so->trie_, initial, so->limits_.max_in_flight);
  return so;
}

Result<std::shared_ptr<const runtime::CompiledGrammar>> StructuredOutput::GrammarFor(
    const ari_ResponseFormat& f) const {
  const int32_t kind = dds::RawEnum(f.kind);
  if (kind == ari_RESPONSE_FORMAT_NONE) return std::shared_ptr<const runtime::CompiledGrammar>();
  if (kind == ari_RESPONSE_FORMAT_SCHEMA_NAME) {
    const std::string_view name = dds::FixedView(f.schema_name);
    if (auto it = registry_.find(name); it != registry_.end()) return it->second;
    return MakeError(ErrorCode::kInvalidArgument,
                     "unknown schema name '" + std::string(name) + "' (not in the node config)");
  }
  const std::string_view text(f.text, std::min<size_t>(f.text_len, sizeof f.text));
  runtime::GrammarLimits gl;
  gl.max_text_bytes = limits_.max_inline_bytes;
  auto g = kind == ari_RESPONSE_FORMAT_JSON_SCHEMA ? runtime::CompileJsonSchema(text, gl)
                                                   : runtime::CompiledGrammar::Parse(text, gl);
  if (!g) return MakeError(ErrorCode::kInvalidArgument, g.error().message);
  return std::move(*g);
}

std::vector<std::string> StructuredOutput::names() const {
  std::vector<std::string> out;
  out.reserve(registry_.size());
  for (const auto& [name, g] : registry_) out.push_back(name);
  return out;
}

FormatVerdict JudgeFormat(const runtime::TokenConstraint& c, ari_ChunkStatus status,
                          std::string_view message) {
  FormatVerdict v;
  v.message = std::string(message);
  if (c.Complete() && status == ari_STATUS_DONE) {
    v.state = ari_FORMAT_COMPLETE;
    return v;
  }
  v.state = ari_FORMAT_INCOMPLETE;
  if (c.DeadEnd()) {
    v.dead_end = true;
    v.message = "grammar dead end (no token can continue): structured output incomplete";
    return v;
  }
  v.message = (message.empty() ? std::string("ended") : std::string(message)) +
              ": structured output incomplete";
  return v;
}

}  // namespace ari::component
