// SPDX-License-Identifier: Apache-2.0
// RunsModel: the run history's runs as a table model (the Studio's runs table, any Qt view). refresh() re-reads
// the history and updates rows in place (inserts, changes, removals), so selections survive live updates.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <vector>

#include <memory>

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

 private:
  QString path_;
  QString error_;
  std::vector<history::Run> runs_;  // by id, ascending
  std::unique_ptr<history::HistoryReader> reader_;  // opened once (refresh runs every 250 ms), again after an error
};

}  // namespace spur::app
