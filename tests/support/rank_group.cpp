// SPDX-License-Identifier: Apache-2.0
// Real rank processes for multi-process tests; see rank_group.h.
#include "rank_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <signal.h>

#include <QDeadlineTimer>
#include <QDir>
#include <QThread>
#include <QFile>
#include <QElapsedTimer>

namespace spur::test {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

RankGroup::RankGroup(QString program, QStringList arguments, int world_size)
    : program_(std::move(program)),
      arguments_(std::move(arguments)),
      world_size_(world_size),
      port_(free_port()),
      env_(QProcessEnvironment::systemEnvironment()) {
  env_.insert("OMP_NUM_THREADS", "1");
  for (int rank = 0; rank < world_size_; ++rank) processes_.push_back(nullptr);
  pids_.assign(static_cast<size_t>(world_size_), 0);
}

RankGroup::~RankGroup() {
  for (auto& process : processes_) {
    if (process && process->state() != QProcess::NotRunning) {
      process->kill();  // SIGKILL to this PID
      process->waitForFinished(5000);
    }
  }
}

void RankGroup::set_env(const QString& name, const QString& value) { env_.insert(name, value); }

bool RankGroup::start(const std::vector<int>& ranks) {
  std::vector<int> selected = ranks;
  if (selected.empty()) {
    for (int rank = 0; rank < world_size_; ++rank) selected.push_back(rank);
  }
  for (int rank : selected) {
    auto env = env_;
    env.insert("RANK", QString::number(rank));
    env.insert("LOCAL_RANK", QString::number(rank));
    env.insert("WORLD_SIZE", QString::number(world_size_));
    env.insert("LOCAL_WORLD_SIZE", QString::number(world_size_));
    env.insert("GROUP_RANK", "0");
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", QString::number(port_));
    auto process = std::make_unique<QProcess>();
    process->setProcessChannelMode(QProcess::MergedChannels);
    process->setProcessEnvironment(env);
    process->start(program_, arguments_);
    if (!process->waitForStarted(10000)) return false;
    pids_[static_cast<size_t>(rank)] = process->processId();
    processes_[rank] = std::move(process);
  }
  return true;
}

bool RankGroup::wait(int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  for (auto& process : processes_) {
    if (!process) continue;
    if (!process->waitForFinished(static_cast<int>(std::max<qint64>(1, deadline.remainingTime())))) {
      for (auto& other : processes_) {
        if (other && other->state() != QProcess::NotRunning) {
          other->kill();
          other->waitForFinished(5000);
        }
      }
      return false;
    }
  }
  return true;
}

QStringList arguments_seen_by_another_user(QString* problem) {
  QProcess ps;
  ps.start("setpriv", {"--reuid=65534", "--regid=65534", "--clear-groups", "ps", "-eo", "args"});
  if (!ps.waitForFinished(10000) || ps.exitStatus() != QProcess::NormalExit || ps.exitCode() != 0) {
    if (problem) *problem = "setpriv ... ps as nobody failed: " + QString::fromLocal8Bit(ps.readAllStandardError());
    return {};
  }
  return QString::fromLocal8Bit(ps.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
}

qint64 RankGroup::pid(int rank) const { return pids_.at(static_cast<size_t>(rank)); }

RankResult RankGroup::result(int rank) const {
  RankResult result;
  const auto& process = processes_.at(rank);
  if (!process) return result;
  result.output = QString::fromLocal8Bit(process->peek(process->bytesAvailable()));
  result.crashed = process->exitStatus() == QProcess::CrashExit;
  result.exit_code = process->exitCode();
  return result;
}

QString RankGroup::transcript() const {
  QString text;
  for (size_t rank = 0; rank < processes_.size(); ++rank) {
    if (!processes_[rank]) continue;
    text += QString("---- rank %1 ----\n").arg(rank) + result(static_cast<int>(rank)).output;
  }
  return text;
}

RankResult run_process(const QString& program, const QStringList& arguments, const QProcessEnvironment& env,
                       int timeout_ms) {
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.setProcessEnvironment(env);
  process.start(program, arguments);
  RankResult result;
  if (!process.waitForStarted(10000)) {
    result.output = "could not start " + program;
    return result;
  }
  if (!process.waitForFinished(timeout_ms)) {
    process.kill();
    process.waitForFinished(5000);
    result.output = QString::fromLocal8Bit(process.readAll()) + "\n[killed after timeout]";
    result.crashed = true;
    return result;
  }
  result.output = QString::fromLocal8Bit(process.readAll());
  result.crashed = process.exitStatus() == QProcess::CrashExit;
  result.exit_code = process.exitCode();
  return result;
}

bool alive(qint64 pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  QFile stat(QString("/proc/%1/stat").arg(pid));
  return stat.open(QIODevice::ReadOnly) &&
         !QString::fromLatin1(stat.readAll()).section(')', 1).trimmed().startsWith('Z');
}

std::vector<qint64> rank_pids(const QString& dir, int count) {
  std::vector<qint64> out;
  for (int rank = 0; rank < count; ++rank) {
    QFile file(dir + QString("/rank%1.pid").arg(rank));
    if (file.open(QIODevice::ReadOnly)) out.push_back(file.readAll().trimmed().toLongLong());
  }
  return out;
}

bool read_until(QProcess& process, QByteArray& output, const std::function<bool(const QByteArray&)>& done,
                int timeout_ms) {
  QElapsedTimer timer;
  timer.start();
  output += process.readAll();
  while (!done(output) && timer.elapsed() < timeout_ms && process.state() != QProcess::NotRunning) {
    process.waitForReadyRead(200);
    output += process.readAll();
  }
  return done(output);
}

bool read_until(QProcess& process, QByteArray& output, const QByteArray& text, int timeout_ms) {
  return read_until(
      process, output, [&text](const QByteArray& seen) { return seen.contains(text); }, timeout_ms);
}

bool all_dead(const std::vector<qint64>& pids, int timeout_ms) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeout_ms) {
    bool any = false;
    for (auto pid : pids) any = any || alive(pid);
    if (!any) return true;
    QThread::msleep(20);
  }
  return false;
}

int kill_processes_under(const QString& folder) {
  if (folder.isEmpty()) return 0;
  const QByteArray needle = QFile::encodeName(folder);
  int killed = 0;
  for (const auto& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool number = false;
    const qint64 pid = entry.toLongLong(&number);
    if (!number || pid == ::getpid()) continue;
    QFile cmdline("/proc/" + entry + "/cmdline");
    if (!cmdline.open(QIODevice::ReadOnly)) continue;
    const QByteArray words = cmdline.readAll();
    if (words.contains(needle) && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++killed;
  }
  return killed;
}

}  // namespace spur::test
