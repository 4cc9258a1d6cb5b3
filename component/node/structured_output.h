// Constrained decoding for ari-node (docs/structured_output.md, docs/interface.md):
// the schema registry of the node config, the compilation of a request's response format,
// and the preallocated pool of TokenConstraints that admitted constrained requests use.
//
//   auto so = StructuredOutput::Create(config.structured_output(), base_dir, *tokenizer);
//   auto grammar = (*so)->GrammarFor(request.response_format);  // intake thread
//   int32_t slot = (*so)->pool().Acquire(*grammar);             // -1: pool full (BUSY)
//   sr.sampling.constraint = (*so)->pool().Get(slot);
//   ... at the terminal: (*so)->pool().Get(slot)->Complete(); (*so)->pool().Release(slot);
//
// Every registered file is compiled once at Create (a bad file: the node does not start,
// the error names the file and the compiler's line:column or JSON pointer). The token trie
// is built once, from the main model's tokenizer; the memory ladder's fallback model runs
// the same vocabulary (checked token by token when it is mapped, fallback_model.h), so the
// same trie serves it. Inline texts are compiled at intake, on the transport's receive
// thread, never on the scheduler thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ari.h"
#include "component/client/error.h"
#include "idl/node_config.pb.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/grammar/token_trie.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::component {

// A fixed set of TokenConstraints built at node start; Acquire/Release allocate nothing
// (the free list has its capacity reserved), so the scheduler thread can release one at a
// terminal. Thread-safe.
class ConstraintPool {
 public:
  ConstraintPool(std::shared_ptr<const runtime::TokenTrie> trie,
                 std::shared_ptr<const runtime::CompiledGrammar> initial, int32_t size);
  // A free constraint rebound to `grammar` (reset), or -1 when all are in use.
  int32_t Acquire(std::shared_ptr<const runtime::CompiledGrammar> grammar);
  void Release(int32_t slot);
  runtime::TokenConstraint* Get(int32_t slot) const {
    return all_[static_cast<size_t>(slot)].get();
  }
  int32_t size() const { return static_cast<int32_t>(all_.size()); }
  int32_t in_use() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<runtime::TokenConstraint>> all_;
  std::vector<int32_t> free_;  // capacity == all_.size()
  std::vector<uint8_t> used_;  // double-release guard
};

struct StructuredOutputLimits {
  uint32_t max_inline_bytes = ari_kFormatTextLen;
  int32_t max_in_flight = 4;
};

class StructuredOutput {
 public:
  // Compiles the registry (paths relative to `base_dir`), builds the trie and the pool.
  static Result<std::unique_ptr<StructuredOutput>> Create(
      const config::StructuredOutputConfig& config, const std::filesystem::path& base_dir,
      const runtime::Tokenizer& tokenizer);

  // The grammar a request's response format asks for: nullptr for RESPONSE_FORMAT_NONE;
  // kInvalidArgument (the message for the INVALID terminal) for an unknown name or an
  // inline text that does not compile (the compiler names the position).
  Result<std::shared_ptr<const runtime::CompiledGrammar>> GrammarFor(
      const ari_ResponseFormat& format) const;

  ConstraintPool& pool() { return *pool_; }
  const StructuredOutputLimits& limits() const { return limits_; }
  const runtime::TokenTrie& trie() const { return *trie_; }
  std::vector<std::string> names() const;

 private:
  StructuredOutput() = default;
  StructuredOutputLimits limits_;
  std::map<std::string, std::shared_ptr<const runtime::CompiledGrammar>, std::less<>> registry_;
  std::shared_ptr<const runtime::TokenTrie> trie_;
  std::unique_ptr<ConstraintPool> pool_;
};

// The terminal's message and format state of a constrained request from the scheduler's
// status and message and the constraint's end state (docs/interface.md "Structured output").
struct FormatVerdict {
  ari_FormatState state = ari_FORMAT_NONE;
  bool dead_end = false;  // the vocabulary could not continue: the terminal becomes FAILED
  std::string message;
};
FormatVerdict JudgeFormat(const runtime::TokenConstraint& constraint, ari_ChunkStatus status,
                          std::string_view message);

}  // namespace ari::component
