// SPDX-License-Identifier: Apache-2.0
// The sharded-weights index reader (see safetensors_index.h).
#include <spur/core/safetensors_index.h>

#include <spur/error.h>
#include <spur/json.h>

namespace spur::detail {

std::set<std::string> SafetensorsIndex::shards() const {
  std::set<std::string> files;
  for (const auto& entry : weight_map) files.insert(entry.second);
  return files;
}

namespace {

void check_shard_name(const std::string& tensor, const std::string& file) {
  const std::string where = "weight_map." + tensor + " '" + file + "'";
  if (file.empty() || file == "." || file == "..") throw Error(where + ": not a shard file name");
  if (file.find('/') != std::string::npos || file.find('\\') != std::string::npos) {
    throw Error(where + ": a shard must be a file in the checkpoint's own folder, not a path");
  }
  for (const char c : file) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) throw Error(where + ": holds a control character");
  }
  static const std::string suffix = ".safetensors";
  if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    throw Error(where + ": not a .safetensors file");
  }
}

}  // namespace

SafetensorsIndex parse_safetensors_index(const std::string& text) {
  json::Value index;
  try {
    index = json::parse(text);
  } catch (const Error& e) {
    throw Error(std::string("not JSON: ") + e.what());
  }
  const auto& root = index.as_object("the index");
  SafetensorsIndex result;
  for (const auto& [key, value] : root) {
    if (key == "metadata") {
      value.as_object("metadata");
    } else if (key == "weight_map") {
      for (const auto& [tensor, file] : value.as_object("weight_map")) {
        const std::string name = file.as_string("weight_map." + tensor);
        check_shard_name(tensor, name);
        result.weight_map.emplace(tensor, name);  // (the JSON reader refuses a key given twice)
      }
    }
  }
  if (result.weight_map.empty()) throw Error("weight_map is missing or empty");
  return result;
}

}  // namespace spur::detail
