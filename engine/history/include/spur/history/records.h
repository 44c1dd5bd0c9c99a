// SPDX-License-Identifier: Apache-2.0
// The run history's records (runs, metric points, console lines, status events) and where the database lives.
// Plain data shared by the engine's trackers, the `spur` command and the Studio; no SQLite, no torch, no Qt.
#pragma once

#include <cstdint>
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
};

struct Point {
  int64_t step = 0;
  double value = 0;
  double wall = 0;
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

bool valid_status(const std::string& status);
/// $SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db, else ~/.local/share/spur/history.db.
std::string default_history_path();
/// Seconds since the epoch, with sub-second precision.
double now_seconds();

}  // namespace spur::history
