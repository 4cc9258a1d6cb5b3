// GgufFile lookups, typed getters, array decoders and value rendering.
#include <charconv>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/gguf/gguf.h"

namespace ari::runtime {

namespace {

// Integer value of a scalar integer variant (bool and non-integers excluded).
bool AsInt128(const GgufValue& v, __int128* out) {
  return std::visit(
      [out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          // NOLINTNEXTLINE(bugprone-signed-char-misuse): GGUF i8 is a number; sign-extend
          *out = static_cast<__int128>(x);
          return true;
        } else {
          return false;
        }
      },
      v);
}

std::string Int128ToString(__int128 v) {
  // Built by append: "-" + std::to_string() trips a GCC 12 -Wrestrict false positive.
  std::string out;
  if (v < 0) out.push_back('-');
  out.append(std::to_string(static_cast<uint64_t>(v < 0 ? -v : v)));
  return out;
}

// Reads element i of a fixed-size integer array as int128 (caller checked the type).
__int128 ArrayIntAt(const GgufArray& a, uint64_t i) {
  auto load = [&]<class T>(T) {
    T v;
    std::memcpy(&v, a.bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<__int128>(v);
  };
  switch (a.elem_type) {
    case GgufValueType::kUint8: return load(uint8_t{});
    case GgufValueType::kInt8: return load(int8_t{});
    case GgufValueType::kUint16: return load(uint16_t{});
    case GgufValueType::kInt16: return load(int16_t{});
    case GgufValueType::kUint32: return load(uint32_t{});
    case GgufValueType::kInt32: return load(int32_t{});
    case GgufValueType::kUint64: return load(uint64_t{});
    case GgufValueType::kInt64: return load(int64_t{});
    default: return 0;
  }
}

bool IsIntType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

uint64_t FixedSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    default: return 4;
  }
}

