// RAII read-only memory mapping of a whole file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

#include "runtime/core/error.h"

namespace ari::runtime {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::byte* data_ = nullptr;  // a PROT_READ mapping: handed out as const only
  size_t size_ = 0;
  std::filesystem::path path_;
};

}  // namespace ari::runtime
