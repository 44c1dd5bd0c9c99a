// SPDX-License-Identifier: Apache-2.0
// Rank supervision on this machine; see local_launcher.h. Signals reach the event loop through a self-pipe.
#include "launch/local_launcher.h"

#include "launch/byte_text.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <QEventLoop>
#include <QTextStream>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace spur::app {
namespace {

constexpr qsizetype kMaxLineBytes = 1 << 20;

int signal_pipe[2] = {-1, -1};

void on_posix_signal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] const auto written = ::write(signal_pipe[1], &byte, 1);
}

QString signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? QString("SIG") + name : QString::number(signal);
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
  guard_.set_stop_orphans(options_.stop_orphans);
  if (!guard_.start()) {
    err_ << "spur launch: warning: cannot start the process that stops the ranks' descendants if this launcher is "
            "killed: "
         << std::strerror(errno) << "\n";
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
  if (running_ > 0) loop.exec();
  loop_ = nullptr;
  // What the ranks started and left running (a background job, a daemon) ends with the run; at once when the
  // user already asked for that (a second Ctrl-C, the grace period over).
  if (const int left = guard_.finish(killed_ ? std::chrono::milliseconds(0) : options_.grace); left > 0) {
    err_ << "spur launch: stopped " << left << " process(es) the ranks left running\n";
  }

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
      err_ << "spur launch: " << rank.spec.label << " could not be started; the other ranks were stopped.\n";
      failure_ = rank.spec.label + " could not be started.";
      err_.flush();
      return exit_code_;
    }
    err_ << "spur launch: " << rank.spec.label << " (pid " << rank.pid << ") failed: " << cause
         << "; the other ranks were stopped. " << (rank.tail.empty() ? "It printed nothing.\n" : "Its last lines:\n");
    failure_ = rank.spec.label + " failed: " + cause + ".";
    for (const auto& line : rank.tail) {
      err_ << "  [" << rank.spec.label << "] " << line << "\n";
      failure_ += "\n" + line;
    }
    err_.flush();
  } else if (user_signal_) {
    err_ << "spur launch: stopped by " << signal_name(user_signal_) << "\n";
    exit_code_ = 128 + user_signal_;
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
void write_line(QTextStream& stream, const QString& label, const QString& line) {
  if (!holds_escaped_bytes(line) || !stream.device()) {
    stream << "[" << label << "] " << line << "\n";
    return;
  }
  stream.flush();
  stream.device()->write("[" + label.toUtf8() + "] " + bytes_from_text(line) + "\n");
}

}  // namespace

void LocalLauncher::cannot_start(Rank& rank, const QString& why) {
  err_ << "spur launch: cannot start " << rank.spec.label << why << "\n";
  err_.flush();
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
    exact->program = bytes_from_text(rank.spec.program);
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
  if (rank.own_group) guard_.watch(static_cast<pid_t>(rank.pid));
  rank.running = true;
  ++running_;
}

void LocalLauncher::read(Rank& rank, QProcess::ProcessChannel channel) {
  auto* process = rank.process.get();
  process->setReadChannel(channel);
  auto& partial = channel == QProcess::StandardOutput ? rank.partial_out : rank.partial_err;
  auto& stream = channel == QProcess::StandardOutput ? out_ : err_;
  partial += process->readAll();
  qsizetype newline;
  // A line longer than kMaxLineBytes is passed on in pieces of that size: output without newlines must not grow
  // the launcher without bound (200 MB in one line made it 1.2 GB).
  while ((newline = partial.indexOf('\n')) >= 0 || partial.size() >= kMaxLineBytes) {
    const bool cut = newline < 0 || newline > kMaxLineBytes;
    const qsizetype length = cut ? kMaxLineBytes : newline;
    const QString line = text_from_bytes(partial.left(length));
    partial.remove(0, cut ? length : length + 1);
    if (options_.on_line && options_.on_line(rank.spec, channel == QProcess::StandardError, line)) continue;
    write_line(stream, rank.spec.label, line);
    rank.tail.push_back(line);
    if (static_cast<int>(rank.tail.size()) > options_.tail_lines) rank.tail.pop_front();
  }
  stream.flush();
}

void LocalLauncher::finished(Rank& rank, int code, QProcess::ExitStatus status) {
  read(rank, QProcess::StandardOutput);
  read(rank, QProcess::StandardError);
  for (auto* partial : {&rank.partial_out, &rank.partial_err}) {
    if (!partial->isEmpty()) {
      const QString line = text_from_bytes(*partial);
      partial->clear();
      if (options_.on_line && options_.on_line(rank.spec, partial == &rank.partial_err, line)) continue;
      write_line(partial == &rank.partial_out ? out_ : err_, rank.spec.label, line);
      rank.tail.push_back(line);
      partial->clear();
    }
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
  if (failed && !failed_rank_ && !stopping_) {
    failed_rank_ = rank.spec.local_rank;
    exit_code_ = status == QProcess::CrashExit ? 128 + code : code;  // Qt reports the signal as the code
    stop_all(SIGTERM);
  }
  if (running_ == 0 && loop_) loop_->quit();
}

void LocalLauncher::signal_rank(const Rank& rank, int signal) {
  if (rank.running && rank.pid > 0)
    ::kill(rank.own_group ? -static_cast<pid_t>(rank.pid) : static_cast<pid_t>(rank.pid), signal);
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
