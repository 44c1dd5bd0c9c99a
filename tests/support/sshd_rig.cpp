// SPDX-License-Identifier: Apache-2.0
// The throw-away sshd; see sshd_rig.h. Settings from the reference: StrictModes no (a world-writable /tmp),
// UsePAM no, keys only, root allowed with a key.
#include "sshd_rig.h"

#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTcpSocket>
#include <QThread>

#include "rank_group.h"

namespace spur::test {
namespace {

bool write_file(const QString& path, const QString& text) {
  QFile file(path);
  return file.open(QIODevice::WriteOnly) && file.write(text.toUtf8()) >= 0;
}

}  // namespace

bool ThrowawaySshd::run(const QString& program, const QStringList& arguments) {
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start(program, arguments);
  if (!process.waitForFinished(30000) || process.exitCode() != 0) {
    problem_ = program + " failed: " + QString::fromLocal8Bit(process.readAll());
    return false;
  }
  return true;
}

// sshd's configuration cannot name paths with spaces, which the default template (the application's name) may hold.
ThrowawaySshd::ThrowawaySshd() : dir_(QDir::tempPath() + "/spur-sshd-XXXXXX") {
  if (!QFile::exists("/usr/sbin/sshd")) {
    problem_ = "/usr/sbin/sshd is missing (Debian's openssh-server)";
    return;
  }
  if (!QDir("/run/sshd").exists() && !QDir().mkpath("/run/sshd")) {
    problem_ = "cannot create /run/sshd (sshd's privilege-separation directory; run as root)";
    return;
  }
  const QString d = dir_.path();
  if (!run("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", d + "/host_key"}) ||
      !run("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", d + "/user_key"}) ||
      !run("ssh-keygen", {"-q", "-t", "ed25519", "-N", "", "-f", d + "/other_key"}) ||
      !QFile::copy(d + "/user_key.pub", d + "/authorized_keys")) {
    if (problem_.isEmpty()) problem_ = "cannot prepare the keys";
    return;
  }
  port_ = free_port();
  const QString user = qEnvironmentVariable("USER", "root");
  write_file(d + "/sshd_config", QString("Port %1\nListenAddress 127.0.0.1\nHostKey %2/host_key\n"
                                         "AuthorizedKeysFile %2/authorized_keys\nPermitRootLogin prohibit-password\n"
                                         "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                                         "StrictModes no\nMaxStartups 100:30:200\nPidFile %2/sshd.pid\n"
                                         "AcceptEnv LANG\n")
                                     .arg(port_).arg(d));
  const int closed = free_port();
  const QString common = QString("  HostName 127.0.0.1\n  User %1\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n"
                                 "  StrictHostKeyChecking no\n  LogLevel ERROR\n")
                             .arg(user);
  write_file(d + "/ssh_config",
             QString("Host machine1 machine2\n  Port %1\n  IdentityFile %2/user_key\n%3"
                     "Host locked\n  Port %1\n  IdentityFile %2/other_key\n%3"
                     "Host closed\n  Port %4\n  IdentityFile %2/user_key\n%3")
                 .arg(port_).arg(d).arg(common).arg(closed));
  sshd_ = std::make_unique<QProcess>();
  sshd_->setProcessChannelMode(QProcess::MergedChannels);
  sshd_->start("/usr/sbin/sshd", {"-D", "-e", "-f", d + "/sshd_config"});
  if (!sshd_->waitForStarted(10000)) {
    problem_ = "cannot start sshd: " + sshd_->errorString();
    return;
  }
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < 10000) {
    QTcpSocket probe;
    probe.connectToHost("127.0.0.1", static_cast<quint16>(port_));
    if (probe.waitForConnected(200)) return;
    if (sshd_->state() != QProcess::Running) break;
    QThread::msleep(50);
  }
  problem_ = "sshd did not start listening: " + QString::fromLocal8Bit(sshd_->readAll());
}

ThrowawaySshd::~ThrowawaySshd() {
  if (sshd_ && sshd_->state() != QProcess::NotRunning) {
    sshd_->terminate();  // SIGTERM to its PID
    if (!sshd_->waitForFinished(5000)) {
      sshd_->kill();
      sshd_->waitForFinished(5000);
    }
  }
}

}  // namespace spur::test
