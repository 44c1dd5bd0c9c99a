// SPDX-License-Identifier: Apache-2.0
// A history on another machine, through `ssh HOST spur runs serve --stdio` (history_server.h): what RunService
// calls when its history is named `ssh://[user@]host[:port]/path`. The user's own OpenSSH does the connecting
// (keys, agent, ~/.ssh/config, ControlMaster; -F FILE as spur launch's --ssh_config); nothing listens on a port
// but sshd. A connection that drops is made again and the call asked again (reads, and the changes that can be
// made twice: rename, tag, notes); callers resume from their own cursors (console line ids), so nothing is lost
// or repeated.
//
// Threads: the object's calls on one thread at a time (the QProcess lives on the thread of the first call).
// Errors: RunServiceError for what the caller asked wrong (prefixed with the host), history::HistoryError for a
// history that cannot be read or written there, and for a machine that cannot be reached, has no Spur or another
// protocol, or answers what is not the protocol; each message names the host and what to do.
#pragma once

#include <QJsonObject>
#include <QJsonValue>
#include <QString>

#include <functional>
#include <memory>
#include <optional>

class QProcess;

namespace spur::app {

/// Where a remote history is: ssh://[user@]host[:port][/path]. An empty path is that machine's default history
/// ($SPUR_HISTORY there, else ~/.local/share/spur/history.db); "/~/..." is relative to the remote home folder.
struct HistoryAddress {
  QString user, host;
  int port = 0;  // 0: ssh's own (22, or what ~/.ssh/config says)
  QString path;  // as the serve on that machine is given it ("~/" expanded there)

  /// nullopt when `location` is not an ssh:// address (a local file); RunServiceError naming what is wrong with
  /// one that is (no host, a host ssh could read as an option, a port out of range).
  static std::optional<HistoryAddress> parse(const QString& location);
  /// Whether `location` names a history on another machine (it starts with ssh://), the rest not judged yet.
  static bool is_address(const QString& location) { return location.startsWith("ssh://", Qt::CaseInsensitive); }
  /// "[user@]host" as ssh is given it.
  QString destination() const;
  /// The address written back: ssh://user@host:port/path.
  QString text() const;
};

struct RemoteOptions {
  /// The client. Default: ssh on PATH.
  QString ssh = "ssh";
  /// ssh -F FILE, when not the user's default configuration (spur launch's --ssh_config).
  QString ssh_config;
  /// The spur command on the other machine. Default: `spur` on its PATH, or ~/.local/bin/spur (where the set-up
  /// links it for a user who is not root).
  QString remote_spur;
  /// Seconds for the connection (ssh's ConnectTimeout). Default: 10.
  int connect_timeout = 10;
  /// Seconds an answer may take once asked (a serve that stops answering is an error, not a hang). Default: 120.
  int answer_timeout = 120;
  /// Never prompt for a password or passphrase (BatchMode): for callers without a terminal and without
  /// SSH_ASKPASS. Default: false (ssh prompts on the terminal, or through SSH_ASKPASS when it is set).
  bool batch_mode = false;
  /// Prompts (a key's passphrase, a password, an unknown host key) go to the program SSH_ASKPASS names, even where
  /// a terminal exists (SSH_ASKPASS_REQUIRE=force): for a window, whose terminal, if any, nobody watches.
  /// Default: false.
  bool askpass = false;
  /// This process's connections to the same machine (by the name it was given) share one SSH connection (OpenSSH's
  /// ControlMaster, its socket in a private folder of the temporary directory, kept 10 s after the last use): a
  /// window's readers are asked for a passphrase once, and each reader after the first connects without a new
  /// handshake. Default: false.
  bool share_connection = false;
  /// Connections made again before a call gives up. Default: 5 (waits of 1, 2, 4, 8 and 16 s between).
  int reconnect_attempts = 5;
  /// Told "lost the connection ...; reconnecting" and "reconnected" (the CLI prints them, the Studio shows them).
  std::function<void(const QString&)> notice;

  /// The defaults with what the environment says: SPUR_SSH_CONFIG (ssh_config), SPUR_REMOTE_SPUR (remote_spur);
  /// when `interactive` is false (a window has no terminal to prompt on), askpass when SSH_ASKPASS is set, else
  /// batch_mode, and share_connection.
  static RemoteOptions from_environment(bool interactive);
};

class RemoteHistory {
 public:
  RemoteHistory(HistoryAddress address, RemoteOptions options);
  ~RemoteHistory();
  RemoteHistory(const RemoteHistory&) = delete;
  RemoteHistory& operator=(const RemoteHistory&) = delete;

  const HistoryAddress& address() const { return address_; }
  /// The history's path on that machine, from the serve's hello (connects when not yet connected).
  QString remote_path();

  /// How many connections have been made (1 after the first; each reconnection adds one).
  qint64 connections() const { return connections_; }
  /// Whether a call may be asked again after the connection dropped mid-call.
  enum class Retry { yes, no };
  /// Asks the call `name` with `arguments` and returns its result (history_protocol.h), connecting first when needed.
  QJsonValue call(const QString& name, const QJsonObject& arguments = {}, Retry retry = Retry::yes);
  /// Asks `name` once for each of `arguments`, every request written before the first answer is read (the serve
  /// answers in order): one round trip for all of them. The results in the same order; when some answer is an
  /// error, every answer is read and the first error thrown. For reads: after a dropped connection all are asked
  /// again.
  std::vector<QJsonValue> call_all(const QString& name, const std::vector<QJsonObject>& arguments);

 private:
  /// Starts ssh and reads the hello; HistoryError naming why not (unreachable, no Spur there, another protocol).
  void connect();
  void disconnect();
  /// The requests written, then their answers read (ids first_id, first_id + 1, ...), with reconnection.
  std::vector<QJsonValue> exchange(const QString& name, const QByteArray& requests, qint64 first_id, size_t count,
                                   Retry retry);
  /// One attempt: false when the connection dropped (`why` says how); throws for every other failure.
  bool attempt(const QByteArray& requests, qint64 first_id, std::vector<QJsonValue>& results, QString& why, bool& sent);
  /// A line from the serve's output within `timeout_ms`; nullopt when the process ended or the time ran out.
  std::optional<QByteArray> read_line(int timeout_ms);
  QString stderr_tail();
  QString where() const;

  HistoryAddress address_;
  RemoteOptions options_;
  std::unique_ptr<QProcess> ssh_;
  QString remote_path_;
  QByteArray stderr_;
  qint64 next_id_ = 1;
  qint64 connections_ = 0;
};

}  // namespace spur::app
