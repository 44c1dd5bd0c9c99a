// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoints' metadata and their merge into whole weights (see checkpoint_merge.h).
#include <spur/core/checkpoint_merge.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <spur/error.h>
#include <spur/json.h>

#include <spur/core/checkpoint_state.h>
#include <spur/core/safetensors_header.h>
#include <spur/core/safetensors_writer.h>

namespace spur::detail {
namespace {

namespace fs = std::filesystem;
constexpr const char* kShardKey = "spur.shard";
constexpr const char* kSlicesKey = "spur.slices";
constexpr const char* kAliasesKey = "spur.aliases";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint file " + path + " is missing or unreadable");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ShardFile {
  SafetensorsHeader header;
  std::string bytes;       // the whole file
  int64_t data_begin = 0;  // where the data part starts in bytes
  ShardFileInfo info;
};

ShardFile read_shard(const std::string& path, const CheckpointFile& listed) {
  ShardFile file;
  file.bytes = read_all(path);
  if (static_cast<int64_t>(file.bytes.size()) != listed.size) {
    throw Error("checkpoint file " + path + " is " + std::to_string(file.bytes.size()) +
                " bytes, its spur_state.json says " + std::to_string(listed.size) + " (truncated or replaced?)");
  }
  Digest digest;
  digest.update(file.bytes.data(), file.bytes.size());
  if (digest.finish() != listed.hash) {
    throw Error("checkpoint file " + path + " does not have the content its spur_state.json records (altered?)");
  }
  try {
    if (file.bytes.size() < 8) throw Error("shorter than its 8-byte header length");
    uint64_t length = 0;
    std::memcpy(&length, file.bytes.data(), 8);
    if (length > file.bytes.size() - 8) throw Error("header length " + std::to_string(length) + " does not fit");
    file.data_begin = 8 + static_cast<int64_t>(length);
    file.header = parse_safetensors_header(file.bytes.substr(8, length),
                                           static_cast<int64_t>(file.bytes.size()) - file.data_begin);
    file.info = parse_shard_file_metadata(file.header.metadata);
  } catch (const Error& e) {
    throw Error("checkpoint file " + path + " is not a Spur shard file: " + e.what());
  }
  return file;
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const auto d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) throw Error("shape too large");
  }
  return n;
}

void write_durably(const std::string& path, const std::string& header, const std::vector<std::string>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
  auto put = [&](const char* p, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw Error("cannot write " + path + ": " + why);
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  };
  const uint64_t length = header.size();  // little-endian on the machines Spur runs on
  put(reinterpret_cast<const char*>(&length), 8);
  put(header.data(), header.size());
  for (const auto& part : data) put(part.data(), part.size());
  const bool synced = ::fsync(fd) == 0;
  const int error = errno;
  if (::close(fd) != 0 || !synced) throw Error("cannot write " + path + ": " + std::strerror(synced ? errno : error));
}

// The folder's entries on disk (a rename into it survives a crash).
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::map<std::string, std::string> shard_file_metadata(const ShardFileInfo& info) {
  json::Object slices;
  for (const auto& [name, slice] : info.slices) {
    json::Array shape;
    for (const auto d : slice.shape) shape.emplace_back(d);
    slices.emplace_back(name, json::Array{slice.offset, std::move(shape)});
  }
  std::map<std::string, std::string> metadata{{"format", "pt"},
                                              {kShardKey, std::to_string(info.rank) + "/" + std::to_string(info.world)},
                                              {kSlicesKey, json::write(json::Value(std::move(slices)))}};
  if (info.aliases) metadata[kAliasesKey] = *info.aliases;
  return metadata;
}

