// SPDX-License-Identifier: Apache-2.0
// The metrics CSV layout; see metrics_csv.h.
#include <spur/core/metrics_csv.h>

#include <cstdio>

namespace spur::metrics_csv {

std::string field(std::string_view key) {
  if (key.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(key);
  std::string out = "\"";
  for (const char c : key) out += c == '"' ? std::string_view("\"\"") : std::string_view(&c, 1);
  return out + "\"";
}

namespace {

// ",step,value,wall_time" and what follows: the numbers as every layout here writes them.
void append_numbers(std::string& out, int64_t step, double value, double wall, const double* smoothed) {
  char numbers[700];  // %.6f of a double near DBL_MAX is 316 characters
  const int size = smoothed ? std::snprintf(numbers, sizeof numbers, ",%lld,%.17g,%.6f,%.17g\n",
                                            static_cast<long long>(step), value, wall, *smoothed)
                            : std::snprintf(numbers, sizeof numbers, ",%lld,%.17g,%.6f\n", static_cast<long long>(step),
                                            value, wall);
  if (size > 0)
    out.append(numbers,
               static_cast<std::size_t>(size) < sizeof numbers ? static_cast<std::size_t>(size) : sizeof numbers - 1);
}

}  // namespace

void append_line(std::string& out, std::string_view key_field, int64_t step, double value, double wall) {
  out.append(key_field);
  append_numbers(out, step, value, wall, nullptr);
}

void append_plot_line(std::string& out, int64_t run, std::string_view name_field, std::string_view key_field,
                      int64_t step, double value, double wall, double smoothed) {
  out.append(std::to_string(run));
  out += ',';
  out.append(name_field);
  out += ',';
  out.append(key_field);
  append_numbers(out, step, value, wall, &smoothed);
}

}  // namespace spur::metrics_csv
