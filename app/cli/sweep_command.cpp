// SPDX-License-Identifier: Apache-2.0
// `spur sweep run|list|show|stop|resume`: many runs from one W&B sweep file (app/sweep/, docs/sweeps.md).
#include <signal.h>

#include <limits>

#include <QCoreApplication>
#include <QDateTime>
#include <QSysInfo>
#include <QTextStream>

#include <spur/history/reader.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "launch/secrets.h"
#include "sweep/sweep_runner.h"
#include "sweep/sweep_spec.h"

namespace spur::cli {
namespace {

const char* kUsage =
    "usage: spur sweep <action>\n"
    "  run FILE [--parallel N] [--count N] [--seed S] [--dry_run] [-- LAUNCH FLAGS...]\n"
    "                     expand a W&B sweep file (method grid or random) and launch its runs, each as\n"
    "                     spur launch [LAUNCH FLAGS] COMMAND (--config_file, --num_processes, --on, --slurm ...)\n"
    "  list               the sweeps, newest first\n"
    "  show ID            a sweep's runs: status, run id, parameters and the metric\n"
    "  stop ID            stop a running sweep and the runs it started (as Ctrl-C does)\n"
    "  resume ID          launch what a stopped sweep has not run\n";

QString point_text(const app::SweepPoint& point) {
  QString out;
  for (const auto& [name, value] : point) {
    out += (out.isEmpty() ? "" : " ") + QString::fromStdString(name + "=" + app::sweep_value_text(value));
  }
  return out;
}

int run(const QStringList& arguments, QTextStream& out, QTextStream& err) {
  // Everything after "--" goes to each `spur launch`.
  QStringList own = arguments, launch_flags;
  if (const auto dash = arguments.indexOf("--"); dash >= 0) {
    own = arguments.mid(0, dash);
    launch_flags = arguments.mid(dash + 1);
  }
  const Arguments args(own, {"parallel", "count", "seed"}, {"dry_run"});
  if (args.positional().size() != 1) throw UsageError("spur sweep run takes one sweep file (spur sweep --help)");
  const auto spec = app::SweepSpec::read(args.positional().front().toStdString());
  const int parallel = static_cast<int>(args.integer("parallel", 1, 256).value_or(1));
  const auto seed = static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<qint64>::max()).value_or(0));
  const auto points = spec.points(args.integer("count", 1, 100000), seed);
  if (args.has("dry_run")) {
    int i = 0;
    for (const auto& point : points) {
      QStringList words;
      for (const auto& word : spec.command_for(point)) words << QString::fromStdString(word);
      out << ++i << "\t" << words.join(' ') << "\n";
    }
    return 0;
  }
  app::SweepState state;
  state.id = app::new_sweep_id();
  state.name = spec.name;
  state.file = spec.file;
  state.text = spec.text;
  state.method = spec.method;
  state.seed = seed;
  state.parallel = parallel;
  state.launch_flags = launch_flags;
  state.created = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000;
  int index = 0;
  for (const auto& point : points) {
    app::SweepRunState run;
    run.index = ++index;
    run.point = point;
    state.runs.push_back(std::move(run));
  }
  out << "spur sweep " << QString::fromStdString(state.id) << " (" << QString::fromStdString(spec.name)
      << "): " << points.size() << " run(s) by " << QString::fromStdString(spec.method) << ", " << parallel
      << " at a time\n";
  return app::run_sweep(state, spec, QCoreApplication::applicationFilePath(), out, err);
}

int list(QTextStream& out, QTextStream& err) {
  std::vector<std::string> problems;
  const auto sweeps = app::list_sweeps(&problems);
  for (const auto& problem : problems) err << "spur sweep list: left out: " << QString::fromStdString(problem) << "\n";
  if (sweeps.empty()) {
    out << "no sweeps yet (spur sweep run FILE starts one)\n";
    return 0;
  }
  out << QString("%1  %2  %3  %4  %5  %6\n")
             .arg("ID", -8)
             .arg("NAME", -20)
             .arg("METHOD", -6)
             .arg("STATUS", -8)
             .arg("RUNS", -22)
             .arg("CREATED");
  for (const auto& s : sweeps) {
    const QString status =
        QString::fromStdString(s.status == "running" && !app::controller_alive(s) ? "stopped" : s.status);
    const QString runs = QString("%1/%2 done, %3 failed")
                             .arg(s.count("finished") + s.count("early_terminated"))
                             .arg(s.runs.size())
                             .arg(s.count("failed"));
    out << QString("%1  %2  %3  %4  %5  %6\n")
               .arg(QString::fromStdString(s.id), -8)
               .arg(QString::fromStdString(s.name), -20)
               .arg(QString::fromStdString(s.method), -6)
               .arg(status, -8)
               .arg(runs, -22)
               .arg(QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(s.created * 1000)).toString("yyyy-MM-dd hh:mm"));
  }
  return 0;
}

