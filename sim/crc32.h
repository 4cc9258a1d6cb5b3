// CRC-32 (IEEE 802.3 / zlib polynomial 0xEDB88320, reflected, init and final
// xor 0xFFFFFFFF): Crc32("123456789") == 0xCBF43926. Used by the drive-log
// record framing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ari::sim {

// Continues a CRC: Crc32(b, Crc32(a)) == Crc32(a + b). Start with crc = 0.
uint32_t Crc32(std::span<const uint8_t> data, uint32_t crc = 0);
inline uint32_t Crc32(std::string_view data, uint32_t crc = 0) {
  return Crc32(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
               crc);
}

}  // namespace ari::sim
