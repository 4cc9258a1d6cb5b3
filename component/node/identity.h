// Authenticated identity of a DDS participant under DDS Security (PKI-DH).
//
// The builtin authentication plugin derives a participant's GUID prefix from its
// identity certificate (DDS Security 1.1, 9.3.2.5.1; Cyclone's get_adjusted_participant_guid):
// byte 0 bit 7 is set and the next 47 bits are the first 47 bits of SHA-256 over the
// DER encoding of the certificate's subject name. The remote side checks this during the
// handshake (Cyclone 0.10: "c.pdata contains incorrect participant guid"), so with DDS
// Security on and unauthenticated participants refused (governance), a matched writer
// whose participant GUID carries the prefix of certificate C was authenticated as C.
// ari-node uses this to grant urgency rights per identity (security.critical_identity_certs).
//
// Pure code (own SHA-256 and a bounds-checked DER walk; no OpenSSL), safe on any input.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "component/client/error.h"

namespace ari::component {

using GuidPrefix6 = std::array<uint8_t, 6>;

std::array<uint8_t, 32> Sha256(std::span<const uint8_t> data);

// Base64 body of the first "-----BEGIN CERTIFICATE-----" block -> DER bytes.
Result<std::vector<uint8_t>> PemCertificateToDer(std::string_view pem);
// DER encoding (tag + length + content) of tbsCertificate.subject.
Result<std::vector<uint8_t>> CertificateSubjectDer(std::span<const uint8_t> der);
// The 6 leading GUID-prefix bytes the PKI-DH plugin gives a participant with this identity.
Result<GuidPrefix6> GuidPrefixForCertificate(std::string_view pem);
Result<GuidPrefix6> GuidPrefixForCertificateFile(const std::filesystem::path& path);

// True when the first 6 bytes of a participant GUID (dds_guid_t::v) equal `prefix`.
bool GuidHasPrefix(std::span<const uint8_t> guid, const GuidPrefix6& prefix);

}  // namespace ari::component
