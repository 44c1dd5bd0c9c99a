// SPDX-License-Identifier: Apache-2.0
// The safetensors header's layout and the checkpoint files' hash (see safetensors_writer.h).
#include <spur/core/safetensors_writer.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include <spur/error.h>
#include <spur/json.h>

namespace spur::detail {

void Digest::update(const char* data, size_t size) {
  // Words are consumed from whatever offset the stream is at, so the hash does not depend on how the caller
  // splits the bytes: buffer them.
  size_t i = 0;
  while (i < size) {
    pending_[pending_size_++] = data[i++];
    if (pending_size_ == 8) {
      uint64_t word = 0;
      std::memcpy(&word, pending_, 8);
      hash_ = (hash_ ^ word) * 1099511628211ull;
      pending_size_ = 0;
    }
  }
}

uint64_t Digest::finish() const {
  uint64_t h = hash_;
  for (size_t i = 0; i < pending_size_; ++i) h = (h ^ static_cast<unsigned char>(pending_[i])) * 1099511628211ull;
  return h;
}

uint64_t digest_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint file " + path + " is missing or unreadable");
  Digest digest;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    digest.update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return digest.finish();
}

std::string layout_safetensors(std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  for (const auto& entry : entries) {
    if (entry.name == "__metadata__") throw Error("a tensor cannot be named __metadata__");
    if (safetensors_element_size(entry.dtype) == 0) {
      throw Error("tensor '" + entry.name + "': unknown dtype " + entry.dtype);
    }
  }
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    const int sa = safetensors_element_size(a.dtype);
    const int sb = safetensors_element_size(b.dtype);
    if (sa != sb) return sa > sb;
    return a.name < b.name;
  });
  json::Object header;
  if (!metadata.empty()) {
    json::Object meta;
    for (const auto& [key, value] : metadata) meta.emplace_back(key, value);
    header.emplace_back("__metadata__", std::move(meta));
  }
  int64_t offset = 0;
  for (auto& entry : entries) {
    int64_t bytes = safetensors_element_size(entry.dtype);
    json::Array shape;
    for (const auto d : entry.shape) {
      bytes *= d;
      shape.emplace_back(d);
    }
    entry.begin = offset;
    entry.end = offset + bytes;
    header.emplace_back(entry.name, json::Object{{"dtype", entry.dtype},
                                                 {"shape", std::move(shape)},
                                                 {"data_offsets", json::Array{entry.begin, entry.end}}});
    offset = entry.end;
  }
  std::string text = json::write(json::Value(std::move(header)));
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace spur::detail
