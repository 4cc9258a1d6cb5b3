// UTF-8 helpers (runtime/core/utf8.h).
#include "runtime/core/utf8.h"

namespace ari::runtime {

size_t Utf8LeadLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

bool Utf8ValidContinuation(uint8_t lead, size_t index, uint8_t b) {
  if (index == 1) {
    switch (lead) {
      case 0xE0: return b >= 0xA0 && b <= 0xBF;  // no overlong
      case 0xED: return b >= 0x80 && b <= 0x9F;  // no surrogates
      case 0xF0: return b >= 0x90 && b <= 0xBF;  // no overlong
      case 0xF4: return b >= 0x80 && b <= 0x8F;  // <= U+10FFFF
      default: break;
    }
  }
  return b >= 0x80 && b <= 0xBF;
}

Utf8Decoded DecodeUtf8At(std::string_view text, size_t i) {
  const auto lead = static_cast<uint8_t>(text[i]);
  const size_t n = Utf8LeadLength(lead);
  if (n == 1) return {lead, 1, true};
  if (n == 0 || i + n > text.size()) return {};
  static constexpr uint8_t kLeadBits[5] = {0, 0, 0x1F, 0x0F, 0x07};
  uint32_t cp = lead & kLeadBits[n];
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(text[i + k]);
    if (!Utf8ValidContinuation(lead, k, b)) return {};
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return {cp, n, true};
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Decoded d = DecodeUtf8At(text, i);
    if (!d.valid) return false;
    i += d.length;
  }
  return true;
}

size_t Utf8Prefix(std::string_view text, size_t max) {
  if (text.size() <= max) return text.size();
  size_t n = max;
  while (n > 0 && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) --n;
  return n == 0 ? max : n;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace ari::runtime
