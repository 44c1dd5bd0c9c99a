// SPDX-License-Identifier: Apache-2.0
// Rank supervision on this machine; see local_launcher.h. Signals reach the event loop through a self-pipe.
#include "launch/local_launcher.h"

#include <spur/core/stream_line.h>

#include "launch/byte_text.h"
#include "launch/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTextStream>

#include <algorithm>
#include <limits>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>
#include <vector>

namespace spur::app {
namespace {

constexpr qsizetype kMaxLineBytes = 1 << 20;

int signal_pipe[2] = {-1, -1};

void on_posix_signal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] const auto written = ::write(signal_pipe[1], &byte, 1);
}

int64_t wall_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

QString whole_seconds(double s) { return QString::number(static_cast<qint64>(std::floor(s))) + " s"; }

// A remote rank whose launcher's records stopped for this long is named silent (they come every second).
constexpr double kSilentSeconds = 5;

// The main threads' stacks of running processes (label, pid), through gdb when it is installed, all attached at
// once and given 20 s in all; where gdb gets no frames (ptrace not allowed, the process gone) its reason.
QString stacks_of(const std::vector<std::pair<QString, qint64>>& processes) {
  const QString gdb = QStandardPaths::findExecutable("gdb");
  if (gdb.isEmpty() || processes.empty()) return {};
  std::vector<std::unique_ptr<QProcess>> attached;
  for (const auto& [label, pid] : processes) {
    auto process = std::make_unique<QProcess>();
    process->setStandardInputFile(QProcess::nullDevice());
    process->start(gdb, {"--batch", "-nx", "-p", QString::number(pid), "-ex", "thread 1", "-ex", "bt 25"});
    attached.push_back(std::move(process));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  QString text;
  for (std::size_t i = 0; i < attached.size(); ++i) {
    auto& process = *attached[i];
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!process.waitForFinished(static_cast<int>(std::max<qint64>(1, left.count())))) {
      // SIGTERM first: gdb detaches, where a SIGKILL mid-attach could leave the rank stopped.
      process.terminate();
      if (!process.waitForFinished(3000)) {
        process.kill();
        process.waitForFinished(1000);
      }
      text += QString("  %1's main thread: gdb did not answer within 20 s\n").arg(processes[i].first);
      continue;
    }
    QStringList frames;
    for (const auto& line : QString::fromLocal8Bit(process.readAllStandardOutput()).split('\n')) {
      // "thread 1" prints the thread's top frame, which bt repeats.
      if (line.startsWith('#') && (frames.isEmpty() || frames.back() != line)) frames << line;
    }
    if (frames.isEmpty()) {
      const QString why = QString::fromLocal8Bit(process.readAllStandardError()).trimmed().section('\n', -1);
      text += QString("  %1's main thread: gdb could not take its stack (%2)\n")
                  .arg(processes[i].first, why.isEmpty() ? QString("no frames") : why);
      continue;
    }
    text += QString("  %1's main thread:\n").arg(processes[i].first);
    for (const auto& frame : frames) text += "    " + frame + "\n";
  }
  return text;
}

}  // namespace

LocalLauncher::LocalLauncher(LaunchPlan plan, SupervisionOptions options, QTextStream& out, QTextStream& err)
    : plan_(std::move(plan)), options_(std::move(options)), out_(out), err_(err) {
  kill_timer_.setSingleShot(true);
  connect(&kill_timer_, &QTimer::timeout, this, [this] { stop_all(SIGKILL); });
}

LocalLauncher::~LocalLauncher() {
  // Nothing outlives the launcher, whatever path left run().
  for (auto& rank : ranks_) signal_rank(*rank, SIGKILL);
  guard_.finish(std::chrono::milliseconds(0));
}

