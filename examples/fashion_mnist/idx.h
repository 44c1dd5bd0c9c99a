// SPDX-License-Identifier: Apache-2.0
// Reading the IDX files of (Fashion-)MNIST, gzipped (Debian's dataset-fashion-mnist ships them so) or not.
// Errors name the file and what is wrong with it: missing, not gzip, truncated, another kind of IDX file.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include <spur/error.h>

namespace idx {

// The whole (decompressed) content of `path`. zlib reads plain files through the same calls.
inline std::vector<uint8_t> read_all(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw spur::Error(path +
                      ": no such file (Fashion-MNIST comes with Debian's dataset-fashion-mnist; --data_dir "
                      "names another copy)");
  }
  std::unique_ptr<gzFile_s, decltype(&gzclose)> file(gzopen(path.c_str(), "rb"), &gzclose);
  if (!file) throw spur::Error(path + ": cannot open");
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> buffer(1 << 20);
  for (;;) {
    const int n = gzread(file.get(), buffer.data(), static_cast<unsigned>(buffer.size()));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file.get(), &code);
      throw spur::Error(path + ": not a readable gzip file (" + std::string(message ? message : "zlib error") + ")");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer.begin(), buffer.begin() + n);
  }
  // A gzip stream cut short reads as a clean end in zlib unless it says so here.
  int code = 0;
  gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) throw spur::Error(path + ": the gzip stream is damaged or cut short");
  return bytes;
}

inline uint32_t big_endian(const std::vector<uint8_t>& bytes, size_t at) {
  return (uint32_t{bytes[at]} << 24) | (uint32_t{bytes[at + 1]} << 16) | (uint32_t{bytes[at + 2]} << 8) | bytes[at + 3];
}

// An IDX file of unsigned bytes with `dims` dimensions (3: images, 1: labels), as a uint8 tensor of that shape.
inline torch::Tensor read_ubyte(const std::string& path, int dims) {
  const auto bytes = read_all(path);
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < 4) {
    throw spur::Error(path + ": " + std::to_string(bytes.size()) + " bytes, too short for an IDX file");
  }
  const uint32_t magic = big_endian(bytes, 0);
  const uint32_t expected = 0x00000800u | static_cast<uint32_t>(dims);
  if (magic != expected) {
    char found[16];
    std::snprintf(found, sizeof(found), "0x%08x", magic);
    throw spur::Error(path + ": magic number " + found + " is not an IDX file of unsigned bytes with " +
                      std::to_string(dims) + " dimension(s) (" + (dims == 3 ? "images" : "labels") + ")");
  }
  if (bytes.size() < header) {
    throw spur::Error(path + ": " + std::to_string(bytes.size()) + " bytes, too short for its IDX header");
  }
  std::vector<int64_t> shape;
  size_t count = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(big_endian(bytes, 4 + 4 * static_cast<size_t>(d)));
    count *= static_cast<size_t>(shape.back());
  }
  if (bytes.size() - header != count) {
    throw spur::Error(path + ": the header promises " + std::to_string(count) + " bytes of data, the file holds " +
                      std::to_string(bytes.size() - header) + (bytes.size() - header < count ? " (truncated)" : ""));
  }
  auto tensor = torch::empty(shape, torch::kUInt8);
  std::memcpy(tensor.data_ptr(), bytes.data() + header, count);
  return tensor;
}

}  // namespace idx
