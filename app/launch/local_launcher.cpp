// SPDX-License-Identifier: Apache-2.0
// Rank supervision on this machine; see local_launcher.h. Signals reach the event loop through a self-pipe.
#include "launch/local_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <QEventLoop>
#include <QTextStream>

#include <cerrno>
#include <cstring>

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
    : plan_(std::move(plan)), options_(options), out_(out), err_(err) {
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
  process->setChildProcessModifier([launcher, own_group = rank.own_group] {
    if (own_group) ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);         // dies with the launcher, even a SIGKILLed one
    if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
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
  process->start(rank.spec.program, rank.spec.arguments);
  if (!process->waitForStarted(30000)) {
    err_ << "spur launch: cannot start " << rank.spec.label << " (" << rank.spec.program
         << "): " << process->errorString() << "\n";
    err_.flush();
    if (!failed_rank_) {
      failed_rank_ = rank.spec.local_rank;
      exit_code_ = 127;
    }
    stop_all(SIGTERM);
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
    const QString line = QString::fromUtf8(partial.left(length));
    partial.remove(0, cut ? length : length + 1);
    if (options_.on_line && options_.on_line(rank.spec, channel == QProcess::StandardError, line)) continue;
    stream << "[" << rank.spec.label << "] " << line << "\n";
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
      const QString line = QString::fromUtf8(*partial);
      partial->clear();
      if (options_.on_line && options_.on_line(rank.spec, partial == &rank.partial_err, line)) continue;
      (partial == &rank.partial_out ? out_ : err_) << "[" << rank.spec.label << "] " << line << "\n";
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
