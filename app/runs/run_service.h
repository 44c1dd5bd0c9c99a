// SPDX-License-Identifier: Apache-2.0
// RunService: what can be done to the runs of a history, for `spur runs` and the Studio alike: list and query
// (runs by filter, one run's metrics in brief, its events and console), rename, tag and untag, notes, delete (not
// while the run runs), export of metrics in the one CSV and the one JSON layout, the run's configuration (shown or
// written to a file), import of TensorBoard runs, the summaries plots read. Neither the CLI nor the Studio opens
// the history for these or formats an export itself (the Studio's periodic reads are app/runs' reader workers:
// RunsReaderWorker, SeriesLoader, CompareReaderWorker, ConsoleModel; its changes go through RunActions, this
// service on a thread of its own).
//
// Layouts (docs/tracking.md, "Export layouts"):
//   CSV   engine/core/include/spur/core/metrics_csv.h's (key,step,value,wall_time; the csv tracker's too), series after
//   series in
//         the order they were first logged.
//   JSON  {"run": run_json(run), "metrics": {key: [[step, value, wall_time], ...]}}
//
// A history named ssh://[user@]host[:port]/path is on another machine: every call above goes to
// `spur runs serve --stdio` there over SSH (remote_history.h) and is answered by that machine's RunService, the same
// rules applied there; only the imports are refused (run them on that machine).
//
// Threads: each change opens the history for writing, does its work and closes it; reads share one read-only
// connection, opened at the first read and kept for the object's life (`spur runs logs --follow` polls through
// it). Calls may block (another process holding the history, a long import). Any thread, one call at a time per
// object. Errors: RunServiceError, naming the run or
// file, for what the caller asked wrong; history::HistoryError when the history cannot be read or written.
#pragma once

#include <QByteArray>
#include <QSet>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <spur/history/reader.h>
#include <spur/history/records.h>

#include "launch/launch_request.h"
#include "runs/remote_history.h"
#include "runs/mlflow_import.h"
#include "runs/tensorboard_import.h"

namespace spur::history {
class HistoryWriter;
}

namespace spur::app {

class RunServiceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ExportFormat { csv, json };

/// A run as `spur runs list --json` and the JSON export show it.
QJsonObject run_json(const history::Run& run);

/// One metric of a run in brief (`spur runs show`).
struct MetricBrief {
  std::string key;
  int64_t points = 0;
  double last = 0;
  int64_t last_step = 0;
  double min = 0, max = 0;  // over the whole series (NaN left out)
};

class RunService {
 public:
  /// `history_path`: a file, or ssh://[user@]host[:port]/path for one on another machine (RunServiceError when
  /// that address is malformed), reached with `remote`'s settings.
  explicit RunService(std::string history_path, RemoteOptions remote = {});
  ~RunService();
  /// $SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db, else ~/.local/share/spur/history.db.
  static QString default_history_path();
  /// The path, or the ssh:// address, as given.
  const std::string& history_path() const { return path_; }
  /// Whether the history is on another machine (an ssh:// address).
  bool remote() const { return remote_ != nullptr; }
  /// Whether the history exists (on one not made yet, reads find nothing and changes are refused).
  bool exists() const;
  /// Whether it exists and this process cannot write it (read-only storage, another user's history): it reads as
  /// any other, and every change (rename, tag, notes, remove, import, summarise) is refused up front, by name.
  bool read_only() const;

