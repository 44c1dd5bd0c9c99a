// SPDX-License-Identifier: GPL-3.0-or-later
// MainWindow: the runs of the history on the left (RunsModel), the live dashboard and console of the selected
// ones on the right, and the actions on runs: configure, launch, stop, relaunch, rename, tag, export, delete.
// The history is re-read every 250 ms on a worker thread (runs, their latest values, new points), so runs
// launched from a terminal show up as well; the GUI thread applies what was read and paints.
// Its parts, each in a file of its own: the runs table's columns (RunsColumns), the menus, toolbar and set-up wizard
// (MainMenus), the TensorBoard imports (ImportWorker) and the plot summaries (HistorySummaries), each on a thread of
// its own, and the Relaunch question (RelaunchDialog).
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
#include "studio/pending_launches.h"

class QLineEdit;
class QSortFilterProxyModel;
class QSplitter;
class QComboBox;
class QTreeView;
class QTimer;

namespace spur::app {
class CompareReaderWorker;
class RunActions;
struct CompareSnapshot;
class RunsGroupModel;
class RunsModel;
class RunsReaderWorker;
class SeriesLoader;
struct RunsSnapshot;
struct SetupAnswers;
}  // namespace spur::app

namespace spur::studio {

class CompareView;
class HParamsView;
class ConsoleView;
class Dashboard;
class HistorySummaries;
class ImportWorker;
class MainMenus;
class RunNotifier;
class RunOverview;
class RunsColours;
class RunsColumns;
class SetupWizard;
struct ImportOutcome;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(const QString& history_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  app::RunsModel* runs() const { return runs_; }
  QTreeView* runs_view() const { return table_; }
  /// Groups the runs table (app::RunsGroupModel's keys: "" for none, "sweep", "project", "status", "param:NAME"),
  /// as the "Group" box above it does; kept in the settings (runs/group_by).
  void group_runs(const QString& key);
  /// The runs table's row of a run's row in runs() (column 0), and back (-1 for a group's row).
  QModelIndex view_index(int runs_row) const;
  int runs_row(const QModelIndex& view_index) const;
  /// Shows only runs whose name, project, status, target or tags contain `text`.
  void filter_runs(const QString& text);
  Dashboard* dashboard() const { return dashboard_; }
  ConsoleView* console() const { return console_; }
  /// The selected runs side by side (the Compare tab), read on the reader thread when the selection changes and,
  /// while the tab is shown, as running runs log.
  CompareView* compare() const { return compare_; }
  HParamsView* hparams() const { return hparams_; }
  /// Shows the Hyperparameters tab (the selected runs' parameters against their metrics).
  void show_hparams();
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
  /// Starts a sweep's `spur sweep run`, detached; when its first run appears the search shows the sweep's runs
  /// (its tag, sweep:ID) and the first is selected; if the controller exits before that, its output is reported.
  QString launch_sweep(const app::SweepLaunch& sweep);
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
  /// Imports the TensorBoard runs at or below `source` (a folder or an event file), or an MLflow server's
  /// (mlflow://HOST:PORT[/EXPERIMENT]), on a worker thread, through
  /// app::RunService; progress shows in the status bar, and when it is done `imported` is emitted with one line
  /// per run folder and the new runs are selected as soon as the next read of the history has them. Returns an error at
  /// once when an import is running. Run folders imported before (or changed since) are left as they are, and a
  /// question box ("import_again") offers to import them again as new runs; `again` imports them without asking.
  QString import_runs(const QString& source, bool again = false);
  bool importing() const;
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
  // The constructor's steps, in its order.
  /// The runs table: the model coloured, sorted and filtered by the search box, its rows, and its columns
  /// (RunsColumns).
  void build_table();
  /// The table and its search box on the left, the Metrics, Console and Compare tabs on the right, the status bar.
  void build_panes();
  /// The reader thread's workers: the runs table's reads, the plots' series, the Compare tab's reads.
  void start_readers();
  /// The plot summaries' builder (HistorySummaries), on a thread of its own.
  void start_summaries();
  /// The TensorBoard imports' worker.
  void start_imports();
  /// The menus and the toolbar (MainMenus).
  void build_actions();
  void restore_settings();

  /// Asks the worker thread for a read of the history; apply_snapshot() takes it.
  void refresh();
  void apply_snapshot(const app::RunsSnapshot& snapshot);
  /// The Compare tab's baseline is the runs table's and the plots' too: the metric columns show each run's delta
  /// against it.
  void follow_baseline();
  void selection_changed();
  /// The selected runs' ids (ascending) and names.
  QMap<qint64, QString> selected_runs() const;
  /// When each of these runs started (its record's start, else its creation), for relative time.
  QMap<qint64, double> run_starts(const QList<qint64>& ids) const;
  /// Their statuses (RunsModel::status).
  QMap<qint64, QString> run_statuses(const QList<qint64>& ids) const;
  void ask_compare();
  /// Stop and Relaunch as the current run allows.
  void update_actions();
  /// What became of the launches (PendingLaunches): a new run is selected and `launched`; a launch that ended
  /// without one is reported with its output.
  void settle_launches();
  /// Imports the runs at or below `paths`; with `only`, those run folders alone.
  QString import_folders(const QStringList& paths, bool again, const QStringList& only = {});
  /// An import ended: its runs are selected, its lines shown (reported when one failed), the run folders it
  /// skipped offered again, and `imported` emitted.
  void import_done(const ImportOutcome& outcome);
  /// The newest run id read so far (a launch's run comes after it).
  qint64 newest_run() const;
  /// Calls `then` with `done`'s error on this thread when it is done.
  void when_done(const QFuture<QString>& done, std::function<void(const QString& error)> then);
  /// Reads the table again when `done` is. Returns `done`.
  QFuture<QString> acted(QFuture<QString> done);
  /// Reports the error `done` gives, when it gives it (the menus' actions).
  void report_when_done(const QFuture<QString>& done);
  void select_run(qint64 run);
  /// The run under the cursor in the table (the current row), or 0.
  qint64 current_run() const;
  void report(const QString& error);
  /// The Relaunch action: asks (RelaunchDialog), with the new run's name to edit, then starts the request it showed.
  /// Asks (RelaunchDialog), then launches `run` again; from `checkpoint` (--resume_from_checkpoint) when given.
  void confirm_relaunch(qint64 run, const QString& checkpoint = {});
  /// Where a relaunch of `run` saves the configuration it ran with (relaunch_request() in relaunch_dialog.h builds
  /// the request that reads it).
  static QString relaunch_config_file(qint64 run);
  /// Saves the configuration `run` ran with where `request` reads it (on the actions thread), then launches
  /// `request`.
  QFuture<QString> start_relaunch(qint64 run, const app::LaunchRequest& request);

  QString path_;
  app::RunsModel* runs_;
  RunNotifier* notifier_;
  RunsColours* colours_;          // runs_ coloured (status, line swatch, baseline verdicts)
  app::RunsGroupModel* groups_;   // colours_ grouped (a tree: a row per group, its runs below it)
  QSortFilterProxyModel* shown_;  // groups_ sorted and filtered by the search box
  QLineEdit* search_;
  QComboBox* group_by_;  // what groups_ groups by
  QTreeView* table_;
  RunsColumns* columns_ = nullptr;  // table_'s: which show, how wide
  QSplitter* splitter_ = nullptr;
  Dashboard* dashboard_;
  ConsoleView* console_;
  CompareView* compare_;
  HParamsView* hparams_;
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
  int running_ = 0;  // the runs running at the last read: one starting or ending fits the columns again
  QList<qint64> wanted_;
  QString last_error_;
  MainMenus* menus_ = nullptr;
  bool read_only_ = false;                 // the last read found the history read-only for this user
  ImportWorker* importer_ = nullptr;       // stopped (and joined) before the window goes
  HistorySummaries* summaries_ = nullptr;  // the plot summaries' builder, on a thread of its own
};

}  // namespace spur::studio
