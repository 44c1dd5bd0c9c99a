// SPDX-License-Identifier: Apache-2.0
// LocalLauncher: runs this machine's ranks of a LaunchPlan as child processes and supervises them like torchrun
// (each rank in its own process group, dying with the launcher; output prefixed [rankN]; signals forwarded;
// the first failure stops the others, SIGTERM then SIGKILL). Runs on the thread that owns the event loop.
#pragma once

#include <QObject>
#include <QProcess>
#include <QSocketNotifier>
#include <QTimer>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "launch/descendant_guard.h"
#include "launch/launch_plan.h"

class QEventLoop;
class QTextStream;

namespace spur::app {

struct SupervisionOptions {
  /// Between SIGTERM and SIGKILL when stopping ranks.
  std::chrono::milliseconds grace{5000};
  /// Lines kept per rank, shown for the rank that failed.
  int tail_lines = 20;
  /// Stop the ranks when stdin reaches end of file: the remote half of an SSH fan-out, whose connection closing
  /// (the local launcher stopped or died) must stop its ranks too; no tty needed.
  bool exit_on_stdin_eof = false;
  /// What the children read as standard input. Default: /dev/null for every rank, so `input()`, `read` or a
  /// debugger's prompt in a rank ends at once instead of waiting forever on a pipe nobody writes.
  /// Rank0: rank 0 reads the launcher's own standard input (`spur launch --interactive`: a debugger, a prompt),
  /// the others /dev/null. Pipe: an open pipe the launcher never writes or closes (the SSH fan-out's children,
  /// whose remote side stops its ranks when that pipe closes).
  enum class Stdin { Null, Rank0, Pipe };
  Stdin stdin_mode = Stdin::Null;
  /// At the run's end, also stop processes the ranks started that left their process groups (setsid daemons),
  /// found through the subreaper flag. Default: true. Off for the SSH fan-out, where ssh's own ControlPersist
  /// master is such a process and serves the user's other sessions.
  bool stop_orphans = true;
  /// Sees every complete output line of every rank (the run history records them); returning true keeps the
  /// line off the console (a tracker's "@spur" record).
  std::function<bool(const RankSpec& rank, bool error_stream, const QString& line)> on_line;
};

class LocalLauncher : public QObject {
  Q_OBJECT

 public:
  LocalLauncher(LaunchPlan plan, SupervisionOptions options, QTextStream& out, QTextStream& err);
  ~LocalLauncher() override;

  /// Starts the ranks and returns when every one has exited: 0, the failing rank's exit code, or 128 + the
  /// signal that stopped the run. Installs SIGINT/SIGTERM/SIGHUP handlers for its duration. SIGPIPE is the
  /// process's to ignore (spur launch does, so a reader that goes away does not end the training).
  int run();
  /// After a failed run(): which rank failed, how, and its last lines; empty otherwise.
  const QString& failure() const { return failure_; }
  /// After run(): the user stopped the run (a signal to the launcher), rather than a rank failing.
  bool stopped() const { return user_signal_ != 0 && !failed_rank_; }

 private:
  struct Rank {
    RankSpec spec;
    std::unique_ptr<QProcess> process;
    qint64 pid = 0;
    QByteArray partial_out, partial_err;
    std::deque<QString> tail;
    bool running = false;
    bool own_group = true;  // leads its own process group (all but an --interactive rank 0)
  };

  void start(Rank& rank);
  /// Says why the rank could not be started (`why` follows its label), fails the run with 127, stops the others.
  void cannot_start(Rank& rank, const QString& why);
  void read(Rank& rank, QProcess::ProcessChannel channel);
  void finished(Rank& rank, int code, QProcess::ExitStatus status);
  void stop_all(int signal);
  /// The rank's process group, or the rank alone when it shares the launcher's group.
  void signal_rank(const Rank& rank, int signal);
  void on_signal();

  LaunchPlan plan_;
  SupervisionOptions options_;
  QTextStream& out_;
  QTextStream& err_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  int running_ = 0;
  std::optional<int> failed_rank_;
  int exit_code_ = 0;
  QString failure_;
  int user_signal_ = 0;
  bool stopping_ = false;
  bool killed_ = false;  // SIGKILL sent: no more grace
  QTimer kill_timer_;
  std::unique_ptr<QSocketNotifier> signal_notifier_;
  std::unique_ptr<QSocketNotifier> stdin_notifier_;
  DescendantGuard guard_;  // finished explicitly by run() and the destructor
  QEventLoop* loop_ = nullptr;
};

}  // namespace spur::app
