// SPDX-License-Identifier: GPL-3.0-or-later
// MainWindow: the runs of the history on the left (RunsModel), the live dashboard of the selected ones on the
// right. The history is re-read every 250 ms: runs launched from a terminal show up as well.
#pragma once

#include <QMainWindow>
#include <QThread>

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
  Dashboard* dashboard() const { return dashboard_; }
  ConsoleView* console() const { return console_; }
  /// Runs to show first (instead of the newest), as soon as they are in the history.
  void show_runs(const QList<qint64>& ids) { wanted_ = ids; selected_once_ = false; }

 private:
  void refresh();
  void selection_changed();

  QString path_;
  app::RunsModel* runs_;
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
