// SPDX-License-Identifier: Apache-2.0
// Comparing runs: CompareReader reads what a comparison shows of 2 or more runs (their records, configurations,
// parameters, and each metric's final and best value) into a CompareSnapshot, on any thread; CompareModel is the
// table of it: a row per field, a column per run. Rows come in sections: the run ("run/name", "run/status", ...),
// its metrics ("loss (final)", "loss (best)"), its parameters ("params/lr", nested keys joined with '/') and its
// configuration ("config/num_processes", nested keys joined with '.'). "Differences only" hides rows whose values are
// the same in every run. With a baseline run, each metric cell also shows its delta against the baseline's, absolute
// and in %, coloured by whether it is better or worse in the metric's direction (studio/baseline.h: what its name
// suggests until the user sets it).
#pragma once

#include <QAbstractTableModel>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <spur/history/records.h>

#include "studio/baseline.h"

namespace spur::app {

struct ComparedMetric {
  double final_value = 0;
  int64_t final_step = 0;
  double min = 0, max = 0;  // over finite values; NaN when there were none
  std::size_t points = 0;
};

/// A file the run recorded, as it stood when read: on this machine (`here`: recorded on this host), and still
/// there (`present`, looked at by the reader, off the GUI thread).
struct ComparedFile {
  history::RunFile file;
  bool here = false;
  bool present = false;
};

struct ComparedRun {
  history::Run run;
  QString status;                             // effective_status
  std::map<QString, QString> config;          // flattened YAML: "key.sub" -> value as written
  std::map<QString, QString> params;          // flattened JSON: "key/sub" -> value as JSON text
  std::map<QString, ComparedMetric> metrics;  // by key
  std::vector<ComparedFile> files;            // oldest first
};

struct CompareSnapshot {
  std::vector<ComparedRun> runs;  // in the order asked
  QString error;                  // not empty: the read failed
};

/// Reads CompareSnapshots. One thread at a time.
class CompareReader {
 public:
  explicit CompareReader(std::string history_path);
  /// The runs with these ids (those that exist), in this order.
  CompareSnapshot read(const QList<qint64>& runs) const;

 private:
  std::string path_;
};

/// A CompareReader for a thread of its own (the Studio's reader thread): read() emits snapshot().
class CompareReaderWorker : public QObject {
  Q_OBJECT

 public:
  explicit CompareReaderWorker(const QString& history_path);

 public slots:
  void read(const QList<qint64>& runs);

 signals:
  void snapshot(const spur::app::CompareSnapshot& snapshot);

 private:
  CompareReader reader_;
};

class CompareModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// Qt::UserRole: the row's field ("run/name", "config/x", "params/lr", "metric/loss/final", "metric/loss/best").
  static constexpr int FieldRole = Qt::UserRole;
  /// Qt::UserRole + 1: a metric cell's delta against the baseline (a double), or nothing.
  static constexpr int DeltaRole = Qt::UserRole + 1;
  /// Qt::UserRole + 2: +1 better than the baseline, -1 worse, 0 the same or not comparable (the Studio colours
  /// cells by it: app/ has no GUI types).
  static constexpr int VerdictRole = Qt::UserRole + 2;

  explicit CompareModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  /// Shows a new read (a model reset: the runs or their number changed).
  void set_snapshot(const CompareSnapshot& snapshot);
  const CompareSnapshot& snapshot() const { return snapshot_; }
  /// Hides rows whose values are the same in every run. Default: false.
  void set_differences_only(bool on);
  bool differences_only() const { return differences_only_; }
  /// The run the others are measured against; 0: none. A run not compared is refused (false).
  bool set_baseline(qint64 run);
  qint64 baseline() const { return baseline_; }
  void set_direction(const QString& metric, MetricDirection direction);
  MetricDirection direction(const QString& metric) const;
  /// The row of a field, or -1 (hidden by "differences only", or absent).
  int row_of(const QString& field) const;

 private:
  struct Row {
    QString field;   // see FieldRole
    QString label;   // shown in the vertical header
    QString metric;  // for metric rows
    bool best = false;
  };
  void rebuild();
  QString text(const Row& row, const ComparedRun& run) const;
  std::optional<double> number(const Row& row, const ComparedRun& run) const;

  CompareSnapshot snapshot_;
  std::vector<Row> all_rows_, rows_;  // rows_: those shown
  bool differences_only_ = false;
  qint64 baseline_ = 0;
  std::map<QString, MetricDirection> directions_;  // set by the user
};

}  // namespace spur::app

Q_DECLARE_METATYPE(spur::app::CompareSnapshot)
