// SPDX-License-Identifier: Apache-2.0
// `spur launch --on HOST`: starting the launch there; see remote_launch.h.
#include "launch/remote_launch.h"

#include <QDir>
#include <QProcess>
#include <QRegularExpression>

#include "launch/launch_plan.h"  // LaunchError
#include "launch/launch_request.h"
#include "launch/ssh_fanout.h"

namespace spur::app {

void parse_on(const QString& text, QString& destination, int& port) {
  static const QRegularExpression bracketed(R"(^(?:([^@\[\]]+)@)?\[([0-9A-Fa-f:.]+)\](?::(\d{1,5}))?$)");
  static const QRegularExpression plain(R"(^([^:\[\]]+?)(?::(\d{1,5}))?$)");
  port = 0;
  if (const auto match = bracketed.match(text); match.hasMatch()) {
    destination = (match.captured(1).isEmpty() ? QString() : match.captured(1) + "@") + match.captured(2);
    port = match.captured(3).toInt();
  } else if (const auto match = plain.match(text); match.hasMatch()) {
    destination = match.captured(1);
    port = match.captured(2).toInt();
  } else {
    throw LaunchError("--on '" + text + "': give [user@]host[:port]");
  }
  if (const QString problem = check_host(destination); !problem.isEmpty()) throw LaunchError("--on: " + problem);
  if (port < 0 || port > 65535) throw LaunchError("--on '" + text + "': the port is out of range");
}

RemoteLaunchStart start_remote_launch(const RemoteLaunchRequest& request, int wait_seconds) {
  // The script there: a private folder, the files from standard input (exactly their sizes), the launcher started
  // in a session of its own with no terminal and no input, then a wait for its first line or its end.
  QStringList script{"umask 077",
                     "mkdir -p \"$HOME/.cache/spur/on\" && d=$(mktemp -d \"$HOME/.cache/spur/on/launch-XXXXXX\") || "
                     "{ echo 'cannot make a folder in ~/.cache/spur/on' >&2; exit 97; }"};
  if (!request.config.isEmpty()) script << QString("head -c %1 > \"$d/run.yaml\"").arg(request.config.size());
  if (!request.target.isEmpty()) script << QString("head -c %1 > \"$d/run.spur.yaml\"").arg(request.target.size());
  if (request.directory_required) {
    script << "cd " + shell_word(request.directory) + " || exit 98";
  } else if (!request.directory.isEmpty()) {
    script << "cd " + shell_word(request.directory) + " 2>/dev/null || cd";
  }
  const QString spur = request.remote_spur.isEmpty() ? QString("spur") : shell_word(request.remote_spur);
  if (request.remote_spur.isEmpty()) script << "command -v spur >/dev/null 2>&1 || PATH=\"$HOME/.local/bin:$PATH\"";
  QStringList words;
  for (const auto& word : request.arguments) words << shell_word(word);
  script << QString("nohup setsid %1 launch %2%3 > \"$d/launch.log\" 2>&1 < /dev/null &")
                .arg(spur, request.config.isEmpty() ? QString() : "--config_file \"$d/run.yaml\" ", words.join(' '));
  script << "p=$!"
         << QString(
                "i=0; while [ $i -lt %1 ] && kill -0 $p 2>/dev/null && [ ! -s \"$d/launch.log\" ]; do "
                "sleep 0.2; i=$((i+1)); done")
                .arg(wait_seconds * 5)
         << "sleep 0.3"  // a launcher that printed its error is gone by now
         << "if kill -0 $p 2>/dev/null; then echo \"spur-on $p $d\"; exit 0; fi"
         // Ended already: a run done in a moment, or a launch that failed; its exit code and output say which.
         << R"(wait $p; c=$?; echo "spur-on $p $d $c"; cat "$d/launch.log" >&2; exit 0)";

  QStringList args;
  if (!request.ssh_config.isEmpty()) args << "-F" << request.ssh_config;
  args << "-T"
       << "-o" << QString("ConnectTimeout=%1").arg(request.connect_timeout);
  if (request.port > 0) args << "-p" << QString::number(request.port);
  args << "--" << request.destination << "sh -c " + shell_word(script.join('\n'));
  QProcess ssh;
  ssh.start("ssh", args);
  RemoteLaunchStart start;
  if (!ssh.waitForStarted(10000)) {
    start.error = "cannot run ssh: " + ssh.errorString();
    return start;
  }
  ssh.write(request.config);
  ssh.write(request.target);
  ssh.closeWriteChannel();
  if (!ssh.waitForFinished((wait_seconds + request.connect_timeout + 30) * 1000)) {
    ssh.kill();
    ssh.waitForFinished();
    start.error = QString("%1 did not say within %2 s whether the launch started")
                      .arg(request.destination)
                      .arg(wait_seconds + request.connect_timeout + 30);
    return start;
  }
  const QString out = QString::fromUtf8(ssh.readAllStandardOutput());
  const QString said = QString::fromUtf8(ssh.readAllStandardError()).trimmed();
  const int code = ssh.exitStatus() == QProcess::NormalExit ? ssh.exitCode() : -1;
  static const QRegularExpression started(R"(spur-on (\d+) (\S+)(?: (\d+))?)");
  if (const auto match = started.match(out); code == 0 && match.hasMatch()) {
    start.pid = match.captured(1).toLongLong();
    start.folder = match.captured(2);
    if (!match.captured(3).isEmpty()) {
      start.ended = true;
      start.exit_code = match.captured(3).toInt();
      start.output = said;
    }
    return start;
  }
  if (code == 255) {
    start.error = QString("cannot reach %1 over SSH: %2").arg(request.destination, said);
  } else if (code == 98) {
    start.error = QString("%1 has no folder %2 (--on_dir)").arg(request.destination, request.directory);
  } else if (code == 96) {
    start.error = QString("the launch on %1 stopped at once:\n%2").arg(request.destination, said);
    if (said.contains("not found") && said.contains("spur")) {
      start.error += "\n(no spur there: install Spur there, or give its path with --remote_spur)";
    }
  } else {
    start.error = QString("the launch on %1 did not start (exit %2)%3")
                      .arg(request.destination)
                      .arg(code)
                      .arg(said.isEmpty() ? QString() : ": " + said);
  }
  return start;
}

}  // namespace spur::app
