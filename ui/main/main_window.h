// SPDX-License-Identifier: GPL-3.0-or-later
// MainWindow: the runs of the history on the left (RunsModel), the live dashboard and console of the selected
// ones on the right, and the actions on runs: configure, launch, stop, relaunch, rename, tag, export, delete.
// The history is re-read every 250 ms on a worker thread (runs, their latest values, new points), so runs
// launched from a terminal show up as well; the GUI thread applies what was read and paints.
#pragma once

#include <QFuture>
#include <QList>
#include <QMainWindow>
#include <QHash>
#include <QMap>
#include <QThread>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "launch/launch_request.h"
#include "runs/pending_launches.h"

class QLineEdit;
class QSortFilterProxyModel;
class QSplitter;
class QTableView;
class QTimer;

namespace spur::app {
class CompareReaderWorker;
class RunActions;
struct CompareSnapshot;
class RunsModel;
class RunsReaderWorker;
class SeriesLoader;
class SummaryBuilder;
struct RunsSnapshot;
struct SetupAnswers;
}  // namespace spur::app

namespace spur::studio {

class CompareView;
class ConsoleView;
class Dashboard;
class RunNotifier;
class RunOverview;
class RunsColours;
class SetupWizard;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(const QString& history_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  app::RunsModel* runs() const { return runs_; }
  QTableView* runs_view() const { return table_; }
  /// Shows only runs whose name, project, status, target or tags contain `text`.
  void filter_runs(const QString& text);
  Dashboard* dashboard() const { return dashboard_; }
  ConsoleView* console() const { return console_; }
  /// The selected runs side by side (the Compare tab), read on the reader thread when the selection changes and,
  /// while the tab is shown, as running runs log.
  CompareView* compare() const { return compare_; }
  /// Brings the Compare tab to the front.
  void show_compare();
  /// Announces runs that end while the window is not focused (View > Notify when runs end).
  RunNotifier* notifier() const { return notifier_; }
  // Run actions (menus ask with dialogs, then call these), done by app::RunActions on the actions thread: each
  // returns at once with a future of its error ("" when done); the table is read again when it is done. The
  // menus report the error.
  QFuture<QString> rename_run(qint64 run, const QString& name);
  QFuture<QString> tag_run(qint64 run, const QString& tag);
  QFuture<QString> set_notes(qint64 run, const QString& notes);
  QFuture<QString> delete_run(qint64 run);
  /// Writes the run's configuration, ready for `spur launch --config_file`.
  QFuture<QString> export_config(qint64 run, const QString& file);
  /// Writes every metric of the run as CSV, in the run service's one layout (key,step,value,wall_time).
  QFuture<QString> export_metrics(qint64 run, const QString& file);
  /// Starts `spur launch` for the request, detached: the run goes on if the Studio closes. When its run appears
  /// in the history it is selected (and `launched` is emitted); if the launcher exits before that, its output
  /// is reported.
  QString launch(const app::LaunchRequest& request);
  /// Asks the run's launcher to stop every rank (or its SageMaker job).
  QString stop_run(qint64 run);
  /// The overview of a run (double-click in the runs table): its record, final and best values, parameters and
  /// configuration, in a window of its own (one per run; asked again, it is brought forward). nullptr for a run
  /// not in the table.
  RunOverview* show_overview(qint64 run);
  /// Launches a past run again with its saved configuration, program and directory, named `name` (empty: its
  /// name with the next free " (N)"), with its tags and notes, recording it as the new run's parent. The Relaunch
  /// action asks first, with the name to edit. The future's error is ready once the launcher has started (its
  /// configuration is saved on the actions thread first): wait for it with the event loop running.
  QFuture<QString> relaunch(qint64 run, const QString& name = {});
  /// Imports the TensorBoard runs at or below `path` (a folder or an event file) on a worker thread, through
  /// app::RunService; progress shows in the status bar, and when it is done `imported` is emitted with one line
  /// per run folder and the new runs are selected as soon as the next read of the history has them. Returns an error at
  /// once when an import is running. Run folders imported before (or changed since) are left as they are, and a
  /// question box ("import_again") offers to import them again as new runs; `again` imports them without asking.
  QString import_tensorboard(const QString& path, bool again = false);
  bool importing() const { return import_thread_ != nullptr; }
  /// The set-up wizard, from the last configuration used (or this machine's defaults).
  SetupWizard* make_wizard(const QString& open_file = {});
  /// The last error reported (also shown in the status bar and a message box).
  const QString& last_error() const { return last_error_; }
  /// Where the Studio keeps its own files (launch logs, configurations of relaunched runs).
  static QString data_directory();

  /// Runs to show first (instead of the newest), as soon as they are in the history.
  /// Runs older than the table's first page are fetched for it.
  void show_runs(const QList<qint64>& ids);

 signals:
  void launched(qint64 run);
  /// A read of the history was applied to the runs table (every 250 ms, and after each action).
  void refreshed();
  /// An import ended: a line per run folder (imported, skipped as imported before, or why it failed), the new
  /// runs' ids, and whether anything failed.
  void imported(const QStringList& lines, const QList<qint64>& runs, bool failed);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  /// Asks the worker thread for a read of the history; apply_snapshot() takes it.
  void refresh();
  void apply_snapshot(const app::RunsSnapshot& snapshot);
  void selection_changed();
  /// The selected runs' ids (ascending) and names.
  QMap<qint64, QString> selected_runs() const;
  void ask_compare();
  void build_actions();
  void update_actions();
  /// What became of the launches (PendingLaunches): a new run is selected and `launched`; a launch that ended
  /// without one is reported with its output.
  void settle_launches();
  /// Imports the runs at or below `paths`; with `only`, those run folders alone.
  QString import_folders(const QStringList& paths, bool again, const QStringList& only = {});
  /// Asks, in a box of its own, whether to import these run folders (found below `paths`) again: they were
  /// imported before.
  void ask_import_again(const QStringList& paths, const QStringList& folders);
  /// The newest run id read so far (a launch's run comes after it).
  qint64 newest_run() const;
  /// Calls `then` with `done`'s error on this thread when it is done.
  void when_done(const QFuture<QString>& done, std::function<void(const QString& error)> then);
  /// Reads the table again when `done` is. Returns `done`.
  QFuture<QString> acted(QFuture<QString> done);
  /// Reports the error `done` gives, when it gives it (the menus' actions).
  void report_when_done(const QFuture<QString>& done);
  void choose_metric_columns(const QPoint& at);
  void run_wizard(SetupWizard* wizard);
  void select_run(qint64 run);
  /// The run under the cursor in the table (the current row), or 0.
  qint64 current_run() const;
  void report(const QString& error);
  void restore_settings();

  QString path_;
  app::RunsModel* runs_;
  RunNotifier* notifier_;
  RunsColours* colours_;          // runs_ coloured (status, line swatch, baseline verdicts)
  QSortFilterProxyModel* shown_;  // colours_ sorted and filtered by the search box
  QLineEdit* search_;
  QTableView* table_;
  QSplitter* splitter_;
  Dashboard* dashboard_;
  ConsoleView* console_;
  CompareView* compare_;
  class QTabWidget* tabs_ = nullptr;
  QTimer* timer_;
  QThread reader_thread_;
  app::SeriesLoader* loader_;
  app::RunsReaderWorker* runs_reader_;  // on reader_thread_, as loader_
  bool read_pending_ = false, read_again_ = false;
  app::CompareReaderWorker* compare_reader_;  // on reader_thread_
  app::RunActions* actions_;                  // changes and exports, on a thread of its own
  app::PendingLaunches pending_;              // launches until their run shows
  QList<qint64> compared_;                    // the runs the last compare read asked for
  qint64 compare_asked_ms_ = 0;
  bool selected_once_ = false;
  QList<qint64> wanted_;
  QString last_error_;
  QAction *stop_ = nullptr, *relaunch_ = nullptr;
  QList<QAction*> editing_;  // rename, tag, notes, delete, import: off while the history is read-only
  bool read_only_ = false;   // the last read found the history read-only for this user
  /// The Relaunch action: asks, with the new run's name to edit, then starts the request it showed.
  void confirm_relaunch(qint64 run);
  /// What relaunches `run` as `name` (empty: the next free " (N)" of its name), its configuration to be saved in
  /// relaunch_config_file(run); an error instead when it cannot be launched again.
  QString relaunch_request(qint64 run, const QString& name, app::LaunchRequest& request) const;
  static QString relaunch_config_file(qint64 run);
  /// Saves the configuration `run` ran with where `request` reads it (on the actions thread), then launches
  /// `request`.
  QFuture<QString> start_relaunch(qint64 run, const app::LaunchRequest& request);
  /// Columns sized to their contents, the names narrowed to keep every column in the pane (again whenever the pane
  /// is resized).
  void fit_columns();
  bool eventFilter(QObject* watched, QEvent* event) override;
  QHash<QString, int> manual_widths_;  // by column title: the widths the user gave (settings: runs/column_widths)
  bool user_resizing_ = false;         // the left button is down on the header
  bool fitting_ = false;               // the window is sizing the columns itself
  /// The names of the runs in the table (a relaunch's " (N)" skips them).
  QSet<QString> run_names() const;
  std::unique_ptr<QThread> import_thread_;     // joined before the window goes
  std::atomic<bool> import_cancelled_{false};  // the window is closing: no further run folder
  QThread summary_thread_;                     // the summary builder's: writes, so apart from the readers
  app::SummaryBuilder* summaries_ = nullptr;   // on summary_thread_
  int summary_attempts_ = 0;                   // builds retried after an error
};

}  // namespace spur::studio