int show(const std::string& id, QTextStream& out) {
  const auto s = app::load_sweep(id);
  const auto spec = app::SweepSpec::parse(s.text, s.file);
  out << "sweep     " << QString::fromStdString(s.id) << " (" << QString::fromStdString(s.name) << ")\n"
      << "file      " << QString::fromStdString(s.file) << "\n"
      << "method    " << QString::fromStdString(s.method)
      << (s.method == "random" ? ", seed " + QString::number(s.seed) : "") << ", " << s.parallel << " at a time\n"
      << "status    "
      << QString::fromStdString(s.status == "running" && !app::controller_alive(s) ? "stopped" : s.status) << "\n";
  // A secret given as --env NAME=VALUE is not printed (the record keeps it, 0600, for resume).
  if (!s.launch_flags.isEmpty()) out << "launch    " << app::redact_secrets(s.launch_flags).join(' ') << "\n";
  if (!spec.metric_name.empty()) {
    out << "metric    " << QString::fromStdString(spec.metric_name) << " (" << QString::fromStdString(spec.metric_goal)
        << ")\n";
  }
  std::optional<history::HistoryReader> reader;
  try {
    reader.emplace();
  } catch (const std::exception&) {
  }
  const bool maximize = spec.metric_goal == "maximize";
  int best_index = 0;
  double best = 0;
  QStringList lines;
  for (const auto& run : s.runs) {
    QString metric = "-";
    if (reader && run.run_id > 0 && !spec.metric_name.empty()) {
      const auto points = reader->series(run.run_id, spec.metric_name);
      if (!points.empty()) {
        const double last = points.back().value;
        metric = QString::number(last, 'g', 6);
        // The best of the runs that ended well: a failed run's last value is not a result.
        const bool result = run.status == "finished" || run.status == "early_terminated";
        if (result && (best_index == 0 || (maximize ? last > best : last < best))) {
          best = last;
          best_index = run.index;
        }
      }
    }
    lines << QString("%1  %2  %3  %4  %5")
                 .arg(run.index, 4)
                 .arg(QString::fromStdString(run.status), -16)
                 .arg(run.run_id > 0 ? QString::number(run.run_id) : "-", 6)
                 .arg(metric, 12)
                 .arg(point_text(run.point));
  }
  out << QString("%1  %2  %3  %4  %5\n")
             .arg("#", 4)
             .arg("STATUS", -16)
             .arg("RUN", 6)
             .arg(spec.metric_name.empty() ? QString("METRIC") : QString::fromStdString(spec.metric_name).right(12), 12)
             .arg("PARAMETERS");
  for (const auto& line : lines) out << line << "\n";
  if (best_index > 0) out << "best      run " << best_index << " (" << QString::number(best, 'g', 6) << ")\n";
  return 0;
}

int stop(const std::string& id, QTextStream& out) {
  auto s = app::load_sweep(id);
  if (app::controller_alive(s)) {
    ::kill(static_cast<pid_t>(s.pid), SIGINT);
    out << "spur sweep " << QString::fromStdString(s.id) << ": stopping (its controller, pid " << s.pid
        << ", stops the runs it started)\n";
    return 0;
  }
  if (s.status == "running") {
    if (!s.host.empty() && s.host != QSysInfo::machineHostName().toStdString()) {
      throw UsageError(QString::fromStdString("sweep " + s.id + " runs on " + s.host + ": stop it there"));
    }
    for (auto& run : s.runs) {
      if (run.status == "running") run.status = "stopped";
    }
    s.status = "stopped";
    s.pid = 0;
    app::save_sweep(s);
  }
  out << "spur sweep " << QString::fromStdString(s.id) << " is not running (" << QString::fromStdString(s.status)
      << ")\n";
  return 0;
}

int resume(const std::string& id, QTextStream& out, QTextStream& err) {
  auto s = app::load_sweep(id);
  if (app::controller_alive(s)) {
    throw UsageError(QString::fromStdString("sweep " + s.id + " is still running (pid " + std::to_string(s.pid) + ")"));
  }
  const auto spec = app::SweepSpec::parse(s.text, s.file);
  int again = 0;
  for (auto& run : s.runs) {
    if (run.status == "running" || run.status == "stopped") run.status = "pending";
    if (run.status == "pending") ++again;
  }
  if (again == 0) {
    out << "spur sweep " << QString::fromStdString(s.id) << ": every run has run (" << QString::fromStdString(s.status)
        << ")\n";
    return 0;
  }
  out << "spur sweep " << QString::fromStdString(s.id) << ": resuming " << again << " run(s), " << s.parallel
      << " at a time\n";
  return app::run_sweep(s, spec, QCoreApplication::applicationFilePath(), out, err);
}

}  // namespace

int sweep_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  if (arguments.isEmpty() || arguments.front() == "--help" || arguments.front() == "-h") {
    out << kUsage;
    return arguments.isEmpty() ? 2 : 0;
  }
  const QString& action = arguments.front();
  const QStringList rest = arguments.mid(1);
  try {
    if (action == "run") return run(rest, out, err);
    if (action == "list") return list(out, err);
    if (action == "show" || action == "stop" || action == "resume") {
      if (rest.size() != 1) throw UsageError("spur sweep " + action + " takes a sweep id (spur sweep list)");
      const std::string id = rest.front().toStdString();
      if (action == "show") return show(id, out);
      if (action == "stop") return stop(id, out);
      return resume(id, out, err);
    }
    throw UsageError("unknown action '" + action + "'\n" + kUsage);
  } catch (const app::SweepError& e) {
    err << "spur sweep: " << e.what() << "\n";
    return 2;
  } catch (const UsageError& e) {
    err << "spur sweep: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "spur sweep " << action << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace spur::cli
