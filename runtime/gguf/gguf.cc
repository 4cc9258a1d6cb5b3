// GGUF reader: header, metadata and tensor infos, every field bounds-checked.
#include "runtime/gguf/gguf.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace ari::runtime {

namespace {

constexpr int kMaxArrayDepth = 8;             // arrays of arrays: nesting limit (stack safety)
constexpr uint64_t kMinKvBytes = 13;          // key length (8) + type (4) + smallest value (1)
constexpr uint64_t kMinTensorInfoBytes = 32;  // name len + n_dims + one dim + type + offset
constexpr uint32_t kMaxAlignment = 1u << 30;
// Counts are checked against the bytes left, but an entry in memory is larger than its
// smallest encoding; reserve at most this many up front so memory grows with real entries.
constexpr uint64_t kMaxReserve = 4096;

bool IsValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

// Encoded size of a fixed-size value type; 0 for strings and arrays.
uint64_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

std::string TypeNameOf(uint32_t raw) {
  return IsValidValueType(raw) ? std::string(GgufValueTypeName(static_cast<GgufValueType>(raw)))
                               : "type " + std::to_string(raw);
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "u8";
    case GgufValueType::kInt8: return "i8";
    case GgufValueType::kUint16: return "u16";
    case GgufValueType::kInt16: return "i16";
    case GgufValueType::kUint32: return "u32";
    case GgufValueType::kInt32: return "i32";
    case GgufValueType::kFloat32: return "f32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "u64";
    case GgufValueType::kInt64: return "i64";
    case GgufValueType::kFloat64: return "f64";
  }
  return "unknown";
}

// Cursor over the file image; every read is checked against the bytes left.
class GgufParser {
 public:
  GgufParser(std::span<const std::byte> bytes, const std::string& name)
      : bytes_(bytes), name_(name) {}

  Result<void> Run(GgufFile& f);

