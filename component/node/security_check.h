// Identity-based urgency rights (security.critical_identity_certs) are only sound when
// DDS Security authenticates every participant: the node grants CRITICAL by the GUID
// prefix PKI-DH derives from a certificate, and without authentication any participant
// may pick that prefix. So ari-node refuses to start with such rights unless
//  1. its Cyclone config has a complete Security section (Authentication with identity
//     CA, certificate and key; AccessControl with permissions CA, governance and
//     permissions; Cryptographic), and
//  2. its own participant actually is authenticated: its GUID prefix is the one PKI-DH
//     derives from the configured identity certificate (proof that Cyclone loaded the
//     plugins with that identity, component/node/identity.h).
#pragma once

#include <dds/dds.h>

#include <string>
#include <string_view>

#include "component/client/error.h"

namespace ari::component {

// What a Cyclone config string (file URIs and inline XML fragments, comma separated, as
// dds::Domain::config()) says about DDS Security.
struct CycloneSecurityConfig {
  bool has_section = false;  // a <Security> (or <DDSSecurity>) element
  std::string missing;       // required elements absent, e.g. "Permissions, Governance"
  std::string
      identity_certificate;  // IdentityCertificate value as written ("file:...", "data:,...")
  bool complete() const { return has_section && missing.empty(); }
};

// Reads the files the config names (an unreadable one is an error) and inspects the XML.
Result<CycloneSecurityConfig> InspectCycloneSecurity(std::string_view config);
// The same on XML text already read (pure).
CycloneSecurityConfig InspectCycloneSecurityXml(std::string_view xml);

// Check 1 for a node with identity rights: the config's Security section is complete.
// Returns the PEM of its IdentityCertificate. The error says what is missing and how
// to fix it.
Result<std::string> RequireSecurityConfig(std::string_view config);
// Check 2, once the node's participant exists: it is authenticated with that identity.
Result<void> RequireAuthenticated(dds_entity_t participant, std::string_view identity_pem);

}  // namespace ari::component
