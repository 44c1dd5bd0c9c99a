// SPDX-License-Identifier: Apache-2.0
// `spur launch [--config_file F] [flags] PROGRAM [ARGS...]`: Accelerate's launch flags over the configuration in
// effect, then this machine's ranks, supervised. `--dry_run` prints the plan and starts nothing.
#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QTextStream>
#include <QThread>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"
#include "launch/launch_plan.h"
#include "launch/launch_request.h"
#include "launch/secrets.h"
#include "launch/local_launcher.h"
#include "launch/run_recorder.h"
#include "launch/supervisor.h"
#include "launch/ssh_fanout.h"
#include "runs/remote_history.h"
#include "sagemaker/aws_cli.h"
#include "sagemaker/container.h"
#include "setup/launch_target.h"
#include "slurm/slurm_job.h"
#include <spur/core/stream_line.h>
#include <spur/core/zero_stage.h>

namespace spur::cli {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  int port = 29500;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

const char* kUsage =
    "usage: spur launch [--config_file F] [flags] PROGRAM [ARGS...]\n"
    "flags (Accelerate's names; dashes or underscores): --num_processes N (total) --num_machines M\n"
    "  --machine_rank R --main_process_ip IP --main_process_port P --mixed_precision no|fp16|bf16 --cpu\n"
    "  --gpu_ids 0,1 --gradient_accumulation_steps K --num_cpu_threads_per_process T\n"
    "  --use_deepspeed [--zero_stage 1|2|3] | --use_fsdp --fsdp_sharding_strategy FULL_SHARD|SHARD_GRAD_OP|NO_SHARD\n"
    "  | --use_fsdp --fsdp_reshard_after_forward true|false (FSDP2's FULL_SHARD or SHARD_GRAD_OP)\n"
    "  [--fsdp_state_dict_type FULL_STATE_DICT|SHARDED_STATE_DICT (stage 3's checkpoints: gathered, or per rank)]\n"
    "  (ZeRO: optimizer state, with stage 2 gradients too, with stage 3 parameters too, sharded)\n"
    "  --ddp_comm_hook no|fp16|bf16 (DDP's gradient compression, as Accelerate's comm_hook; stages 0-1)\n"
    "  --env NAME=VALUE (repeatable: set for every rank) --dry_run (print the plan)\n"
    "  --run_name NAME --tag T (repeatable) --notes TEXT --parent_run ID (the run's record in the history; the\n"
    "  parent is the run this one is launched again from, as the Studio's Relaunch records it)\n"
    "  --history F (the history to record into; default $SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db)\n"
    "the configuration's target file (F.yaml -> F.spur.yaml, written by the Studio and `spur config`) adds where\n"
    "  the run happens (ssh hosts, a Slurm job) and its launch settings; flags given here win (docs/launch.md)\n"
    "  --grace_period S (SIGTERM to SIGKILL, default 5)\n"
    "  --max_restarts N (after a rank fails, stop the others and start them all again, up to N times; each\n"
    "  attempt gets SPUR_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT; default 0)\n"
    "  --hang_timeout S (when no rank makes progress for S seconds, say where each rank is and stop the run,\n"
    "  exit code 124, or restart it with --max_restarts; in a Slurm job, each node watches its ranks; default off)\n"
    "  --system_metrics_interval S (record each rank's CPU and memory, and each GPU's use, every S seconds as\n"
    "  system/ series; 0: off; default 1)\n"
    "  --interactive (rank 0 reads this terminal's input, for a debugger or a prompt; by default every rank's\n"
    "  standard input is /dev/null)\n"
    "on another machine: --on [user@]host[:port] [--on_dir D] [--detach]: the launch starts there detached (it\n"
    "  outlives this command and the SSH connection; the configuration travels as a file) and is followed through\n"
    "  that machine's history (Ctrl-C stops the run, twice leaves it running); with --slurm, submits from there\n"
    "several machines over SSH: --hosts a,b | --hostfile F (lines 'host slots=N'), [--ssh_config F]\n"
    "  [--remote_spur PATH] [--connect_timeout S]: one `spur launch --machine_rank i` per host\n"
    "a SageMaker configuration submits a training job and follows its logs (Ctrl-C stops it):\n"
    "  [--detach] [--job_name NAME] [--poll_interval S] [--aws_endpoint_url URL]\n"
    "inside a SageMaker container (ENTRYPOINT [\"spur\", \"launch\"]) the program comes from the job\n"
    "a Slurm job (one spur launch per node, started by srun; Ctrl-C cancels it): --slurm [--partition P]\n"
    "  [--nodes N] [--ntasks_per_node K] [--time T] [--account A] [--qos Q] [--gres G] [--slurm_args \"...\"]\n"
    "  [--slurm_dir D (default ./spur-slurm, visible from every node)] [--job_name NAME] [--detach] [--dry_run]\n"
    "  [--slurm_config F (settings file; default $XDG_CONFIG_HOME/spur/slurm.yaml)]\n";

// Accelerate's sharding flags as a ZeRO stage (zero_stage.h has the rule), or none.
std::optional<int> zero_stage_flags(const Arguments& args) {
  const bool deepspeed = args.has("use_deepspeed") || args.value("zero_stage");
  const bool fsdp =
      args.has("use_fsdp") || args.value("fsdp_sharding_strategy") || args.value("fsdp_reshard_after_forward");
  if (deepspeed && fsdp) throw UsageError("give --use_deepspeed (--zero_stage) or --use_fsdp, not both");
  if (deepspeed) return static_cast<int>(args.integer("zero_stage", 0, 3).value_or(kDeepSpeedDefaultStage));
  if (fsdp && args.value("fsdp_reshard_after_forward")) {
    // FSDP2's setting: resharding after forward is FULL_SHARD (stage 3), keeping the parameters SHARD_GRAD_OP.
    const QString reshard = *args.value("fsdp_reshard_after_forward");
    const auto stage = fsdp_reshard_stage(reshard.toStdString());
    if (!stage) throw UsageError("--fsdp_reshard_after_forward " + reshard + ": true or false");
    return stage;
  }
  if (fsdp) {
    const QString strategy = args.value("fsdp_sharding_strategy").value_or("FULL_SHARD");
    const auto stage = fsdp_strategy_stage(strategy.toStdString());
    if (!stage || *stage < 0) {
      throw UsageError("--fsdp_sharding_strategy " + strategy +
                       ": Spur runs FULL_SHARD (ZeRO stage 3), SHARD_GRAD_OP (stage 2) and NO_SHARD (plain data "
                       "parallel); the hybrid strategies are not implemented");
    }
    return stage;
  }
  return std::nullopt;
}

}  // namespace