 private:
  std::unexpected<Error> Fail(uint64_t at, const std::string& what,
                              ErrorCode code = ErrorCode::kFormat) const {
    return MakeError(code, name_ + ": offset " + std::to_string(at) + ": " + what);
  }
  uint64_t Left() const { return bytes_.size() - pos_; }
  Result<void> Need(uint64_t n, std::string_view what) const {
    if (n > Left()) {
      return Fail(pos_, "truncated: need " + std::to_string(n) + " bytes for " + std::string(what) +
                            ", only " + std::to_string(Left()) + " left");
    }
    return {};
  }
  template <class T>
  Result<T> Read(std::string_view what) {
    if (auto ok = Need(sizeof(T), what); !ok) return std::unexpected(ok.error());
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string_view> ReadString(std::string_view what);
  Result<GgufValue> ReadValue(GgufValueType type, const std::string& key);
  Result<void> SkipArray(GgufValueType elem, uint64_t count, uint64_t count_at, int depth,
                         const std::string& key);
  Result<void> ReadMetadata(GgufFile& f, uint64_t n_kv);
  Result<void> ReadTensorInfos(GgufFile& f, uint64_t n_tensors, std::vector<uint64_t>* off_at);

  std::span<const std::byte> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

Result<std::string_view> GgufParser::ReadString(std::string_view what) {
  const uint64_t at = pos_;
  auto len = Read<uint64_t>(std::string(what) + " (length)");
  if (!len) return std::unexpected(len.error());
  if (*len > Left()) {
    return Fail(at, std::string(what) + ": string length " + std::to_string(*len) +
                        " exceeds the " + std::to_string(Left()) + " bytes left");
  }
  std::string_view s(reinterpret_cast<const char*>(bytes_.data()) + pos_, *len);
  pos_ += *len;
  return s;
}

Result<void> GgufParser::SkipArray(GgufValueType elem, uint64_t count, uint64_t count_at, int depth,
                                   const std::string& key) {
  auto ctx_of = [&key] { return "array of key '" + key + "': "; };
  if (const uint64_t es = ScalarSize(elem); es != 0) {
    if (count > Left() / es) {
      return Fail(count_at, ctx_of() + std::to_string(count) + " elements of " +
                                std::string(GgufValueTypeName(elem)) + " exceed the " +
                                std::to_string(Left()) + " bytes left");
    }
    if (elem == GgufValueType::kBool) {
      for (uint64_t i = 0; i < count; ++i) {
        const auto b = static_cast<uint8_t>(bytes_[pos_ + i]);
        if (b > 1) return Fail(pos_ + i, ctx_of() + "bool element is " + std::to_string(b));
      }
    }
    pos_ += count * es;
    return {};
  }
  const uint64_t min_elem = elem == GgufValueType::kString ? 8 : 12;
  if (count > Left() / min_elem) {
    return Fail(count_at,
                ctx_of() + std::to_string(count) + " " + std::string(GgufValueTypeName(elem)) +
                    " elements cannot fit in the " + std::to_string(Left()) + " bytes left");
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (elem == GgufValueType::kString) {
      // Inline (no message strings built per element: vocabularies have 100k+ strings).
      const uint64_t at = pos_;
      uint64_t len = 0;
      if (Left() < 8 || (std::memcpy(&len, bytes_.data() + pos_, 8), len > Left() - 8)) {
        auto s = ReadString(ctx_of() + "string element " + std::to_string(i));
        return s ? Fail(at, "internal: string check mismatch", ErrorCode::kInternal)
                 : std::unexpected(s.error());
      }
      pos_ += 8 + len;
      continue;
    }
    if (depth >= kMaxArrayDepth) {
      return Fail(pos_, ctx_of() + "arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    }
    const uint64_t type_at = pos_;
    auto et = Read<uint32_t>("nested array element type");
    if (!et) return std::unexpected(et.error());
    if (!IsValidValueType(*et)) {
      return Fail(type_at, ctx_of() + "unknown nested array element type " + std::to_string(*et));
    }
    const uint64_t inner_count_at = pos_;
    auto n = Read<uint64_t>("nested array count");
    if (!n) return std::unexpected(n.error());
    auto ok = SkipArray(static_cast<GgufValueType>(*et), *n, inner_count_at, depth + 1, key);
    if (!ok) return ok;
  }
  return {};
}

Result<GgufValue> GgufParser::ReadValue(GgufValueType type, const std::string& key) {
  const std::string what = "value of key '" + key + "'";
  switch (type) {
    case GgufValueType::kUint8: return Read<uint8_t>(what);
    case GgufValueType::kInt8: return Read<int8_t>(what);
    case GgufValueType::kUint16: return Read<uint16_t>(what);
    case GgufValueType::kInt16: return Read<int16_t>(what);
    case GgufValueType::kUint32: return Read<uint32_t>(what);
    case GgufValueType::kInt32: return Read<int32_t>(what);
    case GgufValueType::kFloat32: return Read<float>(what);
    case GgufValueType::kUint64: return Read<uint64_t>(what);
    case GgufValueType::kInt64: return Read<int64_t>(what);
    case GgufValueType::kFloat64: return Read<double>(what);
    case GgufValueType::kBool: {
      const uint64_t at = pos_;
      auto b = Read<uint8_t>(what);
      if (!b) return std::unexpected(b.error());
      if (*b > 1) return Fail(at, what + ": bool value is " + std::to_string(*b));
      return *b != 0;
    }
    case GgufValueType::kString: return ReadString(what);
    case GgufValueType::kArray: {
      const uint64_t type_at = pos_;
      auto et = Read<uint32_t>("array element type of key '" + key + "'");
      if (!et) return std::unexpected(et.error());
      if (!IsValidValueType(*et)) {
        return Fail(type_at,
                    "key '" + key + "': unknown array element type " + std::to_string(*et));
      }
      const uint64_t count_at = pos_;
      auto count = Read<uint64_t>("array count of key '" + key + "'");
      if (!count) return std::unexpected(count.error());
      const uint64_t start = pos_;
      const auto elem = static_cast<GgufValueType>(*et);
      if (auto ok = SkipArray(elem, *count, count_at, 1, key); !ok) {
        return std::unexpected(ok.error());
      }
      return GgufArray{elem, *count, bytes_.subspan(start, pos_ - start)};
    }
  }
  return Fail(pos_, "unknown value type");
}

Result<void> GgufParser::ReadMetadata(GgufFile& f, uint64_t n_kv) {
  f.metadata_.reserve(std::min<uint64_t>(n_kv, kMaxReserve));  // grows only as entries parse
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t key_at = pos_;
    auto key = ReadString("key of metadata entry " + std::to_string(i));
    if (!key) return std::unexpected(key.error());
    std::string k(*key);
    if (f.meta_index_.contains(k)) return Fail(key_at, "duplicate metadata key '" + k + "'");
    const uint64_t type_at = pos_;
    auto raw_type = Read<uint32_t>("value type of key '" + k + "'");
    if (!raw_type) return std::unexpected(raw_type.error());
    if (!IsValidValueType(*raw_type)) {
      return Fail(type_at, "key '" + k + "': unknown value type " + std::to_string(*raw_type));
    }
    const auto type = static_cast<GgufValueType>(*raw_type);
    const uint64_t value_at = pos_;
    auto value = ReadValue(type, k);
    if (!value) return std::unexpected(value.error());
    if (k == "general.alignment") {
      uint64_t a = 0;
      if (type == GgufValueType::kUint32) {
        a = std::get<uint32_t>(*value);
      } else if (type == GgufValueType::kUint64) {
        a = std::get<uint64_t>(*value);
      } else {
        return Fail(value_at,
                    "general.alignment has type " + TypeNameOf(*raw_type) + ", expected u32");
      }
      if (a == 0 || a > kMaxAlignment || !std::has_single_bit(a)) {
        return Fail(value_at,
                    "general.alignment " + std::to_string(a) + " is not a power of two in 1..2^30");
      }
      f.alignment_ = static_cast<uint32_t>(a);
    }
    f.meta_index_.emplace(k, f.metadata_.size());
    f.metadata_.push_back(GgufMetadata{std::move(k), type, *value});
  }
  return {};
}

Result<void> GgufParser::ReadTensorInfos(GgufFile& f, uint64_t n_tensors,
                                         std::vector<uint64_t>* off_at) {
  f.tensors_.reserve(std::min<uint64_t>(n_tensors, kMaxReserve));
  off_at->reserve(std::min<uint64_t>(n_tensors, kMaxReserve));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t info_at = pos_;
    auto name = ReadString("name of tensor " + std::to_string(i));
    if (!name) return std::unexpected(name.error());
    TensorInfo t;
    t.name = std::string(*name);
    const std::string ctx = "tensor '" + t.name + "': ";
    if (f.tensor_index_.contains(t.name)) return Fail(info_at, "duplicate " + ctx);
    const uint64_t dims_at = pos_;
    auto n_dims = Read<uint32_t>(ctx + "n_dims");
    if (!n_dims) return std::unexpected(n_dims.error());
    if (*n_dims < 1 || *n_dims > 4) {
      return Fail(dims_at, ctx + "n_dims " + std::to_string(*n_dims) + " not in 1..4");
    }
    t.n_dims = *n_dims;
    int64_t elems = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne_at = pos_;
      auto ne = Read<uint64_t>(ctx + "ne[" + std::to_string(d) + "]");
      if (!ne) return std::unexpected(ne.error());
      if (*ne == 0 || *ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Fail(ne_at, ctx + "ne[" + std::to_string(d) + "] = " + std::to_string(*ne) +
                               " is out of range");
      }
      t.ne[d] = static_cast<int64_t>(*ne);
      if (__builtin_mul_overflow(elems, t.ne[d], &elems)) {
        return Fail(ne_at, ctx + "element count overflows 64 bits");
      }
    }
    const uint64_t type_at = pos_;
    auto raw_type = Read<uint32_t>(ctx + "type");
    if (!raw_type) return std::unexpected(raw_type.error());
    if (!IsSupportedTensorType(*raw_type)) {
      return Fail(type_at, ctx + "unsupported tensor type " + std::to_string(*raw_type),
                  ErrorCode::kUnsupported);
    }
    t.type = static_cast<TensorType>(*raw_type);
    auto nbytes = TensorBytes(t.type, std::span<const int64_t>(t.ne, t.n_dims));
    if (!nbytes) return Fail(type_at, ctx + nbytes.error().message);
    t.nbytes = *nbytes;
    off_at->push_back(pos_);
    auto offset = Read<uint64_t>(ctx + "data offset");
    if (!offset) return std::unexpected(offset.error());
    if (*offset % f.alignment_ != 0) {
      return Fail(off_at->back(), ctx + "data offset " + std::to_string(*offset) +
                                      " is not a multiple of the alignment " +
                                      std::to_string(f.alignment_));
    }
    t.offset = *offset;
    f.tensor_index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }
  return {};
}

Result<void> GgufParser::Run(GgufFile& f) {
  if (auto ok = Need(4, "magic"); !ok) return ok;
  if (std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
    uint32_t m = 0;
    std::memcpy(&m, bytes_.data(), 4);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", std::byteswap(m));
    return Fail(0, std::string("bad magic ") + hex + ", expected \"GGUF\" (0x47475546)");
  }
  pos_ = 4;
  auto version = Read<uint32_t>("version");
  if (!version) return std::unexpected(version.error());
  if (*version == 1) {
    return Fail(4, "GGUF version 1 is not supported (only v2 and v3)", ErrorCode::kUnsupported);
  }
  if (*version != 2 && *version != 3) {
    const uint32_t swapped = std::byteswap(*version);
    if (swapped >= 1 && swapped <= 3) {
      return Fail(4, "big-endian GGUF is not supported", ErrorCode::kUnsupported);
    }
    return Fail(4, "unsupported GGUF version " + std::to_string(*version) + " (only v2 and v3)",
                ErrorCode::kUnsupported);
  }
  f.version_ = *version;
  const uint64_t nt_at = pos_;
  auto n_tensors = Read<uint64_t>("tensor count");
  if (!n_tensors) return std::unexpected(n_tensors.error());
  const uint64_t nkv_at = pos_;
  auto n_kv = Read<uint64_t>("metadata count");
  if (!n_kv) return std::unexpected(n_kv.error());
  if (*n_kv > Left() / kMinKvBytes) {
    return Fail(nkv_at, "metadata count " + std::to_string(*n_kv) + " cannot fit in the " +
                            std::to_string(Left()) + " bytes left");
  }
  if (*n_tensors > Left() / kMinTensorInfoBytes) {
    return Fail(nt_at, "tensor count " + std::to_string(*n_tensors) + " cannot fit in the " +
                           std::to_string(Left()) + " bytes left");
  }
  if (auto ok = ReadMetadata(f, *n_kv); !ok) return ok;
  if (*n_tensors > Left() / kMinTensorInfoBytes) {
    return Fail(nt_at, "tensor count " + std::to_string(*n_tensors) + " cannot fit in the " +
                           std::to_string(Left()) + " bytes left after the metadata");
  }
  std::vector<uint64_t> off_at;
  if (auto ok = ReadTensorInfos(f, *n_tensors, &off_at); !ok) return ok;

  const uint64_t size = bytes_.size();
  f.header_size_ = pos_;
  const uint64_t a = f.alignment_;
  uint64_t data_offset = (pos_ + a - 1) / a * a;
  if (f.tensors_.empty()) {
    data_offset = std::min(data_offset, size);  // vocab-only files may end unpadded
  } else if (data_offset > size) {
    return Fail(pos_, "tensor data section (aligned to " + std::to_string(data_offset) +
                          ") starts past the end of the file (" + std::to_string(size) + " bytes)");
  }
  f.data_offset_ = data_offset;
  const uint64_t data_size = size - data_offset;
  for (size_t i = 0; i < f.tensors_.size(); ++i) {
    TensorInfo& t = f.tensors_[i];
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Fail(off_at[i], "tensor '" + t.name + "': data at data section offset " +
                                 std::to_string(t.offset) + " + " + std::to_string(t.nbytes) +
                                 " bytes extends past the end of the file (" +
                                 std::to_string(size) + " bytes, data section at " +
                                 std::to_string(data_offset) + ")");
    }
    t.data = bytes_.data() + data_offset + t.offset;
  }
  return {};
}

Result<GgufFile> GgufFile::Parse(std::span<const std::byte> bytes, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  GgufParser parser(bytes, f.name_);
  if (auto ok = parser.Run(f); !ok) return std::unexpected(ok.error());
  return f;
}

Result<GgufFile> GgufFile::Open(const std::filesystem::path& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped) return std::unexpected(mapped.error());
  auto map = std::make_shared<MappedFile>(std::move(*mapped));
  auto f = Parse(map->bytes(), path.string());
  if (!f) return f;
  f->map_ = std::move(map);
  return f;
}

}  // namespace ari::runtime
