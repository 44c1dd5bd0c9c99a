// SPDX-License-Identifier: Apache-2.0
// `spur runs`: the run history from the command line: list, show, export, config, logs (--follow), rename, rm,
// tag, note, import (TensorBoard event files), summarise; each through app::RunService, as the Studio's. Reads while
// runs write; `--history F` picks another database than SPUR_HISTORY or the default, and
// `--history ssh://[user@]host[:port]/path` one on another machine. `serve --stdio` is that machine's end.
#include <signal.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDir>

#include <QDateTime>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QRegularExpression>
#include <QTextStream>
#include <QThread>

#include <algorithm>
#include <cmath>
#include <limits>

#include <spur/history/reader.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "launch/launch_request.h"
#include "runs/history_server.h"
#include "runs/run_service.h"
#include "runs/run_status.h"
#include "slurm/slurm_job.h"

namespace spur::cli {
namespace {

const char* kUsage =
    "usage: spur runs <action> [--history F]\n"
    "  F: a history file, or ssh://[user@]host[:port]/path for one on another machine (through ssh and spur\n"
    "     there; /~/... is in the remote home, no path its default history); with --ssh_config FILE (ssh -F;\n"
    "     default $SPUR_SSH_CONFIG) and --remote_spur PATH (default $SPUR_REMOTE_SPUR, else spur on its PATH)\n"
    "  list [--json]                           every run: id, name, status, progress, start, duration, exit code\n"
    "       [--status S] [--tag T] [--project P] [--since WHEN] [--limit N] [--offset M]\n"
    "                                          only those runs; WHEN: 2026-12-01, 2026-12-01T09:30 or an age\n"
    "                                          (90m, 12h, 7d); --limit: the N newest (skipping the M newest)\n"
    "  show ID                                 one run: settings, metrics (last, min, max), events\n"
    "  export ID --format csv|json [--metrics a,b] [--output F]\n"
    "  config ID                               the run's configuration (YAML), for spur launch --config_file\n"
    "  config ID --slurm                       a Slurm run's settings, as Spur's slurm.yaml holds them\n"
    "  logs ID [--rank R] [--follow]           console lines; --follow waits for new ones until the run ends\n"
    "  rename ID NAME                          give the run another name\n"
    "  rm ID [--force]                         delete the run (not while it runs; --force: a run whose launcher\n"
    "                                          died elsewhere) and everything recorded for it\n"
    "  tag ID TAG [--remove]                   add (or remove) a tag\n"
    "  note ID TEXT                            set the run's notes\n"
    "  import PATH [--project P] [--again]     TensorBoard event files at or below PATH, one run per folder\n"
    "                                          (scalars, hparams, status); a run imported before is skipped\n"
    "                                          unless --again\n"
    "  import mlflow://HOST:PORT[/EXPERIMENT] [--run RUN_ID] [--project P] [--again]\n"
    "                                          an MLflow tracking server's runs (every point of every metric,\n"
    "                                          parameters, status); mlflow+https:// for https\n"
    "  summarise [--check]                     build the summaries plots read (a history from an older Spur\n"
    "                                          gains them once; the Studio does this by itself); --check: also\n"
    "                                          rebuild any that disagree with their points\n"
    "  serve --stdio                           answer a remote history's calls on standard input and output\n"
    "                                          (what ssh://HOST/PATH starts on HOST; not for people)\n";

int64_t run_id(const Arguments& args, int index) {
  if (args.positional().size() <= index) throw UsageError("which run? give its ID (spur runs list)");
  bool ok = false;
  const qint64 id = args.positional()[index].toLongLong(&ok);
  if (!ok || id <= 0) throw UsageError("'" + args.positional()[index] + "' is not a run ID (spur runs list)");
  return id;
}

// --since: a date, a date and time (local), or an age ("7d": seven days ago); seconds since the epoch.
double parse_since(const QString& text) {
  static const QRegularExpression age(R"(^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$)");
  if (const auto match = age.match(text.trimmed()); match.hasMatch()) {
    const QMap<QString, double> units{{"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {"w", 604800}};
    return history::now_seconds() - match.captured(1).toDouble() * units.value(match.captured(2));
  }
  QDateTime when = QDateTime::fromString(text.trimmed(), Qt::ISODate);
  if (!when.isValid()) {
    const QDate day = QDate::fromString(text.trimmed(), Qt::ISODate);
    if (day.isValid()) when = day.startOfDay();
  }
  if (!when.isValid()) {
    throw UsageError("--since '" + text + "': give a date (2026-12-01), a local time (2026-12-01T09:30) or an age " +
                     "(90m, 12h, 7d)");
  }
  return static_cast<double>(when.toMSecsSinceEpoch()) / 1000.0;
}

int list(const app::RunService& service, const Arguments& args, QTextStream& out, QTextStream& err) {
  history::RunFilter filter;
  QString status;
  if (auto value = args.value("status")) {
    status = *value;
    if (!history::valid_status(status.toStdString())) {
      throw UsageError("--status '" + status + "': give one of queued, running, finished, failed, stopped");
    }
    // A run recorded as running or queued whose launcher is gone has failed (effective_status): those are read
    // too, then sorted by what the table shows.
    filter.statuses = {status.toStdString()};
    if (status == "failed") filter.statuses.insert(filter.statuses.end(), {"running", "queued"});
  }
  if (auto tag = args.value("tag")) filter.tag = tag->toStdString();
  if (auto project = args.value("project")) filter.project = project->toStdString();
  if (auto since = args.value("since")) filter.since = parse_since(*since);
  const qint64 limit = args.integer("limit", 1, std::numeric_limits<int>::max()).value_or(-1);
  const qint64 offset = args.integer("offset", 0, std::numeric_limits<int>::max()).value_or(0);
  const bool by_effective = status == "failed" || status == "running" || status == "queued";
  filter.newest_first = true;
  if (!by_effective) {
    filter.limit = limit;
    filter.offset = offset;
  }
  if (!service.exists()) {
    err << "spur runs: no run history at " << QString::fromStdString(service.history_path())
        << " yet (spur launch records runs there)\n";
  }
  auto runs = service.runs(filter);
  if (by_effective) {
    std::erase_if(runs, [&](const history::Run& run) { return app::effective_status(run) != status; });
    runs.erase(runs.begin(), runs.begin() + std::min<std::ptrdiff_t>(offset, std::ssize(runs)));
    if (limit >= 0 && std::ssize(runs) > limit) runs.resize(static_cast<size_t>(limit));
  }
  std::reverse(runs.begin(), runs.end());  // oldest first, the newest last
  if (limit >= 0 && !by_effective) {
    const int64_t matching = service.count_runs(filter);
    if (matching > offset + std::ssize(runs) || offset > 0) {
      err << QString("spur runs: %1 of %2 runs (--limit %3 --offset %4)\n")
                 .arg(runs.size())
                 .arg(matching)
                 .arg(limit)
                 .arg(offset);
    }
  }
  if (args.has("json")) {
    QJsonArray array;
    for (const auto& run : runs) array.append(app::run_json(run));
    out << QJsonDocument(array).toJson(QJsonDocument::Indented);
    return 0;
  }
  out << QString("%1  %2 %3 %4 %5 %6 %7 %8\n")
             .arg("ID", 4)
             .arg("NAME", -20)
             .arg("PROJECT", -12)
             .arg("STATUS", -9)
             .arg("PROGRESS", -22)
             .arg("STARTED", -19)
             .arg("DURATION", -9)
             .arg("EXIT");
  for (const auto& run : runs) {
    const double end = run.ended > 0 ? run.ended : history::now_seconds();
    out << QString("%1  %2 %3 %4 %5 %6 %7 %8\n")
               .arg(run.id, 4)
               .arg(app::terminal_text(QString::fromStdString(run.name)), -20)
               .arg(app::terminal_text(QString::fromStdString(run.project)), -12)
               .arg(app::effective_status(run), -9)
               .arg(app::progress_text(run), -22)
               .arg(app::time_text(run.started), -19)
               .arg(run.started > 0 ? app::duration_text(end - run.started) : QString("-"), -9)
               .arg(run.exit_code ? QString::number(*run.exit_code) : QString("-"));
  }
  return 0;
}

int show(const app::RunService& service, const history::Run& run, QTextStream& out) {
  const auto object = app::run_json(run);
  for (const char* key : {"name", "project", "status", "target", "hosts", "command", "notes"}) {
    out << QString("%1").arg(key, -12) << app::terminal_text(object.value(key).toString()) << "\n";
  }
  out << QString("%1").arg("tags", -12) << QJsonDocument(object.value("tags").toArray()).toJson(QJsonDocument::Compact)
      << "\n";
  if (run.parent > 0) out << QString("%1").arg("parent", -12) << "run " << run.parent << " (launched again from it)\n";
  out << QString("%1").arg("started", -12) << app::time_text(run.started) << "\n";
  out << QString("%1").arg("ended", -12) << app::time_text(run.ended) << "\n";
  out << QString("%1").arg("exit code", -12) << (run.exit_code ? QString::number(*run.exit_code) : QString("-"))
      << "\n";
  out << QString("%1").arg("progress", -12) << app::progress_text(run) << "\n";
  out << QString("%1").arg("params", -12) << app::terminal_text(QString::fromStdString(run.params)) << "\n";
  out << "metrics:\n";
  for (const auto& metric : service.metric_briefs(run.id)) {
    out << QString("  %1 %2 points, last %3 at step %4, min %5, max %6\n")
               .arg(app::terminal_text(QString::fromStdString(metric.key)), -20)
               .arg(metric.points)
               .arg(metric.last)
               .arg(metric.last_step)
               .arg(metric.min)
               .arg(metric.max);
  }
  // Its files: checkpoints (with the step they were saved at), exported models, the configuration launched with.
  out << "files:\n";
  for (const auto& file : service.files(run.id)) {
    out << QString("  %1 %2 %3 %4  %5%6\n")
               .arg(QString::fromStdString(file.kind), -11)
               .arg(file.step >= 0 ? QString("step %1").arg(file.step) : QString("-"), -11)
               .arg(app::size_text(file.bytes), 8)
               .arg(app::time_text(file.wall))
               .arg(app::terminal_text(QString::fromStdString(file.path)))
               .arg(file.host.empty() ? QString() : " on " + app::terminal_text(QString::fromStdString(file.host)));
  }
  out << "events:\n";
  for (const auto& event : service.events(run.id)) {
    out << "  " << app::time_text(event.wall) << "  " << app::terminal_text(QString::fromStdString(event.status))
        << (event.detail.empty() ? QString()
                                 : "  " + app::terminal_text(QString::fromStdString(event.detail).split('\n').front()))
        << "\n";
  }
  return 0;
}

int export_run(app::RunService& service, int64_t id, const Arguments& args, QTextStream& out) {
  const QString format = args.value("format").value_or("");
  if (format != "csv" && format != "json") throw UsageError("--format csv or --format json");
  const auto layout = format == "csv" ? app::ExportFormat::csv : app::ExportFormat::json;
  const QStringList keys = args.value("metrics").value_or(QString()).split(',', Qt::SkipEmptyParts);
  if (auto path = args.value("output")) {
    service.export_metrics(id, layout, *path, keys);
  } else {
    out << QString::fromUtf8(service.export_metrics(id, layout, keys));
  }
  return 0;
}

// A Slurm run's settings, from its recorded command line (spur launch --slurm writes the ones in effect there).
int slurm_settings(const history::Run& run, QTextStream& out) {
  app::LaunchRequest request;
  try {
    request = app::LaunchRequest::parse(QString::fromStdString(run.command));
  } catch (const std::invalid_argument&) {
  }
  if (run.target != "slurm" || !request.flags.contains("--slurm"))
    throw UsageError(QString("run %1 was not a Slurm run (spur launch --slurm)").arg(run.id));
  const Arguments flags(request.flags, app::launch_valued_flags(), app::launch_switches());
  app::SlurmRequest settings;
  settings.job_name = flags.value("job_name").value_or(QString());
  settings.partition = flags.value("partition").value_or(QString());
  settings.nodes = static_cast<int>(flags.integer("nodes", 1, 100000).value_or(1));
  settings.ntasks_per_node = static_cast<int>(flags.integer("ntasks_per_node", 1, 100000).value_or(1));
  settings.time = flags.value("time").value_or(QString());
  settings.account = flags.value("account").value_or(QString());
  settings.qos = flags.value("qos").value_or(QString());
  settings.gres = flags.value("gres").value_or(QString());
  settings.extra = app::split_slurm_args(flags.value("slurm_args").value_or(QString()));
  settings.directory = flags.value("slurm_dir").value_or(QString());
  out << app::slurm_yaml(settings);
  return 0;
}

int logs(const app::RunService& service, const history::Run& run, const Arguments& args, QTextStream& out) {
  std::optional<int> rank;
  if (auto r = args.integer("rank", -1, 1'000'000)) rank = static_cast<int>(*r);
  int64_t after = 0;
  const bool remote = run.target != "local";
  auto print = [&] {
    for (const auto& line : service.console(run.id, after, rank)) {
      after = line.id;
      QString label = line.rank >= 0 ? QString("rank%1").arg(line.rank) : QString("launcher");
      if (remote && !line.host.empty()) label = QString::fromStdString(line.host) + " " + label;
      out << "[" << label << "] " << QString::fromStdString(line.text) << "\n";
    }
    out.flush();
  };
  print();
  if (!args.has("follow")) return 0;
  for (;;) {
    const auto now = service.find(run.id);
    const bool over = !now || (app::effective_status(*now) != "running" && app::effective_status(*now) != "queued");
    QThread::msleep(200);
    print();
    if (over) return 0;
  }
}

// `spur runs import PATH`: one line per run folder; 1 when any could not be imported.
int import_runs(app::RunService& service, const Arguments& args, QTextStream& out, QTextStream& err) {
  if (args.positional().size() != 2) {
    throw UsageError(
        "spur runs import PATH [--project P] [--again], or spur runs import mlflow://HOST:PORT[/EXPERIMENT] "
        "[--run RUN_ID] [--project P] [--again]");
  }
  const QString source = args.positional()[1];
  const auto said = [&](const app::ImportedRun& run) {
    (run.error.isEmpty() && run.run != 0 ? out : err) << app::terminal_text(app::import_summary(run)) << "\n";
    out.flush();
    err.flush();
  };
  std::vector<app::ImportedRun> runs;
  if (app::is_mlflow_address(source)) {
    app::MlflowImportOptions options;
    options.project = args.value("project").value_or(QString());
    options.again = args.has("again");
    if (const auto run = args.value("run")) options.run_ids = QStringList{*run};
    runs = service.import_mlflow(source, options, said);
    if (runs.empty()) out << source << ": no active runs\n";
  } else {
    if (args.value("run")) throw UsageError("--run RUN_ID is for an MLflow address (mlflow://HOST:PORT/...)");
    app::TensorBoardImportOptions options;
    options.project = args.value("project").value_or(QString());
    options.again = args.has("again");
    runs = service.import_tensorboard(source, options, said);
  }
  const bool failed = std::any_of(runs.begin(), runs.end(), [](const auto& run) { return !run.error.isEmpty(); });
  return failed ? 1 : 0;
}

// `spur runs serve --stdio`: this machine's history for a client on another (app/runs/history_server.h). Standard
// output carries only the protocol: anything else this process would print there goes to standard error.
int serve(std::string path, const Arguments& args) {
  if (!args.has("stdio")) throw UsageError("spur runs serve --stdio [--history F] (what ssh://HOST/F starts)");
  const QString given = QString::fromStdString(path);
  if (app::HistoryAddress::is_address(given)) {
    throw UsageError("serve answers for a history on this machine, not " + given);
  }
  if (given == "~" || given.startsWith("~/")) path = (QDir::homePath() + given.mid(1)).toStdString();
  ::signal(SIGPIPE, SIG_IGN);  // a client gone is a failed write, not a signal
  const int protocol_out = ::dup(STDOUT_FILENO);
  if (protocol_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    throw app::RunServiceError("cannot set up standard output for serve");
  }
  app::RunService service(path);
  app::HistoryServer server(service, QCoreApplication::applicationVersion());
  const int code = app::serve(server, STDIN_FILENO, protocol_out);
  ::close(protocol_out);
  return code;
}

}  // namespace

int runs_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments,
                         {"history", "format", "metrics", "output", "rank", "project", "status", "tag", "since",
                          "limit", "offset", "ssh_config", "remote_spur", "run"},
                         {"json", "follow", "remove", "force", "help", "slurm", "again", "check", "stdio"});
    if (args.has("help") || args.positional().isEmpty()) {
      out << kUsage;
      return args.has("help") ? 0 : 2;
    }
    std::string path = args.value("history") ? args.value("history")->toStdString() : history::default_history_path();
    const QString action = args.positional().front();
    if (action == "serve") return serve(path, args);
    app::RemoteOptions remote = app::RemoteOptions::from_environment(true);  // ssh may ask on the terminal
    remote.ssh_config = args.value("ssh_config").value_or(remote.ssh_config);
    remote.remote_spur = args.value("remote_spur").value_or(remote.remote_spur);
    remote.notice = [&err](const QString& text) { err << "spur runs: " << text << "\n" << Qt::flush; };
    app::RunService service(path, remote);
    if (action == "import") return import_runs(service, args, out, err);
    if (action == "summarise" || action == "summarize") {
      const int64_t built = service.summarise(
          [&](int64_t done, int64_t total) {
            if (total > 0 && (done % 100 == 0 || done == total)) {
              err << QString("\rspur runs: summarising %1 of %2 series").arg(done).arg(total) << Qt::flush;
            }
            return true;
          },
          args.has("check"));
      err << (built > 0 ? "\n" : "") << QString("spur runs: %1 series summarised\n").arg(built);
      return 0;
    }
    if (action == "rm" || action == "tag" || action == "note" || action == "rename") {
      const int64_t id = run_id(args, 1);
      if (action == "rename") {
        if (args.positional().size() < 3) throw UsageError("spur runs rename ID NAME");
        service.rename(id, args.positional().mid(2).join(' '));
      } else if (action == "rm") {
        service.remove(id, args.has("force"));
        err << "spur runs: deleted run " << id << "\n";
      } else if (action == "tag") {
        if (args.positional().size() != 3) throw UsageError("spur runs tag ID TAG [--remove]");
        service.tag(id, args.positional()[2], args.has("remove"));
      } else {
        if (args.positional().size() < 3) throw UsageError("spur runs note ID TEXT");
        service.set_notes(id, args.positional().mid(2).join(' '));
      }
      return 0;
    }
    if (action == "list") return list(service, args, out, err);
    if (action != "show" && action != "export" && action != "config" && action != "logs") {
      throw UsageError("unknown action '" + action + "'\n" + kUsage);
    }
    const auto run = service.run(run_id(args, 1));
    if (action == "show") return show(service, run, out);
    if (action == "export") return export_run(service, run.id, args, out);
    if (action == "config") {
      if (args.has("slurm")) return slurm_settings(run, out);
      out << service.config(run.id);
      return 0;
    }
    return logs(service, run, args, out);
  } catch (const UsageError& e) {
    err << "spur runs: " << e.what() << "\n";
  } catch (const app::RunServiceError& e) {
    err << "spur runs: " << e.what() << "\n";
  } catch (const history::HistoryError& e) {
    err << "spur runs: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace spur::cli