int LocalLauncher::run() {
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    err_ << "spur launch: cannot set up signal handling: " << std::strerror(errno) << "\n";
    return 1;
  }
  signal_notifier_ = std::make_unique<QSocketNotifier>(signal_pipe[0], QSocketNotifier::Read);
  connect(signal_notifier_.get(), &QSocketNotifier::activated, this, [this] { on_signal(); });
  struct sigaction action {};
  action.sa_handler = on_posix_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction previous[3];
  const int handled[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; ++i) ::sigaction(handled[i], &action, &previous[i]);
  // A caller that restarts runs blocks these signals between attempts: one that came then is delivered now.
  sigset_t handled_set, caller_mask;
  sigemptyset(&handled_set);
  for (const int signal : handled) sigaddset(&handled_set, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &handled_set, &caller_mask);

  if (options_.exit_on_stdin_eof) {
    stdin_notifier_ = std::make_unique<QSocketNotifier>(STDIN_FILENO, QSocketNotifier::Read);
    connect(stdin_notifier_.get(), &QSocketNotifier::activated, this, [this] {
      char buffer[256];
      const auto n = ::read(STDIN_FILENO, buffer, sizeof(buffer));
      if (n > 0) return;  // input is ignored; only its end matters
      stdin_notifier_->setEnabled(false);
      if (!user_signal_) user_signal_ = SIGHUP;
      stop_all(SIGTERM);
    });
  }
  if (options_.hang_timeout.count() > 0 || options_.progress_stream) {
    // Shared memory when there is some: the ranks' stores and the launcher's reads never touch a disk.
    const QString base = QFileInfo("/dev/shm").isWritable() ? QString("/dev/shm") : QDir::tempPath();
    progress_dir_ = std::make_unique<QTemporaryDir>(base + "/spur-progress-XXXXXX");
    if (!progress_dir_->isValid()) {
      err_ << "spur launch: warning: cannot make the ranks' progress files in " << base << ": "
           << progress_dir_->errorString() << "\n";
      progress_dir_.reset();
    }
    if (progress_dir_) guard_.set_leftover_folder(progress_dir_->path().toStdString());
    last_progress_ = std::chrono::steady_clock::now();
    const auto tick = std::chrono::milliseconds(1000);
    // A quarter of the timeout, between 100 ms and a second (whole seconds / 4 may round down to nothing).
    const auto quarter = std::chrono::duration_cast<std::chrono::milliseconds>(options_.hang_timeout) / 4;
    progress_timer_.setInterval(
        options_.hang_timeout.count() > 0 ? std::clamp(quarter, std::chrono::milliseconds(100), tick) : tick);
    connect(&progress_timer_, &QTimer::timeout, this, [this] { watch_progress(); });
    progress_timer_.start();
  }
  // The guard starts before the first rank, told the ranks' mark (their descendants inherit it, also those that
  // leave the rank's process group) and the progress files' folder: both are cleaned up if this launcher is killed.
  guard_.set_stop_orphans(options_.stop_orphans);
  if (options_.stop_orphans) {
    launch_mark_ = QString::fromStdString(stream_line::new_key());
    guard_.set_mark(std::string(kLaunchMarkVariable) + "=" + launch_mark_.toStdString());
  }
  if (!guard_.start()) {
    err_ << "spur launch: warning: cannot start the process that stops the ranks' descendants if this launcher is "
            "killed: "
         << std::strerror(errno) << "\n";
  }
  if (options_.sample_interval.count() > 0 && options_.on_sample) {
    // The GPUs the ranks may use: none on CPUs; else those CUDA_VISIBLE_DEVICES lists (set by --gpu_ids, or
    // inherited from this environment), or every one.
    std::optional<QString> visible;
    const auto& rank_environment = plan_.ranks.empty() ? QProcessEnvironment() : plan_.ranks.front().environment;
    const auto own = QProcessEnvironment::systemEnvironment();
    if (rank_environment.contains("CUDA_VISIBLE_DEVICES")) visible = rank_environment.value("CUDA_VISIBLE_DEVICES");
    else if (own.contains("CUDA_VISIBLE_DEVICES")) visible = own.value("CUDA_VISIBLE_DEVICES");
    sampler_ = std::make_unique<SystemSampler>(!plan_.use_cpu, visible);
    sample_timer_.setInterval(options_.sample_interval);
    connect(&sample_timer_, &QTimer::timeout, this, [this] { sample_system(); });
    sample_timer_.start();
  }
  QEventLoop loop;
  loop_ = &loop;
  for (const auto& spec : plan_.ranks) {
    auto rank = std::make_unique<Rank>();
    rank->spec = spec;
    ranks_.push_back(std::move(rank));
  }
  for (auto& rank : ranks_) {
    start(*rank);
    if (stopping_) break;
  }
  if (running_ > 0) {
    QStringList pids;
    for (const auto& rank : ranks_) {
      if (rank->pid > 0) pids << QString("%1 (pid %2)").arg(rank->spec.label).arg(rank->pid);
    }
    // A first sample soon after the ranks start (their memory; CPU % needs a second), once they have exec'd: a run
    // shorter than the interval still has its ranks' series.
    if (sampler_) {
      QTimer::singleShot(std::min<std::chrono::milliseconds>(std::chrono::milliseconds(200), options_.sample_interval),
                         this, [this] { sample_system(); });
    }
    note(options_.remote_children
             ? QString("spur launch: started the launchers of %1 machine(s): %2").arg(pids.size()).arg(pids.join(", "))
             : QString("spur launch: started %1 rank(s) on this machine: %2").arg(pids.size()).arg(pids.join(", ")));
    loop.exec();
  }
  loop_ = nullptr;
  progress_timer_.stop();
  sample_timer_.stop();
  // What the ranks started and left running (a background job, a daemon) ends with the run; at once when the
  // user already asked for that (a second Ctrl-C, the grace period over).
  if (const int left = guard_.finish(killed_ ? std::chrono::milliseconds(0) : options_.grace); left > 0) {
    say(QString("spur launch: stopped %1 process(es) the ranks left running").arg(left));
  }

  ::pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
  for (int i = 0; i < 3; ++i) ::sigaction(handled[i], &previous[i], nullptr);
  signal_notifier_.reset();
  stdin_notifier_.reset();
  ::close(signal_pipe[0]);
  ::close(signal_pipe[1]);

  if (failed_rank_) {
    const auto& rank = *ranks_[*failed_rank_];
    const QString cause =
        exit_code_ > 128 ? "killed by " + signal_name(exit_code_ - 128) : "exit code " + QString::number(exit_code_);
    if (rank.pid <= 0) {
      // It never started (the reason is printed above): no pid, no output to show.
      say("spur launch: " + rank.spec.label + " could not be started; the other ranks were stopped.");
      failure_ = rank.spec.label + " could not be started.";
      return exit_code_;
    }
    QString message = QString("spur launch: %1 (pid %2) failed: %3; the other ranks were stopped. %4")
                          .arg(rank.spec.label)
                          .arg(rank.pid)
                          .arg(cause, rank.tail.empty() ? "It printed nothing." : "Its last lines:");
    failure_ = rank.spec.label + " failed: " + cause + ".";
    for (const auto& line : rank.tail) {
      message += "\n  [" + rank.spec.label + "] " + line;
      failure_ += "\n" + line;
    }
    say(message);
  } else if (hung_) {
    err_.flush();
  } else if (user_signal_) {
    say("spur launch: stopped by " + signal_name(user_signal_));
    exit_code_ = 128 + user_signal_;
  } else {
    note(exit_code_ == 0 ? QString("spur launch: every rank finished (exit code 0)")
                         : QString("spur launch: the ranks ended with exit code %1").arg(exit_code_));
  }
  return exit_code_;
}

