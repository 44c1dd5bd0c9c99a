// SPDX-License-Identifier: Apache-2.0
// Fuzz target: model.safetensors.index.json as load_model reads it. Anything may be refused with a spur::Error;
// what is accepted must name at least one tensor, and every shard must be a plain *.safetensors file name in the
// checkpoint's own folder (no path, no "." or "..", no control character), so that no index can make load_model
// open a file elsewhere.
#include <cstddef>
#include <cstdint>
#include <string>

#include <spur/error.h>

#include <spur/core/safetensors_index.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto index = spur::detail::parse_safetensors_index(text);
    if (index.weight_map.empty() || index.shards().empty()) __builtin_trap();
    for (const auto& shard : index.shards()) {
      if (shard == "." || shard == ".." || shard.find('/') != std::string::npos) __builtin_trap();
      for (const char c : shard) {
        if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();
      }
      if (shard.size() <= 12 || shard.substr(shard.size() - 12) != ".safetensors") __builtin_trap();
    }
  } catch (const spur::Error&) {
  }
  return 0;
}
