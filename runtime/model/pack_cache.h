// Automatic packs: a plain GGUF (any supported tensor type) is packed once into a cache
// folder and the pack is used from then on, so every model runs through the fast engine.
//
// The cache file is `<source stem>.<key>.pack.gguf`, where key is a 64-bit digest of the
// source's identity: its size, its modification time (ns), its GGUF header region (first
// 4 MiB) and 32 evenly spaced 64 KiB samples of its data, plus the pack format version. A
// changed source therefore gets a new key (and a new pack); the superseded pack of the same
// source path is removed.
//
// A cached file is trusted only after it is opened as a GGUF (every count and tensor
// bounds-checked against the file size, so a truncated file fails), carries
// ari.pack.version and an ari.pack.source_key equal to the key, and binds to the model
// config (BindPack). Anything else (stale, truncated, foreign) is deleted and rebuilt.
//
// Writing is atomic: temp file in the cache folder, fsync, rename, fsync of the folder
// (GgufWriter::WriteFile). A folder that cannot be created or written, or fills up, gives a
// kIo error that names the folder and how to choose another one.
//
// Where the cache lives (first that is set): PackCacheOptions::dir (flag / node config),
// $ARI_PACK_CACHE, $CACHE_DIRECTORY (systemd CacheDirectory=, e.g. /var/cache/ari),
// $XDG_CACHE_HOME/ari/packs, $HOME/.cache/ari/packs. docs/runtime.md, "Pack cache".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "runtime/core/error.h"

namespace ari::runtime {

struct PackCacheOptions {
  std::filesystem::path dir;  // empty: DefaultPackCacheDir()
  bool progress = true;       // progress lines on stderr while packing
};

// The folder the cache uses when PackCacheOptions::dir is empty (see the header comment).
// kNotFound when none of the variables is set.
Result<std::filesystem::path> DefaultPackCacheDir();

// The source's identity key (16 hex digits), as described above.
Result<std::string> PackSourceKey(const std::filesystem::path& source);

// A digest of a model file's content only (the same sampled regions and size as the key
// above, without the modification time): two copies of one file, on two machines, have
// the same digest. NodeStatus.model_hash (docs/routing.md).
Result<uint64_t> ModelContentKey(const std::filesystem::path& model);

struct CachedPack {
  std::filesystem::path path;  // the pack to load
  bool built = false;          // written by this call (else reused)
  std::string rebuilt_reason;  // why an existing cache file was not trusted (empty: none)
  double seconds = 0;          // time spent packing (0 when reused)
};

// The pack of `source` (a plain GGUF) in the cache: reused when valid, else built.
Result<CachedPack> EnsurePack(const std::filesystem::path& source, const PackCacheOptions& opts);

}  // namespace ari::runtime