ShardFileInfo parse_shard_file_metadata(const std::map<std::string, std::string>& metadata) {
  ShardFileInfo info;
  const auto shard = metadata.find(kShardKey);
  if (shard == metadata.end()) throw Error("no \"spur.shard\" in its metadata (not a sharded checkpoint's file)");
  const auto slash = shard->second.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    size_t used = 0;
    info.rank = std::stoll(shard->second.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument("rank");
    const std::string world = shard->second.substr(slash + 1);
    info.world = std::stoll(world, &used);
    if (used != world.size()) throw std::invalid_argument("world");
  } catch (const std::exception&) {
    throw Error("\"spur.shard\" is '" + shard->second + "', not RANK/WORLD");
  }
  if (info.world < 1 || info.rank < 0 || info.rank >= info.world) {
    throw Error("\"spur.shard\" is '" + shard->second + "': the rank is not one of the world's");
  }
  const auto slices = metadata.find(kSlicesKey);
  if (slices == metadata.end()) throw Error("no \"spur.slices\" in its metadata");
  json::Value parsed;
  try {
    parsed = json::parse(slices->second);
  } catch (const Error& e) {
    throw Error(std::string("\"spur.slices\": ") + e.what());
  }
  for (const auto& [name, value] : parsed.as_object("spur.slices")) {
    const std::string where = "spur.slices." + name;
    const auto& pair = value.as_array(where);
    if (pair.size() != 2) throw Error(where + " needs [offset, shape]");
    ShardSlice slice;
    slice.offset = pair[0].as_int(where + " offset");
    for (const auto& d : pair[1].as_array(where + " shape")) {
      slice.shape.push_back(d.as_int(where + " shape"));
      if (slice.shape.back() < 0) throw Error(where + " has a negative dimension");
    }
    if (slice.offset < 0) throw Error(where + " has a negative offset");
    if (!info.slices.emplace(name, std::move(slice)).second) throw Error(where + " is listed twice");
  }
  const auto aliases = metadata.find(kAliasesKey);
  if (aliases != metadata.end()) info.aliases = aliases->second;
  return info;
}

