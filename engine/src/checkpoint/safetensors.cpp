// SPDX-License-Identifier: Apache-2.0
// The safetensors format: 8-byte little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {...}} padded with spaces to 8 bytes, then the raw little-endian data.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include <spur/checkpoint.h>
#include <spur/error.h>
#include <spur/json.h>

#include <spur/core/safetensors_header.h>
#include <spur/core/safetensors_writer.h>

namespace spur {
namespace {

struct DType {
  const char* name;
  c10::ScalarType type;
};
constexpr DType kTypes[] = {
    {"F64", c10::ScalarType::Double},    {"F32", c10::ScalarType::Float}, {"F16", c10::ScalarType::Half},
    {"BF16", c10::ScalarType::BFloat16}, {"I64", c10::ScalarType::Long},  {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},     {"I8", c10::ScalarType::Char},   {"U8", c10::ScalarType::Byte},
    {"BOOL", c10::ScalarType::Bool},
};

const char* dtype_name(c10::ScalarType type, const std::string& tensor) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.name;
  }
  throw Error("safetensors cannot store tensor '" + tensor + "' of dtype " + c10::toString(type));
}

class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    digest_.update(p, size);
    size_ += static_cast<int64_t>(size);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error("cannot write " + path_ + ": " + std::strerror(errno));
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  }
  std::pair<int64_t, uint64_t> close() {
    // On disk before the directory that holds it is swapped into place.
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      throw Error("cannot write " + path_ + ": " + std::strerror(errno));
    }
    fd_ = -1;
    return {size_, digest_.finish()};
  }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  detail::Digest digest_;
};

[[noreturn]] void corrupt(const std::string& path, const std::string& why) {
  throw Error("checkpoint file " + path + " is not a valid safetensors file: " + why);
}

}  // namespace

std::pair<int64_t, uint64_t> save_safetensors(const std::string& path, const NamedTensors& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  std::map<std::string, torch::Tensor> data;
  std::vector<detail::SafetensorsEntry> entries;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") throw Error("a tensor cannot be named __metadata__ in " + path);
    auto contiguous = tensor.detach().to(torch::kCPU).contiguous();
    detail::SafetensorsEntry entry;
    entry.name = name;
    entry.dtype = dtype_name(contiguous.scalar_type(), name);
    entry.shape.assign(contiguous.sizes().begin(), contiguous.sizes().end());
    entries.push_back(std::move(entry));
    data[name] = std::move(contiguous);
  }
  std::string text = detail::layout_safetensors(entries, metadata);

  File file(path);
  const uint64_t length = text.size();  // little-endian on the machines Spur runs on (x86-64, aarch64)
  file.write(&length, 8);
  file.write(text.data(), text.size());
  for (const auto& entry : entries) {
    const auto& tensor = data.at(entry.name);
    file.write(tensor.data_ptr(), tensor.nbytes());
  }
  return file.close();
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint file " + path + " is missing or unreadable");
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  in.seekg(0);
  if (file_size < 8) corrupt(path, "shorter than its 8-byte header length");
  uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 8);
  if (length > 100'000'000 || static_cast<int64_t>(length) > file_size - 8) {
    corrupt(path, "header length " + std::to_string(length) + " does not fit the file");
  }
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  const int64_t data_size = file_size - 8 - static_cast<int64_t>(length);
  detail::SafetensorsHeader header;
  try {
    header = detail::parse_safetensors_header(text, data_size);
  } catch (const Error& e) {
    corrupt(path, e.what());
  }
  SafetensorsFile result;
  result.metadata = std::move(header.metadata);
  std::string data(static_cast<size_t>(data_size), '\0');
  in.read(data.data(), data_size);
  if (!in) corrupt(path, "could not read its data");
  for (const auto& entry : header.entries) {
    c10::ScalarType type = c10::ScalarType::Undefined;
    for (const auto& t : kTypes) {
      if (entry.dtype == t.name) type = t.type;
    }
    auto tensor = torch::empty(entry.shape, torch::dtype(type));
    // A tensor with no elements has no storage (data_ptr() is null) and nothing to copy (found by UBSan).
    if (entry.end > entry.begin) {
      std::memcpy(tensor.data_ptr(), data.data() + entry.begin, static_cast<size_t>(entry.end - entry.begin));
    }
    result.tensors.emplace_back(entry.name, std::move(tensor));
  }
  return result;
}

int64_t parse_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) throw Error("'" + text + "' is not a size (e.g. 10GB, 500MB)");
  const double number = std::stod(text.substr(0, i));
  std::string unit = text.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  const std::map<std::string, double> units{
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  const auto it = units.find(unit);
  if (it == units.end()) throw Error("'" + text + "' has an unknown unit (B, KB, MB, GB, TB, KiB, MiB, GiB)");
  return static_cast<int64_t>(number * it->second);
}

namespace detail {

std::pair<int64_t, uint64_t> write_file(const std::string& path, const std::string& bytes) {
  File file(path);
  file.write(bytes.data(), bytes.size());
  return file.close();
}

}  // namespace detail

uint64_t file_digest(const std::string& path) { return detail::digest_file(path); }

}  // namespace spur