namespace {

// Empty when a rank can be started; else why not, when the cause is this process's file descriptors: starting a
// rank takes up to 8 (QProcess's pipes and its fork descriptor), and at the limit QProcess reports ENOENT.
QString descriptors_short() {
  constexpr int kNeeded = 8;
  int taken[kNeeded];
  int got = 0;
  int error = 0;
  for (; got < kNeeded; ++got) {
    taken[got] = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
    if (taken[got] < 0) {
      error = errno;
      break;
    }
  }
  for (int i = 0; i < got; ++i) ::close(taken[i]);
  if (error != EMFILE && error != ENFILE) return {};
  struct rlimit limit {};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (error == ENFILE) return "the system's table of open files is full (ENFILE)";
  return QString(
             "too many open files: this launcher may have %1 (ulimit -n) and a rank needs up to %2 more; "
             "raise the limit (ulimit -n 4096)")
      .arg(static_cast<qulonglong>(limit.rlim_cur))
      .arg(kNeeded);
}

// What a child executes itself when QProcess would rewrite its bytes (see start()).
struct ExactExec {
  QByteArray program;
  std::vector<QByteArray> storage;  // argv, then envp
  std::vector<char*> argv, envp;
};

// "[rankN] line" on the launcher's terminal, the rank's bytes unchanged (launch/byte_text.h).
// "[label] line" and `end` ("\n", or "\r" for a progress bar's state), the line's bytes as the rank wrote them.
void write_line(QTextStream& stream, const QString& label, const QString& line, const char* end = "\n") {
  if (!holds_escaped_bytes(line) || !stream.device()) {
    stream << "[" << label << "] " << line << end;
    return;
  }
  stream.flush();
  stream.device()->write("[" + label.toUtf8() + "] " + bytes_from_text(line) + end);
}

}  // namespace

void LocalLauncher::sample_system() {
  std::vector<std::pair<int, qint64>> running;
  for (const auto& rank : ranks_) {
    if (rank->running && rank->pid > 0) running.emplace_back(rank->spec.rank, rank->pid);
  }
  if (running.empty() && !sampler_->has_gpus()) return;
  const auto values = sampler_->sample(running);
  if (values.empty()) return;
  options_.on_sample(values);
}

void LocalLauncher::say(const QString& message) {
  err_ << message << "\n";
  err_.flush();
  note(message);
}

void LocalLauncher::note(const QString& message) {
  if (options_.on_message) options_.on_message(message);
}

void LocalLauncher::cannot_start(Rank& rank, const QString& why) {
  say("spur launch: cannot start " + rank.spec.label + why);
  if (!failed_rank_) {
    failed_rank_ = rank.spec.local_rank;
    exit_code_ = 127;
  }
  stop_all(SIGTERM);
}

