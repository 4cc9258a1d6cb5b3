// Decoding: whole sequence (Tokenizer::Decode) and streaming (StreamDecoder), sharing the
// SPM leading-space rule of Tokenizer::NextPiece.
#include <string>
#include <string_view>

#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {

std::string_view Tokenizer::NextPiece(TokenId id, bool special, bool& strip_pending) const {
  std::string_view piece = Piece(id, special);
  if (strip_pending && id != Bos() && !piece.empty()) {
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

// Length of the sequence a lead byte starts, 0 when it cannot start one (strict UTF-8).
size_t LeadLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `b` may follow the partial sequence `seq` (lead byte first).
bool ValidNext(std::string_view seq, uint8_t b) {
  if (seq.size() == 1) {
    switch (static_cast<uint8_t>(seq[0])) {
      case 0xE0: return b >= 0xA0 && b <= 0xBF;  // no overlong
      case 0xED: return b >= 0x80 && b <= 0x9F;  // no surrogates
      case 0xF0: return b >= 0x90 && b <= 0xBF;  // no overlong
      case 0xF4: return b >= 0x80 && b <= 0x8F;  // <= U+10FFFF
      default: break;
    }
  }
  return b >= 0x80 && b <= 0xBF;
}

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
      if (LeadLength(b) == 0) {
        out.append(kReplacement);
      } else {
        pending_.push_back(static_cast<char>(b));
      }
      ++i;
      continue;
    }
    if (!ValidNext(pending_, b)) {  // maximal invalid subpart ends here; retry b afresh
      out.append(kReplacement);
      pending_.clear();
      continue;
    }
    pending_.push_back(static_cast<char>(b));
    ++i;
    if (pending_.size() == LeadLength(static_cast<uint8_t>(pending_[0]))) {
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

void StreamDecoder::Reset() {
  pending_.clear();
  first_ = tok_->AddSpacePrefix();
}

}  // namespace ari::runtime
