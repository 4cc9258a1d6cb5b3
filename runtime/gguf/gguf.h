// GGUF v2/v3 reader over a read-only mmap, and a writer for the project's tools.
//
// The reader never copies tensor data: every TensorInfo::data points into the
// mapping, and string metadata is a string_view into the mapping. Every count,
// length and offset is checked against the bytes left and against overflow; a
// bad file yields an Error naming the file, the byte offset and what was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/mapped_file.h"
#include "runtime/core/tensor_types.h"

namespace ari::runtime {

// GGUF metadata value types (gguf_type in ggml), numbered as on disk.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view GgufValueTypeName(GgufValueType t);

// An array value: elements live in the mapping. Strings are decoded lazily.
struct GgufArray {
  GgufValueType elem_type = GgufValueType::kUint8;
  uint64_t count = 0;
  std::span<const std::byte> bytes;  // raw encoded elements (for kString: len+bytes each)
};

using GgufValue = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string_view, uint64_t, int64_t, double, GgufArray>;

struct GgufMetadata {
  std::string key;
  GgufValueType type = GgufValueType::kUint8;
  GgufValue value;
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};     // ne[0] is the row length (innermost), as in ggml
  uint64_t offset = 0;              // relative to the tensor data section
  const std::byte* data = nullptr;  // into the mapping
  uint64_t nbytes = 0;

  int64_t NumElements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t NumRows() const { return ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps `path` read-only and parses header, metadata and tensor infos.
  static Result<GgufFile> Open(const std::filesystem::path& path);
  // Parses an in-memory image (tests, fuzzing). The bytes must outlive the GgufFile.
  static Result<GgufFile> Parse(std::span<const std::byte> bytes, std::string name);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile() = default;

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::string& name() const { return name_; }
  std::span<const std::byte> bytes() const { return bytes_; }
  // The bytes are this file's own read-only mapping (Open), not a caller's buffer (Parse).
  bool mapped() const { return map_ != nullptr; }
  uint64_t data_offset() const { return data_offset_; }  // start of tensor data section
  // End of the tensor-info table (before alignment padding). A file without tensors may
  // end right here (vocab-only GGUFs do), so data_offset() is then clamped to the size.
  uint64_t header_size() const { return header_size_; }

  const std::vector<GgufMetadata>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Lookups. Missing key -> kNotFound; wrong type -> kFormat (message names key and types).
  const GgufMetadata* Find(std::string_view key) const;
  const TensorInfo* FindTensor(std::string_view name) const;
  // Like FindTensor, but kNotFound names the file and tensor.
  Result<const TensorInfo*> GetTensor(std::string_view name) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Integer getters accept any integer type whose value fits (u8..i64, bool excluded).
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<float> GetFloat(std::string_view key) const;  // f32 or f64
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<GgufArray> GetArray(std::string_view key) const;
  // Typed array decoders (bounds-checked; strings are views into the mapping).
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int32_t>> GetInt32Array(std::string_view key) const;  // any int type fitting

  // Defaults when absent (still kFormat on a wrong type).
  Result<uint64_t> GetUintOr(std::string_view key, uint64_t def) const;
  Result<float> GetFloatOr(std::string_view key, float def) const;

  // Renders a value for display (ari-run --info, gguf dump).
  std::string ValueToString(const GgufMetadata& m, size_t max_array_items = 8) const;

 private:
  GgufFile() = default;
  std::shared_ptr<MappedFile> map_;  // null when parsed from caller's bytes
  std::span<const std::byte> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  uint64_t header_size_ = 0;
  std::vector<GgufMetadata> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> meta_index_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  friend class GgufParser;
};

// Writes GGUF v3 files. Values are copied in; tensors are written in the order added,
// each aligned to `alignment` (general.alignment is written when it is not 32).
// Setting a key twice replaces the earlier value (the key keeps its first position).
//
// Large files (ari-synth, ari-pack: several GB): use the AddTensor overload that takes a
// TensorFiller instead of bytes. Nothing is held in memory for such a tensor; WriteFile
// calls the filler once, in file order, with a scratch buffer of exactly the tensor's
// byte size (reused between tensors), and streams it straight to disk. WriteFile writes
// to "<path>.tmp" and renames it over `path` only on success.
class GgufWriter {
 public:
  // Fills `out` (exactly TensorBytes(type, ne) bytes, zero-initialized) with the
  // tensor's encoded data. An error aborts the write and is returned by WriteFile.
  using TensorFiller = std::function<Result<void>(std::span<std::byte> out)>;

  explicit GgufWriter(uint32_t alignment = 32);

  void SetUint8(std::string key, uint8_t v);
  void SetInt8(std::string key, int8_t v);
  void SetUint16(std::string key, uint16_t v);
  void SetInt16(std::string key, int16_t v);
  void SetUint32(std::string key, uint32_t v);
  void SetInt32(std::string key, int32_t v);
  void SetUint64(std::string key, uint64_t v);
  void SetInt64(std::string key, int64_t v);
  void SetFloat32(std::string key, float v);
  void SetFloat64(std::string key, double v);
  void SetBool(std::string key, bool v);
  void SetString(std::string key, std::string_view v);
  void SetStringArray(std::string key, const std::vector<std::string>& v);
  void SetFloat32Array(std::string key, const std::vector<float>& v);
  void SetInt32Array(std::string key, const std::vector<int32_t>& v);
  void SetUint32Array(std::string key, const std::vector<uint32_t>& v);
  // Copies every metadata entry of `src` whose key starts with `prefix` (e.g. "tokenizer.").
  void CopyMetadata(const GgufFile& src, std::string_view prefix);

  // ne[0] is the row length. `data` must hold exactly TensorBytes(type, ne) bytes.
  Result<void> AddTensor(std::string name, TensorType type, std::span<const int64_t> ne,
                         std::span<const std::byte> data);
  // Streaming variant (see class comment): data is produced by `filler` at write time.
  Result<void> AddTensor(std::string name, TensorType type, std::span<const int64_t> ne,
                         TensorFiller filler);
  // Sum of all tensor sizes plus header: the size WriteFile will produce.
  uint64_t EstimatedFileSize() const;

  Result<void> WriteFile(const std::filesystem::path& path) const;
  Result<std::vector<std::byte>> WriteToMemory() const;

 private:
  struct Meta {
    std::string key;
    GgufValueType type;
    std::vector<std::byte> encoded;  // value encoding without key/type
  };
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> ne;
    std::vector<std::byte> data;
    uint64_t nbytes = 0;
    TensorFiller filler;  // set for streamed tensors (data then empty)
  };
  Result<std::vector<std::byte>> EncodeHeader() const;  // up to the data section start
  Result<void> CheckNewTensor(const std::string& name, TensorType type, std::span<const int64_t> ne,
                              uint64_t* nbytes) const;
  void SetRaw(std::string key, GgufValueType type, std::vector<std::byte> encoded);
  uint32_t alignment_;
  std::vector<Meta> meta_;
  std::vector<Tensor> tensors_;
};

}  // namespace ari::runtime
