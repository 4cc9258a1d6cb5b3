// Private to the engine: idle multi-turn sessions spilled to disk (ChunkRunner::SpillSlot /
// RestoreSession, docs/memory.md "Parked sessions on disk"). One file per session id holds
// the conversation between two turns, compressed with zstd:
//
//   header (SpillFileHeader, 88 bytes) | zstd frame of:
//     K rows [n_layers][position][row_bytes] | V rows, same | history (int32 x hist_len)
//
// Name: <session id, hex>.kvspill in the spill folder. A file is trusted only when every
// field matches the engine (magic, version, model identity, KV type's row bytes, n_layers,
// positions within the context), its size is exactly header + compressed bytes, the frame
// decompresses to exactly the raw size and both checksums (header, raw payload) hold.
// Anything else is deleted and the session restarts fresh (the reason is returned for the
// log). Writes go to a temp file, fsync, rename, fsync of the folder. The folder's
// *.kvspill files are bounded (max_bytes): a spill that would pass the bound removes the
// oldest spill files first; one that cannot fit, or a full disk, fails with kIo and
// leaves no file (the session then restarts fresh on its next turn; no request is lost).
// Buffers (raw and compressed, one slot's worth) and the zstd contexts are allocated once
// at Init.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/engine/engine_slot.h"

namespace ari::runtime {
class Model;
}

namespace ari::runtime::engine_internal {

inline constexpr char kSpillMagic[8] = {'A', 'R', 'I', 'K', 'V', 'S', 'P', '1'};
inline constexpr uint32_t kSpillVersion = 1;

struct SpillFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t kv_type;
  uint64_t model_id;
  uint64_t session;
  uint32_t n_layers;
  uint32_t row_bytes;
  int32_t position;
  int32_t hist_len;
  int32_t pinned;
  uint32_t kind;  // SpillKind (0 in files of the first release: sessions)
  uint64_t raw_bytes;
  uint64_t compressed_bytes;
  uint64_t payload_checksum;  // of the raw payload
  uint64_t header_checksum;   // of the fields above (this one zero)
};
static_assert(sizeof(SpillFileHeader) == 88);

// What a spill file holds, whatever its source: K and V halves whose layer l starts at row
// l * rows_per_layer (a slot: the context; a park area: the positions, compact), the
// history. Spill reads it; Restore fills `k`, `v`, `history` and the counts.
struct KvRowsView {
  std::byte* k = nullptr;
  std::byte* v = nullptr;
  int32_t rows_per_layer = 0;
  KvType type = KvType::kF16;
  int32_t position = 0, hist_len = 0, pinned = 0;
  TokenId* history = nullptr;
};

// A session's conversation (".kvspill": bounded, the oldest removed first to make room) or
// a parked turn's KV (".kvpark": counted in the bound, never removed to make room: the
// turn still needs it).
enum class SpillKind : uint32_t { kSession = 0, kParkedTurn = 1 };

struct SpillCounters {
  uint64_t spills = 0, restores = 0, rejected = 0, failures = 0;
  uint64_t parks_offloaded = 0, parks_reloaded = 0;  // parked turns' KV to disk and back
  uint64_t bytes_on_disk = 0;                        // last known total of the folder's spill files
};

class SpillStore {
 public:
  SpillStore();
  ~SpillStore();
  SpillStore(const SpillStore&) = delete;
  SpillStore& operator=(const SpillStore&) = delete;

  // `max_slot_bytes`: the most KV bytes (K + V) a slot can hold, in any type.
  Result<void> Init(const std::filesystem::path& dir, uint64_t max_bytes, uint64_t model_id,
                    const Model& model, int32_t ctx, uint64_t max_slot_bytes, int level);
  bool enabled() const { return !dir_.empty(); }
  // Writes the slot's conversation (packed KV) as session `session`'s file. The slot is not
  // changed. Returns the file's bytes.
  Result<uint64_t> Spill(const Slot& s, uint64_t session);
  // Loads session `session`'s file into the (reset) slot `s`: true when restored; false when
  // there is none or it is not trusted (`*rejected` then says why; the file is deleted).
  // The file is deleted once restored (the conversation lives in the slot again).
  Result<bool> Restore(uint64_t session, Slot& s, std::string* rejected);
  void Forget(uint64_t session, SpillKind kind = SpillKind::kSession);
  // The same for any KV layout (park areas: ParkStore::Offload / Reload). Write does not
  // change `rows`; Read fills it (its rows_per_layer must be >= the file's position when
  // compact, the context for a slot) and deletes the file.
  Result<uint64_t> Write(const KvRowsView& rows, uint64_t key, SpillKind kind);
  Result<bool> Read(uint64_t key, SpillKind kind, KvRowsView& rows, std::string* rejected);
  const SpillCounters& counters() const { return counters_; }
  std::filesystem::path PathOf(uint64_t key, SpillKind kind = SpillKind::kSession) const;

 private:
  uint64_t FolderBytes() const;
  Result<void> MakeRoom(uint64_t need);
  std::string Check(const SpillFileHeader& h, uint64_t file_bytes, uint64_t key,
                    SpillKind kind) const;

  std::filesystem::path dir_;
  uint64_t max_bytes_ = 0, model_id_ = 0;
  const Model* model_ = nullptr;
  int32_t ctx_ = 0, layers_ = 0;
  int level_ = 1;
  std::unique_ptr<std::byte[]> raw_, packed_;
  uint64_t raw_cap_ = 0, packed_cap_ = 0;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  void* dctx_ = nullptr;  // ZSTD_DCtx
  SpillCounters counters_;
};

}  // namespace ari::runtime::engine_internal
