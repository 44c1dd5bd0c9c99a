// SPDX-License-Identifier: Apache-2.0
// spur_state.json: the checkpoint manifest's reader and writer (see checkpoint_state.h).
#include <spur/core/checkpoint_state.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include <spur/error.h>
#include <spur/json.h>

namespace spur::detail {
namespace {

int64_t integer(const json::Value& object, const std::string& key, int64_t low, int64_t high,
                const std::string& where = {}) {
  const std::string name = where.empty() ? key : where + "." + key;
  const int64_t value = object.at(key, where.empty() ? "the state file" : where).as_int(name);
  if (value < low || value > high) {
    throw Error(name + " is " + std::to_string(value) + ", outside " + std::to_string(low) + ".." +
                std::to_string(high));
  }
  return value;
}

constexpr int64_t kMost = INT64_MAX;

// A text from the file as an error may quote it: control bytes as \xNN, at most 80 bytes.
std::string quoted(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, 80)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escape[5];
      std::snprintf(escape, sizeof(escape), "\\x%02x", byte);
      out += escape;
    } else {
      out.push_back(c);
    }
  }
  return text.size() > 80 ? out + "..." : out;
}

bool plain_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) return false;
  return std::none_of(name.begin(), name.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

uint64_t parse_hash(const std::string& text, const std::string& name) {
  uint64_t value = 0;
  bool good = text.size() == 16;
  for (const char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) good = false;
    value = value << 4 | static_cast<uint64_t>(digit & 15);
  }
  if (!good) throw Error(name + " is \"" + quoted(text) + "\", not 16 lower-case hex digits");
  return value;
}

}  // namespace

const CheckpointFile* CheckpointState::file(const std::string& name) const {
  for (const auto& [listed, entry] : files) {
    if (listed == name) return &entry;
  }
  return nullptr;
}

std::string hash_text(uint64_t hash) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

CheckpointState parse_checkpoint_state(const std::string& text) {
  const json::Value root = json::parse(text);
  root.as_object("the state file");
  CheckpointState state;
  state.format = root.at("format", "the state file").as_int("format");
  if (state.format != CheckpointState::kFormat) {
    throw Error("format " + std::to_string(state.format) + " is not one this Spur reads (it reads " +
                std::to_string(CheckpointState::kFormat) + ")");
  }
  if (const auto* version = root.find("spur_version")) state.spur_version = version->as_string("spur_version");
  state.world_size = integer(root, "world_size", 1, 1 << 24);
  state.models = integer(root, "models", 0, 1 << 20);
  state.optimizers = integer(root, "optimizers", 0, 1 << 20);
  // Written since ZeRO: older files (no key) hold whole optimizer states.
  state.zero_stage = root.find("zero_stage") ? integer(root, "zero_stage", 0, 3) : 0;
  state.schedulers = integer(root, "schedulers", 0, 1 << 20);
  state.custom_objects = integer(root, "custom_objects", 0, 1 << 20);
  state.accumulation_step = integer(root, "accumulation_step", 0, kMost);
  state.step_was_skipped = root.at("step_was_skipped", "the state file").as_bool("step_was_skipped");
  const auto& loaders = root.at("loaders", "the state file").as_array("loaders");
  for (size_t i = 0; i < loaders.size(); ++i) {
    const std::string where = "loaders[" + std::to_string(i) + "]";
    const auto& saved = loaders[i];
    saved.as_object(where);
    CheckpointLoader loader;
    loader.epoch = integer(saved, "epoch", 0, kMost, where);
    loader.position = integer(saved, "position", 0, kMost, where);
    loader.stream = saved.at("stream", where).as_bool(where + ".stream");
    loader.dataset_size = integer(saved, "dataset_size", -1, kMost, where);
    if (const auto* seed = saved.find("seed")) loader.seed = static_cast<uint64_t>(seed->as_int(where + ".seed"));
    state.loaders.push_back(loader);
  }
  std::set<std::string> seen;
  for (const auto& [name, entry] : root.at("files", "the state file").as_object("files")) {
    const std::string where = "files[\"" + quoted(name) + "\"]";
    if (!plain_name(name)) throw Error(where + " is not a plain file name in the checkpoint's folder");
    if (!seen.insert(name).second) throw Error(where + " is listed twice");
    entry.as_object(where);
    CheckpointFile file;
    file.size = integer(entry, "size", 0, kMost, where);
    file.hash = parse_hash(entry.at("hash", where).as_string(where + ".hash"), where + ".hash");
    state.files.emplace_back(name, file);
  }
  return state;
}

std::string write_checkpoint_state(const CheckpointState& state) {
  json::Array loaders;
  for (const auto& loader : state.loaders) {
    json::Object record{{"epoch", loader.epoch},
                        {"position", loader.position},
                        {"stream", loader.stream},
                        {"dataset_size", loader.dataset_size}};
    if (loader.seed) record.emplace_back("seed", *loader.seed);
    loaders.emplace_back(std::move(record));
  }
  json::Object files;
  for (const auto& [name, file] : state.files) {
    files.emplace_back(name, json::Object{{"size", file.size}, {"hash", hash_text(file.hash)}});
  }
  json::Object root{{"format", state.format},
                    {"spur_version", state.spur_version},
                    {"world_size", state.world_size},
                    {"models", state.models},
                    {"optimizers", state.optimizers},
                    {"zero_stage", state.zero_stage},
                    {"schedulers", state.schedulers},
                    {"custom_objects", state.custom_objects},
                    {"accumulation_step", state.accumulation_step},
                    {"step_was_skipped", state.step_was_skipped},
                    {"loaders", std::move(loaders)},
                    {"files", std::move(files)}};
  return json::write(json::Value(std::move(root))) + "\n";
}

std::string checkpoint_model_file(size_t i) {
  return i == 0 ? "model.safetensors" : "model_" + std::to_string(i) + ".safetensors";
}

std::string checkpoint_model_shard_file(size_t i, int64_t rank) {
  return (i == 0 ? std::string("model") : "model_" + std::to_string(i)) + "_rank" + std::to_string(rank) +
         ".safetensors";
}

}  // namespace spur::detail
