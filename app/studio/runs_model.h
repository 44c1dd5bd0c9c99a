// SPDX-License-Identifier: Apache-2.0
// RunsModel: the run history's runs as a table model (the Studio's runs table, any Qt view). A RunsReader reads
// the history into a RunsSnapshot (on a worker thread in the Studio: RunsReaderWorker), and apply() merges it into
// the rows in place (inserts, changes, removals), so selections survive live updates. refresh() does both at once,
// on the calling thread (the CLI-free tests and tools).
#pragma once

#include <QAbstractTableModel>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <vector>

#include <QElapsedTimer>

#include <spur/history/records.h>

#include "studio/baseline.h"

namespace spur::app {

class RunService;

/// One read of the history for the runs table: every run (by id, ascending), its effective status (which looks at
/// /proc, so it is read here and not per paint), and the latest values of the runs that logged or changed since
/// the reader's last read.
struct RunsSnapshot {
  std::vector<history::Run> runs;
  std::vector<QString> statuses;
  std::map<int64_t, std::map<std::string, history::Point>> last_points;  // only the runs read again
  int64_t total_runs = 0;     // in the history: more than `runs` holds when older pages are not fetched yet
  bool fetched_more = false;  // this read served a fetch_more() (the model may ask for the next page)
  QString error;              // not empty: the read failed and the rest is empty
  bool read_only = false;     // this user cannot write the history (read-only storage, another user's)
  /// Nothing was committed since the last read (and it was less than 2 s ago; over SSH, also any read less than
  /// 1 s after the last): runs and last_points are empty and the table stays as it is.
  bool unchanged = false;
};

/// Reads RunsSnapshots, keeping what it read last so that each read fetches only what changed. Runs come in pages,
/// newest first: the first read holds the newest `page` runs, each fetch_more() a page of older ones, and every read
/// all runs from the oldest fetched on (new runs included). One thread at a time; the history is opened once, and
/// again after an error.
class RunsReader {
 public:
  /// Default: 500 runs a page.
  explicit RunsReader(QString history_path, int64_t page = 500);
  ~RunsReader();
  RunsReader(const RunsReader&) = delete;
  RunsReader& operator=(const RunsReader&) = delete;
  RunsSnapshot read();
  /// The next read also holds the next page of older runs.
  void fetch_more();
  /// Every read from now on holds the run `id` and all newer ones (runs asked for by ID, older than the first page).
  void include(int64_t id);
  /// Told when a remote history's connection drops and is made again (RemoteOptions::notice).
  void set_notice(std::function<void(const QString&)> notice) { notice_ = std::move(notice); }

 private:
  QString path_;
  std::function<void(const QString&)> notice_;
  int64_t page_;
  int64_t from_id_ = -1;                 // the oldest run read (-1: nothing read yet; 0: every run)
  int64_t include_ = 0;                  // include(): read at least from this run on (0: no such wish)
  bool more_ = false;                    // fetch_more() asked for another page
  std::unique_ptr<RunService> service_;  // here or over SSH (run_service.h)
  int64_t version_ = -1;                 // the history's data_version at the last whole read
  int64_t included_ = 0;                 // include_ at the last whole read
  int64_t total_ = 0;                    // total_runs at the last whole read
  bool read_only_ = false;               // read_only at the last whole read
  QElapsedTimer last_whole_;             // since the last whole read
  QString failed_;                       // a remote history's last error, said again until failure_ is 2 s old
  QElapsedTimer failure_;
  std::map<int64_t, std::pair<int64_t, std::string>> last_read_;  // (last step, status) when last read
};

/// A RunsReader for a thread of its own (the Studio's): read() emits snapshot() when done.
class RunsReaderWorker : public QObject {
  Q_OBJECT

 public:
  explicit RunsReaderWorker(QString history_path);

 public slots:
  void read();
  /// A page of older runs, then read().
  void fetch_more();
  /// RunsReader::include (then the next read() holds the run).
  void include(qint64 id) { reader_.include(id); }

 signals:
  void snapshot(const spur::app::RunsSnapshot& snapshot);
  /// A remote history's connection: "lost the connection ...; reconnecting", "reconnected to ...".
  void notice(const QString& text);

