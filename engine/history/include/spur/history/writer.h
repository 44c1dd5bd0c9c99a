// SPDX-License-Identifier: Apache-2.0
// HistoryWriter: adds runs, metric points, console lines and status events to the run history. Each call is one
// transaction; batch many points into one append. Each chunk of points that fills is summarised (min, max, first,
// last and sum per bucket, at three levels) in the same transaction. One thread; several processes may write the
// same file.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spur/history/database.h"
#include "spur/history/records.h"

namespace spur::history {

class HistoryWriter {
 public:
  /// Console lines kept per run: the oldest go first.
  static constexpr int64_t kConsoleLinesPerRun = 100000;

  /// Opens (creating and migrating) the history. Throws HistoryError.
  /// `busy_timeout_ms`: how long a write waits for other processes' writes (several launches, a training
  /// program and its launcher share the file) before failing with HistoryError::busy(). Default: 30 s.
  explicit HistoryWriter(const std::string& path = default_history_path(), int busy_timeout_ms = 30000);

  /// A new run; its id. `run.created` and `run.started` default to now.
  int64_t create_run(Run run);
  /// A whole finished run at once (an import): the run as given (its status, times and params), its points and
  /// an event whose detail is `origin` (what it came from, say "tensorboard:FINGERPRINT"), in one transaction:
  /// all of it or none. Unless `again`, a run is not imported twice: when a run was imported from the same
  /// `origin` (the same records, wherever they lie now), or from the same source whose records have changed since
  /// (an earlier run with the same target and command: the same folder, a run still being written), nothing is
  /// written, nullopt is returned, last_imported_as() names the earlier run and last_import_changed() says which.
  std::optional<int64_t> import_run(Run run, const std::vector<MetricAppend>& metrics, const std::string& origin,
                                    bool again = false);
  int64_t last_imported_as() const { return last_imported_as_; }
  /// The import refused last was of the same source with other records (not the same records).
  bool last_import_changed() const { return last_import_changed_; }
  /// Records a status change (and the exit code when it ends) as a run field and an event.
  void set_status(int64_t run, const std::string& status, std::optional<int> exit_code = std::nullopt,
                  const std::string& detail = {});
  void set_total_steps(int64_t run, int64_t total_steps);
  void set_names(int64_t run, const std::string& project, const std::string& name);
  void set_notes(int64_t run, const std::string& notes);
  void set_params(int64_t run, const std::string& params_json);
  void add_tag(int64_t run, const std::string& tag);
  void remove_tag(int64_t run, const std::string& tag);
  /// Deletes the run and everything recorded for it; false when there is no such run.
  bool delete_run(int64_t run);
  bool has_run(int64_t run);

  /// Appends points to the run's metrics (creating them), in one transaction. The run's last step follows the
  /// points' steps, except those of series under "system/" (the launcher's measurements, stepped in seconds).
  void append_metrics(int64_t run, const std::vector<MetricAppend>& metrics);
  /// Appends console lines (each names its run), keeping the newest kConsoleLinesPerRun per run.
  void append_console(const std::vector<ConsoleLine>& lines);
  /// Records files of runs (RunFile::run_id each; a wall of 0 is now).
  void add_files(const std::vector<RunFile>& files);

  /// Builds the multi-resolution summaries (see HistoryReader::summary) of every series that lacks them (a history
  /// written by a Spur before them) or, when `check_all`, whose summaries disagree with its points (never trusted:
  /// rebuilt from the points), one transaction per series. `check_all` reads every series once (a second for
  /// 30,000); without it only series never summarised are found (one query). `progress(done, total)` is called
  /// before each series and at the end; it may return false to stop (what was built stays). Returns how many series
  /// were (re)built.
  int64_t build_summaries(const std::function<bool(int64_t done, int64_t total)>& progress = {}, bool check_all = true);
  /// Rebuilds one series' summaries if they disagree with its points (a reader found summarised == false); whether
  /// it did.
  bool rebuild_summaries(int64_t run, const std::string& key);
  /// How many series build_summaries() would build (a check of each; no writes).
  int64_t series_needing_summaries();

  Database& database() { return db_; }

 private:
  int64_t series_id(int64_t run, const std::string& key);
  // Inside a transaction: the run's row, its tags and its first event; its id.
  int64_t insert_run(Run run, const std::string& event_detail);
  // Inside a transaction: appends the points, growing each series' last chunk first.
  void append_points(int64_t run, const std::vector<MetricAppend>& metrics);
  void append_metrics_once(int64_t run, const std::vector<MetricAppend>& metrics);
  std::vector<int64_t> series_to_summarise(bool check_all);

  Database db_;
  std::map<std::pair<int64_t, std::string>, int64_t> series_;
  int64_t last_imported_as_ = 0;
  bool last_import_changed_ = false;
};

}  // namespace spur::history
