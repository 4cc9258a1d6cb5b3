// Files shipped in the repository's config/ folder (default policy, tuning space, node
// config, loopback Cyclone DDS configs), found without being run from the repo root.
//
// Looked for, in order: $ARI_CONFIG_DIR/<name>; <folder of the running executable>/../share/ari
// (an installed tree: bin/ari-sim next to share/ari); the install prefix's share/ari
// (compiled in); the source tree's config/ (compiled in: tools run from a build tree);
// ./config/<name>. docs/deployment.md.
#pragma once

#include <filesystem>
#include <string_view>

#include "qos/error.h"

namespace ari::qos {

// The first existing candidate; kIo listing every place that was tried.
Result<std::filesystem::path> FindShippedConfig(std::string_view name);

}  // namespace ari::qos