  /// Every run, oldest first; none when the history does not exist yet.
  std::vector<history::Run> runs() const;
  /// The runs `filter` picks (statuses as recorded, tag, project, since, order, limit and offset); none when the
  /// history does not exist yet. A remote history's come without their configuration (run() and find() have it).
  std::vector<history::Run> runs(const history::RunFilter& filter) const;
  /// How many runs `filter` picks, its limit and offset aside.
  int64_t count_runs(const history::RunFilter& filter) const;
  /// The run, or RunServiceError "no run N in FILE" ("no run history at FILE yet" when there is none).
  history::Run run(int64_t id) const;
  /// The run as it is now; none when it is not (or no longer) in the history, or there is no history.
  std::optional<history::Run> find(int64_t id) const;
  /// Each metric of the run in brief, in the order first logged: read from the coarsest summaries, so instant
  /// however long the series. None for a run not in the history.
  std::vector<MetricBrief> metric_briefs(int64_t id) const;
  /// The run's status changes, oldest first (none for a run not in the history).
  std::vector<history::Event> events(int64_t id) const;
  /// The files the run recorded (checkpoints, models, its configuration), oldest first; none from a remote Spur
  /// that does not keep them.
  std::vector<history::RunFile> files(int64_t id) const;
  /// The run's console lines after line `after` (an id from an earlier answer; 0: from the start), oldest first;
  /// `rank` only (-1: the launcher's own lines) when given.
  std::vector<history::ConsoleLine> console(int64_t id, int64_t after = 0, std::optional<int> rank = {}) const;
  // The Studio's periodic reads (app/studio's readers), here or over SSH; each on a history that exists.
  /// Changes whenever another connection commits to the history (SQLite's data_version; over SSH also each time the
  /// connection is made again): a poller that sees the same value as last time has nothing new to read.
  int64_t data_version() const;
  /// HistoryError when another process has since moved the history to a newer schema (a service kept across polls
  /// checks this first).
  void check_schema() const;
  /// The run's metric keys, in the order first logged.
  std::vector<std::string> metric_keys(int64_t id) const;
  /// Every series' latest point (the runs table's final values).
  std::map<std::string, history::Point> last_points(int64_t id) const;
  /// The series' points; with a cursor, only those after it (and it advances).
  std::vector<history::Point> series(int64_t id, const std::string& key, history::SeriesCursor* cursor = nullptr) const;
  /// The series over a range at a width (history::HistoryReader::summary): bounded work and size however long.
  history::SeriesSummary summary(int64_t id, const std::string& key, const history::SeriesRange& range = {}) const;
  // The same reads for many runs or series at once, in the order asked: over SSH all in one round trip (the
  // Studio's pollers read hundreds of runs on each poll), here one after the other.
  std::vector<std::vector<std::string>> metric_keys(const std::vector<int64_t>& ids) const;
  std::vector<std::map<std::string, history::Point>> last_points(const std::vector<int64_t>& ids) const;
  struct SeriesRead {
    int64_t run = 0;
    std::string key;
    history::SeriesCursor cursor;  // where to start; advanced past what was read
  };
  std::vector<std::vector<history::Point>> series(std::vector<SeriesRead>& reads) const;
  struct SummaryRead {
    int64_t run = 0;
    std::string key;
    history::SeriesRange range;
  };
  std::vector<history::SeriesSummary> summaries(const std::vector<SummaryRead>& reads) const;
  /// Rebuilds one series' summaries (one a read found wrong); whether anything was rebuilt.
  bool rebuild_summaries(int64_t id, const std::string& key);
  /// Builds the summaries plots read where a series lacks them (a history from an older Spur), and with
  /// `check_all` rebuilds any that disagree with their points; `progress(done, total)` returning false stops
  /// between series. How many series were built. RunServiceError when there is no history.
  int64_t summarise(const std::function<bool(int64_t done, int64_t total)>& progress = {}, bool check_all = false);
  /// Its name, trimmed; an empty name is refused.
  void rename(int64_t id, const QString& name);
  /// Adds (or with `remove`, removes) a tag, trimmed; an empty tag is refused.
  void tag(int64_t id, const QString& tag, bool remove = false);
  void set_notes(int64_t id, const QString& notes);
  /// Asks the run's launcher to stop it (SIGTERM, on the machine it runs on: over SSH, that machine's serve
  /// signals it); RunServiceError saying why not (not running, launched on another machine, its launcher gone).
  void stop(int64_t id);
  /// Deletes the run and everything recorded for it. A queued or running run is refused (its recorder would write
  /// it back without its configuration) unless `force` (a run whose launcher died on another machine).
  void remove(int64_t id, bool force = false);
  /// The run's metrics (all, or `keys`, each of which must exist) in `format`'s layout (above).
  QByteArray export_metrics(int64_t id, ExportFormat format, const QStringList& keys = {}) const;
  /// The same, into `file`: whole or not at all (a regular file), or written straight through (a pipe,
  /// /dev/stdout); never over the history or its journal files, whatever name or link leads there.
  void export_metrics(int64_t id, ExportFormat format, const QString& file, const QStringList& keys = {}) const;
  /// The YAML the run was launched with; RunServiceError for a run that was not started by spur launch.
  QString config(int64_t id) const;
  /// The same, into `file`, its owner's only as every configuration Spur writes (it can name hosts and
  /// profiles); never over the history.
  void export_config(int64_t id, const QString& file) const;
  /// `spur runs import`; see tensorboard_import.h (std::invalid_argument is turned into RunServiceError).
  std::vector<ImportedRun> import_tensorboard(const QString& path, const TensorBoardImportOptions& options = {},
                                              const std::function<void(const ImportedRun&)>& done = {});
  /// `spur runs import mlflow://...`; see mlflow_import.h (std::invalid_argument is turned into RunServiceError).
  std::vector<ImportedRun> import_mlflow(const QString& address, const MlflowImportOptions& options = {},
                                         const std::function<void(const ImportedRun&)>& done = {});

  /// The name for a run launched again from one named `name`: "name (2)", and "name (3)" from "name (2)"; the
  /// next number that is not one of `taken`.
  static QString next_name(const QString& name, const QSet<QString>& taken = {});
  /// What launches `run` again (the Studio's Relaunch): its recorded command and directory, with the
  /// configuration it ran with, which the caller writes to `config_file`, recorded as `name` (empty: next_name of its
  /// name, not looking for names taken: the Studio passes its own),
  /// with its tags and notes, and `run` as its parent (--run_name, --tag, --notes, --parent_run replace any the
  /// command had). RunServiceError naming the run when it was not started by spur launch, or its command does not
  /// say its directory or cannot be read back.
  static LaunchRequest relaunch_request(const history::Run& run, const QString& config_file, QString name = {});

 private:
  history::HistoryReader& reader() const;
  /// A writer for a change to run `id`; RunServiceError naming the run (or the missing history) when it is not
  /// there. A missing history is never created by a change.
  std::unique_ptr<history::HistoryWriter> change(int64_t id) const;
  void refuse_if_read_only() const;
  /// RunServiceError when `file` is the history or one of its journal files, whatever name or link leads there.
  void refuse_history_file(const QString& file) const;

  QJsonValue ask(const QString& call, const QJsonObject& arguments = {},
                 RemoteHistory::Retry retry = RemoteHistory::Retry::yes) const;

  std::string path_;
  mutable std::unique_ptr<history::HistoryReader> reader_;  // the reads' connection, opened at the first
  mutable std::unique_ptr<RemoteHistory> remote_;           // set for an ssh:// history
};

}  // namespace spur::app
