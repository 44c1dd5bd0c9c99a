// SPDX-License-Identifier: Apache-2.0
// `spur launch --slurm ...`: writes the sbatch script (slurm/slurm_job.h), submits it and follows the job like a
// SageMaker job; `spur slurm follow|stop|describe JOB` for a job submitted with --detach (or from elsewhere).
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSet>
#include <QTextStream>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"
#include "launch/launch_plan.h"
#include "launch/launch_request.h"
#include "launch/secrets.h"
#include "launch/ssh_fanout.h"
#include "launch/supervisor.h"
#include <spur/core/stream_line.h>
#include "slurm/slurm_job.h"

namespace spur::cli {
namespace {

const char* kUsage =
    "usage: spur slurm follow|stop|describe JOB\n"
    "  follow    print the job's state changes and every node's output until it ends (Ctrl-C cancels it)\n"
    "  stop      cancel the job (scancel)\n"
    "  describe  the job's state, nodes, exit code, times and Spur's directory for it\n"
    "Slurm's own commands (sbatch, squeue, scontrol, scancel) run with your SLURM_CONF; SPUR_SLURM_BIN names\n"
    "the directory that holds them when they are not on PATH.\n";

// Spur's directory of a job it submitted: where the batch output goes.
QString job_directory(const std::map<QString, QString>& fields, const QString& job) {
  const auto out = fields.find("StdOut");
  if (out == fields.end())
    throw app::SlurmError("job " + job + " is not known to Slurm (any more): scontrol has no record of it");
  QString dir = QFileInfo(out->second).absolutePath();
  if (!QFileInfo::exists(dir + "/job.sh")) {
    throw app::SlurmError("job " + job + " was not submitted by spur launch --slurm (no job.sh beside its output " +
                          out->second + ")");
  }
  return dir;
}

}  // namespace

int slurm_launch(const std::optional<app::RunConfig>& config, const Arguments& args, const QStringList& given,
                 app::LaunchOptions options, int grace) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  for (const char* elsewhere : {"hosts", "hostfile", "machine_rank", "main_process_ip"}) {
    if (args.value(elsewhere))
      throw UsageError(QString("--slurm and --%1 do not go together: Slurm chooses the nodes").arg(elsewhere));
  }
  // Flags win over Spur's Slurm settings file, which wins over the Accelerate configuration's machine counts.
  app::SlurmRequest in_file;
  in_file.nodes = 0;  // 0: not in the file
  in_file.ntasks_per_node = 0;
  const QString slurm_file = args.value("slurm_config").value_or(app::default_slurm_file());
  if (args.value("slurm_config") && !QFileInfo::exists(slurm_file))
    throw app::SlurmError("--slurm_config " + slurm_file + ": no such file");
  const app::SlurmRequest settings = app::read_slurm_file(slurm_file, in_file);
  app::SlurmRequest request;
  const QString program = args.positional().front();
  request.job_name =
      args.value("job_name")
          .value_or(!settings.job_name.isEmpty() ? settings.job_name
                                                 : "spur-" + QFileInfo(program).fileName().replace(
                                                                 QRegularExpression("[^A-Za-z0-9_.:+-]"), "_"));
  request.partition = args.value("partition").value_or(settings.partition);
  request.time = args.value("time").value_or(settings.time);
  request.account = args.value("account").value_or(settings.account);
  request.qos = args.value("qos").value_or(settings.qos);
  request.gres = args.value("gres").value_or(settings.gres);
  request.extra = settings.extra;
  if (auto extra = args.value("slurm_args")) request.extra = app::split_slurm_args(*extra);
  request.nodes = static_cast<int>(
      args.integer("nodes", 1, 100000)
          .value_or(settings.nodes > 0 ? settings.nodes
                                       : options.num_machines.value_or(config ? config->num_machines() : 1)));
  if (options.num_machines && *options.num_machines != request.nodes) {
    throw UsageError(QString("--nodes %1 but --num_machines %2").arg(request.nodes).arg(*options.num_machines));
  }
  int per_node = static_cast<int>(args.integer("ntasks_per_node", 1, 100000).value_or(settings.ntasks_per_node));
  if (per_node == 0) {
    const int total =
        options.num_processes.value_or(config && config->num_processes() > 0 ? config->num_processes() : request.nodes);
    if (total % request.nodes != 0) {
      throw UsageError(QString("%1 processes do not split evenly over %2 nodes: give --ntasks_per_node")
                           .arg(total)
                           .arg(request.nodes));
    }
    per_node = total / request.nodes;
  } else if (options.num_processes && *options.num_processes != per_node * request.nodes) {
    throw UsageError(QString("--num_processes %1 but --nodes %2 x --ntasks_per_node %3")
                         .arg(*options.num_processes)
                         .arg(request.nodes)
                         .arg(per_node));
  }
  request.ntasks_per_node = per_node;
  const QString stamp = QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss-zzz");
  const QString slurm_dir =
      args.value("slurm_dir").value_or(settings.directory.isEmpty() ? QString("spur-slurm") : settings.directory);
  request.directory =
      QDir::cleanPath(QDir(QDir::currentPath()).absoluteFilePath(slurm_dir + "/" + request.job_name + "-" + stamp));
  app::check_request(request);

