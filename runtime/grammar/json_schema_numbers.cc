// Exact range automata for integers and bounded decimals (json_schema.h).
#include <string>

#include "runtime/grammar/json_schema.h"

namespace ari::runtime::schema_internal {

namespace {

bool All(std::string_view s, char c) { return s.find_first_not_of(c) == std::string_view::npos; }

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return " [0-9]";
  std::string out = " [0-9]{";  // by append: GCC 12 -Wrestrict false positive otherwise
  out += std::to_string(n);
  out += '}';
  return out;
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return std::string(" \"") + lo + "\"";
  return std::string(" [") + lo + "-" + hi + "]";
}

// Digit strings of a's length between a and b (same length, a <= b; leading zeros allowed).
std::string SameLength(std::string_view a, std::string_view b) {
  if (a.empty()) return "";
  if (a == b) return " \"" + std::string(a) + "\"";
  const std::string_view ar = a.substr(1), br = b.substr(1);
  const bool low_full = All(ar, '0'), high_full = All(br, '9');
  if (low_full && high_full) return DigitClass(a[0], b[0]) + AnyDigits(ar.size());
  if (a[0] == b[0]) return DigitClass(a[0], a[0]) + " (" + SameLength(ar, br) + " )";
  std::string out;
  auto add = [&out](const std::string& alt) {
    if (!out.empty()) out += " |";
    out += alt;
  };
  char mid_lo = static_cast<char>(a[0] + 1), mid_hi = static_cast<char>(b[0] - 1);
  if (low_full) {
    mid_lo = a[0];
  } else {
    add(DigitClass(a[0], a[0]) + " (" + SameLength(ar, std::string(ar.size(), '9')) + " )");
  }
  if (high_full) mid_hi = b[0];
  if (mid_lo <= mid_hi) add(DigitClass(mid_lo, mid_hi) + AnyDigits(ar.size()));
  if (!high_full) {
    add(DigitClass(b[0], b[0]) + " (" + SameLength(std::string(br.size(), '0'), br) + " )");
  }
  return out;
}

uint64_t Pow10(size_t n) {
  uint64_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= 10;
  return p;
}

// Non-negative integers in [lo, hi], canonical (no leading zeros).
std::string NonNegative(uint64_t lo, uint64_t hi) {
  const std::string ls = std::to_string(lo), hs = std::to_string(hi);
  std::string out;
  for (size_t d = ls.size(); d <= hs.size(); ++d) {
    const uint64_t a = d == ls.size() ? lo : Pow10(d - 1);
    const uint64_t b = d == hs.size() ? hi : Pow10(d) - 1;
    if (!out.empty()) out += " |";
    out += SameLength(std::to_string(a), std::to_string(b));
  }
  return "(" + out + " )";
}

uint64_t Abs(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

// Non-negative decimals with a value in [lo, hi] (integers): an integer part below hi with
// any fraction, or hi itself with a zero fraction.
std::string NonNegativeDecimal(uint64_t lo, uint64_t hi) {
  const std::string digits = std::to_string(kFractionDigits);
  std::string frac = " ( \".\" [0-9]{1,";
  frac += digits;
  frac += "} )?";
  std::string zeros = " ( \".\" \"0\"{1,";
  zeros += digits;
  zeros += "} )?";
  std::string top = " \"";
  top += std::to_string(hi);
  top += '"';
  top += zeros;
  if (lo == hi) return "(" + top + " )";
  return "( " + NonNegative(lo, hi - 1) + frac + " |" + top + " )";
}

}  // namespace

std::string IntegerRange(int64_t lo, int64_t hi) {
  if (lo >= 0) return NonNegative(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  if (hi < 0) return "( \"-\" " + NonNegative(Abs(hi), Abs(lo)) + " )";
  return "( \"-\" " + NonNegative(1, Abs(lo)) + " | " + NonNegative(0, static_cast<uint64_t>(hi)) +
         " )";
}

std::string DecimalRange(int64_t lo, int64_t hi) {
  if (lo >= 0) return NonNegativeDecimal(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  if (hi < 0) return "( \"-\" " + NonNegativeDecimal(Abs(hi), Abs(lo)) + " )";
  return "( \"-\" " + NonNegativeDecimal(0, Abs(lo)) + " | " +
         NonNegativeDecimal(0, static_cast<uint64_t>(hi)) + " )";
}

}  // namespace ari::runtime::schema_internal
