// Compact vocabulary storage; see vocab_store.h.
#include "runtime/tokenizer/vocab_store.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace ari::runtime::tok {

void PackedStrings::Reserve(size_t count, size_t chars) {
  ends_.reserve(count);
  chars_.reserve(chars);
}

void PackedStrings::Append(std::string_view s) {
  chars_.append(s);
  ends_.push_back(static_cast<uint32_t>(chars_.size()));
}

void PackedStrings::Clear() {
  chars_.clear();
  ends_.clear();
}

void TokenIndex::Build(const PackedStrings& texts) {
  const size_t n = texts.size();
  const size_t cap = std::bit_ceil(std::max<size_t>(2 * n, 16));
  slots_.assign(cap, -1);
  mask_ = cap - 1;
  const std::hash<std::string_view> hash;
  for (size_t id = 0; id < n; ++id) {
    const std::string_view t = texts[id];
    size_t s = hash(t) & mask_;
    while (slots_[s] >= 0 && texts[static_cast<size_t>(slots_[s])] != t) s = (s + 1) & mask_;
    slots_[s] = static_cast<int32_t>(id);  // a repeated text: the later id replaces it
  }
}

int32_t TokenIndex::Find(const PackedStrings& texts, std::string_view text) const {
  if (slots_.empty()) return -1;
  size_t s = std::hash<std::string_view>{}(text)&mask_;
  while (slots_[s] >= 0) {
    if (texts[static_cast<size_t>(slots_[s])] == text) return slots_[s];
    s = (s + 1) & mask_;
  }
  return -1;
}

}  // namespace ari::runtime::tok
