#include "component/node/security_check.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <sstream>

#include "component/node/identity.h"

namespace ari::component {
namespace {

constexpr std::string_view kWhy =
    "security.critical_identity_certs grants CRITICAL by authenticated identity, which "
    "needs DDS Security (docs/deployment.md \"Security\"): ";

// XML comments blanked out (same length, so offsets stay valid).
std::string BlankComments(std::string_view xml) {
  std::string s(xml);
  size_t pos = 0;
  while ((pos = s.find("<!--", pos)) != std::string::npos) {
    const size_t end = s.find("-->", pos + 4);
    const size_t stop = end == std::string::npos ? s.size() : end + 3;
    std::fill(s.begin() + static_cast<std::ptrdiff_t>(pos),
              s.begin() + static_cast<std::ptrdiff_t>(stop), ' ');
    pos = stop;
  }
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Text between <tag ...> and </tag> in `text` (lower-cased copy `low`), trimmed; "" if absent.
// "<tag" / "</tag" built by appending (GCC 12 warns on "lit" + string temporaries).
std::string Tag(std::string_view prefix, std::string_view tag, std::string_view suffix = "") {
  std::string t(prefix);
  t.append(tag).append(suffix);
  return t;
}

std::string ElementText(const std::string& text, const std::string& low, std::string_view tag,
                        size_t from, size_t to) {
  const std::string open = Tag("<", tag);
  size_t p = low.find(open, from);
  while (p != std::string::npos && p < to) {
    const char after = low[p + open.size()];
    if (after == '>' || after == ' ' || after == '/' || after == '\t' || after == '\n') break;
    p = low.find(open, p + 1);
  }
  if (p == std::string::npos || p >= to) return "";
  const size_t gt = low.find('>', p);
  if (gt == std::string::npos || low[gt - 1] == '/') return "";
  const size_t close = low.find(Tag("</", tag), gt);
  if (close == std::string::npos || close > to) return "";
  std::string v = text.substr(gt + 1, close - gt - 1);
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  v.erase(v.begin(), std::find_if(v.begin(), v.end(), not_space));
  v.erase(std::find_if(v.rbegin(), v.rend(), not_space).base(), v.end());
  return v;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kConfig, "cannot read Cyclone config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The certificate PEM an IdentityCertificate value names ("file:<path>", "file://<path>",
// "data:,<PEM>").
Result<std::string> CertificatePem(const std::string& value) {
  if (value.rfind("data:,", 0) == 0) return value.substr(6);
  std::string path = value;
  if (path.rfind("file://", 0) == 0) {
    path = path.substr(7);
  } else if (path.rfind("file:", 0) == 0) {
    path = path.substr(5);
  }
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kConfig, "cannot read IdentityCertificate " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(const uint8_t* b, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[b[i] >> 4];
    s += kDigits[b[i] & 15];
  }
  return s;
}

}  // namespace

CycloneSecurityConfig InspectCycloneSecurityXml(std::string_view xml) {
  CycloneSecurityConfig out;
  const std::string text = BlankComments(xml);
  const std::string low = Lower(text);
  size_t from = std::string::npos;
  std::string_view section;
  for (std::string_view tag : {"security", "ddssecurity"}) {
    const size_t p = low.find(Tag("<", tag, ">"));
    if (p != std::string::npos) {
      from = p;
      section = tag;
      break;
    }
  }
  if (from == std::string::npos) return out;
  out.has_section = true;
  const size_t end = low.find(Tag("</", section, ">"), from);
  const size_t to = end == std::string::npos ? low.size() : end;
  constexpr std::array<std::string_view, 7> kRequired = {
      "IdentityCA", "IdentityCertificate", "PrivateKey",   "PermissionsCA",
      "Governance", "Permissions",         "Cryptographic"};
  for (std::string_view name : kRequired) {
    const std::string v = name == "Cryptographic"
                              ? (low.find("<cryptographic", from) < to ? "x" : "")
                              : ElementText(text, low, Lower(name), from, to);
    if (v.empty()) out.missing += (out.missing.empty() ? "" : ", ") + std::string(name);
    if (name == "IdentityCertificate") out.identity_certificate = v;
  }
  return out;
}

Result<CycloneSecurityConfig> InspectCycloneSecurity(std::string_view config) {
  // Comma-separated parts; a part that starts neither a URI nor a fragment continues the
  // previous one (a comma inside inline XML).
  std::string xml;
  std::string part;
  auto flush = [&]() -> Result<void> {
    if (part.empty()) return {};
    if (part.front() == '<') {
      xml += part;
    } else {
      auto text = ReadFile(part.rfind("file://", 0) == 0 ? part.substr(7) : part);
      if (!text) return std::unexpected(text.error());
      xml += *text;
    }
    part.clear();
    return {};
  };
  size_t pos = 0;
  while (pos <= config.size()) {
    const size_t comma = std::min(config.find(',', pos), config.size());
    std::string piece(config.substr(pos, comma - pos));
    const bool starts = piece.empty() || piece.front() == '<' || piece.front() == '/' ||
                        piece.rfind("file:", 0) == 0;
    if (starts) {
      if (auto r = flush(); !r) return std::unexpected(r.error());
      part = piece;
    } else {
      part += "," + piece;
    }
    pos = comma + 1;
  }
  if (auto r = flush(); !r) return std::unexpected(r.error());
  return InspectCycloneSecurityXml(xml);
}

Result<std::string> RequireSecurityConfig(std::string_view config) {
  auto sec = InspectCycloneSecurity(config);
  if (!sec) return MakeError(ErrorCode::kConfig, std::string(kWhy) + sec.error().message);
  if (!sec->has_section) {
    return MakeError(ErrorCode::kConfig,
                     std::string(kWhy) + "the Cyclone config (" + std::string(config) +
                         ") has no <Security> section, so any participant could claim an "
                         "identity's GUID prefix. Set dds.cyclone_config to a secure config "
                         "or remove critical_identity_certs");
  }
  if (!sec->complete()) {
    return MakeError(ErrorCode::kConfig, std::string(kWhy) +
                                             "the Cyclone config's <Security> section lacks " +
                                             sec->missing + " (" + std::string(config) + ")");
  }
  auto pem = CertificatePem(sec->identity_certificate);
  if (!pem) return MakeError(ErrorCode::kConfig, std::string(kWhy) + pem.error().message);
  return pem;
}

Result<void> RequireAuthenticated(dds_entity_t participant, std::string_view identity_pem) {
  auto want = GuidPrefixForCertificate(identity_pem);
  if (!want) {
    return MakeError(ErrorCode::kConfig,
                     std::string(kWhy) + "IdentityCertificate: " + want.error().message);
  }
  dds_guid_t guid{};
  if (const dds_return_t rc = dds_get_guid(participant, &guid); rc != DDS_RETCODE_OK) {
    return MakeError(ErrorCode::kDds, std::string(kWhy) + "dds_get_guid: " + dds_strretcode(rc));
  }
  if (!GuidHasPrefix(guid.v, *want)) {
    return MakeError(ErrorCode::kConfig,
                     std::string(kWhy) +
                         "the node's participant is not authenticated with the configured "
                         "IdentityCertificate (GUID " +
                         Hex(guid.v, sizeof guid.v) + ", PKI-DH prefix " +
                         Hex(want->data(), want->size()) +
                         "): is the <Security> section in a <Domain> that applies to this "
                         "domain id?");
  }
  return {};
}

}  // namespace ari::component
