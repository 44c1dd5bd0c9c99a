// SPDX-License-Identifier: Apache-2.0
// LocalLauncher: runs this machine's ranks of a LaunchPlan as child processes and supervises them like torchrun
// (each rank in its own process group, dying with the launcher; output prefixed [rankN]; signals forwarded;
// the first failure stops the others, SIGTERM then SIGKILL) and, when asked, for hangs: each rank's progress file
// (engine/core/include/spur/core/progress_file.h) is read every second, and when no rank has made progress for the hang
// timeout the launcher says where every rank is and stops them. Runs on the thread that owns the event loop.
#pragma once

#include <QObject>
#include <QProcess>
#include <QSocketNotifier>
#include <QTemporaryDir>
#include <QTimer>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "launch/descendant_guard.h"
#include "launch/launch_plan.h"
#include "launch/system_sampler.h"
#include <spur/core/progress_file.h>

class QEventLoop;
class QTextStream;

namespace spur::app {

/// The variable, unique to each launch, that every rank's environment holds: its descendants inherit it, and the
/// launcher's guard stops every process holding it if the launcher is killed (DescendantGuard::set_mark).
inline constexpr const char* kLaunchMarkVariable = "SPUR_LAUNCH_ID";

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
  /// Sees the launcher's own messages about the run, the history's "launcher" console lines: when the ranks
  /// start and how they ended, a failed rank with its last lines, a hang report, a stop by signal, processes the
  /// ranks left. Those about trouble are also printed on the error stream; the start and a clean end only here.
  std::function<void(const QString& message)> on_message;
  /// `--hang_timeout`: when no rank has made progress (started or finished an operation of Spur's, or a step)
  /// for this long, print where every rank is (and its stack, when gdb is installed) and stop the run with
  /// exit code kHangExitCode. Ranks of remote machines count through their launchers' progress records.
  /// Default: 0, off.
  std::chrono::seconds hang_timeout{0};
  /// Write each rank's progress as "@spur:<key> {"type":"progress",...}" lines on the output stream every second:
  /// the remote half of an SSH fan-out, whose launching side watches for hangs. Default: false.
  bool progress_stream = false;
  /// The launch's record key (engine/core/include/spur/core/stream_line.h): what this launcher's own records carry
  /// (progress_stream), and what a remote launcher's must carry to be taken as records (remote_children). Default:
  /// none.
  QString stream_key;
  /// The children are launchers on other machines (the SSH fan-out): no progress files of their own; a hang
  /// report names every rank of the run. Default: false.
  bool remote_children = false;
  /// `--system_metrics_interval`: how often the ranks' processes (and the GPUs) are sampled for what they cost
  /// the machine (launch/system_sampler.h); `on_sample` gets each sample (the caller keeps the clock: one launch
  /// may be several attempts, each its own LocalLauncher). Default: 0, off.
  std::chrono::milliseconds sample_interval{0};
  std::function<void(const std::vector<SystemValue>& values)> on_sample;
};

/// A run stopped for making no progress for the hang timeout exits with this code (as timeout(1) does).
inline constexpr int kHangExitCode = 124;

/// Where one rank is, for a hang report.
struct RankProgress {
  QString label;  // "rank1", or "hostb rank3" for a remote rank
  qint64 pid = 0;
  std::optional<progress::Snapshot> snapshot;  // none: it never reported
  double idle_seconds = 0;                     // since its activity last changed
  double op_seconds = 0;                       // in its current operation
  double silent_seconds = 0;                   // since its last report reached the launcher (remote ranks)
  std::optional<int> exited;                   // it ended, with this code (the others may wait for it)
  char state = 0;  // its state in /proc/PID/stat (R, S, D, T, t, Z...); 0: not known (a remote rank)
};

/// The state letter of /proc/PID/stat for `pid`; 0 when it cannot be read (it ended, or it is not on this machine).
char process_state(qint64 pid);

