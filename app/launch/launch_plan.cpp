// SPDX-License-Identifier: Apache-2.0
// Turning configuration + flags into ranks and environments: torchrun's variables (so programs written for
// torchrun run unchanged) plus Spur's own, and Accelerate's rules for the totals (num_processes is the total
// over all machines; a machine runs num_processes / num_machines of them).
#include "launch/launch_plan.h"

#include "launch/secrets.h"
#include "launch/launch_request.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include "launch/byte_text.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>

#include <spur/core/comm_hook.h>
#include <spur/core/zero_stage.h>

namespace spur::app {

LaunchPlan make_plan(const std::optional<RunConfig>& config, const LaunchOptions& options, const QString& program,
                     const QStringList& arguments, const MachineFacts& machine) {
  if (program.isEmpty()) throw LaunchError("no program to launch: spur launch [flags] PROGRAM [ARGS...]");
  if (config && config->sagemaker()) {
    throw LaunchError(
        "the configuration is for Amazon SageMaker; `spur launch` on this machine runs local "
        "configurations (compute_environment: LOCAL_MACHINE)");
  }
  LaunchPlan plan;
  if (config)
    plan.notes = [&] {
      QStringList notes;
      for (const auto& note : config->unsupported()) notes << QString::fromStdString(note);
      return notes;
    }();

  // Totals: flags over the file; a file with distributed_type NO means one process.
  int total = options.num_processes.value_or(config ? config->num_processes() : -1);
  if (!options.num_processes && config && config->distributed_type() == "NO") total = 1;
  if (total < 1) total = 1;
  plan.num_machines = options.num_machines.value_or(config ? config->num_machines() : 1);
  plan.machine_rank = options.machine_rank.value_or(config ? config->machine_rank() : 0);
  if (plan.num_machines < 1) throw LaunchError("--num_machines must be at least 1");
  if (plan.machine_rank < 0 || plan.machine_rank >= plan.num_machines) {
    throw LaunchError(QString("--machine_rank %1 is not one of the %2 machines (0 to %3)")
                          .arg(plan.machine_rank)
                          .arg(plan.num_machines)
                          .arg(plan.num_machines - 1));
  }
  if (total / plan.num_machines > kMaxProcessesPerMachine) {
    throw LaunchError(QString("num_processes %1 over %2 machine(s) is %3 processes on each: one machine runs at most "
                              "%4 (give --num_machines the machines they run on)")
                          .arg(total)
                          .arg(plan.num_machines)
                          .arg(total / plan.num_machines)
                          .arg(kMaxProcessesPerMachine));
  }
  if (total % plan.num_machines != 0) {
    throw LaunchError(QString("num_processes (%1) is the total over num_machines (%2): it must be a multiple of it "
                              "(e.g. %3 for %4 per machine)")
                          .arg(total)
                          .arg(plan.num_machines)
                          .arg(plan.num_machines * std::max(1, total / plan.num_machines))
                          .arg(std::max(1, total / plan.num_machines)));
  }
  plan.world_size = total;
  plan.local_world_size = total / plan.num_machines;

  // Rendezvous: one machine talks to itself on loopback; several need the main machine's address.
  const QString ip = options.main_process_ip.value_or(config ? QString::fromStdString(config->main_process_ip()) : "");
  if (plan.num_machines > 1 && ip.isEmpty()) {
    throw LaunchError(QString("%1 machines need the main machine's address: --main_process_ip (or "
                              "main_process_ip in the configuration)")
                          .arg(plan.num_machines));
  }
  plan.master_addr = ip.isEmpty() ? "127.0.0.1" : ip;
  int port = options.main_process_port.value_or(config ? config->main_process_port() : -1);
  if (port > 65535) throw LaunchError(QString("--main_process_port %1 is not a TCP port (0 to 65535)").arg(port));
  if (port <= 0) {
    if (plan.num_machines > 1) {
      // The machines must agree without talking first: Accelerate's default.
      port = 29500;
    } else {
      port = machine.free_port ? machine.free_port() : 29500;
    }
  }
  plan.master_port = port;

  plan.mixed_precision =
      options.mixed_precision.value_or(config ? QString::fromStdString(config->mixed_precision()) : "no");
  if (plan.mixed_precision != "no" && plan.mixed_precision != "fp16" && plan.mixed_precision != "bf16") {
    throw LaunchError("--mixed_precision " + plan.mixed_precision + ": Spur runs no, fp16 or bf16");
  }
  plan.use_cpu = options.cpu || (config && config->use_cpu());
  plan.zero_stage = options.zero_stage.value_or(config ? config->zero_stage() : 0);
  if (plan.zero_stage < 0 || plan.zero_stage > 3) {
    throw LaunchError(
        QString("the configuration's ZeRO setting (deepspeed_config.zero_stage, or "
                "fsdp_config.fsdp_sharding_strategy) is not one Spur runs: zero_stage 1, 2 or 3, or "
                "FULL_SHARD / SHARD_GRAD_OP / NO_SHARD"));
  }
  plan.state_dict_type =
      options.state_dict_type.value_or(config ? QString::fromStdString(config->state_dict_type()) : QString());
  if (!plan.state_dict_type.isEmpty()) {
    const auto type = fsdp_state_dict_type(plan.state_dict_type.toStdString());
    if (!type || *type == "LOCAL_STATE_DICT") {
      throw LaunchError((options.state_dict_type ? "--fsdp_state_dict_type " : "fsdp_config.fsdp_state_dict_type ") +
                        plan.state_dict_type + ": Spur writes FULL_STATE_DICT or SHARDED_STATE_DICT");
    }
    plan.state_dict_type = QString::fromStdString(*type);
  }
  if (options.comm_hook) {
    std::string why;
    const auto hook = parse_comm_hook(options.comm_hook->toStdString(), &why);
    if (!hook) throw LaunchError("--ddp_comm_hook " + QString::fromStdString(why));
    if (auto conflict = comm_hook_stage_conflict(*hook, plan.zero_stage)) {
      throw LaunchError("--ddp_comm_hook " + *options.comm_hook + ": " + QString::fromStdString(*conflict));
    }
    // "no" too: the flag wins over a SPUR_DDP_COMM_HOOK the launcher's own environment would pass on.
    plan.comm_hook = comm_hook_name(*hook);
  }
  const QString gpu_ids = options.gpu_ids.value_or(config ? QString::fromStdString(config->gpu_ids()) : "all");

  // Threads: what the user set wins; else the machine's cores shared between its ranks (torchrun sets 1).
  int threads = options.num_cpu_threads_per_process.value_or(0);
  if (threads <= 0 && machine.environment.value("OMP_NUM_THREADS").isEmpty()) {
    threads = std::max(1, machine.cpu_cores / plan.local_world_size);
  }

  QString resolved = program;
  if (machine.resolve_program) {
    if (program.contains('/')) {
      // A path: say what is wrong with the file (issue 12: "no such executable file" for a file that exists but
      // lacks the execute bit, or is a directory).
      // Judged on the path's own bytes, which need not be UTF-8 (launch/byte_text.h).
      const QByteArray path = bytes_from_text(program);
      struct stat info {};
      if (::stat(path.constData(), &info) != 0) throw LaunchError("cannot run '" + program + "': no such file");
      if (S_ISDIR(info.st_mode)) throw LaunchError("cannot run '" + program + "': it is a directory");
      if (::access(path.constData(), X_OK) != 0) {
        throw LaunchError("cannot run '" + program + "': the file is not executable (chmod +x " + program + ")");
      }
      resolved = program;
      if (!program.startsWith('/')) {
        char cwd[PATH_MAX];
        if (::getcwd(cwd, sizeof cwd)) resolved = QDir::cleanPath(text_from_bytes(cwd) + "/" + program);
      }
    } else {
      resolved = QStandardPaths::findExecutable(program);
      if (resolved.isEmpty()) throw LaunchError("cannot run '" + program + "': no such executable file on PATH");
    }
    // Neither an ELF file nor a script: exec would hand it to /bin/sh as a script of garbage.
    // (An execute-only file cannot be read: the kernel judges it.)
    QByteArray head("#!");
    if (const int fd = ::open(bytes_from_text(resolved).constData(), O_RDONLY | O_CLOEXEC); fd >= 0) {
      char first[4];
      const auto n = ::read(fd, first, sizeof first);
      head = QByteArray(first, n > 0 ? n : 0);
      ::close(fd);
    }
    if (!head.startsWith("\x7f"
                         "ELF") &&
        !head.startsWith("#!")) {
      throw LaunchError("cannot run '" + program + "': " + resolved +
                        " is not a program (neither an ELF executable nor a script starting with #!)");
    }
  }

  for (int local = 0; local < plan.local_world_size; ++local) {
    RankSpec rank;
    rank.local_rank = local;
    rank.rank = plan.machine_rank * plan.local_world_size + local;
    rank.label = QString("rank%1").arg(rank.rank);
    rank.program = resolved;
    rank.arguments = arguments;
    auto& env = rank.environment;
    env.insert("RANK", QString::number(rank.rank));
    env.insert("LOCAL_RANK", QString::number(local));
    env.insert("WORLD_SIZE", QString::number(plan.world_size));
    env.insert("LOCAL_WORLD_SIZE", QString::number(plan.local_world_size));
    env.insert("GROUP_RANK", QString::number(plan.machine_rank));
    env.insert("GROUP_WORLD_SIZE", QString::number(plan.num_machines));
    env.insert("ROLE_RANK", QString::number(rank.rank));
    env.insert("ROLE_WORLD_SIZE", QString::number(plan.world_size));
    env.insert("MASTER_ADDR", plan.master_addr);
    env.insert("MASTER_PORT", QString::number(plan.master_port));
    env.insert("SPUR_LAUNCHER", "spur");
    env.insert("SPUR_MIXED_PRECISION", plan.mixed_precision);
    env.insert("SPUR_USE_CPU", plan.use_cpu ? "true" : "false");
    if (options.gradient_accumulation_steps) {
      env.insert("SPUR_GRADIENT_ACCUMULATION_STEPS", QString::number(*options.gradient_accumulation_steps));
    }
    // Only when asked for: a program started plainly keeps what its environment says.
    if (plan.zero_stage > 0) env.insert("SPUR_ZERO_STAGE", QString::number(plan.zero_stage));
    if (!plan.state_dict_type.isEmpty()) env.insert("FSDP_STATE_DICT_TYPE", plan.state_dict_type);
    if (!plan.comm_hook.isEmpty()) env.insert("SPUR_DDP_COMM_HOOK", plan.comm_hook);
    if (threads > 0) env.insert("OMP_NUM_THREADS", QString::number(threads));
    for (const auto& [name, value] : options.environment) env.insert(name, value);
    if (!plan.use_cpu && gpu_ids != "all") env.insert("CUDA_VISIBLE_DEVICES", gpu_ids);
    plan.ranks.push_back(rank);
  }
  return plan;
}

QString LaunchPlan::describe() const {
  QString text = QString("%1 process(es) over %2 machine(s); this machine (rank %3) runs %4; rendezvous at %5:%6\n")
                     .arg(world_size)
                     .arg(num_machines)
                     .arg(machine_rank)
                     .arg(local_world_size)
                     .arg(master_addr)
                     .arg(master_port);
  for (const auto& rank : ranks) {
    text += QString("[%1] %2").arg(rank.label, rank.program);
    for (const auto& argument : rank.arguments) text += " " + argument;
    text += "\n";
    auto keys = rank.environment.keys();
    keys.sort();
    for (const auto& key : keys) {
      text += "    " + key + "=" + shown_value(key, rank.environment.value(key)) + "\n";
    }
  }
  for (const auto& note : notes) text += "note: " + note + "\n";
  return text;
}

QPair<QString, QString> parse_environment_assignment(const QString& text) {
  static const QRegularExpression name("^[A-Za-z_][A-Za-z0-9_]*$");
  const auto eq = text.indexOf('=');
  const QString variable = eq < 0 ? text : text.left(eq);
  if (!name.match(variable).hasMatch()) {
    throw LaunchError("--env '" + text + "': expected NAME=VALUE or NAME, with NAME a variable name");
  }
  // Each rank's identity is the launcher's to give: `--env RANK=0` gave every rank the same rank (issue 12).
  static const QSet<QString> owned{"RANK",        "LOCAL_RANK",       "WORLD_SIZE",    "LOCAL_WORLD_SIZE",
                                   "GROUP_RANK",  "GROUP_WORLD_SIZE", "ROLE_RANK",     "ROLE_WORLD_SIZE",
                                   "MASTER_ADDR", "MASTER_PORT",      "SPUR_LAUNCHER", "SPUR_RUN_ID"};
  if (owned.contains(variable)) {
    throw LaunchError("--env " + variable + ": spur launch sets " + variable +
                      " for each rank itself (use --num_processes, --num_machines, --machine_rank, "
                      "--main_process_ip and --main_process_port)");
  }
  if (eq < 0) {
    // `--env NAME`: this environment's value (what the history records for a secret), as `docker run -e NAME`.
    const auto environment = QProcessEnvironment::systemEnvironment();
    if (!environment.contains(variable)) {
      throw LaunchError("--env " + variable + ": " + variable + " is not set here (give --env " + variable +
                        "=VALUE, or export it)");
    }
    return {variable, environment.value(variable)};
  }
  return {variable, text.mid(eq + 1)};
}

RunConfig effective_config(const std::optional<RunConfig>& config, const LaunchPlan& plan) {
  RunConfig effective = config ? *config : RunConfig::defaults(plan.mixed_precision.toStdString());
  const std::string type = effective.distributed_type();
  if (plan.world_size == 1) {
    effective.set("distributed_type", yaml_string("NO"));
  } else {
    // Without a GPU driver the ranks ran on CPUs, whatever the flags said.
    const bool cpu = plan.use_cpu || QDir("/proc/driver/nvidia/gpus").isEmpty();
    if (type == "NO" || type.empty() || (cpu && type == "MULTI_GPU")) {
      effective.set("distributed_type", yaml_string(cpu ? "MULTI_CPU" : "MULTI_GPU"));
    }
  }
  effective.set("num_machines", YAML::Node(plan.num_machines));
  effective.set("machine_rank", YAML::Node(plan.machine_rank));
  effective.set("num_processes", YAML::Node(plan.world_size));
  effective.set("mixed_precision", yaml_string(plan.mixed_precision.toStdString()));
  effective.set("use_cpu", YAML::Node(plan.use_cpu));
  if (plan.num_machines > 1) {
    effective.set("main_process_ip", yaml_string(plan.master_addr.toStdString()));
    effective.set("main_process_port", YAML::Node(plan.master_port));
  }
  return effective;
}

}  // namespace spur::app
