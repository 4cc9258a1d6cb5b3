// What ran, next to what was decided, per chunk: the TokenChunk trace fields
// (docs/interface.md, "What ran") and the node's per-chunk log line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ari.h"
#include "qos/scheduler.h"

namespace ari::component {

// Sets has_trace, on_fallback, isa_refused, decided, ran, ran_threads_observed and
// pin_failures of `c` from the chunk event (every part of a chunk split over several
// TokenChunks carries the same trace).
void FillChunkTrace(const qos::ChunkEvent& ev, ari_TokenChunk& c);

// One line for the node log (component/client/chunk_trace_text.h, ChunkTraceText): when
// the reference path ran (plain GGUF), the decided precision is not printed.
std::string FormatChunkTrace(const qos::ChunkEvent& ev);
// The same into out[0..cap) without allocating (NUL-terminated); its length.
size_t FormatChunkTraceTo(const qos::ChunkEvent& ev, char* out, size_t cap);

// The decision text as the node shows it (log, NodeStatus.decision, TokenChunk.decision):
// unchanged when the model can switch precision; otherwise the W8A16/W4A8 the policy names
// becomes "fp32 reference" (a plain GGUF runs the reference path whatever was decided).
std::string ShownDecision(std::string text, bool can_switch_precision);
// The same into out[0..cap) without allocating (NUL-terminated, truncated); its length.
size_t ShownDecisionTo(std::string_view text, bool can_switch_precision, char* out, size_t cap);

}  // namespace ari::component
