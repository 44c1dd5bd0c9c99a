// SPDX-License-Identifier: GPL-3.0-or-later
// MainWindow: the runs of the history on the left (RunsModel), the live dashboard of the selected ones on the
// right. The history is re-read every 250 ms: runs launched from a terminal show up as well.
#pragma once

#include <QMainWindow>
#include <QThread>

class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTimer;

namespace spur::app {
class RunsModel;
}

namespace spur::studio {

class ConsoleView;
class Dashboard;
class SeriesLoader;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QString history_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  app::RunsModel* runs() const { return runs_; }
  QTableView* runs_view() const { return table_; }
  /// Shows only runs whose name, project, status, target or tags contain `text`.
  void filter_runs(const QString& text);
  Dashboard* dashboard() const { return dashboard_; }
  ConsoleView* console() const { return console_; }
  // Run actions (menu and context menu ask with dialogs, then call these). Each returns an error, or empty.
  QString rename_run(qint64 run, const QString& name);
  QString tag_run(qint64 run, const QString& tag);
  QString set_notes(qint64 run, const QString& notes);
  QString delete_run(qint64 run);
  /// Writes the run's configuration, ready for `spur launch --config_file`.
  QString export_config(qint64 run, const QString& file);

  /// Runs to show first (instead of the newest), as soon as they are in the history.
  void show_runs(const QList<qint64>& ids) { wanted_ = ids; selected_once_ = false; }

 private:
  void refresh();
  void selection_changed();
  void build_actions();
  /// The run under the cursor in the table (the current row), or 0.
  qint64 current_run() const;
  void report(const QString& error);

  QString path_;
  app::RunsModel* runs_;
  QSortFilterProxyModel* shown_;  // runs_ sorted and filtered by the search box
  QLineEdit* search_;
  QTableView* table_;
  Dashboard* dashboard_;
  ConsoleView* console_;
  QTimer* timer_;
  QThread reader_thread_;
  SeriesLoader* loader_;
  bool selected_once_ = false;
  QList<qint64> wanted_;
};

}  // namespace spur::studio
