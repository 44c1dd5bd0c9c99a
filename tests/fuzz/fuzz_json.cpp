// SPDX-License-Identifier: Apache-2.0
// Fuzz target: the engine's JSON reader, which reads safetensors headers (from any file a user points
// load_state at), checkpoint state files and stream records. Malformed input is a spur::Error; accepted input
// writes out and reads back to the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include <spur/error.h>
#include <spur/json.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto value = spur::json::parse(text);
    const std::string written = spur::json::write(value);
    if (spur::json::write(spur::json::parse(written)) != written) __builtin_trap();
  } catch (const spur::Error&) {
  }
  return 0;
}