void LocalLauncher::start(Rank& rank) {
  rank.process = std::make_unique<QProcess>();
  auto* process = rank.process.get();
  auto environment = QProcessEnvironment::systemEnvironment();
  environment.insert(rank.spec.environment);
  if (!launch_mark_.isEmpty()) environment.insert(kLaunchMarkVariable, launch_mark_);
  if (progress_dir_ && !options_.remote_children) {
    const QString path = progress_dir_->filePath(QString("rank%1").arg(rank.spec.rank));
    if (progress::create_file(path.toStdString())) {
      environment.insert("SPUR_PROGRESS_FILE", path);
      rank.progress = std::make_unique<progress::Reader>(path.toStdString());
    }
  }
  process->setProcessEnvironment(environment);
  const pid_t launcher = ::getpid();
  // Own process group: signals reach the rank and anything it started. Except the rank that reads the terminal
  // (--interactive): a background group reading it would be stopped (SIGTTIN), so it stays in the launcher's
  // group, which the terminal's Ctrl-C reaches anyway.
  rank.own_group = !(options_.stdin_mode == SupervisionOptions::Stdin::Rank0 && rank.spec.rank == 0);
  // A program path, argument or --env value holding bytes that are not UTF-8 (launch/byte_text.h): QProcess would
  // rewrite them to U+FFFD, so the child executes them itself, byte for byte, everything made before the fork.
  auto exact = std::make_shared<ExactExec>();
  bool escaped = holds_escaped_bytes(rank.spec.program);
  for (const auto& argument : rank.spec.arguments) escaped = escaped || holds_escaped_bytes(argument);
  for (const auto& key : rank.spec.environment.keys()) {
    escaped = escaped || holds_escaped_bytes(rank.spec.environment.value(key));
  }
  if (escaped) {
    // execve does not search PATH: a bare name (ssh for a remote machine) is looked up in the rank's PATH.
    QString program = rank.spec.program;
    if (!program.contains('/')) {
      const QString found = QStandardPaths::findExecutable(program, environment.value("PATH").split(':'));
      if (!found.isEmpty()) program = found;
    }
    exact->program = bytes_from_text(program);
    exact->storage.push_back(exact->program);
    for (const auto& argument : rank.spec.arguments) exact->storage.push_back(bytes_from_text(argument));
    const auto arguments = exact->storage.size();
    for (const auto& key : environment.keys()) {
      // Inherited values as the launcher got them (bytes); the run's own through bytes_from_text.
      const QByteArray value = rank.spec.environment.contains(key) ? bytes_from_text(environment.value(key))
                                                                   : qgetenv(key.toLocal8Bit().constData());
      exact->storage.push_back(bytes_from_text(key) + '=' + value);
    }
    for (size_t i = 0; i < exact->storage.size(); ++i) {
      (i < arguments ? exact->argv : exact->envp).push_back(exact->storage[i].data());
    }
    exact->argv.push_back(nullptr);
    exact->envp.push_back(nullptr);
  }
  process->setChildProcessModifier([launcher, own_group = rank.own_group, exact] {
    if (own_group) ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);         // dies with the launcher, even a SIGKILLed one
    if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
    if (!exact->argv.empty()) {
      ::execve(exact->program.constData(), exact->argv.data(), exact->envp.data());
      static const char message[] = "spur launch: execve of the rank's program failed\n";
      (void)!::write(STDERR_FILENO, message, sizeof message - 1);
      ::_exit(127);
    }
  });
  switch (options_.stdin_mode) {
    case SupervisionOptions::Stdin::Pipe:
      break;  // QProcess's own: a pipe kept open until the child ends
    case SupervisionOptions::Stdin::Rank0:
      if (rank.spec.rank == 0) {
        process->setInputChannelMode(QProcess::ForwardedInputChannel);
        break;
      }
      [[fallthrough]];
    case SupervisionOptions::Stdin::Null:
      process->setStandardInputFile(QProcess::nullDevice());
      break;
  }
  connect(process, &QProcess::readyReadStandardOutput, this, [this, &rank] { read(rank, QProcess::StandardOutput); });
  connect(process, &QProcess::readyReadStandardError, this, [this, &rank] { read(rank, QProcess::StandardError); });
  connect(process, &QProcess::finished, this,
          [this, &rank](int code, QProcess::ExitStatus status) { finished(rank, code, status); });
  // Out of file descriptors, QProcess says "No such file or directory" (issue 12): name the real cause first.
  if (const QString descriptors = descriptors_short(); !descriptors.isEmpty()) {
    cannot_start(rank, ": " + descriptors);
    return;
  }
  process->start(rank.spec.program, rank.spec.arguments);
  if (!process->waitForStarted(30000)) {
    cannot_start(rank, " (" + rank.spec.program + "): " + process->errorString());
    return;
  }
  rank.pid = process->processId();
  // What it reads first (the SSH fan-out's environment): written through the pipe, never on a command line.
  if (options_.stdin_mode == SupervisionOptions::Stdin::Pipe && !rank.spec.input.isEmpty()) {
    process->write(rank.spec.input);
  }
  if (rank.own_group) guard_.watch(static_cast<pid_t>(rank.pid));
  rank.running = true;
  ++running_;
}

