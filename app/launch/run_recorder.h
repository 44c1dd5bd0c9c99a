// SPDX-License-Identifier: Apache-2.0
// RunRecorder: the launcher's side of the run history. It creates the run, tells the ranks where to record
// (SPUR_HISTORY, SPUR_RUN_ID), keeps every rank's console lines, turns the keyed stream records of remote ranks
// (stream_line.h) back into metrics, and records how the run ended.
//
// Threads: line(), flush(), finish() and the getters are called from one thread (the launcher's event loop) and
// never wait on the database, except finish(), which waits for everything to be written. A writer thread of
// its own owns the history connection: it writes what is queued every 200 ms, and when another process holds
// the history (several launches at once) it keeps what it took and retries with backoff, so nothing queued is
// lost. Only what exceeds the bounded queue is dropped, and then counted and reported.
#pragma once

#include <QProcessEnvironment>
#include <QString>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spur/history/records.h>

class QTextStream;

namespace spur::history {
class HistoryWriter;
}

namespace spur::app {

/// This machine's name, as runs record it (a run's host).
QString local_host_name();

/// A record line carrying `key` ("@spur:<key> {json}", engine/core/include/spur/core/stream_line.h), possibly behind
/// "[host] [rankN] " prefixes: its JSON object, else nothing (a line with another key, or none, is console text; an
/// empty key accepts nothing).
std::optional<QString> stream_record(const QString& line, const QString& key, int* rank = nullptr);

struct RunRecorderOptions {
  /// How long finish() waits for a busy or failing history before giving up on what is left. Default: 120 s.
  std::chrono::milliseconds finish_timeout{120000};
  /// Console lines plus metric values queued but not yet written; beyond it new ones are dropped and counted.
  /// Default: 500,000.
  std::size_t queue_limit = 500000;
  /// How often the writer thread writes what is queued. Default: 200 ms.
  std::chrono::milliseconds interval{200};
  /// The launch's record key (stream_line.h): only lines carrying it are records. Default: none, so that every
  /// line is console text (ranks on this machine record through the history itself).
  QString stream_key;
};

class RunRecorder {
 public:
  /// Creates the run in the history at `path` (waiting, with retries, while another process writes it). On a
  /// history that cannot be written it warns once on `err` and the launch goes on without it (recording() is
  /// false).
  RunRecorder(const std::string& path, const history::Run& run, QTextStream& err, RunRecorderOptions options = {});
  /// Finishes as "failed" (exit code -1) if finish() was not called, writing what is queued.
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  bool recording() const { return run_id_ != 0; }
  int64_t run_id() const { return run_id_; }
  /// What the ranks need to record into this run.
  QProcessEnvironment environment() const;

  /// One output line of `rank` on `host` (-1: the launcher's own). Returns true when it was a stream record
  /// (ingested as metrics, kept off the console). Never waits on the database.
  bool line(const QString& host, int rank, bool error_stream, const QString& text);
  /// One point of a metric the launcher measures itself (the system/ series). Never waits on the database.
  void metric(const QString& key, const history::Point& point);
  /// Files of the run (its configuration at the launch; a remote rank's checkpoints come as "file" records).
  void files(const std::vector<history::RunFile>& files);
  /// Asks the writer thread to write what is queued now (it also does every interval by itself).
  void flush();
  /// Records the end: finished (exit code 0), stopped (by the user: Ctrl-C, SIGTERM, a job stopped) or failed.
  /// Waits until everything queued and the status are written, or finish_timeout passes. Returns true when
  /// the record is complete.
  bool finish(int exit_code, bool stopped, const QString& detail = {});
  /// After finish(): whether everything reached the history, and if not, what is missing and why.
  bool complete() const { return complete_; }
  QString incomplete_reason() const { return incomplete_; }

 private:
  struct Queue {
    std::vector<history::ConsoleLine> console;
    std::map<std::string, std::vector<history::Point>> metrics;
    std::optional<int64_t> total_steps;
    std::optional<std::pair<std::string, std::string>> names;  // project, name
    std::optional<std::string> params;
    std::vector<history::RunFile> files;
    bool empty() const {
      return console.empty() && metrics.empty() && !total_steps && !names && !params && files.empty();
    }
    std::size_t values() const;
    void take(Queue& from);
  };
  struct Final {
    std::string status;
    int exit_code = 0;
    std::string detail;
  };

  void ingest(const QString& json);
  /// Under mutex_: queues one point, or counts it dropped beyond the queue limit.
  void queue_point(const std::string& key, const history::Point& point);
  void warn(const std::string& what);
  void writer_loop();
  /// Writes `queue` (clearing what was written) and then `final` if given; throws on the first failure.
  void write(Queue& queue, const std::optional<Final>& final);

  std::string path_;
  std::string command_;  // the run's recorded command (secrets redacted): SPUR_LAUNCH_COMMAND for the ranks
  QTextStream& err_;
  RunRecorderOptions options_;
  std::unique_ptr<history::HistoryWriter> writer_;  // the writer thread's once it runs
  int64_t run_id_ = 0;
  bool warned_ = false;
  bool finished_ = false;
  bool complete_ = false;
  QString incomplete_;

  // Shared with the writer thread, under mutex_.
  std::mutex mutex_;
  std::condition_variable wake_;
  Queue pending_;
  std::size_t queued_ = 0;  // console lines and metric values in pending_ and in the writer's hands
  uint64_t dropped_ = 0;
  bool flush_asked_ = false;
  std::optional<Final> final_;
  bool final_written_ = false;
  bool give_up_ = false;
  bool writer_done_ = false;
  std::string last_error_;
  bool last_error_busy_ = false;
  std::atomic<bool> unreported_error_{false};  // a failure other than "busy", for line() to warn about
  std::thread thread_;
};

}  // namespace spur::app
