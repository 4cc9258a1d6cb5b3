// Private to the engine: the persistent prompt-prefix cache's files (Engine::AddPrefix,
// docs/memory.md "Prompt-prefix cache"). One file holds the KV rows of one token prefix,
// computed once by one model with one compute identity (precision, KV type, kernel tiers):
//
//   header (PrefixFileHeader, 72 bytes) | token ids (int32 x n_tokens) | pad to 64 |
//   K rows [n_layers][n_tokens][row_bytes] | V rows, same
//
// Name: <model id>-<compute id>-<token digest>.kvprefix, in the cache folder. A file is
// trusted only when every field matches what the engine expects (magic, version, model
// identity, compute identity, KV type, n_layers, row bytes), its size is exactly the one
// its counts give (a truncated or padded file fails), its token ids equal the prefix's
// and both checksums (header + ids, payload) hold. Anything else is deleted and rebuilt.
// Writes go to a temp file in the folder, fsync, rename, fsync of the folder. Disk use of
// the folder's *.kvprefix files is bounded (max_bytes): before a write, the least recently
// used files (mtime, refreshed on every use) that no entry of this store maps are removed
// (and temp files a crashed writer left, after an hour).
// Entries stay mapped read-only (file-backed pages: the kernel can drop and re-read them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime::engine_internal {

inline constexpr char kPrefixMagic[8] = {'A', 'R', 'I', 'K', 'V', 'P', 'F', '1'};
inline constexpr uint32_t kPrefixVersion = 1;

struct PrefixFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // offset of the K rows (header + ids + pad)
  uint64_t model_id;
  uint64_t compute_id;
  uint32_t kv_type;
  uint32_t n_layers;
  uint32_t row_bytes;
  uint32_t n_tokens;
  uint64_t payload_bytes;  // K + V rows
  uint64_t payload_checksum;
  uint64_t header_checksum;  // of the fields above (this one zero) and the token ids
};
static_assert(sizeof(PrefixFileHeader) == 72);

// What an entry's KV must match to be used.
struct PrefixIdentity {
  uint64_t model_id = 0;    // digest of the loaded model file (PackSourceKey)
  uint64_t compute_id = 0;  // precision, KV type and kernel tiers the rows were computed with
  KvType kv_type = KvType::kF16;
  uint32_t n_layers = 0;
  uint32_t row_bytes = 0;  // one K (or V) row in kv_type
};

struct PrefixEntry {
  PrefixIdentity id;
  std::vector<TokenId> tokens;
  std::filesystem::path path;
  const std::byte* k = nullptr;  // [n_layers][n_tokens][row_bytes], in the mapping
  const std::byte* v = nullptr;
  uint64_t file_bytes = 0;
  int fd = -1;
  void* map = nullptr;
};

// Writes one prefix's rows: rows(layer, is_v) gives layer `layer`'s n_tokens rows of K
// (is_v false) or V, contiguous.
using PrefixRows = std::function<const std::byte*(uint32_t layer, bool is_v)>;

class PrefixStore {
 public:
  PrefixStore() = default;
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;
  ~PrefixStore();

  // `dir` empty: the store is disabled (Find/Load return nothing).
  void Init(std::filesystem::path dir, uint64_t max_bytes);
  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& dir() const { return dir_; }

  // The file of (id, tokens), mapped, when it is valid. kNotFound: no file; any other error
  // says why the file present was not trusted (the file is then removed).
  Result<const PrefixEntry*> Load(const PrefixIdentity& id, std::span<const TokenId> tokens);
  // Writes the file of (id, tokens) within the bound (evicting LRU files), then loads it.
  Result<const PrefixEntry*> Store(const PrefixIdentity& id, std::span<const TokenId> tokens,
                                   const PrefixRows& rows);
  // The entry sharing the longest leading run of tokens with `prompt` under (compute_id,
  // kv_type), at most max_use tokens of it; `use` gets the run's length. No allocation.
  PrefixEntry* Find(std::span<const TokenId> prompt, uint64_t compute_id, KvType kv,
                    int32_t max_use, int32_t& use);
  // Before a use: the entry's file still has its size (not truncated under us; else the
  // entry is unmapped, never used again, and a line says so) and its mtime is refreshed
  // (LRU order). No allocation on success.
  bool Touch(PrefixEntry& e);
  size_t size() const { return entries_.size(); }
  std::string FileName(const PrefixIdentity& id, std::span<const TokenId> tokens) const;

 private:
  // Why the mapped file fails (empty: valid).
  static std::string Validate(const std::byte* p, uint64_t size, const PrefixIdentity& id,
                              std::span<const TokenId> tokens);
  // Removes LRU files not mapped here until `incoming` more bytes fit the bound.
  Result<void> MakeRoom(uint64_t incoming);

  std::filesystem::path dir_;
  uint64_t max_bytes_ = 0;
  std::vector<std::unique_ptr<PrefixEntry>> entries_;
};

// Bytes of a prefix file of n_tokens.
uint64_t PrefixFileBytes(uint32_t n_tokens, uint32_t n_layers, uint32_t row_bytes);
uint64_t PrefixDigest(const void* p, size_t n, uint64_t seed);

// Writes n bytes to fd (EINTR retried); a short write is kIo naming `what` (e.g.
// "prefix cache"), the folder, the file and "disk full" for ENOSPC. Shared by the prefix
// cache and the session spill files.
Result<void> WriteAll(int fd, const void* p, uint64_t n, const std::filesystem::path& path,
                      std::string_view what);

}  // namespace ari::runtime::engine_internal