void LocalLauncher::read(Rank& rank, QProcess::ProcessChannel channel) {
  auto* process = rank.process.get();
  process->setReadChannel(channel);
  const bool error_stream = channel == QProcess::StandardError;
  auto& partial = error_stream ? rank.partial_err : rank.partial_out;
  auto& shown = error_stream ? rank.shown_err : rank.shown_out;
  auto& stream = error_stream ? err_ : out_;
  partial += process->readAll();
  qsizetype newline;
  // A line longer than kMaxLineBytes is passed on in pieces of that size: output without newlines must not grow
  // the launcher without bound (200 MB in one line made it 1.2 GB).
  while ((newline = partial.indexOf('\n')) >= 0 || partial.size() >= kMaxLineBytes) {
    const bool cut = newline < 0 || newline > kMaxLineBytes;
    const qsizetype length = cut ? kMaxLineBytes : newline;
    const QByteArray bytes = partial.left(length);
    partial.remove(0, cut ? length : length + 1);
    const qsizetype already = std::min(shown, length);
    shown = std::max<qsizetype>(0, shown - (cut ? length : length + 1));
    take_line(rank, error_stream, bytes, already);
  }
  // A progress bar's states ("epoch 1 [30/100]\r"): on the terminal as they come, so that the bar moves.
  if (const qsizetype carriage = partial.lastIndexOf('\r'); carriage >= shown) {
    const auto states = partial.mid(shown, carriage - shown).split('\r');
    for (const auto& state : states) write_line(stream, rank.spec.label, text_from_bytes(state), "\r");
    shown = carriage + 1;
    // Of the states shown, only the last is kept (what the line's record will hold): a bar that never ends its
    // line does not grow the launcher.
    if (const qsizetype previous = carriage > 0 ? partial.lastIndexOf('\r', carriage - 1) : -1; previous >= 0) {
      partial.remove(0, previous + 1);
      shown -= previous + 1;
    }
  }
  stream.flush();
}

void LocalLauncher::take_line(Rank& rank, bool error_stream, const QByteArray& bytes, qsizetype shown) {
  auto& stream = error_stream ? err_ : out_;
  QByteArray body = bytes;
  if (body.endsWith('\r')) body.chop(1);  // a CRLF line end
  // What the console and the history keep of a line a progress bar rewrote: its last state.
  QByteArray kept;
  const auto states = body.split('\r');
  for (auto state = states.rbegin(); state != states.rend() && kept.isEmpty(); ++state) kept = *state;
  const QString line = text_from_bytes(kept);
  // (Only a machine's launcher forwards progress: a local rank's line that looks like one is its own output.)
  if (options_.remote_children && !error_stream && remote_progress(rank, line)) return;
  if (options_.on_line && options_.on_line(rank.spec, error_stream, line)) return;
  const QByteArray rest = body.mid(std::min(shown, body.size()));
  if (shown > 0 && rest.isEmpty()) {
    stream << "\n";  // its last state is on the terminal already
  } else {
    const auto parts = rest.split('\r');
    for (qsizetype i = 0; i < parts.size(); ++i) {
      write_line(stream, rank.spec.label, text_from_bytes(parts[i]), i + 1 < parts.size() ? "\r" : "\n");
    }
  }
  rank.tail.push_back(line);
  if (static_cast<int>(rank.tail.size()) > options_.tail_lines) rank.tail.pop_front();
}

void LocalLauncher::finished(Rank& rank, int code, QProcess::ExitStatus status) {
  read(rank, QProcess::StandardOutput);
  read(rank, QProcess::StandardError);
  for (const bool error_stream : {false, true}) {
    auto& partial = error_stream ? rank.partial_err : rank.partial_out;
    auto& shown = error_stream ? rank.shown_err : rank.shown_out;
    if (!partial.isEmpty()) take_line(rank, error_stream, partial, shown);
    partial.clear();
    shown = 0;
  }
  out_.flush();
  err_.flush();
  rank.running = false;
  --running_;
  // A group left empty is forgotten at once: its number may be reused by an unrelated process.
  if (rank.own_group && ::kill(-static_cast<pid_t>(rank.pid), 0) != 0 && errno == ESRCH) {
    guard_.forget(static_cast<pid_t>(rank.pid));
  }
  const bool failed = status == QProcess::CrashExit || code != 0;
  // (An SSH fan-out's children are machines, not ranks: their launchers send "exited" records themselves.)
  if (!options_.remote_children && (rank.progress || watched_.contains(rank.spec.rank))) {
    // A rank that ended is not stuck, but the others may wait for it (one that stopped early on uneven data).
    const int code_seen = status == QProcess::CrashExit ? 128 + code : code;
    watched_[rank.spec.rank].exited = code_seen;
    if (watched_[rank.spec.rank].label.isEmpty()) watched_[rank.spec.rank].label = rank.spec.label;
    watched_[rank.spec.rank].pid = rank.pid;
    if (options_.progress_stream) {
      const QJsonObject record{
          {"type", "progress"}, {"rank", rank.spec.rank}, {"pid", rank.pid}, {"exited", code_seen}};
      out_ << QString::fromStdString(stream_line::prefix(options_.stream_key.toStdString()))
           << QJsonDocument(record).toJson(QJsonDocument::Compact) << "\n";
      out_.flush();
    }
  }
  if (failed && !failed_rank_ && !stopping_) {
    failed_rank_ = rank.spec.local_rank;
    exit_code_ = status == QProcess::CrashExit ? 128 + code : code;  // Qt reports the signal as the code
    stop_all(SIGTERM);
  }
  if (running_ == 0 && loop_) loop_->quit();
}

