// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a W&B sweep file as `spur sweep run` reads it (app/sweep/sweep_spec.h). Anything may be refused with
// a SweepError; nothing may crash, hang or grow without bound; what is accepted expands (a grid's size is the
// product of its parameters' values, capped by run_cap; random draws as many as asked) and each run's command is
// made.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sweep/sweep_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto spec = spur::app::SweepSpec::parse(text, "fuzz.yaml");
    std::vector<spur::app::SweepPoint> points;
    if (spec.method == "grid") {
      points = spec.grid();
      size_t expected = 1;
      for (const auto& p : spec.parameters) expected *= p.grid_values(spec.file).size();
      if (spec.run_cap && static_cast<size_t>(*spec.run_cap) < expected) expected = static_cast<size_t>(*spec.run_cap);
      if (points.size() != expected) __builtin_trap();
    } else {
      points = spec.random(3, 1);
      if (points.size() != 3) __builtin_trap();
    }
    for (const auto& point : points) {
      if (point.size() != spec.parameters.size()) __builtin_trap();
    }
    if (!points.empty()) (void)spec.command_for(points.front());
  } catch (const spur::app::SweepError&) {
  }
  return 0;
}
