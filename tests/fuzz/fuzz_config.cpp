// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a run configuration (Accelerate's YAML or JSON) as `spur config validate` and `spur launch` read
// it. Anything may be refused with a ConfigError; nothing may crash, hang or grow without bound, and what is
// accepted must write out and read back the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto config = spur::app::RunConfig::parse(text, "fuzz.yaml");
    const std::string yaml = config.to_yaml();
    const auto again = spur::app::RunConfig::parse(yaml, "written.yaml");
    if (again.to_yaml() != yaml) __builtin_trap();  // what Spur writes reads back unchanged
    (void)config.to_json();
  } catch (const spur::app::ConfigError&) {
  }
  return 0;
}
