// SPDX-License-Identifier: GPL-3.0-or-later
// RunOverview: what a double-click on a run in the runs table opens: the run's record (status, target, hosts,
// tags, notes, the run it was launched again from), each metric's final and best value, its parameters and its
// configuration, in one table (app/runs/CompareModel over one run), with its command line to copy; and its files
// (app::RunFilesModel: checkpoints with their step and size, exported models, the configuration), each folder to
// open, each checkpoint to launch the run again from. A window of its own, not modal: several can be open. It only
// paints: the reads happen on the window's reader thread, through a CompareReaderWorker of its own that it hands back
// when it closes.
#pragma once

#include <QDialog>

class QLineEdit;
class QPushButton;
class QTableView;
class QThread;

namespace spur::app {
class CompareReaderWorker;
class RunFilesModel;
struct CompareSnapshot;
}  // namespace spur::app

namespace spur::studio {

class CompareView;

class RunOverview : public QDialog {
  Q_OBJECT

 public:
  /// Reads run `run` of the history at `history_path` on `reader_thread`; shown as soon as the read comes back.
  RunOverview(qint64 run, const QString& history_path, QThread* reader_thread, QWidget* parent = nullptr);
  ~RunOverview() override;

  qint64 run() const { return run_; }
  CompareView* view() const { return view_; }
  /// The run's files, newest first; the selected one is what Open folder and Relaunch from checkpoint act on.
  QTableView* files() const { return files_; }
  app::RunFilesModel* files_model() const { return files_model_; }

 signals:
  /// "Relaunch from checkpoint": the window asks (RelaunchDialog) before it launches the run again with
  /// --resume_from_checkpoint `checkpoint`.
  void relaunch_from(qint64 run, const QString& checkpoint);

 public:
  /// Reads the run again (its values while it runs).
  void refresh();

 signals:
  /// A read came back and is shown.
  void shown_read();

 private:
  void show_read(const app::CompareSnapshot& snapshot);

  void update_file_actions();
  /// The selected file's folder (a checkpoint's or a model's own; a configuration's, the one it is in).
  QString selected_folder() const;

  qint64 run_;
  CompareView* view_;
  app::RunFilesModel* files_model_;
  QTableView* files_;
  QPushButton* open_folder_;
  QPushButton* resume_;
  QLineEdit* command_;
  bool sized_ = false;  // fitted to its first read
  app::CompareReaderWorker* reader_;
};

}  // namespace spur::studio
