#include "component/node/identity.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace ari::component {
namespace {

// ------------------------------------------------------------------ SHA-256 (FIPS 180-4)
constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void Compress(uint32_t h[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (size_t i = 0; i < 16; ++i) {
    w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
           (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 =
        hh + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
    const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += hh;
}

// ------------------------------------------------------------------ DER
struct Tlv {
  uint8_t tag = 0;
  size_t header = 0;  // tag + length bytes
  size_t length = 0;  // content bytes
  size_t total() const { return header + length; }
};

// Reads one TLV at data[pos..]; false when it does not fit (or uses unsupported forms).
bool ReadTlv(std::span<const uint8_t> data, size_t pos, Tlv* out) {
  if (pos >= data.size() || data.size() - pos < 2) return false;
  Tlv t;
  t.tag = data[pos];
  if ((t.tag & 0x1f) == 0x1f) return false;  // high tag numbers: not in certificates
  const uint8_t first = data[pos + 1];
  size_t len = 0, header = 2;
  if (first < 0x80) {
    len = first;
  } else {
    const size_t n = first & 0x7f;
    if (n == 0 || n > 4 || data.size() - pos - 2 < n) return false;  // indefinite / huge
    for (size_t i = 0; i < n; ++i) len = (len << 8) | data[pos + 2 + i];
    header += n;
  }
  if (len > data.size() - pos - header) return false;
  t.header = header;
  t.length = len;
  *out = t;
  return true;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::array<uint8_t, 32> Sha256(std::span<const uint8_t> data) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t i = 0;
  for (; data.size() - i >= 64; i += 64) Compress(h, data.data() + i);
  uint8_t tail[128] = {};
  const size_t rest = data.size() - i;
  if (rest) std::memcpy(tail, data.data() + i, rest);
  tail[rest] = 0x80;
  const size_t blocks = rest + 9 <= 64 ? 1 : 2;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  for (int b = 0; b < 8; ++b) tail[blocks * 64 - 1 - b] = static_cast<uint8_t>(bits >> (8 * b));
  for (size_t b = 0; b < blocks; ++b) Compress(h, tail + 64 * b);
  std::array<uint8_t, 32> out{};
  for (size_t k = 0; k < 8; ++k) {
    out[4 * k] = static_cast<uint8_t>(h[k] >> 24);
    out[4 * k + 1] = static_cast<uint8_t>(h[k] >> 16);
    out[4 * k + 2] = static_cast<uint8_t>(h[k] >> 8);
    out[4 * k + 3] = static_cast<uint8_t>(h[k]);
  }
  return out;
}

Result<std::vector<uint8_t>> PemCertificateToDer(std::string_view pem) {
  constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  const size_t b = pem.find(kBegin);
  if (b == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "no BEGIN CERTIFICATE line");
  }
  const size_t e = pem.find(kEnd, b + kBegin.size());
  if (e == std::string_view::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "no END CERTIFICATE line");
  }
  std::vector<uint8_t> der;
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (char c : pem.substr(b + kBegin.size(), e - b - kBegin.size())) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int v = Base64Value(c);
    if (v < 0 || padding) return MakeError(ErrorCode::kInvalidArgument, "bad base64 in PEM");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      der.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  if (der.empty()) return MakeError(ErrorCode::kInvalidArgument, "empty certificate");
  return der;
}

Result<std::vector<uint8_t>> CertificateSubjectDer(std::span<const uint8_t> der) {
  auto bad = [](const char* what) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("certificate DER: ") + what);
  };
  Tlv cert, tbs, field;
  if (!ReadTlv(der, 0, &cert) || cert.tag != 0x30) return bad("not a SEQUENCE");
  const std::span<const uint8_t> body = der.subspan(cert.header, cert.length);
  if (!ReadTlv(body, 0, &tbs) || tbs.tag != 0x30) return bad("no tbsCertificate");
  const std::span<const uint8_t> t = body.subspan(tbs.header, tbs.length);
  size_t pos = 0;
  if (!ReadTlv(t, pos, &field)) return bad("truncated tbsCertificate");
  if (field.tag == 0xa0) {  // [0] EXPLICIT version
    pos += field.total();
    if (!ReadTlv(t, pos, &field)) return bad("truncated after version");
  }
  if (field.tag != 0x02) return bad("no serial number");
  pos += field.total();
  // signature AlgorithmIdentifier, issuer Name, validity: three SEQUENCEs; then subject.
  for (const char* what : {"signature algorithm", "issuer", "validity"}) {
    if (!ReadTlv(t, pos, &field) || field.tag != 0x30) return bad(what);
    pos += field.total();
  }
  if (!ReadTlv(t, pos, &field) || field.tag != 0x30) return bad("subject");
  const auto s = t.subspan(pos, field.total());
  return std::vector<uint8_t>(s.begin(), s.end());
}

Result<GuidPrefix6> GuidPrefixForCertificate(std::string_view pem) {
  auto der = PemCertificateToDer(pem);
  if (!der) return std::unexpected(der.error());
  auto subject = CertificateSubjectDer(*der);
  if (!subject) return std::unexpected(subject.error());
  const auto high = Sha256(*subject);
  GuidPrefix6 p;
  uint8_t carry = 0x80;  // bit 0 set, then the hash shifted right by one bit
  for (int i = 0; i < 6; ++i) {
    p[i] = static_cast<uint8_t>(carry | (high[i] >> 1));
    carry = static_cast<uint8_t>(high[i] << 7);
  }
  return p;
}

Result<GuidPrefix6> GuidPrefixForCertificateFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kConfig, "cannot read certificate " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = GuidPrefixForCertificate(ss.str());
  if (!p) return MakeError(ErrorCode::kConfig, path.string() + ": " + p.error().message);
  return p;
}

bool GuidHasPrefix(std::span<const uint8_t> guid, const GuidPrefix6& prefix) {
  return guid.size() >= prefix.size() &&
         std::memcmp(guid.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace ari::component
