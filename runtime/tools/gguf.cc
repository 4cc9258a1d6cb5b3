// ari-gguf <file.gguf> [--all]: prints version, alignment, metadata and the tensor table.
// Errors are one line on stderr and exit code 1.
#include "runtime/gguf/gguf.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

void PrintUsage() { std::fprintf(stderr, "usage: ari-gguf <file.gguf> [--all]\n"); }

}  // namespace

int main(int argc, char** argv) {
  using ari::runtime::GgufFile;
  const char* path = nullptr;
  bool all = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--all") == 0) {
      all = true;
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      PrintUsage();
      return 0;
    } else if (path == nullptr) {
      path = argv[i];
    } else {
      PrintUsage();
      return 1;
    }
  }
  if (path == nullptr) {
    PrintUsage();
    return 1;
  }
  auto f = GgufFile::Open(path);
  if (!f) {
    std::fprintf(stderr, "ari-gguf: %s\n", f.error().ToString().c_str());
    return 1;
  }
  std::printf("file: %s\n", f->name().c_str());
  std::printf("version: %" PRIu32 "\nalignment: %" PRIu32 "\n", f->version(), f->alignment());
  std::printf("size: %zu bytes, header %" PRIu64 " bytes, data section at %" PRIu64 "\n",
              f->bytes().size(), f->header_size(), f->data_offset());
  std::printf("metadata: %zu entries\n", f->metadata().size());
  const size_t max_items = all ? SIZE_MAX : 8;
  for (const auto& m : f->metadata()) {
    std::printf("  %-40s %-8s %s\n", m.key.c_str(),
                std::string(ari::runtime::GgufValueTypeName(m.type)).c_str(),
                f->ValueToString(m, max_items).c_str());
  }
  uint64_t total = 0;
  std::printf("tensors: %zu\n", f->tensors().size());
  if (!f->tensors().empty()) {
    std::printf("  %-5s %-40s %-5s %-28s %14s %14s\n", "#", "name", "type", "ne", "offset",
                "bytes");
  }
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    const auto& t = f->tensors()[i];
    std::string ne;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      if (d > 0) ne += " x ";
      ne += std::to_string(t.ne[d]);
    }
    std::printf("  %-5zu %-40s %-5s %-28s %14" PRIu64 " %14" PRIu64 "\n", i, t.name.c_str(),
                std::string(ari::runtime::TensorTypeName(t.type)).c_str(), ne.c_str(), t.offset,
                t.nbytes);
    total += t.nbytes;
  }
  std::printf("tensor data: %" PRIu64 " bytes (%.2f MiB)\n", total,
              static_cast<double>(total) / (1024.0 * 1024.0));
  return 0;
}
