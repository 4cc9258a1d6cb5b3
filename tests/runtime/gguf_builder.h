// Hand-made GGUF images for reader tests (valid and deliberately broken ones).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace ari::testing {

class ByteBuilder {
 public:
  template <class T>
  size_t Put(T v) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
    return at;
  }
  size_t U8(uint8_t v) { return Put(v); }
  size_t U32(uint32_t v) { return Put(v); }
  size_t U64(uint64_t v) { return Put(v); }
  size_t Str(std::string_view s) {
    const size_t at = U64(s.size());
    for (char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return at;
  }
  size_t Magic() {
    const size_t at = bytes_.size();
    for (char c : std::string_view("GGUF")) bytes_.push_back(static_cast<std::byte>(c));
    return at;
  }
  // Header: magic, version, n_tensors, n_kv.
  void Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    Magic();
    U32(version);
    U64(n_tensors);
    U64(n_kv);
  }
  void PadTo(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(std::byte{0});
  }
  void Zeros(size_t n) { bytes_.resize(bytes_.size() + n); }
  template <class T>
  void PatchAt(size_t at, T v) {
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
  }
  size_t size() const { return bytes_.size(); }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace ari::testing
