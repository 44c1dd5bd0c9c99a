// SPDX-License-Identifier: Apache-2.0
// RunActions: the run service's changes and exports for the Studio (rename, tag, notes, delete, export of metrics
// and of a configuration, the configuration a relaunch starts from), done on a thread of their own, so the window
// never waits on the history: a rename while an import or another process holds the history's write lock waits
// there (up to the history's busy timeout), not in the GUI thread. Each call returns at once with a future of its
// error ("" when done; a sentence, capitalised and ending with a full stop, for a person); the calls run one after
// another in the order they were made, each as app::RunService does it.
// Threads: make, call and destroy it on one thread; the work runs on the actions thread. A continuation attached
// with QFuture::then(context, ...) runs on the context's thread. The destructor waits for the calls already made
// (they are the user's changes; each waits at most the history's busy timeout, 30 s, for another writer).
#pragma once

#include <QFuture>
#include <QObject>
#include <QString>
#include <QThread>

#include <functional>

namespace spur::app {

class RunService;

class RunActions : public QObject {
  Q_OBJECT

 public:
  explicit RunActions(QString history_path, QObject* parent = nullptr);
  ~RunActions() override;

  QFuture<QString> rename(qint64 run, const QString& name);
  QFuture<QString> tag(qint64 run, const QString& tag, bool remove = false);
  QFuture<QString> set_notes(qint64 run, const QString& notes);
  /// RunService::stop: on a history over SSH, that machine signals the run's launcher.
  QFuture<QString> stop(qint64 run);
  /// Not while the run runs (RunService::remove).
  QFuture<QString> remove(qint64 run);
  /// Every metric of the run in the one CSV layout, into `file` (whole or not at all; never over the history).
  QFuture<QString> export_metrics(qint64 run, const QString& file);
  /// The configuration the run was launched with, into `file` (its owner's only, as every configuration Spur
  /// writes): for `spur launch --config_file`, and what a relaunch starts from.
  QFuture<QString> export_config(qint64 run, const QString& file);

 private:
  QFuture<QString> post(std::function<void(RunService&)> work);

  QString path_;
  QThread thread_;
  QObject* worker_;  // lives on thread_: the calls are queued to it
};

}  // namespace spur::app