int launch_command(const QStringList& given) {
  // Output piped into a reader that stops early (`| head -n1`) must not kill the launcher: the run goes on and is
  // recorded with its exit code; writes to the closed pipe fail quietly.
  ::signal(SIGPIPE, SIG_IGN);
  QTextStream out(stdout);
  QTextStream err(stderr);
  std::optional<app::SageMakerContainer> container;
  try {
    // In a SageMaker training container, SageMaker runs the image's `spur launch` with "train": the program,
    // its arguments and the launch flags come from the job's hyperparameters; flags given here still win.
    QStringList arguments = given;
    container = app::detect_sagemaker_container();
    if (container) {
      const Arguments probe(given, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
      QStringList program = probe.positional();
      QStringList flags = given.mid(0, given.size() - program.size());
      if (!flags.isEmpty() && flags.back() == "--") flags.removeLast();
      // SageMaker appends "train" to the image's entry point; with a program in the entry point it is noise.
      if (program.size() > 1 && program.back() == "train") program.removeLast();
      if (program.isEmpty() || program == QStringList{"train"})
        program = QStringList{container->program()} + container->arguments();
      arguments = container->launch_flags() + flags + QStringList{"--"} + program;
    }
    // Spur's target file beside the configuration (setup/launch_target.h): where the run happens and its launch
    // settings, under the flags of this command line. What is recorded is the launch with both.
    // --no_config: the remote half of an SSH fan-out, which gets every setting as a flag. (A target file cannot name
    // another configuration: the path read here is the launch's.)
    const Arguments probe(arguments, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
    const std::string path = probe.value("config_file") ? probe.value("config_file")->toStdString()
                             : probe.has("no_config")   ? std::string()
                                                        : app::config_in_effect();
    std::optional<app::LaunchTarget> target;
    QString target_path;
    if (!container && !probe.has("help") && !path.empty())
      target = app::LaunchTarget::load_for(QString::fromStdString(path));
    // --on HOST (or the target file's on:): the whole launch happens there (detached), this command follows it
    // (cli/launch_on.cpp).
    if (!container && !probe.has("help") && (probe.value("on") || (target && target->value("on")))) {
      return launch_on(arguments, path);
    }
    if (!container && !probe.has("help") && !path.empty()) {
      const QString file = QString::fromStdString(path);
      if (target) {
        target_path = app::LaunchTarget::path_for(file);
        const QStringList& program = probe.positional();
        QStringList flags = arguments.mid(0, arguments.size() - program.size());
        if (!flags.isEmpty() && flags.back() == "--") flags.removeLast();
        arguments = app::merge_launch_flags(*target, flags) + QStringList{"--"} + program;
      }
    }
    const Arguments args(arguments, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
    if (args.has("help")) {
      out << kUsage;
      return 0;
    }
    if (args.positional().isEmpty()) throw UsageError(QString("no program to launch\n") + kUsage);
    {
      // The run's record flags are judged before anything starts or is submitted (a Slurm or SageMaker job).
      history::Run record;
      take_run_flags(args, record);
    }

    std::optional<app::RunConfig> config;
    if (!path.empty()) config = app::RunConfig::load(path);
    if (target && target->where == app::LaunchTarget::Where::SageMaker && !(config && config->sagemaker())) {
      throw app::ConfigError(target_path.toStdString() + ": target: sagemaker, but " + path +
                             " is not a SageMaker configuration (compute_environment: AMAZON_SAGEMAKER)");
    }
    if (config && config->sagemaker() && !container) return sagemaker_launch(*config, args, arguments);
    if (config && config->sagemaker()) config.reset();  // in the job's container: the job already carries it

    app::LaunchOptions options;
    if (auto v = args.integer("num_processes", 1, 1'000'000)) options.num_processes = static_cast<int>(*v);
    if (auto v = args.integer("num_machines", 1, 100'000)) options.num_machines = static_cast<int>(*v);
    if (auto v = args.integer("machine_rank", 0, 100'000)) options.machine_rank = static_cast<int>(*v);
    if (auto v = args.value("main_process_ip")) options.main_process_ip = *v;
    if (auto v = args.integer("main_process_port", 0, 65535)) options.main_process_port = static_cast<int>(*v);
    if (auto v = args.value("mixed_precision")) options.mixed_precision = *v;
    options.cpu = args.has("cpu") || args.has("use_cpu");
    if (auto v = args.value("gpu_ids")) options.gpu_ids = *v;
    if (auto v = args.integer("gradient_accumulation_steps", 1, 1'000'000)) {
      options.gradient_accumulation_steps = static_cast<int>(*v);
    }
    if (auto v = args.integer("num_cpu_threads_per_process", 1, 4096)) {
      options.num_cpu_threads_per_process = static_cast<int>(*v);
    }
    if (const auto stage = zero_stage_flags(args)) options.zero_stage = *stage;
    if (auto v = args.value("fsdp_state_dict_type")) options.state_dict_type = *v;
    if (auto v = args.value("ddp_comm_hook")) options.comm_hook = *v;
    // The remote half of an SSH fan-out gets the run's variables on its standard input, before anything else
    // there: values never travel in an argument list.
    if (args.has("env_on_stdin")) options.environment << app::read_environment_block(STDIN_FILENO, 60000);
    for (const auto& assignment : args.values("env")) {
      options.environment << app::parse_environment_assignment(assignment);
    }
    if (container) container->complete(options);
    app::MachineFacts machine;
    machine.cpu_cores = QThread::idealThreadCount();
    machine.free_port = free_port;
    const QString program = args.positional().front();
    const int grace = static_cast<int>(args.integer("grace_period", 0, 3600).value_or(5));
    const int max_restarts = static_cast<int>(args.integer("max_restarts", 0, 10'000).value_or(0));
    const auto hang_timeout = std::chrono::seconds(args.integer("hang_timeout", 1, 31'536'000).value_or(0));
    const auto system_interval =
        std::chrono::milliseconds(1000 * args.integer("system_metrics_interval", 0, 86'400).value_or(1));

    if (args.has("slurm")) return slurm_launch(config, args, arguments, options, grace);
    for (const char* flag : {"partition", "nodes", "ntasks_per_node", "time", "account", "qos", "gres", "slurm_args",
                             "slurm_dir", "slurm_config"}) {
      if (args.value(flag)) throw UsageError(QString("--%1 is a Slurm setting: add --slurm").arg(flag));
    }

    std::vector<app::Host> hosts;
    if (auto file = args.value("hostfile")) hosts = app::read_hostfile(*file);
    if (auto list = args.value("hosts")) {
      if (!hosts.empty()) throw UsageError("give --hosts or --hostfile, not both");
      hosts = app::parse_host_list(*list);
    }
    if (!hosts.empty()) {
      app::take_hosts(hosts, options, config && config->num_processes() > 0 && config->distributed_type() != "NO");
      // The ranks' metrics come back as record lines through ssh and are recorded here (not without a history:
      // they would fill the terminal). Only lines carrying this launch's key are records (stream_line.h); it
      // travels with the --env values, on each ssh's standard input.
      const QString stream_key = QString::fromStdString(stream_line::new_key());
      if (!args.has("no_history")) options.environment.append(qMakePair(QString("SPUR_TRACKERS"), QString("stream")));
      options.environment.append(qMakePair(QString(stream_line::kKeyVariable), stream_key));
      if (!options.main_process_ip)
        options.main_process_ip = hosts.front().name.mid(hosts.front().name.lastIndexOf('@') + 1);
      machine.resolve_program = false;  // it runs on the hosts
      const auto plan = app::make_plan(config, options, program, args.positional().mid(1), machine);
      app::SshOptions ssh;
      ssh.progress_stream = hang_timeout.count() > 0;
      // The machines' samples come back only to be recorded: not without a history (they would fill the terminal).
      if (!args.has("no_history") && !args.has("dry_run")) {
        ssh.system_interval = static_cast<int>(system_interval.count() / 1000);
        ssh.system_since = history::now_seconds();  // one clock for every attempt's machines
      }
      if (auto v = args.value("ssh_config")) ssh.config_file = *v;
      if (auto v = args.integer("connect_timeout", 1, 600)) ssh.connect_timeout = static_cast<int>(*v);
      ssh.remote_spur = args.value("remote_spur").value_or(QCoreApplication::applicationFilePath());
      ssh.remote_directory = QDir::currentPath();
      app::LaunchPlan fanout = plan;
      fanout.ranks = app::fanout_children(ssh, hosts, plan, options, program, args.positional().mid(1), grace);
      if (args.has("dry_run")) {
        out << QString("%1 process(es) over %2 machine(s) over SSH; rendezvous at %3:%4\n")
                   .arg(plan.world_size)
                   .arg(plan.num_machines)
                   .arg(plan.master_addr)
                   .arg(plan.master_port);
        for (const auto& child : fanout.ranks) {
          out << "[" << child.label << "] " << child.program << " " << child.arguments.join(' ') << "\n";
        }
        for (const auto& [name, value] : options.environment) {
          out << "environment, sent on each ssh's standard input: " << name << "=" << app::shown_value(name, value)
              << "\n";
        }
        return 0;
      }
      app::preflight(ssh, hosts);
      QStringList names;
      for (const auto& host : hosts) names << host.name;
      app::Supervisor supervisor(record_options(args, arguments, "ssh", names.join(','),
                                                app::effective_config(config, plan).to_yaml(), stream_key),
                                 out, err);
      app::SupervisionOptions supervision;
      supervision.stream_key = stream_key;
      supervision.grace = std::chrono::seconds(grace);
      supervision.stdin_mode = app::SupervisionOptions::Stdin::Pipe;  // its closing stops the remote ranks
      supervision.stop_orphans = false;  // ssh's ControlPersist master outlives a run by design
      supervision.hang_timeout = hang_timeout;
      supervision.remote_children = true;
      // Each attempt's remote launchers get the attempt's number through --env (ssh carries no environment).
      const auto result = supervisor.run(
          [&](int attempt) {
            auto attempt_options = options;
            attempt_options.environment.append(qMakePair(QString("SPUR_RESTART_COUNT"), QString::number(attempt)));
            attempt_options.environment.append(
                qMakePair(QString("TORCHELASTIC_RESTART_COUNT"), QString::number(attempt)));
            // Each attempt rendezvous on its own port: the last attempt's remote ranks may still be stopping.
            app::LaunchPlan attempt_plan = plan;
            attempt_plan.master_port =
                plan.master_port + attempt <= 65535 ? plan.master_port + attempt : 1024 + attempt;
            attempt_plan.ranks = app::fanout_children(ssh, hosts, attempt_plan, attempt_options, program,
                                                      args.positional().mid(1), grace);
            return attempt_plan;
          },
          supervision, max_restarts);
      auto failure = result.failure;
      if (result.code != 0 && !result.stopped) {
        // A rank's collective failing says only that a peer went quiet: the machines that no longer answer are
        // named as the likely cause.
        const QString lost = app::unreachable_hosts(ssh, hosts);
        if (!lost.isEmpty()) {
          supervisor.say(
              "spur launch: after the failure these machines no longer answer over SSH (down, or their network cut), "
              "the likely cause:\n" +
              lost);
          failure = "machines unreachable:\n" + lost + "\n" + failure;
        }
      }
      return supervisor.finish(result.code, result.stopped, failure);
    }

    auto plan = app::make_plan(config, options, program, args.positional().mid(1), machine);
    if (max_restarts > 0 && plan.num_machines > 1) {
      throw UsageError(QString("--max_restarts %1 needs every machine under one launcher, to stop and start them "
                               "together: give the machines with --hosts or --hostfile")
                           .arg(max_restarts));
    }
    // A port picked here is picked again for each restart: a new store never meets an old one's connections.
    const bool own_port =
        !options.main_process_port && !(config && config->main_process_port() > 0) && plan.num_machines == 1;

    if (args.has("dry_run")) {
      if (!path.empty()) out << "configuration: " << QString::fromStdString(path) << "\n";
      if (target) out << "launch settings: " << target_path << " (" << target->describe() << ")\n";
      out << plan.describe();
      return 0;
    }
    for (const auto& note : plan.notes) err << "spur launch: note: " << note << "\n";
    err.flush();
    app::SupervisionOptions supervision;
    supervision.grace = std::chrono::seconds(grace);
    supervision.exit_on_stdin_eof = args.has("exit_on_stdin_eof");
    // One machine of an SSH or Slurm run: its own records (progress, system samples) carry the launch's key.
    for (const auto& [name, value] : options.environment) {
      if (name == stream_line::kKeyVariable) supervision.stream_key = value;
    }
    supervision.hang_timeout = hang_timeout;
    supervision.progress_stream = args.has("progress_stream");
    if (args.has("interactive")) {
      if (supervision.exit_on_stdin_eof)
        throw app::LaunchError("--interactive and --exit_on_stdin_eof both want stdin");
      supervision.stdin_mode = app::SupervisionOptions::Stdin::Rank0;
    }
    auto recording = record_options(args, arguments, "local", plan.num_machines > 1 ? plan.master_addr : QString(),
                                    app::effective_config(config, plan).to_yaml());
    if (container) recording.record.reset();  // the submitting machine records
    if (recording.record) {
      // What the run costs the machine, as system/ series: each rank's CPU and memory, each GPU's use.
      supervision.sample_interval = system_interval;
    } else if (args.has("system_stream")) {
      // One machine of an SSH or Slurm run (the launcher that records is elsewhere): the samples go back as the
      // trackers' metric records on this launcher's output, which that launcher records like any rank's. Steps
      // count seconds from --system_since (the run's start on the recording machine, the same for every attempt
      // of a restarted run), else from this launcher's start.
      supervision.sample_interval = system_interval;
      const double since = args.value("system_since") ? args.value("system_since")->toDouble() : history::now_seconds();
      supervision.on_sample = app::samples_on_output(out, supervision.stream_key, plan.machine_rank, since);
    }
    app::Supervisor supervisor(std::move(recording), out, err);
    const auto result = supervisor.run(
        [&](int attempt) {
          if (attempt > 0 && own_port) {
            plan.master_port = free_port();
            for (auto& rank : plan.ranks) rank.environment.insert("MASTER_PORT", QString::number(plan.master_port));
          }
          return plan;
        },
        supervision, max_restarts);
    const int code = supervisor.finish(result.code, result.stopped, result.failure);
    if (code != 0 && container) {
      container->report_failure(result.failure.isEmpty() ? QString("spur launch: exit code %1").arg(code)
                                                         : result.failure);
    }
    return code;
  } catch (const app::AwsError& e) {
    err << "spur launch: " << e.what() << "\n";
    return 1;
  } catch (const app::SlurmError& e) {  // Slurm missing, or refusing the job
    err << "spur launch: " << e.what() << "\n";
    return 1;
  } catch (const std::runtime_error& e) {  // ConfigError, LaunchError, UsageError: bad input, named
    err << "spur launch: " << e.what() << "\n";
    if (container) container->report_failure(QString("spur launch: ") + e.what());
  }
  return 2;
}

app::SupervisorOptions record_options(const Arguments& args, const QStringList& command, const QString& target,
                                      const QString& hosts, const std::string& config_yaml, const QString& stream_key,
                                      const QString& default_name) {
  app::SupervisorOptions options;
  options.stream_key = stream_key;
  if (args.has("no_history") || args.has("dry_run")) return options;
  if (const auto history = args.value("history")) options.history_path = history->toStdString();
  std::string path = options.history_path;
  if (path.empty()) path = qEnvironmentVariable("SPUR_HISTORY").toStdString();
  if (app::HistoryAddress::is_address(QString::fromStdString(path))) {
    throw UsageError("spur launch records into a history on this machine, not " + QString::fromStdString(path) +
                     " (SPUR_HISTORY or --history): give a file here, or launch on that machine (ssh HOST spur "
                     "launch ...) and read its history with spur runs --history " +
                     QString::fromStdString(path));
  }
  history::Run run;
  take_run_flags(args, run);
  if (run.name.empty()) run.name = default_name.toStdString();
  run.target = target.toStdString();
  run.hosts = hosts.toStdString();
  run.config = config_yaml;
  options.record = run;
  options.command = command;
  // The configuration launched with, listed with the run's files (the Studio's overview opens its folder).
  const QString config = args.value("config_file").value_or(QString::fromStdString(app::config_in_effect()));
  if (!config.isEmpty() && QFileInfo(config).isFile()) {
    history::RunFile file;
    file.kind = "config";
    file.path = QFileInfo(config).absoluteFilePath().toStdString();
    file.bytes = QFileInfo(config).size();
    file.host = app::local_host_name().toStdString();
    options.files.push_back(file);
  }
  return options;
}

void take_run_flags(const Arguments& args, history::Run& run) {
  if (const auto name = args.value("run_name")) run.name = name->toStdString();
  for (const QString& tag : args.values("tag")) {
    if (tag.trimmed().isEmpty()) throw UsageError("--tag needs a name, not an empty one");
    run.tags.push_back(tag.trimmed().toStdString());
  }
  if (const auto notes = args.value("notes")) run.notes = notes->toStdString();
  if (const auto parent = args.integer("parent_run", 1, std::numeric_limits<qint64>::max())) run.parent = *parent;
}

}  // namespace spur::cli
