// SPDX-License-Identifier: Apache-2.0
// RunRecorder: the launcher's side of the run history. It creates the run, tells the ranks where to record
// (SPUR_HISTORY, SPUR_RUN_ID), keeps every rank's console lines, turns "@spur" stream records from remote
// ranks back into metrics, and records how the run ended. Writes in batches from the launcher's event loop.
#pragma once

#include <QObject>
#include <QProcessEnvironment>
#include <QString>
#include <QTimer>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spur/history/records.h>

class QTextStream;

namespace spur::history {
class HistoryWriter;
}

namespace spur::app {

/// A "@spur {json}" line, possibly behind "[host] [rankN] " prefixes: its JSON object, else nothing.
std::optional<QString> stream_record(const QString& line, int* rank = nullptr);

class RunRecorder : public QObject {
  Q_OBJECT

 public:
  /// Creates the run in the history at `path`. On a history that cannot be written it warns once on `err` and
  /// the launch goes on without it (recording() is false).
  RunRecorder(const std::string& path, history::Run run, QTextStream& err);
  ~RunRecorder() override;

  bool recording() const { return run_id_ != 0; }
  int64_t run_id() const { return run_id_; }
  /// What the ranks need to record into this run.
  QProcessEnvironment environment() const;

  /// One output line of `rank` on `host` (-1: the launcher's own). Returns true when it was a stream record
  /// (ingested as metrics, kept off the console).
  bool line(const QString& host, int rank, bool error_stream, const QString& text);
  /// Writes what is buffered now (also every 200 ms by itself).
  void flush();
  /// Records the end: finished (exit code 0), stopped (by the user: Ctrl-C, SIGTERM, a job stopped) or failed.
  void finish(int exit_code, bool stopped, const QString& detail = {});

 private:
  void ingest(const QString& json);
  void warn(const std::string& what);

  std::string path_;
  QTextStream& err_;
  std::unique_ptr<history::HistoryWriter> writer_;
  int64_t run_id_ = 0;
  QTimer timer_;
  std::vector<history::ConsoleLine> console_;
  std::map<std::string, std::vector<history::Point>> metrics_;
  std::optional<int64_t> total_steps_;
  std::size_t buffered_limit_ = 200000;
  uint64_t dropped_ = 0;
  bool warned_ = false;
};

}  // namespace spur::app
