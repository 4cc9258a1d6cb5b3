// Internal to the tokenizer: compact storage for a vocabulary's strings and their index.
// A 32000-token vocabulary kept as one std::string per token, an unordered_map node per
// token and a second std::string per piece is ~4 MiB in ~100k heap blocks; building it is
// mostly first-touch page faults, ~12 ms of the engine's start on a VM whose faults are
// slow. Packed, the same vocabulary is one character buffer and one offset array per table
// and one slot array for the index (~1 MiB, a handful of allocations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ari::runtime::tok {

// Strings stored back to back in one buffer; string i is a view into it. Append-only; at
// most kMaxChars characters in all (the caller checks: CheckSpec).
class PackedStrings {
 public:
  static constexpr size_t kMaxChars = UINT32_MAX;
  void Reserve(size_t count, size_t chars);
  void Append(std::string_view s);
  void Clear();
  size_t size() const { return ends_.size(); }
  size_t chars() const { return chars_.size(); }  // of all strings together
  std::string_view operator[](size_t i) const {
    const size_t b = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(chars_).substr(b, ends_[i] - b);
  }

 private:
  std::string chars_;
  std::vector<uint32_t> ends_;  // ends_[i]: one past the last char of string i
};

// Text -> id over a PackedStrings: open addressing with linear probing, a power-of-two
// table at most half full. Where a text occurs twice the last id wins (as llama.cpp's
// token_to_id map, filled in id order).
class TokenIndex {
 public:
  void Build(const PackedStrings& texts);
  // -1 when `text` is not in the table.
  int32_t Find(const PackedStrings& texts, std::string_view text) const;

 private:
  std::vector<int32_t> slots_;  // id, or -1 for an empty slot
  size_t mask_ = 0;
};

}  // namespace ari::runtime::tok