std::vector<std::string> merge_sharded_checkpoint(const std::string& checkpoint_dir, const std::string& output_dir) {
  const std::string manifest = checkpoint_dir + "/spur_state.json";
  std::error_code error;
  if (!fs::is_directory(checkpoint_dir, error)) throw Error("checkpoint " + checkpoint_dir + " is not a directory");
  if (!fs::exists(manifest, error)) {
    throw Error("checkpoint " + checkpoint_dir + " has no spur_state.json (is it the folder save_state wrote?)");
  }
  CheckpointState state;
  try {
    state = parse_checkpoint_state(read_all(manifest));
  } catch (const Error& e) {
    throw Error("checkpoint " + manifest + ": " + e.what());
  }
  if (state.models == 0) throw Error("checkpoint " + checkpoint_dir + " holds no model weights");
  if (!state.file(checkpoint_model_shard_file(0, 0))) {
    throw Error("checkpoint " + checkpoint_dir + " holds its weights whole already (" + checkpoint_model_file(0) +
                ", FULL_STATE_DICT): nothing to merge");
  }
  if (fs::exists(output_dir + "/model.safetensors.index.json", error)) {
    // load_model reads the index first: it would load the old shards, not the merged file.
    throw Error(output_dir +
                " holds model.safetensors.index.json (weights save_model wrote in shards): merge into "
                "another folder");
  }
  std::vector<std::string> written;
  for (int64_t model = 0; model < state.models; ++model) {
    struct Piece {
      int64_t offset;
      const char* data;
      int64_t bytes;
      int64_t rank;
    };
    struct Whole {
      SafetensorsEntry entry;
      std::vector<Piece> pieces;
      bool sliced = false;
    };
    std::map<std::string, Whole> tensors;
    std::vector<ShardFile> files;
    files.reserve(static_cast<size_t>(state.world_size));
    std::optional<std::string> aliases;
    for (int64_t rank = 0; rank < state.world_size; ++rank) {
      const std::string name = checkpoint_model_shard_file(static_cast<size_t>(model), rank);
      const CheckpointFile* listed = state.file(name);
      if (!listed) throw Error("checkpoint " + manifest + " does not list " + name);
      const std::string path = checkpoint_dir + "/" + name;
      files.push_back(read_shard(path, *listed));
      const ShardFile& file = files.back();
      if (file.info.rank != rank || file.info.world != state.world_size) {
        throw Error("checkpoint file " + path + " says it is rank " + std::to_string(file.info.rank) + " of " +
                    std::to_string(file.info.world) + ", the checkpoint's rank " + std::to_string(rank) + " of " +
                    std::to_string(state.world_size));
      }
      if (rank == 0) aliases = file.info.aliases;
      for (const auto& entry : file.header.entries) {
        const char* data = file.bytes.data() + file.data_begin + entry.begin;
        const auto slice = file.info.slices.find(entry.name);
        Whole& whole = tensors[entry.name];
        if (slice == file.info.slices.end()) {  // a whole tensor: rank 0's
          if (rank != 0 || !whole.pieces.empty()) {
            throw Error("checkpoint file " + path + ": tensor '" + entry.name +
                        "' is whole here and written by another rank too");
          }
          whole.entry = entry;
          whole.pieces.push_back({0, data, entry.end - entry.begin, rank});
          continue;
        }
        if (entry.shape.size() != 1) {
          throw Error("checkpoint file " + path + ": the range of '" + entry.name + "' is not 1-D");
        }
        if (!whole.pieces.empty() &&
            (!whole.sliced || whole.entry.dtype != entry.dtype || whole.entry.shape != slice->second.shape)) {
          throw Error("checkpoint file " + path + ": tensor '" + entry.name +
                      "' has another dtype or shape than in the ranks before");
        }
        whole.sliced = true;
        whole.entry.name = entry.name;
        whole.entry.dtype = entry.dtype;
        whole.entry.shape = slice->second.shape;
        whole.pieces.push_back({slice->second.offset, data, entry.end - entry.begin, rank});
      }
    }
    std::vector<SafetensorsEntry> entries;
    for (auto& [name, whole] : tensors) {
      if (whole.sliced) {
        const int64_t element = safetensors_element_size(whole.entry.dtype);
        int64_t total = 0;
        try {
          total = elements(whole.entry.shape);
        } catch (const Error& e) {
          throw Error("checkpoint " + checkpoint_dir + ": tensor '" + name + "': " + e.what());
        }
        std::sort(whole.pieces.begin(), whole.pieces.end(), [](const Piece& a, const Piece& b) {
          return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
        });
        int64_t next = 0;
        for (const auto& piece : whole.pieces) {
          if (piece.offset != next) {
            throw Error("checkpoint " + checkpoint_dir + ": tensor '" + name + "' " +
                        (piece.offset < next ? "has ranges that overlap" : "has a gap") + " at element " +
                        std::to_string(std::min(piece.offset, next)) + " (rank " + std::to_string(piece.rank) +
                        "'s file)");
          }
          next += piece.bytes / element;
        }
        if (next != total) {
          throw Error("checkpoint " + checkpoint_dir + ": tensor '" + name + "' has " + std::to_string(next) +
                      " of its " + std::to_string(total) + " elements in the ranks' files");
        }
      }
      entries.push_back(whole.entry);
    }
    std::map<std::string, std::string> metadata{{"format", "pt"}};
    if (aliases) metadata["spur.aliases"] = *aliases;
    const std::string header = layout_safetensors(entries, metadata);
    std::vector<std::string> data;
    data.reserve(entries.size());
    for (const auto& entry : entries) {
      std::string bytes;
      bytes.reserve(static_cast<size_t>(entry.end - entry.begin));
      for (const auto& piece : tensors.at(entry.name).pieces)
        bytes.append(piece.data, static_cast<size_t>(piece.bytes));
      data.push_back(std::move(bytes));
    }
    if (model == 0) {  // once every file of the first model is checked
      fs::create_directories(output_dir, error);
      if (error) throw Error("cannot create " + output_dir + ": " + error.message());
    }
    const std::string target = output_dir + "/" + checkpoint_model_file(static_cast<size_t>(model));
    const std::string temporary = target + ".spur-tmp";
    try {
      write_durably(temporary, header, data);
      fs::rename(temporary, target, error);
      if (error) throw Error("cannot write " + target + ": " + error.message());
    } catch (const Error&) {
      fs::remove(temporary, error);
      throw;
    }
    sync_directory(output_dir);
    written.push_back(target);
  }
  return written;
}

}  // namespace spur::detail
