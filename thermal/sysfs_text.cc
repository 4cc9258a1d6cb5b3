#include "thermal/sysfs_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace ari::thermal {

FileReadStatus ReadSmallFile(const char* path, char* buf, int cap, int* len) {
  *len = 0;
  if (cap > 0) buf[0] = '\0';
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return (errno == ENOENT || errno == ENOTDIR || errno == ENODEV || errno == ENXIO)
               ? FileReadStatus::kMissing
               : FileReadStatus::kNoData;
  }
  int total = 0;
  FileReadStatus status = FileReadStatus::kOk;
  while (total < cap - 1) {
    ssize_t n = ::read(fd, buf + total, static_cast<size_t>(cap - 1 - total));
    if (n < 0) {
      if (errno == EINTR) continue;
      status =
          (errno == ENODEV || errno == ENXIO) ? FileReadStatus::kMissing : FileReadStatus::kNoData;
      break;
    }
    if (n == 0) break;
    total += static_cast<int>(n);
  }
  ::close(fd);
  if (cap > 0) buf[total] = '\0';
  *len = total;
  return status;
}

std::string_view TrimWs(std::string_view s) {
  auto ws = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseInt64(std::string_view s) {
  s = TrimWs(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> ReadTextFile(const std::string& path) {
  char buf[4096];
  int len = 0;
  if (ReadSmallFile(path.c_str(), buf, sizeof(buf), &len) != FileReadStatus::kOk) {
    return std::nullopt;
  }
  return std::string(buf, static_cast<size_t>(len));
}

std::optional<int64_t> ReadIntFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text) return std::nullopt;
  return ParseInt64(*text);
}

}  // namespace ari::thermal
