// GGUF v3 writer (in memory or streamed to a file).
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <string>

#include "runtime/gguf/gguf.h"

namespace ari::runtime {

namespace {

constexpr std::string_view kAlignmentKey = "general.alignment";

template <class T>
void Put(std::vector<std::byte>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void PutString(std::vector<std::byte>* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out->insert(out->end(), p, p + s.size());
}

template <class T>
std::vector<std::byte> Scalar(T v) {
  std::vector<std::byte> out;
  Put(&out, v);
  return out;
}

template <class T>
std::vector<std::byte> FixedArray(GgufValueType elem, const std::vector<T>& v) {
  std::vector<std::byte> out;
  Put<uint32_t>(&out, static_cast<uint32_t>(elem));
  Put<uint64_t>(&out, v.size());
  const auto* p = reinterpret_cast<const std::byte*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(T));
  return out;
}

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::unexpected<Error> IoError(const std::filesystem::path& path, const char* what, int err) {
  return MakeError(ErrorCode::kIo, path.string() + ": " + what + ": " + std::strerror(err));
}

Result<void> WriteAll(int fd, const std::filesystem::path& path, const std::byte* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError(path, "write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {}

void GgufWriter::SetRaw(std::string key, GgufValueType type, std::vector<std::byte> encoded) {
  for (Meta& m : meta_) {
    if (m.key == key) {
      m.type = type;
      m.encoded = std::move(encoded);
      return;
    }
  }
  meta_.push_back(Meta{std::move(key), type, std::move(encoded)});
}

void GgufWriter::SetUint8(std::string k, uint8_t v) {
  SetRaw(std::move(k), GgufValueType::kUint8, Scalar(v));
}
void GgufWriter::SetInt8(std::string k, int8_t v) {
  SetRaw(std::move(k), GgufValueType::kInt8, Scalar(v));
}
void GgufWriter::SetUint16(std::string k, uint16_t v) {
  SetRaw(std::move(k), GgufValueType::kUint16, Scalar(v));
}
void GgufWriter::SetInt16(std::string k, int16_t v) {
  SetRaw(std::move(k), GgufValueType::kInt16, Scalar(v));
}
void GgufWriter::SetUint32(std::string k, uint32_t v) {
  SetRaw(std::move(k), GgufValueType::kUint32, Scalar(v));
}
void GgufWriter::SetInt32(std::string k, int32_t v) {
  SetRaw(std::move(k), GgufValueType::kInt32, Scalar(v));
}
void GgufWriter::SetUint64(std::string k, uint64_t v) {
  SetRaw(std::move(k), GgufValueType::kUint64, Scalar(v));
}
void GgufWriter::SetInt64(std::string k, int64_t v) {
  SetRaw(std::move(k), GgufValueType::kInt64, Scalar(v));
}
void GgufWriter::SetFloat32(std::string k, float v) {
  SetRaw(std::move(k), GgufValueType::kFloat32, Scalar(v));
}
void GgufWriter::SetFloat64(std::string k, double v) {
  SetRaw(std::move(k), GgufValueType::kFloat64, Scalar(v));
}
void GgufWriter::SetBool(std::string k, bool v) {
  SetRaw(std::move(k), GgufValueType::kBool, Scalar<uint8_t>(v ? 1 : 0));
}

void GgufWriter::SetString(std::string k, std::string_view v) {
  std::vector<std::byte> enc;
  PutString(&enc, v);
  SetRaw(std::move(k), GgufValueType::kString, std::move(enc));
}

void GgufWriter::SetStringArray(std::string k, const std::vector<std::string>& v) {
  std::vector<std::byte> enc;
  Put<uint32_t>(&enc, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(&enc, v.size());
  for (const std::string& s : v) PutString(&enc, s);
  SetRaw(std::move(k), GgufValueType::kArray, std::move(enc));
}

void GgufWriter::SetFloat32Array(std::string k, const std::vector<float>& v) {
  SetRaw(std::move(k), GgufValueType::kArray, FixedArray(GgufValueType::kFloat32, v));
}
void GgufWriter::SetInt32Array(std::string k, const std::vector<int32_t>& v) {
  SetRaw(std::move(k), GgufValueType::kArray, FixedArray(GgufValueType::kInt32, v));
}
void GgufWriter::SetUint32Array(std::string k, const std::vector<uint32_t>& v) {
  SetRaw(std::move(k), GgufValueType::kArray, FixedArray(GgufValueType::kUint32, v));
}

void GgufWriter::CopyMetadata(const GgufFile& src, std::string_view prefix) {
  for (const GgufMetadata& m : src.metadata()) {
    if (!m.key.starts_with(prefix)) continue;
    std::vector<std::byte> enc;
    std::visit(
        [&enc](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool>) {
            Put<uint8_t>(&enc, x ? 1 : 0);
          } else if constexpr (std::is_same_v<T, std::string_view>) {
            PutString(&enc, x);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            Put<uint32_t>(&enc, static_cast<uint32_t>(x.elem_type));
            Put<uint64_t>(&enc, x.count);
            enc.insert(enc.end(), x.bytes.begin(), x.bytes.end());
          } else {
            Put<T>(&enc, x);
          }
        },
        m.value);
    SetRaw(m.key, m.type, std::move(enc));
  }
}

Result<void> GgufWriter::CheckNewTensor(const std::string& name, TensorType type,
                                        std::span<const int64_t> ne, uint64_t* nbytes) const {
  for (const Tensor& t : tensors_) {
    if (t.name == name) {
      return MakeError(ErrorCode::kInvalidArgument, "duplicate tensor name '" + name + "'");
    }
  }
  auto bytes = TensorBytes(type, ne);
  if (!bytes) {
    return MakeError(bytes.error().code, "tensor '" + name + "': " + bytes.error().message);
  }
  *nbytes = *bytes;
  return {};
}

Result<void> GgufWriter::AddTensor(std::string name, TensorType type, std::span<const int64_t> ne,
                                   std::span<const std::byte> data) {
  uint64_t nbytes = 0;
  if (auto ok = CheckNewTensor(name, type, ne, &nbytes); !ok) return ok;
  if (data.size() != nbytes) {
    return MakeError(ErrorCode::kInvalidArgument, "tensor '" + name + "': got " +
                                                      std::to_string(data.size()) +
                                                      " bytes, expected " + std::to_string(nbytes));
  }
  tensors_.push_back(Tensor{std::move(name),
                            type,
                            std::vector<int64_t>(ne.begin(), ne.end()),
                            std::vector<std::byte>(data.begin(), data.end()),
                            nbytes,
                            {}});
  return {};
}

Result<void> GgufWriter::AddTensor(std::string name, TensorType type, std::span<const int64_t> ne,
                                   TensorFiller filler) {
  uint64_t nbytes = 0;
  if (auto ok = CheckNewTensor(name, type, ne, &nbytes); !ok) return ok;
  if (!filler) {
    return MakeError(ErrorCode::kInvalidArgument, "tensor '" + name + "': empty filler");
  }
  tensors_.push_back(Tensor{std::move(name),
                            type,
                            std::vector<int64_t>(ne.begin(), ne.end()),
                            {},
                            nbytes,
                            std::move(filler)});
  return {};
}

Result<std::vector<std::byte>> GgufWriter::EncodeHeader() const {
  if (alignment_ == 0 || !std::has_single_bit(alignment_) || alignment_ > (1u << 30)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "alignment " + std::to_string(alignment_) + " is not a power of two");
  }
  const bool write_alignment = alignment_ != 32;
  uint64_t n_kv = write_alignment ? 1 : 0;
  for (const Meta& m : meta_) n_kv += m.key != kAlignmentKey;

  std::vector<std::byte> out;
  const auto* magic = reinterpret_cast<const std::byte*>("GGUF");
  out.insert(out.end(), magic, magic + 4);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, n_kv);
  if (write_alignment) {
    PutString(&out, kAlignmentKey);
    Put<uint32_t>(&out, static_cast<uint32_t>(GgufValueType::kUint32));
    Put<uint32_t>(&out, alignment_);
  }
  for (const Meta& m : meta_) {
    if (m.key == kAlignmentKey) continue;  // owned by the writer's alignment
    PutString(&out, m.key);
    Put<uint32_t>(&out, static_cast<uint32_t>(m.type));
    out.insert(out.end(), m.encoded.begin(), m.encoded.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
  }
  out.resize(AlignUp(out.size(), alignment_));
  return out;
}

uint64_t GgufWriter::EstimatedFileSize() const {
  auto header = EncodeHeader();
  if (!header) return 0;
  uint64_t size = header->size();
  for (const Tensor& t : tensors_) size += AlignUp(t.nbytes, alignment_);
  return size;
}

Result<std::vector<std::byte>> GgufWriter::WriteToMemory() const {
  auto out = EncodeHeader();
  if (!out) return out;
  for (const Tensor& t : tensors_) {
    const size_t at = out->size();
    out->resize(AlignUp(at + t.nbytes, alignment_));  // zero padding
    if (t.filler) {
      auto ok = t.filler(std::span<std::byte>(out->data() + at, t.nbytes));
      if (!ok) return std::unexpected(ok.error());
    } else if (t.nbytes > 0) {
      std::memcpy(out->data() + at, t.data.data(), t.nbytes);
    }
  }
  return out;
}

Result<void> GgufWriter::WriteFile(const std::filesystem::path& path) const {
  auto header = EncodeHeader();
  if (!header) return std::unexpected(header.error());
  // A temp name of this process in the target's folder: concurrent writers never share it,
  // and the rename below is atomic (readers see the old file or the whole new one).
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(tmp, "open", errno);
  auto fail = [&](Error e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return std::unexpected(std::move(e));
  };
  if (auto ok = WriteAll(fd, tmp, header->data(), header->size()); !ok) return fail(ok.error());
  std::vector<std::byte> scratch;
  const std::vector<std::byte> zeros(alignment_);
  for (const Tensor& t : tensors_) {
    const std::byte* src = t.data.data();
    if (t.filler) {
      scratch.assign(t.nbytes, std::byte{0});
      auto ok = t.filler(std::span<std::byte>(scratch));
      if (!ok) return fail(ok.error());
      src = scratch.data();
    }
    if (auto ok = WriteAll(fd, tmp, src, t.nbytes); !ok) return fail(ok.error());
    const uint64_t pad = AlignUp(t.nbytes, alignment_) - t.nbytes;
    if (auto ok = WriteAll(fd, tmp, zeros.data(), pad); !ok) return fail(ok.error());
  }
  if (::fsync(fd) != 0) return fail(IoError(tmp, "fsync", errno).error());
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return IoError(tmp, "close", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return IoError(path, "rename", err);
  }
  // The rename itself is durable only once the folder is synced.
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return IoError(dir, "open", errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return IoError(dir, "fsync", err);
  return {};
}

}  // namespace ari::runtime
