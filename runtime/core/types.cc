// Names of the shared vocabulary types (runtime/core/types.h).
#include "runtime/core/types.h"

namespace ari::runtime {

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kReference: return "reference";
    case Precision::kW8A16: return "w8a16";
    case Precision::kW4A8: return "w4a8";
  }
  return "?";
}

std::string_view KvTypeName(KvType k) {
  switch (k) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kInt8: return "int8";
  }
  return "?";
}

std::string_view StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kEndOfGen: return "end_of_generation";
    case StopReason::kBos: return "bos";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kCallback: return "callback";
    case StopReason::kGrammarDone: return "grammar_done";
    case StopReason::kGrammarDeadEnd: return "grammar_dead_end";
  }
  return "unknown";
}

}  // namespace ari::runtime
