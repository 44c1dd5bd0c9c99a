// SPDX-License-Identifier: GPL-3.0-or-later
// ImportWorker: the Studio's imports (File > Import TensorBoard runs, File > Import from MLflow), one at a time,
// through app::RunService (app/runs/tensorboard_import.h and mlflow_import.h say what is imported and what is
// skipped); and the question that offers to import again the runs an import skipped as imported before.
// Threads: start(), running(), stop() and the signals are the GUI thread's. Each import runs on a thread of its
// own, which hands every line and the outcome back as queued calls on this object; the thread is joined before the
// object goes. A run is written whole or not at all: stop() lets the run folder under way finish.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThread>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

class QWidget;

namespace spur::studio {

/// What an import gave.
struct ImportOutcome {
  QStringList paths;    // what it imported from
  QStringList lines;    // a line per run folder: imported, skipped as imported before, or why it failed
  QList<qint64> runs;   // the new runs' ids
  bool failed = false;  // a run folder, or the whole import, failed
  QStringList skipped;  // the run folders skipped as imported before (or changed since)
};

class ImportWorker : public QObject {
  Q_OBJECT

 public:
  /// Imports into the history at `history_path`.
  explicit ImportWorker(const QString& history_path, QObject* parent = nullptr);
  /// stop().
  ~ImportWorker() override;

  /// Starts importing the TensorBoard runs at or below `paths` (folders or event files) or at MLflow addresses
  /// (mlflow://HOST:PORT[/EXPERIMENT]); with `again`, runs imported before too; with `only`, those runs alone (as
  /// ImportOutcome::skipped names them). False, and nothing started, while one is running.
  bool start(const QStringList& paths, bool again, const QStringList& only = {});
  /// From start() until `finished` is emitted.
  bool running() const { return thread_ != nullptr; }
  /// Stops the import before its next run folder (the one under way is written whole) and waits for its thread.
  /// `finished` is not emitted once the worker is gone.
  void stop();

 signals:
  /// A run folder is done: its line.
  void progress(const QString& line);
  /// The import ended; running() is false by now.
  void finished(const spur::studio::ImportOutcome& outcome);

 private:
  std::string history_;
  std::unique_ptr<QThread> thread_;
  std::atomic<bool> cancelled_{false};  // asked before each run folder
  // From the import's thread to this one: its lines and, at its end, its outcome; deliver() emits them.
  std::mutex handed_mutex_;
  QStringList handed_lines_;
  std::optional<ImportOutcome> handed_outcome_;
  void hand_over(const QString& line, std::optional<ImportOutcome> outcome);  // on the import's thread
  Q_INVOKABLE void deliver();
};

/// Asks, in a window-modal box on `parent` (object name "import_again"), whether to import these run folders again,
/// as new runs: an import skipped them as imported before (or changed since). Calls `again` when asked to.
void ask_import_again(QWidget* parent, const QStringList& folders, std::function<void()> again);

}  // namespace spur::studio
