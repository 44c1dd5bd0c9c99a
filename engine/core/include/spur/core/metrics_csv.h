// SPDX-License-Identifier: Apache-2.0
// The one CSV layout for metric points, written by the csv tracker (engine), `spur runs export --format csv` and
// the Studio's export (app::RunService): a header "key,step,value,wall_time", then one line per point; a key
// holding a comma, a quote or a line break is quoted as RFC 4180 says; values with 17 significant digits (they
// read back exactly), wall times in seconds since the epoch with 6 decimals. Torch-free; shared with app/.
// A plot's lines (the Studio's "Export data as CSV") are the same columns with the run in front and the smoothed
// value after: "run,name,key,step,value,wall_time,smoothed", written by append_plot_line, fields as above.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spur::metrics_csv {

inline constexpr std::string_view kHeader = "key,step,value,wall_time\n";
inline constexpr std::string_view kPlotHeader = "run,name,key,step,value,wall_time,smoothed\n";

/// `key` as a CSV field.
std::string field(std::string_view key);
/// Appends one point's line; `key_field` is field(key), computed once per series.
void append_line(std::string& out, std::string_view key_field, int64_t step, double value, double wall);
/// Appends one line of a plot's CSV (kPlotHeader); `name_field` and `key_field` are field()'s.
void append_plot_line(std::string& out, int64_t run, std::string_view name_field, std::string_view key_field,
                      int64_t step, double value, double wall, double smoothed);

}  // namespace spur::metrics_csv
