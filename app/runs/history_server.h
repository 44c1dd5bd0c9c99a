// SPDX-License-Identifier: Apache-2.0
// `spur runs serve --stdio`: one history's RunService answering the remote history's calls (history_protocol.h)
// on standard input and output, for a client that started it over SSH (remote_history.h). No port, no daemon: it
// lives as long as its SSH session, and reads the history as `spur runs` does (while runs write it).
//
// Threads: one, the caller's; answers go out in the order the requests came.
#pragma once

#include <QByteArray>
#include <QString>

namespace spur::app {

class RunService;

class HistoryServer {
 public:
  /// `version`: this Spur's, said in the hello.
  HistoryServer(RunService& service, QString version);
  /// The first line: protocol, version, the history's path, whether it exists and can be written here.
  QByteArray hello() const;
  /// The answer line to one request line. Never throws: a request it cannot read, an unknown call and every
  /// failure of the call itself are error answers (their kinds in history_protocol.h).
  QByteArray answer(const QByteArray& line);

 private:
  RunService& service_;
  QString version_;
};

/// The hello, then one answer per request line read from `in_fd`, until `in_fd` ends (0) or `out_fd` cannot be
/// written (1: the client is gone). A request line longer than 1 MiB ends the session with an error answer (2).
int serve(HistoryServer& server, int in_fd, int out_fd);

}  // namespace spur::app
