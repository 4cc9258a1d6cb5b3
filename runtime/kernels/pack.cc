#include "runtime/kernels/pack.h"

#include <cstring>
#include <string>
#include <vector>

#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels {
namespace {

using internal::LoadU16;

void StoreU16(std::byte* p, uint16_t v) {
  p[0] = static_cast<std::byte>(v & 0xffu);
  p[1] = static_cast<std::byte>(v >> 8);
}

// Writes one GGUF-format block (Q8_0 for kW8, Q4_0 for kW4) as row i of tile `tile`.
void PutW8(std::byte* tile, int64_t i, const BlockQ8_0& blk) {
  StoreU16(tile + 2 * i, blk.d);
  std::memcpy(tile + 16 + 32 * i, blk.qs, 32);
}

void PutW4(std::byte* tile, int64_t i, const BlockQ4_0& blk) {
  StoreU16(tile + 2 * i, blk.d);
  // Q4_0 byte jj (jj < 16) holds quants jj (low) and jj + 16 (high): exactly the packed
  // byte 32 * (jj / 4) + 4 * i + jj % 4.
  for (int64_t v = 0; v < 4; ++v) std::memcpy(tile + 16 + 32 * v + 4 * i, blk.qs + 4 * v, 4);
}

// Quant j of row i of a packed tile (W8: int8; W4: nibble - 8, layout.h).
int PackedQuant(const std::byte* tile, PackedPrecision precision, int64_t i, int j) {
  if (precision == PackedPrecision::kW8) {
    return static_cast<int>(std::to_integer<int8_t>(tile[16 + 32 * i + j]));
  }
  const int jj = j & 15;
  const auto b = static_cast<unsigned>(tile[16 + 32 * (jj >> 2) + 4 * i + (jj & 3)]);
  return static_cast<int>(j < 16 ? (b & 0x0fu) : (b >> 4)) - 8;
}

}  // namespace

Result<void> PackMatrix(PackedPrecision precision, TensorType src_type, const std::byte* src,
                        int64_t src_row_bytes, int64_t rows, int64_t cols,
                        std::span<std::byte> dst) {
  if (rows <= 0 || cols <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "pack: empty matrix " + std::to_string(rows) + "x" + std::to_string(cols));
  }
  if (!IsSupportedTensorType(static_cast<uint32_t>(src_type))) {
    return MakeError(ErrorCode::kUnsupported, "pack: unsupported source tensor type");
  }
  auto row_bytes = RowBytes(src_type, cols);
  if (!row_bytes) {
    return MakeError(ErrorCode::kInvalidArgument, "pack: " + row_bytes.error().message);
  }
  if (src == nullptr || src_row_bytes < static_cast<int64_t>(*row_bytes)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "pack: source row stride " + std::to_string(src_row_bytes) +
                         " is smaller than a row (" + std::to_string(*row_bytes) + " bytes)");
  }
  const int64_t need = PackedBytes(precision, rows, cols);
  if (static_cast<int64_t>(dst.size()) < need) {
    return MakeError(ErrorCode::kInvalidArgument, "pack: destination holds " +
                                                      std::to_string(dst.size()) + " bytes, need " +
                                                      std::to_string(need));
  }
  const int64_t groups = Groups(cols);
  const int64_t padded = PaddedCols(cols);
  const int64_t tile_bytes = TileBytes(precision);
  const bool w8 = precision == PackedPrecision::kW8;
  // Zero value everywhere first: scale 0, W8 q 0, W4 nibbles 8.
  for (int64_t t = 0; t < need / tile_bytes; ++t) {
    std::byte* tile = dst.data() + t * tile_bytes;
    std::memset(tile, 0, 16);
    std::memset(tile + 16, w8 ? 0 : 0x88, static_cast<size_t>(tile_bytes - 16));
  }
  const bool direct =
      (w8 && src_type == TensorType::kQ8_0) || (!w8 && src_type == TensorType::kQ4_0);
  std::vector<float> f32(direct ? 0 : static_cast<size_t>(padded), 0.0f);
  std::vector<std::byte> blocks(static_cast<size_t>(groups) *
                                (w8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0)));
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* row = src + r * src_row_bytes;
    const std::byte* qrow = row;
    if (!direct) {
      DequantizeRow(src_type, row, f32.data(), cols);  // tail [cols, padded) stays 0
      QuantizeRow(w8 ? TensorType::kQ8_0 : TensorType::kQ4_0, f32.data(), blocks.data(), padded);
      qrow = blocks.data();
    }
    std::byte* block = dst.data() + (r / kRowInterleave) * groups * tile_bytes;
    const int64_t i = r % kRowInterleave;
    for (int64_t g = 0; g < groups; ++g) {
      std::byte* tile = block + g * tile_bytes;
      if (w8) {
        BlockQ8_0 blk{};
        std::memcpy(&blk, qrow + g * sizeof(BlockQ8_0), sizeof blk);
        PutW8(tile, i, blk);
      } else {
        BlockQ4_0 blk{};
        std::memcpy(&blk, qrow + g * sizeof(BlockQ4_0), sizeof blk);
        PutW4(tile, i, blk);
      }
    }
  }
  return {};
}

Result<void> PackF32(PackedPrecision precision, const float* src, int64_t rows, int64_t cols,
                     std::span<std::byte> dst) {
  return PackMatrix(precision, TensorType::kF32, reinterpret_cast<const std::byte*>(src),
                    cols * static_cast<int64_t>(sizeof(float)), rows, cols, dst);
}

Result<void> UnpackRow(const PackedMatrix& w, int64_t row, std::span<float> out) {
  if (w.data == nullptr || row < 0 || row >= w.rows || static_cast<int64_t>(out.size()) < w.cols) {
    return MakeError(ErrorCode::kInvalidArgument, "unpack: row " + std::to_string(row) + " of " +
                                                      std::to_string(w.rows) + " or output of " +
                                                      std::to_string(out.size()) + " < " +
                                                      std::to_string(w.cols) + " values");
  }
  const int64_t groups = Groups(w.cols);
  const int64_t tile_bytes = TileBytes(w.precision);
  const std::byte* block = w.data + (row / kRowInterleave) * groups * tile_bytes;
  const int64_t i = row % kRowInterleave;
  for (int64_t g = 0; g < groups; ++g) {
    const std::byte* tile = block + g * tile_bytes;
    const float d = Fp16ToFp32(LoadU16(tile + 2 * i));
    for (int j = 0; j < kGroup; ++j) {
      const int64_t c = g * kGroup + j;
      if (c >= w.cols) break;
      const int q = PackedQuant(tile, w.precision, i, j);
      out[static_cast<size_t>(c)] = d * static_cast<float>(q);
    }
  }
  return {};
}

}  // namespace ari::runtime::kernels