/// A progress record a machine's launcher forwards over SSH (progress_stream: "@spur {...,"type":"progress"}" lines
/// on its output). It comes from another machine, so nothing in it is trusted: numbers out of range are clamped
/// (pid, step, activity to their types, op_seconds to 0..1e9), a record without a numeric rank, or with an exit
/// code that is not a number, is `damaged` (the launcher also drops ranks outside its run).
struct ProgressRecord {
  bool damaged = false;  // a progress line, but not a usable one: dropped, never shown
  int rank = 0;
  qint64 pid = 0;
  std::optional<int> exited;  // the rank ended, with this code
  progress::Snapshot snapshot;
  double op_seconds = 0;
};
/// nullopt when `line` is not a progress record (an ordinary output line).
std::optional<ProgressRecord> parse_progress_record(const QString& line, const QString& key);

/// The hang report: one line per rank (last step, the operation it waits in and for how long, or that it is in
/// the program's own code, never reported, or went silent), then which ranks the others wait for.
/// The hang report: a line per rank (its step, where it waits, its state when it is not simply running or
/// sleeping), then a last line naming the rank the others wait for, and why: it exited, never reported, went
/// silent, stays in the program's own code, is stopped or in the kernel (its /proc state), or is behind the others'
/// step.
QString describe_hang(const std::vector<RankProgress>& ranks, std::chrono::seconds timeout);

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
  /// After run(): the user signalled the launcher (Ctrl-C, SIGTERM), also while a failure was being handled.
  bool interrupted() const { return user_signal_ != 0; }

 private:
  struct Rank {
    RankSpec spec;
    std::unique_ptr<QProcess> process;
    std::unique_ptr<progress::Reader> progress;  // with hang detection or the progress stream
    qint64 pid = 0;
    QByteArray partial_out, partial_err;
    // How many bytes at the start of partial_out/err the terminal already shows: a progress bar's states, each
    // ending in '\r', are passed on as they come, not when the line's newline comes.
    qsizetype shown_out = 0, shown_err = 0;
    std::deque<QString> tail;
    bool running = false;
    bool own_group = true;  // leads its own process group (all but an --interactive rank 0)
  };

  void start(Rank& rank);
  /// A message about the run: on the error stream and to on_message.
  void say(const QString& message);
  /// One for on_message only (the terminal stays as quiet as before).
  void note(const QString& message);
  /// Says why the rank could not be started (`why` follows its label), fails the run with 127, stops the others.
  void cannot_start(Rank& rank, const QString& why);
  void read(Rank& rank, QProcess::ProcessChannel channel);
  /// One line of a rank's output (without its newline), of which the first `shown` bytes are on the terminal
  /// already: to the terminal the rest; to the progress reader, on_line (the history) and the tail its last state.
  void take_line(Rank& rank, bool error_stream, const QByteArray& bytes, qsizetype shown);
  void finished(Rank& rank, int code, QProcess::ExitStatus status);
  void stop_all(int signal);
  /// The rank's process group, or the rank alone when it shares the launcher's group.
  void signal_rank(const Rank& rank, int signal);
  void on_signal();
  /// Every second with hang detection or the progress stream: reads the ranks' progress, streams it, judges.
  void watch_progress();
  /// A "@spur {"type":"progress"}" line from a remote launcher (the child `from`); false if it is not one.
  bool remote_progress(const Rank& from, const QString& line);
  void update_progress(int rank, const QString& label, qint64 pid, const progress::Snapshot& snapshot,
                       double op_seconds);
  void hang();

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
  struct Watched {
    QString label;
    qint64 pid = 0;
    progress::Snapshot snapshot;
    std::chrono::steady_clock::time_point changed, seen, op_started;  // seen: never while it has not reported
    std::optional<int> exited;
  };
  std::map<int, Watched> watched_;  // by global rank
  std::chrono::steady_clock::time_point last_progress_;
  QTimer progress_timer_;
  QTimer sample_timer_;
  std::unique_ptr<SystemSampler> sampler_;
  /// Every sample_interval: samples the running ranks and hands the values to on_sample.
  void sample_system();
  std::unique_ptr<QTemporaryDir> progress_dir_;
  bool hung_ = false;
  std::unique_ptr<QSocketNotifier> signal_notifier_;
  std::unique_ptr<QSocketNotifier> stdin_notifier_;
  QString launch_mark_;    // SPUR_LAUNCH_ID's value in every rank's environment (DescendantGuard::set_mark)
  DescendantGuard guard_;  // finished explicitly by run() and the destructor
  QEventLoop* loop_ = nullptr;
};

}  // namespace spur::app
