// Test helpers for paging/residency tests: a scratch directory on a disk-backed file system
// (page cache can be dropped there, unlike tmpfs), dropping a file's cached pages, and
// synthetic models with a real 32000-token vocabulary.
#pragma once

#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/convert/synth.h"
#include "tests/common/test_util.h"

namespace ari::testing {

inline constexpr long kTmpfsMagic = 0x01021994;

inline bool IsTmpfs(const std::filesystem::path& dir) {
  struct statfs st {};
  return ::statfs(dir.c_str(), &st) == 0 && static_cast<long>(st.f_type) == kTmpfsMagic;
}

// TempDir(tag), or a folder in the build tree when the temp dir is tmpfs.
inline std::filesystem::path DiskTempDir(const std::string& tag) {
  auto dir = TempDir(tag);
  if (!IsTmpfs(dir)) return dir;
  std::filesystem::remove_all(dir);
  const char* bin = std::getenv("ARI_BINARY_DIR");
  auto alt = std::filesystem::path(bin && *bin ? bin : ".") /
             ("tmp_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(alt);
  TempDirRegistry::Get().Add(alt);
  return alt;
}

// Writes back and drops the file's pages from the page cache (pages still mapped by some
// process stay). Returns false when the file cannot be opened.
inline bool DropFileCache(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return true;
}

// The Llama 2 SPM vocabulary (32000 tokens) from the shared models, or empty when absent.
inline std::filesystem::path Vocab32k() { return ModelFile("vocab/ggml-vocab-llama-spm.gguf"); }

inline runtime::SynthPreset CustomPreset(int64_t dim, int64_t ffn, int64_t layers, int64_t heads,
                                         int64_t kv_heads) {
  runtime::SynthPreset p;
  p.name = "custom";
  p.arch = "llama";
  p.dim = dim;
  p.ffn = ffn;
  p.layers = layers;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.context = 256;
  return p;
}

}  // namespace ari::testing
