// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a TensorBoard event file as `spur runs import` reads it. Anything may be refused with an
// EventFileError; what is accepted must be consistent: every point counted once, a session status TensorBoard
// defines, and every byte of the file inside a record whose CRCs matched.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <spur/core/tensorboard_reader.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spur::tensorboard::EventReader reader;
  try {
    reader.add_file(std::string_view(reinterpret_cast<const char*>(data), size), "fuzzed");
  } catch (const spur::tensorboard::EventFileError&) {
    return 0;
  }
  const auto& events = reader.events();
  uint64_t points = 0;
  for (const auto& [tag, series] : events.scalars) points += series.size();
  if (points != events.scalar_points) __builtin_trap();
  if (events.session_status < 0 || events.session_status > 3) __builtin_trap();
  if (events.records * 16 > size) __builtin_trap();  // each record is at least its 16 bytes of framing
  if (size > 0 && events.records == 0) __builtin_trap();
  return 0;
}
