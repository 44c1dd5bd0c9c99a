// SPDX-License-Identifier: GPL-3.0-or-later
// HistorySummaries: the history's plot summaries, built in the background by an app::SummaryBuilder: once for a
// history an older Spur wrote (its series have none), and again for any series a read could not trust. How far it
// is, and why it failed, are said for the status bar (`message`); a failed build is tried again a minute later, up
// to three times, unless the history cannot be written by this user.
// Threads: the builder writes on a thread of its own, apart from the readers; this object, its calls and its
// signals are the GUI thread's.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

namespace spur::app {
class SeriesLoader;
class SummaryBuilder;
}  // namespace spur::app

namespace spur::studio {

class HistorySummaries : public QObject {
  Q_OBJECT

 public:
  /// Builds the summaries of the history at `history_path`, once start() is called.
  explicit HistorySummaries(const QString& history_path, QObject* parent = nullptr);
  /// stop().
  ~HistorySummaries() override;

  /// Starts the builder's thread and its first build.
  void start();
  /// Rebuilds each series `loader` finds untrustworthy (straight from the reader thread to the builder's).
  void rebuild_untrusted(const app::SeriesLoader* loader);
  /// Stops the build after the series it is on (every series is written whole or not at all) and ends the
  /// builder's thread. Nothing more is built after it.
  void stop();

 signals:
  /// For the status bar; `timeout_ms` 0: until the next message.
  void message(const QString& text, int timeout_ms);

 private:
  QThread thread_;
  app::SummaryBuilder* builder_;  // on thread_; nullptr once stopped
  int attempts_ = 0;              // builds retried after an error
};

}  // namespace spur::studio