void LocalLauncher::signal_rank(const Rank& rank, int signal) {
  if (!rank.running || rank.pid <= 0) return;
  const pid_t target = rank.own_group ? -static_cast<pid_t>(rank.pid) : static_cast<pid_t>(rank.pid);
  ::kill(target, signal);
  // A stopped rank (SIGSTOP, a debugger's stop) acts on SIGTERM or SIGINT only once it runs again: continue it,
  // so that it ends within the grace period as the others do (SIGKILL needs no help).
  if (signal == SIGTERM || signal == SIGINT) ::kill(target, SIGCONT);
}

void LocalLauncher::stop_all(int signal) {
  if (signal != SIGKILL && !stopping_) {
    stopping_ = true;
    kill_timer_.start(options_.grace);
  }
  if (signal == SIGKILL) killed_ = true;
  for (auto& rank : ranks_) signal_rank(*rank, signal);
}

void LocalLauncher::on_signal() {
  char byte = 0;
  while (::read(signal_pipe[0], &byte, 1) == 1) {
    const int signal = static_cast<unsigned char>(byte);
    if (user_signal_ && signal == SIGINT) {
      stop_all(SIGKILL);  // a second Ctrl-C: no more waiting
      continue;
    }
    if (!user_signal_) user_signal_ = signal;
    // Forward what the user sent (Ctrl-C reaches ranks as SIGINT), then escalate after the grace period.
    if (!stopping_) {
      stopping_ = true;
      kill_timer_.start(options_.grace);
    }
    for (auto& rank : ranks_) signal_rank(*rank, signal == SIGHUP ? SIGTERM : signal);
  }
}

}  // namespace spur::app

namespace spur::app {

void LocalLauncher::update_progress(int rank, const QString& label, qint64 pid, const progress::Snapshot& snapshot,
                                    double op_seconds) {
  const auto now = std::chrono::steady_clock::now();
  const auto found = watched_.find(rank);
  auto& watched = watched_[rank];
  if (found == watched_.end() || watched.snapshot.activity != snapshot.activity) {
    watched.changed = now;
    last_progress_ = now;
  }
  watched.label = label;
  watched.pid = pid;
  watched.snapshot = snapshot;
  watched.seen = now;
  watched.exited.reset();  // reporting again: a new attempt's rank under a remote launcher
  watched.op_started = now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(std::max(0.0, op_seconds)));
}

void LocalLauncher::watch_progress() {
  const int64_t wall = wall_ns();
  for (auto& rank : ranks_) {
    if (!rank->progress || !rank->running) continue;
    const auto snapshot = rank->progress->read();
    if (!snapshot) continue;  // not attached yet: the program has not created its Accelerator
    const double op_seconds = snapshot->op_since > 0 ? static_cast<double>(wall - snapshot->op_since) / 1e9 : 0;
    update_progress(rank->spec.rank, rank->spec.label, rank->pid, *snapshot, op_seconds);
    if (options_.progress_stream) {
      const QJsonObject record{{"type", "progress"},
                               {"rank", rank->spec.rank},
                               {"pid", rank->pid},
                               {"activity", static_cast<double>(snapshot->activity)},
                               {"step", static_cast<double>(snapshot->step)},
                               {"op", QString::fromStdString(snapshot->op)},
                               {"op_seconds", op_seconds}};
      out_ << QString::fromStdString(stream_line::prefix(options_.stream_key.toStdString()))
           << QJsonDocument(record).toJson(QJsonDocument::Compact) << "\n";
    }
  }
  if (options_.progress_stream) out_.flush();
  if (options_.hang_timeout.count() > 0 && !stopping_ &&
      std::chrono::steady_clock::now() - last_progress_ >= options_.hang_timeout) {
    hang();
  }
}

