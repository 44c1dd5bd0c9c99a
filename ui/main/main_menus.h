// SPDX-License-Identifier: GPL-3.0-or-later
// MainMenus: the main window's menus (File, Run, View, Help) and toolbar, and the runs table's context menu (the
// Run menu's actions on the run under the cursor). Each action asks what it needs (a file, a name, a yes) and calls
// the window's public calls; what only the window does (report an error, relaunch, read the history again) it asks
// for through its signals. Stop and Relaunch follow the current run; the actions that change the history are off
// while it is read-only. The set-up wizard is made and run from here (New, Open, Launch; the window's make_wizard).
// Threads: the GUI thread only. The changes it asks for run on the window's actions thread; it hands their futures
// to the window, which reports their errors when they are done.
#pragma once

#include <QFuture>
#include <QList>
#include <QObject>
#include <QString>

#include <functional>

class QAction;
class QKeySequence;
class QLineEdit;
class QMenu;
class QTreeView;

namespace spur::studio {

class MainWindow;
class RunsColumns;
class SetupWizard;

class MainMenus : public QObject {
  Q_OBJECT

 public:
  /// Adds the menus and the toolbar to `window`, and the per-run actions to `table` (its context menu); the actions
  /// are the window's children. `search`: the runs' filter box (View > Filter runs); `columns`: the table's
  /// (View > Metric columns); `current_run`: the run under the cursor in the table, or 0.
  MainMenus(MainWindow* window, QTreeView* table, QLineEdit* search, RunsColumns* columns, QString history_path,
            std::function<qint64()> current_run);

  /// Stop for a queued or running run, Relaunch for one launched with a configuration and a command: `run` is the
  /// current one (0: none).
  void update(qint64 run);
  /// Rename, tag, notes, delete and import: off for a history this user can only read.
  void set_editable(bool editable);
  /// The set-up wizard (a child of the window), from `open_file` or else the last configuration used (or this
  /// machine's defaults), with what was last launched; nullptr, and `failed`, when `open_file` cannot be read.
  SetupWizard* make_wizard(const QString& open_file = {});

 signals:
  /// An action failed: the window reports `error` (never empty).
  void failed(const QString& error);
  /// A change started on the actions thread: the window reports its error when it is done.
  void acting(const QFuture<QString>& done);
  /// Run > Relaunch on `run`: the window asks (RelaunchDialog), then launches.
  void relaunch_asked(qint64 run);
  /// View > Refresh.
  void refresh_asked();

 private:
  void build_file_menu();
  void build_run_menu();
  void build_view_menu();
  void build_help_menu();
  /// An action of `menu` (a child of the window) calling `slot`; with `on_table`, in the table's context menu too.
  QAction* add(QMenu* menu, const QString& text, const QKeySequence& keys, std::function<void()> slot,
               bool on_table = false);
  /// Runs `wizard` (nullptr: nothing) window-modal; accepted, its configuration is the next one it starts from,
  /// and it launches when asked to.
  void run_wizard(SetupWizard* wizard);
  /// Runs `then` once this machine's hardware is known (DetectedHardware::ready()): at once, or when the probe
  /// ends, the status bar saying what it waits for. The GUI thread never waits for nvidia-smi.
  void when_hardware_known(std::function<void()> then);
  std::function<void()> after_hardware_;  // what opens once the probe is done; empty when nothing waits
  /// failed(error), unless `error` is empty.
  void report(const QString& error);

  MainWindow* window_;
  QTreeView* table_;
  QLineEdit* search_;
  RunsColumns* columns_;
  QString path_;
  bool remote_ = false;  // the history is on another machine: watched, compared and edited, not launched into
  std::function<qint64()> current_run_;
  QAction *create_ = nullptr, *open_ = nullptr, *launch_ = nullptr;  // the toolbar's, with stop_ and relaunch_
  QAction *stop_ = nullptr, *relaunch_ = nullptr, *import_ = nullptr, *import_mlflow_ = nullptr;
  QList<QAction*> editing_;  // rename, tag, notes, delete, import: off while the history is read-only
};

}  // namespace spur::studio
