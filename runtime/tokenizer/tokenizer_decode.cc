// Decoding: whole sequence (Tokenizer::Decode) and streaming (StreamDecoder), sharing the
// SPM leading-space rule of Tokenizer::NextPiece.
#include <span>
#include <string>
#include <string_view>

#include "runtime/core/utf8.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {

bool Tokenizer::TakesLeadingSpace(TokenId id, bool special) const {
  return id != Bos() && !Piece(id, special).empty();
}

std::string_view Tokenizer::NextPiece(TokenId id, bool special, bool& strip_pending) const {
  std::string_view piece = Piece(id, special);
  if (strip_pending && TakesLeadingSpace(id, special)) {
    strip_pending = false;
    if (piece.front() == ' ') piece.remove_prefix(1);
  }
  return piece;
}

std::string Tokenizer::Decode(const std::vector<TokenId>& ids, bool special) const {
  std::string out;
  bool strip = AddSpacePrefix();
  for (TokenId id : ids) out += NextPiece(id, special, strip);
  return out;
}

// ---- StreamDecoder -------------------------------------------------------------------

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool special)
    : tok_(&tok), special_(special), first_(tok.AddSpacePrefix()) {}

void StreamDecoder::Push(TokenId id, std::string& out) {
  Feed(tok_->NextPiece(id, special_, first_), out);
}

void StreamDecoder::Feed(std::string_view bytes, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (pending_.empty()) {
      if (b < 0x80) {  // ASCII run
        size_t j = i + 1;
        while (j < bytes.size() && static_cast<uint8_t>(bytes[j]) < 0x80) ++j;
        out.append(bytes.substr(i, j - i));
        i = j;
        continue;
      }
      if (Utf8LeadLength(b) == 0) {
        out.append(kReplacement);
      } else {
        pending_.push_back(static_cast<char>(b));
      }
      ++i;
      continue;
    }
    if (!Utf8ValidContinuation(static_cast<uint8_t>(pending_[0]), pending_.size(),
                               b)) {  // maximal invalid subpart ends here; retry b afresh
      out.append(kReplacement);
      pending_.clear();
      continue;
    }
    pending_.push_back(static_cast<char>(b));
    ++i;
    if (pending_.size() == Utf8LeadLength(static_cast<uint8_t>(pending_[0]))) {
      out.append(pending_);
      pending_.clear();
    }
  }
}

void StreamDecoder::Flush(std::string& out) {
  if (!pending_.empty()) {
    out.append(kReplacement);
    pending_.clear();
  }
}

void StreamDecoder::Reset(std::span<const TokenId> context) {
  pending_.clear();
  first_ = tok_->AddSpacePrefix();
  for (size_t i = 0; first_ && i < context.size(); ++i) {
    first_ = !tok_->TakesLeadingSpace(context[i], special_);
  }
}

}  // namespace ari::runtime
