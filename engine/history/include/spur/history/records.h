// SPDX-License-Identifier: Apache-2.0
// The run history's records (runs, metric points, console lines, status events) and where the database lives.
// Plain data shared by the engine's trackers, the `spur` command and the Studio; no SQLite, no torch, no Qt.
#pragma once

#include <cstdint>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spur::history {

/// A history that cannot be opened, read or written; the message names the file. busy(): another connection
/// held the lock past the busy timeout (the same call may succeed later).
class HistoryError : public std::runtime_error {
 public:
  explicit HistoryError(const std::string& message, bool busy = false) : std::runtime_error(message), busy_(busy) {}
  bool busy() const { return busy_; }

 private:
  bool busy_ = false;
};

/// One run: what was launched, where, and how it went. Times are seconds since the epoch (0: not yet).
struct Run {
  int64_t id = 0;
  std::string name;
  std::string project;
  std::string status = "running";  // queued, running, finished, failed, stopped
  double created = 0, started = 0, ended = 0;
  std::optional<int> exit_code;
  std::string target = "local";  // local, ssh, sagemaker
  std::string hosts;             // comma-separated
  std::string config;            // the run configuration's YAML, as launched
  std::string command;           // the command line
  std::string notes;
  std::string params = "{}";  // the program's parameters (init_trackers' config), a JSON object
  std::vector<std::string> tags;
  int64_t total_steps = 0;  // 0: unknown
  int64_t last_step = -1;   // -1: nothing logged yet
  int64_t pid = 0;          // the process that owns the run (launcher, or the training program)
  std::string host;         // the machine that process runs on
  int64_t parent = 0;       // the run this one was launched again from (0: none)
};

struct Point {
  int64_t step = 0;
  double value = 0;
  double wall = 0;
};

/// Some consecutive points of a series, summarised: their count, extent, extremes, first, last, and the sum and
/// number of their finite values. A single point is a bucket of count 1. min and max leave NaN values out (NaN only
/// when every value is); the mean is of the finite values (an fp16 run's few inf losses do not blank a bucket of
/// 4,096 points), NaN when there are none.
struct Bucket {
  int64_t count = 0;
  int64_t step_lo = 0, step_hi = 0;
  double wall_lo = 0, wall_hi = 0;
  double min = 0, max = 0, first = 0, last = 0;
  double sum = 0;      // of the finite values
  int64_t finite = 0;  // how many values are finite
  double mean() const { return finite ? sum / static_cast<double>(finite) : std::numeric_limits<double>::quiet_NaN(); }
  /// One point as a bucket of count 1 (its value is min, max, first, last and, when finite, the sum): every bucket
  /// of one point is this one.
  static Bucket of(const Point& p) {
    const bool is_finite = std::isfinite(p.value);
    Bucket b;
    b.count = 1;
    b.step_lo = b.step_hi = p.step;
    b.wall_lo = b.wall_hi = p.wall;
    b.min = b.max = b.first = b.last = p.value;
    b.sum = is_finite ? p.value : 0;
    b.finite = is_finite ? 1 : 0;
    return b;
  }
};

/// What part of a series to read, and how finely: the x range [lo, hi] (steps, or wall times in seconds since the
/// epoch when `by_wall`) at `width` columns (a plot's pixels). Default: the whole series at 1,000 columns.
struct SeriesRange {
  double lo = -1e300, hi = 1e300;
  bool by_wall = false;
  int64_t width = 1000;
};

/// A series read at a resolution: between `width` and 2 x `width` buckets over the range (fewer only when the range
/// holds fewer points: then one bucket per point), min and max of every raw point kept.
struct SeriesSummary {
  std::vector<Bucket> buckets;
  int64_t points_per_bucket = 1;  // nominal; 1: the raw points
  int level = 0;                  // the summary level read (0: raw points)
  /// false: the series has no trustworthy summaries yet (a history from an older Spur, or summaries that disagree
  /// with their points): these buckets were computed from the raw points, and HistoryWriter::build_summaries()
  /// makes the next read fast.
  bool summarised = true;
  int64_t total_points = 0;  // in the whole series
  double first_wall = 0;     // the series' first point's wall time (0: no points)
  /// Where the series ended when read (a SeriesCursor there reads only the points logged after).
  int64_t end_chunk_id = 0, end_chunk_points = 0;
};

/// A metric's new points for one run, appended in one go.
struct MetricAppend {
  std::string key;
  std::vector<Point> points;
};

struct ConsoleLine {
  int64_t id = 0;  // set by the database
  int64_t run_id = 0;
  std::string host;
  int rank = -1;  // -1: the launcher itself
  std::string stream = "stdout";
  double wall = 0;
  std::string text;
};

struct Event {
  int64_t id = 0;
  int64_t run_id = 0;
  double wall = 0;
  std::string status;
  std::string detail;
};

/// A file a run wrote or ran with: a checkpoint (save_state's folder), a model (save_model's folder), or its
/// configuration (the file launched with). Recorded when written; the file may have gone since (a rotated
/// checkpoint).
struct RunFile {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string kind;   // "checkpoint", "model", "config"
  std::string path;   // absolute, on `host`
  int64_t step = -1;  // the run's last logged step when it was written; -1: none
  int64_t bytes = 0;
  double wall = 0;
  std::string host;  // the machine it is on (empty: the history's)
};

bool valid_status(const std::string& status);
/// $SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db, else ~/.local/share/spur/history.db (home_directory(): it
/// throws std::runtime_error when the user has no home folder).
std::string default_history_path();
/// This user's home folder: $HOME, else the password database's entry for this user (a service, a cron job or
/// `env -i` runs without HOME). Throws std::runtime_error naming what to set when neither gives one; never the
/// current folder.
std::string home_directory();
/// Seconds since the epoch, with sub-second precision.
double now_seconds();

}  // namespace spur::history