// Shortest representation that round-trips in the value's own precision.
template <class F>
std::string FloatToString(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Quote(std::string_view s, size_t max_len) {
  std::string out = "\"";
  const size_t n = std::min(s.size(), max_len);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (n < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

const GgufMetadata* GgufFile::Find(std::string_view key) const {
  auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &metadata_[it->second];
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const TensorInfo*> GgufFile::GetTensor(std::string_view name) const {
  if (const TensorInfo* t = FindTensor(name)) return t;
  return MakeError(ErrorCode::kNotFound, name_ + ": tensor '" + std::string(name) + "' not found");
}

namespace {

std::unexpected<Error> NotFound(const std::string& file, std::string_view key) {
  return MakeError(ErrorCode::kNotFound, file + ": key '" + std::string(key) + "' not found");
}

std::unexpected<Error> WrongType(const std::string& file, const GgufMetadata& m,
                                 std::string_view expected) {
  std::string got(GgufValueTypeName(m.type));
  if (const auto* a = std::get_if<GgufArray>(&m.value)) {
    got += " of " + std::string(GgufValueTypeName(a->elem_type));
  }
  return MakeError(ErrorCode::kFormat, file + ": key '" + m.key + "' has type " + got +
                                           ", expected " + std::string(expected));
}

}  // namespace

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  __int128 v = 0;
  if (!AsInt128(m->value, &v)) return WrongType(name_, *m, "an unsigned integer");
  if (v < 0) {
    return MakeError(ErrorCode::kFormat,
                     name_ + ": key '" + m->key + "' is negative (" + Int128ToString(v) + ")");
  }
  return static_cast<uint64_t>(v);
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  __int128 v = 0;
  if (!AsInt128(m->value, &v)) return WrongType(name_, *m, "an integer");
  if (v > std::numeric_limits<int64_t>::max()) {
    return MakeError(ErrorCode::kFormat, name_ + ": key '" + m->key + "' value " +
                                             Int128ToString(v) + " does not fit int64");
  }
  return static_cast<int64_t>(v);
}

Result<float> GgufFile::GetFloat(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  if (const auto* f = std::get_if<float>(&m->value)) return *f;
  if (const auto* d = std::get_if<double>(&m->value)) return static_cast<float>(*d);
  return WrongType(name_, *m, "f32 or f64");
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  if (const auto* b = std::get_if<bool>(&m->value)) return *b;
  return WrongType(name_, *m, "bool");
}

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  if (const auto* s = std::get_if<std::string_view>(&m->value)) return *s;
  return WrongType(name_, *m, "string");
}

Result<GgufArray> GgufFile::GetArray(std::string_view key) const {
  const GgufMetadata* m = Find(key);
  if (!m) return NotFound(name_, key);
  if (const auto* a = std::get_if<GgufArray>(&m->value)) return *a;
  return WrongType(name_, *m, "array");
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  auto a = GetArray(key);
  if (!a) return std::unexpected(a.error());
  if (a->elem_type != GgufValueType::kString)
    return WrongType(name_, *Find(key), "array of string");
  std::vector<std::string_view> out;
  out.reserve(std::min<uint64_t>(a->count, a->bytes.size() / 8));
  size_t pos = 0;
  const size_t size = a->bytes.size();
  for (uint64_t i = 0; i < a->count; ++i) {
    uint64_t len = 0;
    if (size - pos < 8) break;
    std::memcpy(&len, a->bytes.data() + pos, 8);
    pos += 8;
    if (len > size - pos) break;
    out.emplace_back(reinterpret_cast<const char*>(a->bytes.data()) + pos, len);
    pos += len;
  }
  if (out.size() != a->count) {  // cannot happen for a parsed file; guards hand-made arrays
    return MakeError(ErrorCode::kFormat,
                     name_ + ": key '" + std::string(key) + "': string array is truncated");
  }
  return out;
}

Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  auto a = GetArray(key);
  if (!a) return std::unexpected(a.error());
  std::vector<float> out;
  if (a->elem_type == GgufValueType::kFloat32 && a->bytes.size() / 4 >= a->count) {
    out.resize(a->count);
    if (a->count > 0) std::memcpy(out.data(), a->bytes.data(), a->count * 4);
    return out;
  }
  if (a->elem_type == GgufValueType::kFloat64 && a->bytes.size() / 8 >= a->count) {
    out.resize(a->count);
    for (uint64_t i = 0; i < a->count; ++i) {
      double d = 0.0;
      std::memcpy(&d, a->bytes.data() + i * 8, 8);
      out[i] = static_cast<float>(d);
    }
    return out;
  }
  return WrongType(name_, *Find(key), "array of f32 or f64");
}

Result<std::vector<int32_t>> GgufFile::GetInt32Array(std::string_view key) const {
  auto a = GetArray(key);
  if (!a) return std::unexpected(a.error());
  if (!IsIntType(a->elem_type)) return WrongType(name_, *Find(key), "array of integers");
  const uint64_t es = FixedSize(a->elem_type);
  if (a->bytes.size() / es < a->count) {
    return MakeError(ErrorCode::kFormat,
                     name_ + ": key '" + std::string(key) + "': array truncated");
  }
  std::vector<int32_t> out(a->count);
  for (uint64_t i = 0; i < a->count; ++i) {
    const __int128 v = ArrayIntAt(*a, i);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
      return MakeError(ErrorCode::kFormat, name_ + ": key '" + std::string(key) + "': element " +
                                               std::to_string(i) + " = " + Int128ToString(v) +
                                               " does not fit int32");
    }
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

Result<uint64_t> GgufFile::GetUintOr(std::string_view key, uint64_t def) const {
  if (!Has(key)) return def;
  return GetUint(key);
}

Result<float> GgufFile::GetFloatOr(std::string_view key, float def) const {
  if (!Has(key)) return def;
  return GetFloat(key);
}

namespace {

// Reads a T at p (zero when fewer than sizeof(T) bytes are left) and advances p, at
// most to `end`.
template <class T>
T Take(const std::byte*& p, const std::byte* end) {
  T v{};
  if (end - p >= static_cast<ptrdiff_t>(sizeof(T))) std::memcpy(&v, p, sizeof(T));
  p += std::min<ptrdiff_t>(end - p, sizeof(T));
  return v;
}

template <class T>
void RenderInt(const std::byte*& p, const std::byte* end, bool show, std::string* out) {
  const T v = Take<T>(p, end);
  if (show) *out += std::to_string(v);
}

template <class T>
void RenderFloat(const std::byte*& p, const std::byte* end, bool show, std::string* out) {
  const T v = Take<T>(p, end);
  if (show) *out += FloatToString(v);
}

const std::byte* RenderArray(GgufValueType type, uint64_t count, const std::byte* p,
                             const std::byte* end, size_t max_items, std::string* out);

// Renders one encoded element of `type` from `p` (bounded by `end`) when `show`, else
// only skips it; returns its end.
const std::byte* RenderElement(GgufValueType type, const std::byte* p, const std::byte* end,
                               bool show, size_t max_items, std::string* out) {
  switch (type) {
    case GgufValueType::kUint8: RenderInt<uint8_t>(p, end, show, out); break;
    case GgufValueType::kInt8: RenderInt<int8_t>(p, end, show, out); break;
    case GgufValueType::kUint16: RenderInt<uint16_t>(p, end, show, out); break;
    case GgufValueType::kInt16: RenderInt<int16_t>(p, end, show, out); break;
    case GgufValueType::kUint32: RenderInt<uint32_t>(p, end, show, out); break;
    case GgufValueType::kInt32: RenderInt<int32_t>(p, end, show, out); break;
    case GgufValueType::kUint64: RenderInt<uint64_t>(p, end, show, out); break;
    case GgufValueType::kInt64: RenderInt<int64_t>(p, end, show, out); break;
    case GgufValueType::kFloat32: RenderFloat<float>(p, end, show, out); break;
    case GgufValueType::kFloat64: RenderFloat<double>(p, end, show, out); break;
    case GgufValueType::kBool: {
      auto v = Take<uint8_t>(p, end);
      if (show) *out += v ? "true" : "false";
      break;
    }
    case GgufValueType::kString: {
      const uint64_t len = Take<uint64_t>(p, end);
      const uint64_t n = std::min<uint64_t>(len, static_cast<uint64_t>(end - p));
      if (show) *out += Quote(std::string_view(reinterpret_cast<const char*>(p), n), 64);
      p += n;
      break;
    }
    case GgufValueType::kArray: {
      const auto et = static_cast<GgufValueType>(Take<uint32_t>(p, end));
      const uint64_t n = Take<uint64_t>(p, end);
      std::string inner;
      p = RenderArray(et, n, p, end, show ? max_items : 0, &inner);
      if (show) *out += inner;
      break;
    }
  }
  return p;
}

// Renders `count` encoded elements of `type` from `p` (bounded by `end`); returns the end.
const std::byte* RenderArray(GgufValueType type, uint64_t count, const std::byte* p,
                             const std::byte* end, size_t max_items, std::string* out) {
  *out += "[";
  for (uint64_t i = 0; i < count; ++i) {
    const bool show = i < max_items;
    if (i > 0 && show) *out += ", ";
    if (i == max_items) {
      *out += i > 0 ? ", ..." : "...";
      if (const uint64_t es = FixedSize(type); es != 0) {  // skip the rest at once
        const uint64_t left = static_cast<uint64_t>(end - p);
        const uint64_t rest = count - i;
        p += rest > left / es ? left : rest * es;
        break;
      }
    }
    p = RenderElement(type, p, end, show, max_items, out);
  }
  *out += "]";
  return p;
}

}  // namespace

std::string GgufFile::ValueToString(const GgufMetadata& m, size_t max_array_items) const {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          return FloatToString(x);
        } else if constexpr (std::is_same_v<T, std::string_view>) {
          return Quote(x, 256);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          std::string out = "[";
          out.append(GgufValueTypeName(x.elem_type)).append(" x ");
          out.append(std::to_string(x.count)).append("] ");
          RenderArray(x.elem_type, x.count, x.bytes.data(), x.bytes.data() + x.bytes.size(),
                      max_array_items, &out);
          return out;
        } else {
          return std::to_string(x);
        }
      },
      m.value);
}

}  // namespace ari::runtime