namespace {

// A number from a remote machine's record as an integer: NaN, infinities and values out of range (which a cast
// would make undefined behaviour) become 0 or the nearest bound.
template <typename T>
T whole(const QJsonValue& value) {
  const double number = value.toDouble();
  if (!(number == number)) return 0;
  if (number <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (number >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(number);
}

}  // namespace

std::optional<ProgressRecord> parse_progress_record(const QString& line, const QString& key) {
  // QJsonDocument writes keys in order: "type" comes last (watch_progress writes these lines).
  if (key.isEmpty() || !line.startsWith(QLatin1String("@spur:")) ||
      !line.endsWith(QLatin1String(R"("type":"progress"})")))
    return std::nullopt;
  const std::string text = line.toStdString();
  const auto body = stream_line::record(text, key.toStdString());
  if (!body) return std::nullopt;
  const auto json = QJsonDocument::fromJson(QByteArray(body->data(), static_cast<qsizetype>(body->size()))).object();
  if (json.value("type").toString() != "progress") return std::nullopt;
  ProgressRecord record;
  if (!json.value("rank").isDouble()) {
    record.damaged = true;
    return record;
  }
  record.rank = whole<int>(json.value("rank"));
  record.pid = whole<qint64>(json.value("pid"));
  if (json.contains("exited")) {
    if (!json.value("exited").isDouble()) record.damaged = true;
    record.exited = whole<int>(json.value("exited"));
    return record;
  }
  record.snapshot.activity = whole<uint64_t>(json.value("activity"));
  record.snapshot.step = whole<int64_t>(json.value("step"));
  record.snapshot.op = json.value("op").toString().left(256).toStdString();
  const double op_seconds = json.value("op_seconds").toDouble();
  record.op_seconds = op_seconds > 0 && op_seconds < 1e9 ? op_seconds : 0;
  return record;
}

bool LocalLauncher::remote_progress(const Rank& from, const QString& line) {
  const auto record = parse_progress_record(line, options_.stream_key);
  if (!record) return false;
  // Dropped, never shown: a damaged record, or a rank this run does not have (each would be a line in a report).
  if (record->damaged || record->rank < 0 || record->rank >= plan_.world_size) return true;
  const QString label = QString("%1 rank%2").arg(from.spec.label).arg(record->rank);
  if (record->exited) {
    auto& watched = watched_[record->rank];
    watched.exited = record->exited;
    watched.label = label;
    watched.pid = record->pid;
    return true;
  }
  update_progress(record->rank, label, record->pid, record->snapshot, record->op_seconds);
  return true;
}

void LocalLauncher::hang() {
  hung_ = true;
  const auto now = std::chrono::steady_clock::now();
  // Every rank of the run when the children are remote launchers; else this machine's (and any that reported).
  std::set<int> judged;
  for (const auto& [r, watched] : watched_) judged.insert(r);
  for (int r = 0; options_.remote_children && r < plan_.world_size; ++r) judged.insert(r);
  for (const auto& local : ranks_) {
    if (local->progress) judged.insert(local->spec.rank);
  }
  std::vector<RankProgress> report;
  for (const int r : judged) {
    RankProgress rank;
    rank.label = QString("rank%1").arg(r);
    for (const auto& local : ranks_) {
      if (local->spec.rank == r && local->progress) rank.pid = local->pid;
    }
    if (const auto it = watched_.find(r); it != watched_.end()) {
      const auto& watched = it->second;
      rank.label = watched.label;
      rank.pid = watched.pid;
      rank.snapshot = watched.snapshot;
      rank.idle_seconds = seconds(now - watched.changed);
      rank.op_seconds = watched.snapshot.op.empty() ? 0 : seconds(now - watched.op_started);
      rank.silent_seconds = seconds(now - watched.seen);
      rank.exited = watched.exited;
      if (watched.seen == std::chrono::steady_clock::time_point{}) rank.snapshot.reset();  // exited, never reported
    }
    // The state of this machine's ranks (a remote rank's is its own launcher's to tell).
    for (const auto& local : ranks_) {
      if (local->spec.rank == r && local->running && !options_.remote_children) rank.state = process_state(local->pid);
    }
    report.push_back(rank);
  }
  QString text = describe_hang(report, options_.hang_timeout);
  // Stacks of this machine's ranks, where gdb can take them: all at once, within one deadline.
  std::vector<std::pair<QString, qint64>> running;
  for (const auto& local : ranks_) {
    if (local->running && local->progress) running.emplace_back(local->spec.label, local->pid);
  }
  text += stacks_of(running);
  err_ << "spur launch: " << text;
  err_.flush();
  note("spur launch: " + text.trimmed());
  failure_ = text.trimmed();
  exit_code_ = kHangExitCode;
  stop_all(SIGTERM);
}

char process_state(qint64 pid) {
  if (pid <= 0) return 0;
  const auto text = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return 0;
  // "PID (COMMAND) STATE ...": the command may hold spaces and parentheses, so the state follows the last ')'.
  const auto close = text->rfind(')');
  if (close == std::string::npos || close + 2 >= text->size()) return 0;
  return (*text)[close + 2];
}

namespace {

// What a /proc state says about a rank that does not move; empty for running and sleeping (the usual states of
// a rank that computes or waits).
QString state_text(char state) {
  switch (state) {
    case 'T':
      return "stopped (SIGSTOP, Ctrl-Z or a debugger; /proc state T)";
    case 't':
      return "stopped by a debugger (/proc state t)";
    case 'D':
      return "in the kernel, waiting for a disk or a device (/proc state D)";
    case 'Z':
      return "ended, not yet collected (/proc state Z)";
    default:
      return {};
  }
}

}  // namespace

QString describe_hang(const std::vector<RankProgress>& ranks, std::chrono::seconds timeout) {
  QString text = QString("no rank made progress for %1 s (--hang_timeout %1); stopping the run. Where each rank is:\n")
                     .arg(timeout.count());
  QStringList waited_for;  // "rank1 (why)"
  QStringList operations;
  bool someone_waits = false;
  std::optional<int64_t> lowest, highest;
  for (const auto& rank : ranks) {
    if (rank.snapshot && !rank.exited) {
      lowest = std::min(lowest.value_or(rank.snapshot->step), rank.snapshot->step);
      highest = std::max(highest.value_or(rank.snapshot->step), rank.snapshot->step);
    }
  }
  for (const auto& rank : ranks) {
    QString line = "  " + rank.label + (rank.pid > 0 ? QString(" (pid %1)").arg(rank.pid) : QString()) + ": ";
    const QString state = state_text(rank.state);
    if (rank.exited) {
      line += QString("exited with code %1").arg(*rank.exited) +
              (rank.snapshot ? QString(" after step %1").arg(rank.snapshot->step) : QString());
      waited_for << rank.label + " (it exited)";
    } else if (!rank.snapshot) {
      line += "never reported (it has not created its spur::Accelerator, or is not a Spur program)";
      waited_for << rank.label + (state.isEmpty() ? " (it never reported)" : " (" + state + ")");
    } else if (rank.silent_seconds >= kSilentSeconds) {
      line += QString("step %1, then no report for %2: it died without a trace, or its machine is unreachable")
                  .arg(rank.snapshot->step)
                  .arg(whole_seconds(rank.silent_seconds));
      waited_for << rank.label + " (silent)";
    } else if (rank.snapshot->op.empty()) {
      line += QString("step %1, in the program's own code, no progress for %2")
                  .arg(rank.snapshot->step)
                  .arg(whole_seconds(rank.idle_seconds));
      waited_for << rank.label + QString(" (%1 at step %2)")
                                     .arg(state.isEmpty() ? QString("in its own code") : state)
                                     .arg(rank.snapshot->step);
    } else {
      line += QString("step %1, waiting in %2 for %3")
                  .arg(rank.snapshot->step)
                  .arg(QString::fromStdString(rank.snapshot->op))
                  .arg(whole_seconds(rank.op_seconds));
      someone_waits = true;
      if (!operations.contains(QString::fromStdString(rank.snapshot->op)))
        operations << QString::fromStdString(rank.snapshot->op);
    }
    if (!state.isEmpty()) line += "; " + state;
    text += line + "\n";
  }
  if (someone_waits && !waited_for.isEmpty()) {
    text += "  The ranks in Spur's operations wait for: " + waited_for.join(", ") + "\n";
    return text;
  }
  // Every rank is in one of Spur's operations. The one the others wait for is stopped or in the kernel (its
  // /proc state), else behind the others' step.
  QStringList stuck;
  for (const auto& rank : ranks) {
    if (rank.snapshot && !rank.exited && !state_text(rank.state).isEmpty()) {
      stuck << QString("%1 (%2 at step %3)").arg(rank.label, state_text(rank.state)).arg(rank.snapshot->step);
    }
  }
  if (stuck.isEmpty() && lowest && highest && *lowest < *highest) {
    for (const auto& rank : ranks) {
      if (rank.snapshot && !rank.exited && rank.snapshot->step == *lowest) {
        stuck << QString("%1 (at step %2, behind the others' %3)").arg(rank.label).arg(*lowest).arg(*highest);
      }
    }
  }
  if (!stuck.isEmpty()) {
    text += "  The others wait for: " + stuck.join(", ") + "\n";
  } else if (operations.size() > 1) {
    text +=
        "  The ranks wait in different operations: a collective called on some ranks only, or in another "
        "order\n";
  } else if (!operations.isEmpty()) {
    text += "  Every rank waits in " + operations.front() +
            " at the same step: no rank stands out (a collective that never completes: the network between the "
            "machines, or a deadlock in the communication library)\n";
  }
  return text;
}

}  // namespace spur::app
