// SPDX-License-Identifier: Apache-2.0
// The safetensors header reader (see safetensors_header.h). Sizes are checked for overflow before they are used:
// the header comes from a file Spur may not have written.
#include <spur/core/safetensors_header.h>

#include <algorithm>

#include <spur/error.h>
#include <spur/json.h>

namespace spur::detail {

int safetensors_element_size(const std::string& dtype) {
  static const std::map<std::string, int> sizes{{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

SafetensorsHeader parse_safetensors_header(const std::string& text, int64_t data_size) {
  json::Value header;
  try {
    header = json::parse(text);
  } catch (const Error& e) {
    throw Error(std::string("header: ") + e.what());
  }
  SafetensorsHeader result;
  for (const auto& [name, info] : header.as_object("the header")) {
    if (name == "__metadata__") {
      for (const auto& [key, value] : info.as_object("__metadata__")) {
        result.metadata[key] = value.as_string("__metadata__." + key);
      }
      continue;
    }
    try {
      SafetensorsEntry entry;
      entry.name = name;
      entry.dtype = info.at("dtype", name).as_string(name + ".dtype");
      const int element = safetensors_element_size(entry.dtype);
      if (element == 0) throw Error("unknown dtype " + entry.dtype);
      int64_t bytes = element;
      for (const auto& d : info.at("shape", name).as_array(name + ".shape")) {
        const int64_t size = d.as_int(name + ".shape");
        if (size < 0) throw Error("negative dimension");
        // A shape such as [2^62, 4] would overflow the byte count: refused before it does.
        if (__builtin_mul_overflow(bytes, size, &bytes)) throw Error("shape too large");
        entry.shape.push_back(size);
      }
      const auto& offsets = info.at("data_offsets", name).as_array(name + ".data_offsets");
      if (offsets.size() != 2) throw Error("data_offsets needs two numbers");
      entry.begin = offsets[0].as_int(name + ".data_offsets");
      entry.end = offsets[1].as_int(name + ".data_offsets");
      const std::string span = "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
      if (entry.begin < 0 || entry.end < entry.begin) throw Error(span + " are not a range in the data part");
      if (entry.end > data_size) {
        throw Error(span + " reach past the end of the data part (" + std::to_string(data_size) +
                    " bytes; truncated?)");
      }
      if (entry.end - entry.begin != bytes) {
        throw Error("data_offsets span " + std::to_string(entry.end - entry.begin) + " bytes, the shape needs " +
                    std::to_string(bytes) + " bytes of " + entry.dtype);
      }
      result.entries.push_back(std::move(entry));
    } catch (const Error& e) {
      throw Error("tensor '" + name + "': " + e.what());
    }
  }
  // By offsets; a tensor of no elements first where it starts where another does (it ends there too), and empty
  // tensors at one offset in the header's order (the writer's).
  std::stable_sort(result.entries.begin(), result.entries.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  int64_t expected = 0;
  for (const auto& entry : result.entries) {
    if (entry.begin != expected) throw Error("tensor '" + entry.name + "' does not start where the previous ends");
    expected = entry.end;
  }
  if (expected != data_size) {
    throw Error("the data holds " + std::to_string(data_size) + " bytes, the header describes " +
                std::to_string(expected) + " (truncated?)");
  }
  return result;
}

}  // namespace spur::detail
