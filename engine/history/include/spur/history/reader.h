// SPDX-License-Identifier: Apache-2.0
// HistoryReader: reads runs, metric series, console lines and events while training writes them (WAL: readers
// never block writers). Cursors let a viewer fetch only what is new since its last read.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spur/history/database.h"
#include "spur/history/records.h"

namespace spur::history {

/// Where a series was read up to; pass the same cursor again to get only newer points.
struct SeriesCursor {
  int64_t chunk_id = 0;
  int64_t points_in_chunk = 0;
};

class HistoryReader {
 public:
  /// Opens the history read-only. Throws HistoryError when it does not exist or cannot be read.
  explicit HistoryReader(const std::string& path = default_history_path());

  /// Throws HistoryError when another process has since moved the file to a newer schema (a reader kept open
  /// across refreshes checks this first; it costs one header read).
  void check_schema();
  std::vector<Run> runs();
  std::optional<Run> run(int64_t id);
  std::vector<std::string> metric_keys(int64_t run);
  /// The series' points in the order they were logged; with a cursor, only those after it (and it advances).
  std::vector<Point> series(int64_t run, const std::string& key, SeriesCursor* cursor = nullptr);
  /// Every series' latest point (the runs table's "final values"); reads one chunk per series.
  std::map<std::string, Point> last_points(int64_t run);
  /// Console lines with id > after_id, oldest first; `rank` filters (-1: the launcher's own lines).
  std::vector<ConsoleLine> console(int64_t run, int64_t after_id = 0, std::optional<int> rank = std::nullopt,
                                   int64_t limit = -1);
  std::vector<Event> events(int64_t run);

 private:
  Database db_;
};

}  // namespace spur::history
