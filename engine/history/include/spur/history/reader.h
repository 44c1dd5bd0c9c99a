// SPDX-License-Identifier: Apache-2.0
// HistoryReader: reads runs, metric series, console lines and events while training writes them (WAL: readers
// never block writers). Cursors let a viewer fetch only what is new since its last read.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spur/history/database.h"
#include "spur/history/records.h"

namespace spur::history {

/// Where a series was read up to; pass the same cursor again to get only newer points.
struct SeriesCursor {
  int64_t chunk_id = 0;
  int64_t points_in_chunk = 0;
};

/// Which runs runs() lists. Default: every run, oldest first. Each filter is served by an index.
struct RunFilter {
  std::vector<std::string> statuses;  // only runs of these (recorded) statuses; empty: any
  std::string tag;                    // only runs with this tag; empty: any
  std::string project;                // only runs of this project; empty: any
  double since = 0;                   // only runs created at or after this time (seconds since the epoch); 0: any
  int64_t limit = -1;                 // at most this many; -1: all
  int64_t offset = 0;                 // after skipping this many
  int64_t from_id = 0;                // only runs with an id at or above this; 0: any
  int64_t before_id = 0;              // only runs with an id below this; 0: any
  bool newest_first = false;
};

class HistoryReader {
 public:
  /// Opens the history to read it. Throws HistoryError when it does not exist or cannot be read. One this process
  /// cannot write (read-only storage, another user's) is read as it is (Database's read-only mode).
  explicit HistoryReader(const std::string& path = default_history_path());
  /// True when this process cannot write the history (reading works; a change would fail).
  bool read_only() const { return db_.read_only(); }

  /// Throws HistoryError when another process has since moved the file to a newer schema (a reader kept open
  /// across refreshes checks this first; it costs one header read).
  void check_schema();
  /// Changes whenever another connection commits to the file (SQLite's data_version): a poller that sees the same
  /// value as last time has nothing new to read.
  int64_t data_version();
  std::vector<Run> runs(const RunFilter& filter = {});
  /// How many runs the filter lists (limit and offset aside).
  int64_t count_runs(const RunFilter& filter = {});
  std::optional<Run> run(int64_t id);
  std::vector<std::string> metric_keys(int64_t run);
  /// The series' points in the order they were logged; with a cursor, only those after it (and it advances).
  std::vector<Point> series(int64_t run, const std::string& key, SeriesCursor* cursor = nullptr);
  /// The series over `range` at about `range.width` columns, from the coarsest summary level that still gives
  /// `width` buckets there (the raw points when none does): bounded work and size however long the series, every
  /// point's min and max kept. Unsummarised series (summarised == false) are summarised from the raw points.
  SeriesSummary summary(int64_t run, const std::string& key, const SeriesRange& range = {});
  /// Every series' latest point (the runs table's "final values"); reads one chunk per series.
  std::map<std::string, Point> last_points(int64_t run);
  /// Console lines with id > after_id, oldest first; `rank` filters (-1: the launcher's own lines).
  std::vector<ConsoleLine> console(int64_t run, int64_t after_id = 0, std::optional<int> rank = std::nullopt,
                                   int64_t limit = -1);
  std::vector<Event> events(int64_t run);
  /// The files the run recorded (HistoryWriter::add_files), oldest first.
  std::vector<RunFile> files(int64_t run);

 private:
  // A series as summary() found it, kept until another connection commits (data_version changes).
  struct SeriesState {
    int64_t id = 0;
    bool agree = false;  // its summaries agree with its points
    int64_t total_points = 0, last_summarised_chunk = 0;
    std::vector<Point> extent;  // its first and last points
    double first_wall = 0;
    int64_t end_chunk_id = 0, end_chunk_points = 0;
  };
  SeriesState read_series_state(int64_t series);

  Database db_;
  std::map<std::pair<int64_t, std::string>, SeriesState> cached_;
  int64_t cached_version_ = -1;
};

}  // namespace spur::history
