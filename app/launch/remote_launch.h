// SPDX-License-Identifier: Apache-2.0
// `spur launch --on [user@]host[:port] ...`: the launch started on another machine, detached there (it outlives the
// SSH connection and this machine), recording into that machine's history; this side then follows the run through
// that history (runs/remote_history.h). The configuration file (and Spur's target file beside it) travel on the SSH
// session's standard input into a private folder there (~/.cache/spur/on/launch-XXXXXX, 0700), never in an
// argument list; the launcher's own output goes to launch.log in that folder.
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>

namespace spur::app {

struct RemoteLaunchRequest {
  QString destination;              // [user@]host
  int port = 0;                     // 0: ssh's own
  QString ssh_config;               // ssh -F
  int connect_timeout = 10;         // seconds
  QString remote_spur;              // empty: `spur` on its PATH, or ~/.local/bin/spur
  QString directory;                // where the launch starts there; empty: this directory's path if it exists there,
                                    // else the home folder
  bool directory_required = false;  // --on_dir: a missing directory is an error, not the home folder
  QByteArray config;                // the configuration's bytes; empty: none
  QByteArray target;                // Spur's target file's bytes (setup/launch_target.h); empty: none
  QStringList arguments;            // `spur launch` arguments there (flags and program), without --config_file
};

struct RemoteLaunchStart {
  qint64 pid = 0;      // the launcher's there: the run it records carries it
  QString folder;      // the private folder there (its launch.log)
  QString error;       // why it did not start (unreachable, no Spur); empty when it did
  bool ended = false;  // the launcher had ended already when looked at (a run done at once, or a failed launch)
  int exit_code = 0;   // then: its exit code
  QString output;      // then: its output (launch.log)
};

/// Parses "[user@]host[:port]" (the port after the last ':' of a name; an IPv6 address in brackets); LaunchError
/// naming what is wrong.
void parse_on(const QString& text, QString& destination, int& port);
/// Starts the launch and waits until it has started (its first line in launch.log) or ended (its log is the
/// error), at most `wait_seconds`.
RemoteLaunchStart start_remote_launch(const RemoteLaunchRequest& request, int wait_seconds = 60);

}  // namespace spur::app
