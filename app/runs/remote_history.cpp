// SPDX-License-Identifier: Apache-2.0
// A history on another machine over SSH; see remote_history.h.
#include "runs/remote_history.h"

#include <unistd.h>

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDeadlineTimer>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QThread>
#include <QUrl>

#include <mutex>

#include <spur/history/records.h>

#include "launch/launch_request.h"  // shell_word
#include "launch/ssh_fanout.h"      // check_host
#include "runs/history_protocol.h"
#include "runs/run_service.h"

namespace spur::app {
namespace {

[[noreturn]] void unreachable(const QString& why) { throw history::HistoryError(why.toStdString()); }

}  // namespace

std::optional<HistoryAddress> HistoryAddress::parse(const QString& location) {
  if (!is_address(location)) return std::nullopt;
  const QUrl url(location, QUrl::StrictMode);
  auto wrong = [&](const QString& why) {
    throw RunServiceError(
        QString("history '%1': %2 (give ssh://[user@]host[:port]/path)").arg(location, why).toStdString());
  };
  if (!url.isValid()) wrong(url.errorString().section(';', 0, 0));
  if (url.host().isEmpty()) wrong("no host");
  if (url.hasQuery() || url.hasFragment()) wrong("a '?' or '#' has no meaning here");
  if (!url.password().isEmpty()) wrong("a password does not belong in the address (ssh asks for it)");
  HistoryAddress address;
  address.user = url.userName();
  address.host = url.host();
  address.port = url.port(0);
  if (address.port < 0 || address.port > 65535) wrong("the port is out of range");
  QString path = url.path();
  if (path == "/") path.clear();
  if (path.startsWith("/~/") || path == "/~") path = path.mid(1);
  address.path = path;
  if (const QString problem = check_host(address.destination()); !problem.isEmpty()) wrong(problem);
  return address;
}

QString HistoryAddress::destination() const { return user.isEmpty() ? host : user + "@" + host; }

QString HistoryAddress::text() const {
  QString text = "ssh://";
  if (!user.isEmpty()) text += user + "@";
  text += host.contains(':') ? "[" + host + "]" : host;
  if (port > 0) text += ":" + QString::number(port);
  if (!path.isEmpty()) {
    text += QString::fromLatin1(QUrl::toPercentEncoding(path.startsWith('/') ? path : "/" + path, "/~"));
  }
  return text;
}

RemoteOptions RemoteOptions::from_environment(bool interactive) {
  RemoteOptions options;
  options.ssh_config = qEnvironmentVariable("SPUR_SSH_CONFIG");
  options.remote_spur = qEnvironmentVariable("SPUR_REMOTE_SPUR");
  options.askpass = !interactive && !qEnvironmentVariableIsEmpty("SSH_ASKPASS");
  options.batch_mode = !interactive && !options.askpass;
  options.share_connection = !interactive;
  return options;
}

RemoteHistory::RemoteHistory(HistoryAddress address, RemoteOptions options)
    : address_(std::move(address)), options_(std::move(options)) {}

RemoteHistory::~RemoteHistory() { disconnect(); }

QString RemoteHistory::where() const { return address_.text(); }

void RemoteHistory::disconnect() {
  if (!ssh_) return;
  if (ssh_->state() != QProcess::NotRunning) {
    ssh_->closeWriteChannel();  // the serve reads the end of its input and exits; ssh with it
    if (!ssh_->waitForFinished(2000)) {
      ssh_->kill();
      ssh_->waitForFinished(2000);
    }
  }
  ssh_.reset();
}

QString RemoteHistory::stderr_tail() {
  if (ssh_) stderr_ += ssh_->readAllStandardError();
  if (stderr_.size() > 8192) stderr_ = stderr_.right(8192);
  QStringList lines;
  for (const auto& line : QString::fromUtf8(stderr_).split('\n')) {
    if (!line.trimmed().isEmpty()) lines << line.trimmed();
  }
  return lines.mid(std::max<qsizetype>(0, lines.size() - 3)).join("; ");
}

std::optional<QByteArray> RemoteHistory::read_line(int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (!ssh_->canReadLine()) {
    if (ssh_->bytesAvailable() > protocol::kMaxLine) {
      unreachable(where() + " sent a line longer than the protocol allows: it is not Spur's history protocol");
    }
    if (ssh_->state() == QProcess::NotRunning) return std::nullopt;
    if (deadline.hasExpired()) return std::nullopt;
    const qint64 left = deadline.remainingTime();
    ssh_->waitForReadyRead(static_cast<int>(std::min<qint64>(left < 0 ? 1000 : left, 1000)));
    stderr_ += ssh_->readAllStandardError();
    if (stderr_.size() > 65536) stderr_ = stderr_.right(8192);
  }
  QByteArray line = ssh_->readLine();
  if (line.endsWith('\n')) line.chop(1);
  return line;
}

void RemoteHistory::connect() {
  disconnect();
  stderr_.clear();
  QStringList args;
  if (!options_.ssh_config.isEmpty()) args << "-F" << options_.ssh_config;
  args << "-T"
       << "-o" << QString("ConnectTimeout=%1").arg(options_.connect_timeout) << "-o"
       << "ServerAliveInterval=15"
       << "-o"
       << "ServerAliveCountMax=3"
       // Answers are JSON text (numbers written out): zlib makes them a third or less on a slow link.
       << "-o"
       << "Compression=yes";
  if (options_.batch_mode)
    args << "-o"
         << "BatchMode=yes";
  // One connection made at a time in this process: with a shared connection the first one made is the one the
  // others use (asked for a passphrase once).
  static std::mutex connecting;
  std::unique_lock<std::mutex> one_at_a_time(connecting, std::defer_lock);
  if (options_.share_connection) {
    one_at_a_time.lock();
    const QString folder = QDir::temp().filePath(QString("spur-ssh-%1").arg(::getuid()));
    if (QDir().mkpath(folder) &&
        QFile::setPermissions(folder, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner)) {
      // Per process and per name the machine was given by (two aliases of one machine may use different keys or
      // configurations: OpenSSH's %C alone would let one use the other's connection).
      const QByteArray given = (address_.destination() + '\n' + options_.ssh_config).toUtf8();
      const QString name =
          QString("%1-%2-")
              .arg(QCoreApplication::applicationPid())
              .arg(QString::fromLatin1(QCryptographicHash::hash(given, QCryptographicHash::Sha1).toHex().left(8)));
      args << "-o"
           << "ControlMaster=auto"
           << "-o"
           << "ControlPath=" + folder + "/" + name + "%C"
           << "-o"
           << "ControlPersist=10";
    }
  }
  if (address_.port > 0) args << "-p" << QString::number(address_.port);
  QString serve = " runs serve --stdio";
  if (!address_.path.isEmpty()) serve += " --history " + shell_word(address_.path);
  // `exec`: the serve is the session's process, so closing the connection ends it.
  const QString command = options_.remote_spur.isEmpty()
                              ? "command -v spur >/dev/null 2>&1 || PATH=\"$HOME/.local/bin:$PATH\"; exec spur" + serve
                              : "exec " + shell_word(options_.remote_spur) + serve;
  args << "--" << address_.destination() << command;

  ssh_ = std::make_unique<QProcess>();
  if (options_.askpass) {
    auto environment = QProcessEnvironment::systemEnvironment();
    environment.insert("SSH_ASKPASS_REQUIRE", "force");
    ssh_->setProcessEnvironment(environment);
  }
  ssh_->setProgram(options_.ssh);
  ssh_->setArguments(args);
  ssh_->start();
  if (!ssh_->waitForStarted(10000)) {
    const QString why = ssh_->errorString();
    ssh_.reset();
    unreachable(QString("cannot open %1: cannot run %2 (%3)").arg(where(), options_.ssh, why));
  }
  // A login script may print a greeting before the serve starts: lines before the hello that are not JSON are
  // passed over (and named if no hello follows).
  QStringList before;
  for (;;) {
    const auto line = read_line(options_.answer_timeout * 1000 + options_.connect_timeout * 1000);
    if (!line) {
      const bool running = ssh_->state() != QProcess::NotRunning;
      if (running) {
        disconnect();
        unreachable(QString("%1 did not answer within %2 s")
                        .arg(where())
                        .arg(options_.answer_timeout + options_.connect_timeout));
      }
      ssh_->waitForFinished(1000);
      const int code = ssh_->exitStatus() == QProcess::NormalExit ? ssh_->exitCode() : -1;
      const QString tail = stderr_tail();
      ssh_.reset();
      if (code == 255) unreachable(QString("cannot reach %1 over SSH: %2").arg(address_.destination(), tail));
      if (code == 127 && options_.remote_spur.isEmpty()) {
        unreachable(QString("%1 has no spur on its PATH (nor in ~/.local/bin): install Spur there, or say where it "
                            "is with --remote_spur PATH (SPUR_REMOTE_SPUR)")
                        .arg(address_.destination()));
      }
      if (code == 127) {
        unreachable(QString("%1 has no %2 (--remote_spur, SPUR_REMOTE_SPUR): %3")
                        .arg(address_.destination(), options_.remote_spur, tail));
      }
      if (tail.contains("unknown action 'serve'")) {
        unreachable(QString("the Spur on %1 is older than this one (%2) and cannot serve its history: install Spur "
                            "%2 there")
                        .arg(address_.destination(), QCoreApplication::applicationVersion()));
      }
      const QString said = before.isEmpty() ? QString() : "; it printed: " + before.mid(0, 3).join(" / ");
      unreachable(QString("spur runs serve on %1 stopped (exit %2) before it answered%3%4")
                      .arg(address_.destination())
                      .arg(code)
                      .arg(tail.isEmpty() ? QString() : ": " + tail, said));
    }
    if (!line->trimmed().startsWith('{') && before.size() < 100) {
      before << QString::fromUtf8(line->left(200));
      continue;
    }
    try {
      const auto hello = protocol::decode_hello(*line);
      if (hello.protocol != protocol::kVersion) {
        disconnect();
        unreachable(QString("%1 runs Spur %2, which speaks history protocol %3; this Spur (%4) speaks %5: install "
                            "the same Spur on both machines")
                        .arg(address_.destination(), hello.version)
                        .arg(hello.protocol)
                        .arg(QCoreApplication::applicationVersion())
                        .arg(protocol::kVersion));
      }
      remote_path_ = hello.history;
      ++connections_;
      return;
    } catch (const protocol::ProtocolError& e) {
      disconnect();
      unreachable(QString("%1 did not start spur runs serve: %2").arg(address_.destination(), e.what()));
    }
  }
}

QString RemoteHistory::remote_path() {
  if (!ssh_) call("state");
  return remote_path_;
}

bool RemoteHistory::attempt(const QByteArray& requests, qint64 first_id, std::vector<QJsonValue>& results, QString& why,
                            bool& sent) {
  sent = false;
  if (!ssh_ || ssh_->state() != QProcess::Running) connect();
  // Written whole before any answer is read: QProcess reads the answers into its buffer while it writes, so a
  // serve answering early never blocks on a full pipe.
  if (ssh_->write(requests) != requests.size() || !ssh_->waitForBytesWritten(options_.answer_timeout * 1000)) {
    why = "it could not be written to";
    return false;
  }
  sent = true;
  std::optional<protocol::Answer> failed;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto line = read_line(options_.answer_timeout * 1000);
    if (!line) {
      if (ssh_->state() == QProcess::NotRunning) {
        const QString tail = stderr_tail();
        why = tail.isEmpty() ? QString("the connection closed") : tail;
        return false;
      }
      disconnect();
      unreachable(QString("%1 did not answer within %2 s").arg(where()).arg(options_.answer_timeout));
    }
    protocol::Answer answer;
    try {
      answer = protocol::decode_answer(*line);
      if (answer.id != first_id + static_cast<qint64>(i)) throw protocol::ProtocolError("it answered another request");
    } catch (const protocol::ProtocolError& e) {
      disconnect();
      unreachable(QString("%1 answered what is not Spur's history protocol: %2").arg(where(), e.what()));
    }
    if (!answer.error_kind.isEmpty() && !failed) failed = answer;
    results[i] = answer.result;
  }
  if (!failed) return true;
  const QString message = address_.destination() + ": " + failed->error_message;
  if (failed->error_kind == "run") throw RunServiceError(message.toStdString());
  throw history::HistoryError(message.toStdString(), failed->error_kind == "busy");
}

