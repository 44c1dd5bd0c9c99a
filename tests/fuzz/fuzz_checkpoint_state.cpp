// SPDX-License-Identifier: Apache-2.0
// Fuzz target: spur_state.json, the checkpoint manifest load_state reads before it restores anything. Anything may
// be refused with a spur::Error; what is accepted must be in range (world size >= 1, counts and positions >= 0,
// ZeRO stage 0-3), every listed file a plain name in the checkpoint's own folder, listed once, and the manifest
// must write back to text that reads as the same manifest.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include <spur/error.h>

#include <spur/core/checkpoint_state.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  spur::detail::CheckpointState state;
  try {
    state = spur::detail::parse_checkpoint_state(text);
  } catch (const spur::Error&) {
    return 0;
  }
  if (state.world_size < 1 || state.models < 0 || state.optimizers < 0 || state.schedulers < 0 ||
      state.custom_objects < 0 || state.accumulation_step < 0 || state.zero_stage < 0 || state.zero_stage > 3) {
    __builtin_trap();
  }
  for (const auto& loader : state.loaders) {
    if (loader.epoch < 0 || loader.position < 0 || loader.dataset_size < -1) __builtin_trap();
  }
  std::set<std::string> names;
  for (const auto& [name, file] : state.files) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) __builtin_trap();
    for (const char c : name) {
      if (static_cast<unsigned char>(c) < 0x20) __builtin_trap();
    }
    if (!names.insert(name).second || file.size < 0 || state.file(name) != &file) __builtin_trap();
  }
  const std::string written = spur::detail::write_checkpoint_state(state);
  try {
    if (!(spur::detail::parse_checkpoint_state(written) == state)) __builtin_trap();
  } catch (const spur::Error&) {
    __builtin_trap();  // what it accepted, it must read back
  }
  if (spur::detail::write_checkpoint_state(spur::detail::parse_checkpoint_state(written)) != written) __builtin_trap();
  return 0;
}
