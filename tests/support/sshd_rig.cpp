// SPDX-License-Identifier: Apache-2.0
// The throw-away sshd; see sshd_rig.h. Settings from the reference: StrictModes no (a world-writable /tmp),
// UsePAM no, keys only, root allowed with a key.
#include "sshd_rig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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
      !run("ssh-keygen", {"-q", "-t", "ed25519", "-N", kGuardedPassphrase, "-f", d + "/guarded_key"})) {
    if (problem_.isEmpty()) problem_ = "cannot prepare the keys";
    return;
  }
  {
    QFile user(d + "/user_key.pub"), guarded(d + "/guarded_key.pub");
    if (!user.open(QIODevice::ReadOnly) || !guarded.open(QIODevice::ReadOnly) ||
        !write_file(d + "/authorized_keys", QString::fromUtf8(user.readAll() + guarded.readAll()))) {
      problem_ = "cannot write authorized_keys";
      return;
    }
  }
  // The "closed" host's port is a socket bound and held without listening (connections are refused), so it can
  // never be sshd's port, and sshd's own port is tried again if another process took it first (issue 12, defect
  // 13: two free_port() calls in a row once returned the same port).
  closed_socket_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (closed_socket_ < 0 || ::bind(closed_socket_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(closed_socket_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    problem_ = "cannot bind a loopback port for the closed host";
    return;
  }
  const int closed = ntohs(address.sin_port);
  const QString user = qEnvironmentVariable("USER", "root");
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    write_file(d + "/sshd_config", QString("Port %1\nListenAddress 127.0.0.1\nHostKey %2/host_key\n"
                                           "AuthorizedKeysFile %2/authorized_keys\nPermitRootLogin prohibit-password\n"
                                           "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                                           "StrictModes no\nMaxStartups 100:30:200\nPidFile %2/sshd.pid\n"
                                           "AcceptEnv LANG\n")
                                       .arg(port_)
                                       .arg(d));
    const QString common = QString(
                               "  HostName 127.0.0.1\n  User %1\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n"
                               "  StrictHostKeyChecking no\n  LogLevel ERROR\n")
                               .arg(user);
    write_file(d + "/ssh_config", QString("Host machine1 machine2\n  Port %1\n  IdentityFile %2/user_key\n%3"
                                          "Host locked\n  Port %1\n  IdentityFile %2/other_key\n%3"
                                          "Host closed\n  Port %4\n  IdentityFile %2/user_key\n%3"
                                          "Host guarded\n  Port %1\n  IdentityFile %2/guarded_key\n%3")
                                      .arg(port_)
                                      .arg(d)
                                      .arg(common)
                                      .arg(closed));
    sshd_ = std::make_unique<QProcess>();
    sshd_->setProcessChannelMode(QProcess::MergedChannels);
    // A test that crashes never runs the destructor: sshd then goes with the test's process (SIGTERM to its PID).
    sshd_->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
    sshd_->start("/usr/sbin/sshd", {"-D", "-e", "-f", d + "/sshd_config"});
    if (!sshd_->waitForStarted(10000)) {
      problem_ = "cannot start sshd: " + sshd_->errorString();
      return;
    }
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < 10000 && sshd_->state() == QProcess::Running) {
      QTcpSocket probe;
      probe.connectToHost("127.0.0.1", static_cast<quint16>(port_));
      if (probe.waitForConnected(200)) {
        problem_.clear();
        return;
      }
      QThread::msleep(50);
    }
    problem_ = "sshd did not start listening on port " + QString::number(port_) + ": " +
               QString::fromLocal8Bit(sshd_->readAll());
    sshd_->kill();  // its port was taken (it exits), or it hangs: the next attempt picks another port
    sshd_->waitForFinished(5000);
  }
}

ThrowawaySshd::~ThrowawaySshd() {
  if (closed_socket_ >= 0) ::close(closed_socket_);
  if (sshd_ && sshd_->state() != QProcess::NotRunning) {
    sshd_->terminate();  // SIGTERM to its PID
    if (!sshd_->waitForFinished(5000)) {
      sshd_->kill();
      sshd_->waitForFinished(5000);
    }
  }
}

}  // namespace spur::test
