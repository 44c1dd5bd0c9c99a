// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a safetensors file as load_safetensors reads it (8-byte little-endian header length, the JSON
// header, the data part), up to the tensors themselves. Anything may be refused with a spur::Error; what is
// accepted must describe the data part exactly: tensors in order, no gap or overlap, each one's bytes equal to its
// shape's element count times its element size, computed here without overflow. The writer's layout of what was
// accepted (layout_safetensors, which save_safetensors and the sharded-checkpoint merge use) must read back as the
// same tensors, and a sharded checkpoint's metadata (spur.shard, spur.slices), where accepted, must write back to
// metadata that reads as the same.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <spur/error.h>

#include <spur/core/checkpoint_merge.h>
#include <spur/core/safetensors_header.h>
#include <spur/core/safetensors_writer.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t length = 0;
  std::memcpy(&length, data, 8);
  if (length > size - 8) return 0;  // load_safetensors refuses these before reading the header
  const std::string text(reinterpret_cast<const char*>(data) + 8, length);
  const auto data_size = static_cast<int64_t>(size - 8 - length);
  spur::detail::SafetensorsHeader header;
  try {
    header = spur::detail::parse_safetensors_header(text, data_size);
  } catch (const spur::Error&) {
    return 0;
  }
  int64_t expected = 0;
  for (const auto& entry : header.entries) {
    if (entry.begin != expected) __builtin_trap();
    __int128 bytes = spur::detail::safetensors_element_size(entry.dtype);
    for (const int64_t dimension : entry.shape) bytes *= dimension;
    if (bytes != static_cast<__int128>(entry.end) - entry.begin) __builtin_trap();
    expected = entry.end;
  }
  if (expected != data_size) __builtin_trap();

  // What was accepted, laid out by the writer, reads back as the same tensors (a refusal here is a finding).
  auto entries = header.entries;
  spur::detail::SafetensorsHeader again;
  try {
    again =
        spur::detail::parse_safetensors_header(spur::detail::layout_safetensors(entries, header.metadata), data_size);
  } catch (const spur::Error&) {
    __builtin_trap();
  }
  if (again.metadata != header.metadata || again.entries.size() != entries.size()) __builtin_trap();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& a = entries[i];
    const auto& b = again.entries[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin || a.end != b.end) {
      __builtin_trap();
    }
  }

  // A sharded checkpoint's metadata, where accepted, writes back to metadata that reads as the same.
  spur::detail::ShardFileInfo info;
  try {
    info = spur::detail::parse_shard_file_metadata(header.metadata);
  } catch (const spur::Error&) {
    return 0;
  }
  spur::detail::ShardFileInfo back;
  try {
    back = spur::detail::parse_shard_file_metadata(spur::detail::shard_file_metadata(info));
  } catch (const spur::Error&) {
    __builtin_trap();
  }
  if (back.rank != info.rank || back.world != info.world || back.aliases != info.aliases ||
      back.slices.size() != info.slices.size()) {
    __builtin_trap();
  }
  for (const auto& [name, slice] : info.slices) {
    const auto it = back.slices.find(name);
    if (it == back.slices.end() || it->second.offset != slice.offset || it->second.shape != slice.shape) {
      __builtin_trap();
    }
  }
  return 0;
}
