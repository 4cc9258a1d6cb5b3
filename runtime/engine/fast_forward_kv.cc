// FastForward::ConvertKv: in-place KV conversion of a live slot (F32/F16 -> INT8, F32 -> F16);
// see runtime/engine/fast_forward.h.
#include <cstring>

#include "runtime/core/tensor_types.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/kv_int8.h"
#include "runtime/model/model.h"

namespace ari::runtime {

Result<void> FastForward::ConvertKv(KvCacheView& kv, KvType to, int32_t positions) const {
  const ModelConfig& c = model_->config();
  if (kv.type == to) return {};
  const size_t from_rb = KvCacheView::RowBytes(c, kv.type);
  const size_t to_rb = KvCacheView::RowBytes(c, to);
  if (to_rb > from_rb || (to == KvType::kInt8 && KvCacheView::Int8Group(c) == 0)) {
    return MakeError(ErrorCode::kUnsupported, "fast forward: KV conversion would grow rows");
  }
  if (positions < 0 || positions > kv.ctx) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: KV conversion positions");
  }
  const int64_t kvd = c.kv_dim();
  const int64_t g = KvCacheView::Int8Group(c);
  float* row = b_.k;  // scratch: [max_tokens, kv_dim] floats, kv_dim needed
  const kernels::KernelTable& k = kernels::ActiveKernels();
  // Row r is read whole into `row` before its new bytes are written, and the new row r ends
  // at (r + 1) * to_rb <= (r + 1) * from_rb: the start of source row r + 1. Increasing r
  // therefore never overwrites a row not yet converted.
  for (void* half : {kv.k, kv.v}) {
    auto* base = static_cast<std::byte*>(half);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      for (int32_t pos = 0; pos < positions; ++pos) {
        const size_t r = static_cast<size_t>(l) * kv.ctx + static_cast<size_t>(pos);
        const std::byte* src = base + r * from_rb;
        if (kv.type == KvType::kF16) {
          const auto* h = reinterpret_cast<const uint16_t*>(src);
          for (int64_t i = 0; i < kvd; ++i) row[i] = Fp16ToFp32(h[i]);
        } else if (kv.type == KvType::kF32) {
          std::memcpy(row, src, static_cast<size_t>(kvd) * sizeof(float));
        } else {
          return MakeError(ErrorCode::kUnsupported, "fast forward: INT8 KV cannot be widened");
        }
        std::byte* dst = base + r * to_rb;
        if (to == KvType::kInt8) {
          kernels::QuantizeKvInt8(row, kvd, g, reinterpret_cast<int8_t*>(dst),
                                  reinterpret_cast<float*>(dst + kvd));
        } else {
          k.convert_f16(row, kvd, reinterpret_cast<uint16_t*>(dst));
        }
      }
    }
  }
  kv.type = to;
  return {};
}

}  // namespace ari::runtime
