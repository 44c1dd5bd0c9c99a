// SPDX-License-Identifier: Apache-2.0
// SummaryBuilder: builds the run history's multi-resolution summaries in the background: once for a history an
// older Spur wrote (its series have none), and again for any series a read found untrustworthy (summaries that
// disagree with their points). For a thread of its own (the Studio's): a build writes one series per
// transaction, so writers wait at most one series; progress and the end come as signals.
#pragma once

#include <QObject>
#include <QSet>
#include <QString>

#include <atomic>
#include <utility>

namespace spur::app {

class SummaryBuilder : public QObject {
  Q_OBJECT

 public:
  explicit SummaryBuilder(QString history_path);

  /// Asks a build under way to stop after its current series (any thread).
  void stop() { stop_ = true; }

 public slots:
  /// Summarises every series never summarised (found with one query: nothing to do costs nothing).
  void build();
  /// Rebuilds one series whose summaries a read did not trust (nothing when they agree by now).
  void rebuild(qint64 run, const QString& key);

 signals:
  /// Before each series and at the end (done == total); only when there is something to build.
  void progress(qint64 done, qint64 total);
  /// A build ended: how many series were (re)built, or why it could not run (a history this user may only read).
  void finished(qint64 built, const QString& error);

 private:
  QString path_;
  std::atomic<bool> stop_{false};
};

}  // namespace spur::app
