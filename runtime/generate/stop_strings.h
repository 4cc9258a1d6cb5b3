// Stop strings over streamed text: what the reference loop (generate.h) and the engine's
// callers (ari-run) share. Holds back a tail of the text that could still become a stop
// string, and truncates the text at the first match.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ari::runtime {

using TextCallback = std::function<bool(std::string_view piece)>;

// Streams text while holding back a tail that could still become a stop string.
class StopStringFilter {
 public:
  StopStringFilter(const std::vector<std::string>& stops, std::string& text, const TextCallback& cb)
      : stops_(stops), text_(text), cb_(cb) {
    for (const std::string& s : stops_) max_len_ = std::max(max_len_, s.size());
  }
  // Called after text_ grew. Returns false when a stop string matched (text_ truncated) or
  // the callback asked to stop (*by_callback set).
  bool Update(bool* by_callback) {
    const size_t from = emitted_ > max_len_ ? emitted_ - max_len_ : 0;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      if (s.empty()) continue;
      const size_t p = text_.find(s, from);
      if (p != std::string::npos) cut = std::min(cut, p);
    }
    if (cut != std::string::npos) {
      text_.resize(cut);
      Emit(cut, by_callback);
      return false;
    }
    size_t safe = text_.size();
    for (const std::string& s : stops_) {  // longest text suffix that is a prefix of s
      for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); k > 0; --k) {
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, text_.size() - k);
          break;
        }
      }
    }
    return Emit(std::max(safe, emitted_), by_callback);
  }
  bool Finish(bool* by_callback) { return Emit(text_.size(), by_callback); }

 private:
  bool Emit(size_t upto, bool* by_callback) {
    if (upto <= emitted_) return true;
    const std::string_view piece(text_.data() + emitted_, upto - emitted_);
    emitted_ = upto;
    if (cb_ && !cb_(piece)) {
      *by_callback = true;
      return false;
    }
    return true;
  }
  const std::vector<std::string>& stops_;
  std::string& text_;
  const TextCallback& cb_;
  size_t max_len_ = 0;
  size_t emitted_ = 0;
};

}  // namespace ari::runtime
