// The tier timings of this host, kept in a file (issue 16, docs/benchmarks.md "Tier choice
// by measurement"): every process on the host then dispatches to the same kernels, so
// ari-run, ari-node and a test's in-process reference compute the same numbers (kernels of
// two tiers round differently), and the prefix cache's compute identity stays put across
// restarts. The first process measures and writes the file (temp file + rename); later
// ones read it. Delete it to measure again (e.g. after a kernel change).
//
// Path: $ARI_KERNEL_TIMINGS_FILE, else $XDG_CACHE_HOME/ari (default ~/.cache/ari)
// /kernel-timings-<host key>.txt; the key hashes the CPU model name and the supported
// tiers, so a disk image moved to another CPU measures anew.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "runtime/kernels/tier_choice.h"

namespace ari::runtime::kernels {

std::filesystem::path TierTimingsPath();

// Text form: a header line, then "<family> <tier> <us>" per measured entry.
std::string FormatTierTimings(const TierTimings& t);
// nullopt on anything malformed (unknown family or tier, not a finite time, bad header).
std::optional<TierTimings> ParseTierTimings(const std::string& text);

// nullopt when the file is absent or malformed.
std::optional<TierTimings> LoadTierTimings(const std::filesystem::path& path);
// false when it cannot be written (the timings are still used, only not shared).
bool SaveTierTimings(const std::filesystem::path& path, const TierTimings& t);

}  // namespace ari::runtime::kernels