  options.num_processes = request.nodes * per_node;
  options.num_machines = request.nodes;
  options.machine_rank = 0;
  options.main_process_ip = "@MASTER_ADDR@";
  const bool port_given = options.main_process_port.has_value() || (config && config->main_process_port() > 0);
  if (!port_given) options.main_process_port = 29500;  // replaced in the script by one derived from the job id
  // The ranks' metrics come back through the nodes' output files as "@spur" lines.
  options.environment.append(qMakePair(QString("SPUR_TRACKERS"), QString("stream")));
  // Only lines carrying this launch's key are records (stream_line.h): a rank's other output is console text. It
  // travels in the job's private environment file, as the --env values do.
  const QString stream_key = QString::fromStdString(stream_line::new_key());
  options.environment.append(qMakePair(QString(stream_line::kKeyVariable), stream_key));
  app::MachineFacts machine;
  machine.resolve_program = false;  // it runs on the nodes
  const auto plan = app::make_plan(config, options, program, args.positional().mid(1), machine);
  QStringList node = app::machine_launch_arguments(
      args.value("remote_spur").value_or(QCoreApplication::applicationFilePath()), plan, options, program,
      args.positional().mid(1), grace, "@MACHINE_RANK@", "@MASTER_ADDR@", false, app::EnvironmentPassing::by_name,
      static_cast<int>(args.integer("system_metrics_interval", 0, 86'400).value_or(1)));
  node.removeAt(node.indexOf("--exit_on_stdin_eof"));  // srun gives the tasks /dev/null: no connection to watch
  if (!port_given) node[node.indexOf("--main_process_port") + 1] = "@MASTER_PORT@";
  // Each node's launcher watches its own ranks: when none of them progresses for that long (a stuck rank there, or
  // all of them waiting in a collective for one elsewhere) it says where each is and ends with 124, srun stops the
  // other nodes, and the job's code is that 124.
  if (const auto hang = args.integer("hang_timeout", 1, 31'536'000)) {
    node.insert(node.indexOf("--"), "--hang_timeout");
    node.insert(node.indexOf("--"), QString::number(*hang));
  }
  const int max_restarts = static_cast<int>(args.integer("max_restarts", 0, 10000).value_or(0));
  const QString script = app::sbatch_script(request, node, max_restarts);

  if (args.has("dry_run")) {
    out << "Slurm job " << request.job_name << ": " << request.nodes << " node(s) x " << per_node
        << " rank(s); the sbatch script (written to " << request.directory << "/job.sh):\n"
        << script;
    if (!options.environment.isEmpty()) {
      out << "and the environment job.sh exports, from " << request.directory
          << "/env (0600, removed once the job reads it):\n";
      for (const auto& [name, value] : options.environment)
        out << "  " << name << "=" << app::shown_value(name, value) << "\n";
    }
    return 0;
  }
  app::SlurmCli slurm;
  slurm.program("sbatch");  // named before anything is written
  // The env file holds the ranks' --env values and the job's output can hold anything a rank prints: the job's own
  // folder is the user's only (0700, made here and nowhere else: a second launch in the same millisecond fails
  // rather than share it), and so are the script and all the nodes write into it. The folders above it (a shared
  // --slurm_dir) follow the umask, so that a team can share them.
  const QString parent = QFileInfo(request.directory).absolutePath();
  if (!QDir().mkpath(parent)) throw app::SlurmError("cannot make the folder " + parent);
  if (!QDir().mkdir(request.directory)) {
    throw app::SlurmError("cannot make the job's folder " + request.directory +
                          (QFileInfo::exists(request.directory) ? ": it exists already" : ""));
  }
  QFile::setPermissions(request.directory, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
  const QString script_path = request.directory + "/job.sh";
  try {
    app::write_private_file(script_path.toStdString(), script.toStdString(), true);
    if (!options.environment.isEmpty()) {
      app::write_private_file((request.directory + "/env").toStdString(),
                              app::environment_file(options.environment).toStdString(), false);
    }
  } catch (const app::ConfigError& e) {
    throw app::SlurmError(e.what());
  }
  const QString job = app::submit(slurm, script_path);
  err << "spur launch: submitted Slurm job " << job << " (" << request.job_name << ", " << request.nodes
      << " node(s) x " << per_node << " rank(s)); files in " << request.directory << "\n";
  if (args.has("detach")) {
    out << job << "\n";
    err << "spur launch: follow it with `spur slurm follow " << job << "`, cancel it with `spur slurm stop " << job
        << "`\n";
    return 0;
  }
  err.flush();
  // The settings in effect (the file's too) go into the recorded command, so a relaunch asks Slurm for the same
  // and `spur runs config ID --slurm` gives them back.
  // The user's own Slurm flags (and --slurm_config: the file may be gone by then) give way to these.
  static const QSet<QString> slurm_valued{"partition", "nodes", "ntasks_per_node", "time",      "account",
                                          "qos",       "gres",  "slurm_args",      "slurm_dir", "slurm_config",
                                          "job_name"};
  const qsizetype flag_words = given.size() - args.positional().size();
  QStringList recorded;
  for (qsizetype i = 0; i < given.size(); ++i) {
    const QString& word = given[i];
    if (i < flag_words && word.startsWith("--")) {
      const QString name = word.mid(2).section('=', 0, 0).replace('-', '_');
      if (slurm_valued.contains(name)) {
        if (!word.contains('=')) ++i;  // its value
        continue;
      }
    }
    recorded << word;
  }
  const QStringList effective = app::slurm_flags(request) + QStringList{"--slurm_dir", QDir(slurm_dir).absolutePath()};
  const qsizetype at = recorded.indexOf("--slurm") + 1;
  for (qsizetype i = 0; i < effective.size(); ++i) recorded.insert(at + i, effective[i]);
  auto recording =
      record_options(args, recorded, "slurm", QString("job %1: %2 x %3").arg(job).arg(request.nodes).arg(per_node),
                     app::effective_config(config, plan).to_yaml(), stream_key, request.job_name);
  recording.hold_signals = false;  // the follower counts them (launch/signals.h)
  app::Supervisor supervisor(std::move(recording), out, err);
  app::SlurmFollowOptions follow;
  follow.who = "spur launch";
  follow.on_line = supervisor.line_hook();
  follow.after_poll = supervisor.poll_hook();
  app::SlurmFollower follower(slurm, job, request.directory, follow, out, err);
  const int code = follower.run();
  return supervisor.finish(code, follower.outcome().status == "stopped", follower.outcome().detail);
}

int slurm_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments, {}, {"help"});
    if (args.has("help") || args.positional().size() != 2) {
      out << kUsage;
      return args.has("help") ? 0 : 2;
    }
    const QString action = args.positional()[0];
    const QString job = args.positional()[1];
    // A job id as Slurm writes them (1234, an array task 1234_5, a component 1234+1): anything else could be an
    // option of scancel's or scontrol's ("--me" cancels every job of the user's).
    static const QRegularExpression job_id(R"(^[0-9]+([_+][0-9]+)?$)");
    if (!job_id.match(job).hasMatch()) {
      throw UsageError("'" + job + "' is not a Slurm job id (a number, as sbatch printed it: 1234, 1234_5)");
    }
    app::SlurmCli slurm;
    if (action == "stop") {
      slurm.run("scancel", {job});
      err << "spur slurm: cancelling job " << job << "\n";
      return 0;
    }
    const auto fields = app::job_fields(slurm, job);
    if (action == "describe") {
      if (fields.empty()) throw app::SlurmError("job " + job + " is not known to Slurm (any more)");
      for (const char* key : {"JobId", "JobName", "JobState", "Reason", "Partition", "NumNodes", "NumTasks", "NodeList",
                              "ExitCode", "SubmitTime", "StartTime", "EndTime", "TimeLimit", "StdOut"}) {
        if (fields.contains(key)) out << key << ": " << fields.at(key) << "\n";
      }
      return 0;
    }
    if (action == "follow") {
      app::SlurmFollowOptions follow;
      follow.who = "spur slurm";
      app::SlurmFollower follower(slurm, job, job_directory(fields, job), follow, out, err);
      return follower.run();
    }
    throw UsageError("unknown action '" + action + "'\n" + kUsage);
  } catch (const UsageError& e) {
    err << "spur slurm: " << e.what() << "\n";
    return 2;
  } catch (const std::runtime_error& e) {
    err << "spur slurm: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace spur::cli
