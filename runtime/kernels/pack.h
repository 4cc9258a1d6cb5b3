// Packing GGUF / float matrices into the kernels' interleaved layouts (layout.h).
// Not on the hot path: ari-pack and tests use these; they allocate temporaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/core/error.h"
#include "runtime/core/tensor_types.h"
#include "runtime/kernels/layout.h"

namespace ari::runtime::kernels {

// Packs a rows x cols matrix whose row r starts at src + r * src_row_bytes and holds `cols`
// values of `src_type` (any supported type: float, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 need
// cols % 32 == 0, the K-quants Q4_K, Q5_K, Q6_K cols % 256 == 0, as in GGUF) into dst,
// which must hold PackedBytes(precision, rows, cols) bytes.
//  - kQ8_0 -> kW8 and kQ4_0 -> kW4 copy scales and quants unchanged (no requantization).
//  - Any other pair dequantizes the row to fp32, zero-pads it to PaddedCols(cols) and
//    quantizes it as ggml's reference Q8_0 / Q4_0 quantizer does (QuantizeRow), so packing
//    an F32 row equals packing the Q8_0/Q4_0 row ggml would produce (when cols % 32 == 0).
// Padding: tail-group columns and padding rows hold value 0 (W8 q = 0, W4 q = 8; padding
// rows also scale 0).
Result<void> PackMatrix(PackedPrecision precision, TensorType src_type, const std::byte* src,
                        int64_t src_row_bytes, int64_t rows, int64_t cols,
                        std::span<std::byte> dst);

// Convenience for contiguous fp32 rows (src_row_bytes = cols * 4).
Result<void> PackF32(PackedPrecision precision, const float* src, int64_t rows, int64_t cols,
                     std::span<std::byte> dst);

// Dequantizes row `row` of a packed matrix into out[0 .. cols).
Result<void> UnpackRow(const PackedMatrix& w, int64_t row, std::span<float> out);

}  // namespace ari::runtime::kernels
