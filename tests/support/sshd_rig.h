// SPDX-License-Identifier: Apache-2.0
// A throw-away OpenSSH server on a loopback port the OS chose, with its own host and user keys, and an ssh
// client config naming "machines" on it (machine1, machine2), one with the wrong key (locked), one whose key has
// a passphrase (guarded: kGuardedPassphrase) and one on a closed port (closed). Stopped by PID when the object goes
// away, also on failure, and when the test's process dies without it going away (a crash: the kernel's parent-death
// signal).
#pragma once

#include <QProcess>
#include <QString>
#include <QTemporaryDir>

#include <memory>

namespace spur::test {

inline constexpr const char* kGuardedPassphrase = "open sesame";

class ThrowawaySshd {
 public:
  ThrowawaySshd();
  ~ThrowawaySshd();
  /// Empty when the server is up; otherwise why not (the test skips or fails with it).
  const QString& problem() const { return problem_; }
  /// ssh -F for the client side.
  QString client_config() const { return dir_.path() + "/ssh_config"; }
  int port() const { return port_; }

 private:
  bool run(const QString& program, const QStringList& arguments);
  QTemporaryDir dir_;
  std::unique_ptr<QProcess> sshd_;
  int port_ = 0;
  QString problem_;
  int closed_socket_ = -1;  // bound, never listening: the 'closed' host's port, held so nothing else takes it
};

}  // namespace spur::test
