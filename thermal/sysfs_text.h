// Small allocation-free helpers to read sysfs-style text files (one number or
// one short word per file). Internal to the thermal module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ari::thermal {

enum class FileReadStatus : uint8_t {
  kOk,       // content read (may be empty)
  kMissing,  // ENOENT / ENOTDIR / ENODEV: the file is not there
  kNoData,   // exists but no data now (EAGAIN, ENODATA, EIO, EBUSY...)
};

// Reads up to cap-1 bytes of `path` into buf (NUL-terminated); *len = bytes read.
FileReadStatus ReadSmallFile(const char* path, char* buf, int cap, int* len);

// Trims ASCII whitespace on both ends.
std::string_view TrimWs(std::string_view s);

// Parses a whole (trimmed) decimal integer; nullopt for anything else.
std::optional<int64_t> ParseInt64(std::string_view s);

// Whole-file helpers for set-up code (may allocate): nullopt when unreadable.
std::optional<std::string> ReadTextFile(const std::string& path);
std::optional<int64_t> ReadIntFile(const std::string& path);

}  // namespace ari::thermal