QJsonValue RemoteHistory::call(const QString& name, const QJsonObject& arguments, Retry retry) {
  const qint64 id = next_id_++;
  return exchange(name, protocol::encode_request(id, name, arguments), id, 1, retry).front();
}

std::vector<QJsonValue> RemoteHistory::call_all(const QString& name, const std::vector<QJsonObject>& arguments) {
  if (arguments.empty()) return {};
  const qint64 first_id = next_id_;
  QByteArray requests;
  for (const auto& each : arguments) requests += protocol::encode_request(next_id_++, name, each);
  return exchange(name, requests, first_id, arguments.size(), Retry::yes);
}

std::vector<QJsonValue> RemoteHistory::exchange(const QString& name, const QByteArray& requests, qint64 first_id,
                                                size_t count, Retry retry) {
  bool was_connected = ssh_ != nullptr;
  for (int attempt_number = 0;; ++attempt_number) {
    std::vector<QJsonValue> results(count);
    QString why;
    bool sent = false;
    try {
      if (attempt(requests, first_id, results, why, sent)) {
        if (attempt_number > 0 && options_.notice) options_.notice("reconnected to " + where());
        return results;
      }
    } catch (const history::HistoryError& e) {
      // Reaching it again failed: tried again while attempts are left, once it had been reached.
      if (!was_connected || ssh_ || attempt_number >= options_.reconnect_attempts) throw;
      why = QString::fromUtf8(e.what());
    }
    was_connected = true;
    disconnect();
    if (sent && retry == Retry::no) {
      unreachable(QString("lost the connection to %1 while asking it to %2 (%3): it may or may not have been done; "
                          "look before asking again")
                      .arg(where(), name, why));
    }
    if (attempt_number >= options_.reconnect_attempts) {
      unreachable(QString("lost the connection to %1 (%2); gave up after %3 attempts to reconnect")
                      .arg(where(), why)
                      .arg(options_.reconnect_attempts));
    }
    const int wait = 1 << attempt_number;
    if (options_.notice) {
      options_.notice(QString("lost the connection to %1 (%2); reconnecting in %3 s").arg(where(), why).arg(wait));
    }
    QThread::sleep(static_cast<unsigned long>(wait));
  }
}

}  // namespace spur::app
