// SPDX-License-Identifier: Apache-2.0
// `spur launch --on [user@]host[:port] ...`: the launch runs detached on that machine (launch/remote_launch.h) and
// this command follows its run through that machine's history over SSH, as `spur runs logs --follow` does: the
// console, then the run's end and exit code. The SSH connection may drop (it is made again, nothing lost or
// repeated) and this command may end (Ctrl-C twice, --detach, a closed laptop): the run goes on there.
// Ctrl-C once asks the run's launcher there to stop it.
#include <signal.h>

#include <QDir>
#include <QFile>
#include <QTextStream>
#include <QThread>

#include <atomic>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "launch/launch_plan.h"
#include "launch/launch_request.h"
#include "launch/remote_launch.h"
#include "runs/run_service.h"
#include "runs/run_status.h"
#include "setup/launch_target.h"

namespace spur::cli {
namespace {

std::atomic<int> interrupts{0};
void count_interrupt(int) { interrupts.fetch_add(1); }

QByteArray file_bytes(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) throw app::LaunchError("cannot read " + path + ": " + file.errorString());
  return file.readAll();
}

}  // namespace

int launch_on(const QStringList& arguments, const std::string& config_path) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  const Arguments args(arguments, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
  app::RemoteLaunchRequest request;
  // The machine and its folder: the command line's, else the target file's (on:, on_dir:). The target file travels
  // without them (there, the launch is that machine's own).
  std::optional<QString> on = args.value("on");
  std::optional<QString> on_dir = args.value("on_dir");
  if (!config_path.empty()) {
    const QString config = QString::fromStdString(config_path);
    request.config = file_bytes(config);
    if (auto target = app::LaunchTarget::load_for(config)) {
      if (!on) on = target->value("on");
      if (!on_dir) on_dir = target->value("on_dir");
      target->remove({"on", "on_dir"});
      if (!target->empty()) request.target = target->to_yaml(config).toUtf8();
    }
  }
  if (!on) throw UsageError("--on: no machine to launch on");
  app::parse_on(*on, request.destination, request.port);
  // As for a history there (ssh://): SPUR_SSH_CONFIG and SPUR_REMOTE_SPUR when the flags are not given.
  const auto environment = app::RemoteOptions::from_environment(true);
  request.ssh_config = args.value("ssh_config").value_or(environment.ssh_config);
  request.remote_spur = args.value("remote_spur").value_or(environment.remote_spur);
  request.connect_timeout = static_cast<int>(args.integer("connect_timeout", 1, 3600).value_or(10));
  request.directory_required = on_dir.has_value();
  request.directory = on_dir.value_or(QDir::currentPath());
  // What the launcher there gets: every flag but those that are this side's (where to, how to connect, the
  // configuration, which travels as a file, and --detach, which is this command's to honour).
  static const QSet<QString> here{"on", "on_dir", "ssh_config", "config_file", "detach"};
  qsizetype end = 0;
  for (const auto& flag : app::split_launch_flags(arguments, &end)) {
    if (flag.name == "env" && flag.value.contains('=')) {
      throw app::LaunchError("--on: --env " + flag.value.section('=', 0, 0) +
                             "=...: values do not travel to another machine in an argument list; set the variable "
                             "there, or give --env NAME with it set in that machine's environment");
    }
    if (here.contains(flag.name)) continue;
    request.arguments << flag.words;
  }
  request.arguments << "--" << arguments.mid(end);
  if (request.arguments.size() == 1) throw UsageError("no program to launch");

  err << "spur launch: starting on " << request.destination << "\n" << Qt::flush;
  const auto started = app::start_remote_launch(request);
  if (!started.error.isEmpty()) {
    err << "spur launch: " << started.error << "\n";
    return 1;
  }
  // Its history there, through `spur runs serve` (ssh://...), as the Studio would open it.
  app::HistoryAddress address;
  const qsizetype at = request.destination.lastIndexOf('@');
  address.user = at >= 0 ? request.destination.left(at) : QString();
  address.host = request.destination.mid(at + 1);
  address.port = request.port;
  address.path = args.value("history").value_or(QString());
  app::RemoteOptions remote = app::RemoteOptions::from_environment(true);
  remote.ssh_config = request.ssh_config;
  if (!request.remote_spur.isEmpty()) remote.remote_spur = request.remote_spur;
  remote.connect_timeout = request.connect_timeout;
  remote.notice = [&err](const QString& text) { err << "spur launch: " << text << "\n" << Qt::flush; };
  app::RunService service(address.text().toStdString(), remote);

  // The run the launcher records carries its pid.
  std::optional<history::Run> run;
  for (int i = 0; i < (started.ended ? 1 : 150) && !run; ++i) {
    history::RunFilter newest;
    newest.newest_first = true;
    newest.limit = 20;
    for (const auto& candidate : service.runs(newest)) {
      if (candidate.pid == started.pid) run = candidate;
    }
    if (!run) QThread::msleep(200);
  }
  const QString follow = QString("spur runs logs %1 --follow --history %2").arg(run ? run->id : 0).arg(address.text());
  if (!run) {
    if (started.ended && started.exit_code == 0) {  // a launch that records nothing: --dry_run, --no_history
      out << started.output << "\n";
      return 0;
    }
    if (started.ended) {
      err << "spur launch: the launch on " << request.destination << " failed (exit code " << started.exit_code
          << "):\n"
          << started.output << "\n";
      return started.exit_code;
    }
    err << "spur launch: the launcher on " << request.destination << " (pid " << started.pid
        << ") has recorded no run within 30 s; its output is in " << started.folder << "/launch.log there\n";
    return 1;
  }
  err << "spur launch: run " << run->id << " (" << QString::fromStdString(run->name) << ") runs on "
      << request.destination << ", detached; follow it again with: " << follow << "\n"
      << Qt::flush;
  if (args.has("detach")) return 0;

  struct sigaction action {
  }, previous_int{}, previous_term{};
  action.sa_handler = count_interrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);
  int asked = 0;
  int64_t after = 0;
  for (;;) {
    const int now_asked = interrupts.load();
    if (now_asked >= 2) {
      err << "spur launch: left run " << run->id << " on " << request.destination << " (it goes on): " << follow
          << "\n";
      return 130;
    }
    if (now_asked > asked) {
      asked = now_asked;
      err << "spur launch: stopping run " << run->id << " on " << request.destination
          << " (Ctrl-C again to leave it running)\n"
          << Qt::flush;
      try {
        service.stop(run->id);
      } catch (const app::RunServiceError& e) {
        err << "spur launch: " << e.what() << "\n";
      }
    }
    // The console's new lines; once more after the run has ended (what it printed last).
    auto print_new_lines = [&] {
      for (const auto& line : service.console(run->id, after)) {
        after = line.id;
        out << "[" << (line.rank >= 0 ? QString("rank%1").arg(line.rank) : QString("launcher")) << "] "
            << QString::fromStdString(line.text) << "\n";
      }
      out.flush();
    };
    const auto record = service.find(run->id);
    print_new_lines();
    const QString status = record ? app::effective_status(*record) : QString("failed");
    if (status != "running" && status != "queued") {
      print_new_lines();
      ::sigaction(SIGINT, &previous_int, nullptr);
      ::sigaction(SIGTERM, &previous_term, nullptr);
      const int code = status == "finished" ? 0 : record && record->exit_code ? *record->exit_code : 1;
      err << "spur launch: run " << run->id << " " << status << " on " << request.destination << " (exit code " << code
          << ")\n";
      return code;
    }
    QThread::msleep(250);
  }
}

}  // namespace spur::cli
