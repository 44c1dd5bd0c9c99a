// SPDX-License-Identifier: Apache-2.0
// RunsModel: the run history's runs as a table model (the Studio's runs table, any Qt view). refresh() re-reads
// the history and updates rows in place (inserts, changes, removals), so selections survive live updates.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <QStringList>

#include <map>
#include <optional>
#include <memory>
#include <vector>

#include <spur/history/records.h>

namespace spur::history {
class HistoryReader;
}

namespace spur::app {

class RunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Id, Name, Project, Status, Progress, Started, Duration, ExitCode, Target, Tags, ColumnCount };
  /// Qt::UserRole: the raw value to sort by (numbers as numbers, times as seconds).
  static constexpr int SortRole = Qt::UserRole;
  /// Qt::UserRole + 1: the run's id, on every column.
  static constexpr int RunIdRole = Qt::UserRole + 1;

  explicit RunsModel(QString history_path, QObject* parent = nullptr);
  ~RunsModel() override;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  /// Re-reads the history. False (and error() says why) when it cannot be read; the rows stay as they were.
  bool refresh();
  const QString& error() const { return error_; }
  const history::Run& run(int row) const { return runs_.at(static_cast<size_t>(row)); }
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

 private:
  QString path_;
  QString error_;
  std::vector<history::Run> runs_;  // by id, ascending
  std::vector<QString> statuses_;   // effective_status of each row
  QStringList metric_columns_;
  std::map<int64_t, std::map<std::string, history::Point>> last_points_;  // by run id
  std::map<int64_t, std::pair<int64_t, std::string>> last_read_;          // (last step, status) when read
  std::unique_ptr<history::HistoryReader> reader_;  // opened once (refresh runs every 250 ms), again after an error
};

}  // namespace spur::app
