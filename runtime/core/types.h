// Vocabulary types shared by every runtime layer: token ids, weight precisions, KV cache
// types, why generation stopped. Here (and not in tokenizer/, engine/ or generate/) so a
// lower layer can name them without including a higher one.
#pragma once

#include <cstdint>
#include <string_view>

namespace ari::runtime {

using TokenId = int32_t;

enum class Precision : uint8_t {
  kReference,  // fp32 reference forward over whatever the GGUF holds (plain files)
  kW8A16,      // packed 8-bit weights, fp16 activations, fp32 accumulate
  kW4A8,       // packed 4-bit weights, int8 activations, integer dot products
};
std::string_view PrecisionName(Precision p);

enum class KvType : uint8_t { kF32, kF16, kInt8 };
std::string_view KvTypeName(KvType k);

enum class StopReason : uint8_t {
  kMaxTokens,    // generated max_tokens tokens
  kEndOfGen,     // the tokenizer's end-of-generation token (EOS, EOT...)
  kBos,          // BOS generated (llama2.c convention: it starts a new text)
  kStopString,   // a stop string appeared in the text
  kContextFull,  // the session's KV cache is full
  kCallback,     // the text callback asked to stop
  // Constrained decoding (runtime/grammar/token_constraint.h, docs/structured_output.md):
  kGrammarDone,     // the output is a complete sentence of the grammar (valid)
  kGrammarDeadEnd,  // no token of the vocabulary can continue the grammar (incomplete)
};
std::string_view StopReasonName(StopReason r);

}  // namespace ari::runtime