 private:
  RunsReader reader_;
};

class RunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Id, Name, Project, Status, Progress, Started, Duration, ExitCode, Target, Tags, ColumnCount };
  /// Qt::UserRole: the raw value to sort by (numbers as numbers, times as seconds).
  static constexpr int SortRole = Qt::UserRole;
  /// Qt::UserRole + 1: the run's id, on every column.
  static constexpr int RunIdRole = Qt::UserRole + 1;
  /// Qt::UserRole + 2, on metric columns with a baseline: +1 better than the baseline's value, -1 worse, 0 same or
  /// not comparable (CompareModel's verdict; the Studio colours by it).
  static constexpr int VerdictRole = Qt::UserRole + 2;

  explicit RunsModel(QString history_path, QObject* parent = nullptr);
  ~RunsModel() override;

  int rowCount(const QModelIndex& parent = {}) const override;
  /// Rows come in pages (RunsReader): views ask for older runs as they scroll to them.
  bool canFetchMore(const QModelIndex& parent) const override;
  void fetchMore(const QModelIndex& parent) override;
  /// Runs in the history, fetched or not.
  int64_t total_runs() const { return total_runs_; }
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  /// Merges a snapshot into the rows. False (and error() says why) for a failed read; the rows stay as they were.
  bool apply(const RunsSnapshot& snapshot);
  /// Reads the history on this thread and applies it (fetchMore then reads the next page here too).
  bool refresh();
  const QString& error() const { return error_; }
  const history::Run& run(int row) const { return runs_.at(static_cast<size_t>(row)); }
  /// Every row's run, in row order (ascending id).
  const std::vector<history::Run>& records() const { return runs_; }
  /// The row of a run, or -1.
  int row_of(int64_t id) const;
  /// effective_status() of a row as of the last refresh (it looks at /proc: once per refresh, not per paint).
  const QString& status(int row) const { return statuses_.at(static_cast<size_t>(row)); }

  /// Columns after ColumnCount: each run's latest value of these metrics ("final values" once it ended).
  void set_metric_columns(const QStringList& keys);
  const QStringList& metric_columns() const { return metric_columns_; }
  /// Every metric key of the runs in the table, sorted (what set_metric_columns can show).
  QStringList metric_keys() const;
  /// A run's latest value of a metric, if it logged one.
  std::optional<double> last_value(int64_t run, const QString& key) const;
  /// The run the metric columns are measured against (each cell then shows its delta, absolute and in %,
  /// "0.25 (-0.03, -10.7%)", as studio/baseline.h says it); 0: none.
  /// Directions as CompareModel's: `direction` gives a metric's (default: guess_direction).
  void set_baseline(qint64 run, std::function<MetricDirection(const QString& key)> direction = {});
  /// The running rows' Progress, Started and Duration changed with the clock (their duration and eta, and "last
  /// logged 0m08s ago" while a program evaluates without logging): the window calls this every second, so the
  /// table moves while nothing is committed.
  void tick();
  /// A running run logged nothing for this many seconds: its Progress says since when.
  static constexpr double kQuietSeconds = 5;
  qint64 baseline() const { return baseline_; }

 signals:
  /// fetchMore() of a model fed by apply() (a RunsReaderWorker's): its owner should ask the worker for more.
  void more_wanted();

 private:
  QString path_;
  QString error_;
  std::vector<history::Run> runs_;  // by id, ascending
  std::vector<QString> statuses_;   // effective_status of each row
  QStringList metric_columns_;
  std::map<int64_t, std::map<std::string, history::Point>> last_points_;  // by run id
  std::unique_ptr<RunsReader> reader_;                                    // refresh()'s, made on first use
  int64_t total_runs_ = 0;
  bool fetching_ = false;  // more_wanted() sent, no snapshot since
  bool applying_ = false;  // inside apply()
  qint64 baseline_ = 0;
  std::function<MetricDirection(const QString& key)> direction_;
  std::optional<double> delta(int64_t run, const QString& key) const;
};

}  // namespace spur::app

Q_DECLARE_METATYPE(spur::app::RunsSnapshot)
