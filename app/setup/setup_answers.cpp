// SPDX-License-Identifier: Apache-2.0
// Setup answers to configurations and launches; see setup_answers.h.
#include "setup/setup_answers.h"

#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QThread>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>

#include "launch/launch_plan.h"
#include "launch/remote_launch.h"
#include <spur/core/torch_features.h>

namespace spur::app {
namespace {

QString host_part(const QString& host) { return host.mid(host.indexOf('@') + 1); }

}  // namespace

namespace {

DetectedHardware probe_hardware() {
  DetectedHardware hardware;
  hardware.cpu_cores = std::max(1, QThread::idealThreadCount());
  const QString smi = QStandardPaths::findExecutable("nvidia-smi");
  if (!smi.isEmpty()) {
    QProcess process;
    process.start(smi, {"-L"});
    if (process.waitForFinished(10000) && process.exitCode() == 0) {
      hardware.gpus = static_cast<int>(
          QString::fromLocal8Bit(process.readAllStandardOutput()).trimmed().split('\n', Qt::SkipEmptyParts).size());
    }
  }
  return hardware;
}

}  // namespace

namespace {

// The one probe of this process (started by the first start()).
std::shared_future<DetectedHardware>& probe_future() {
  static std::shared_future<DetectedHardware> future;
  return future;
}
std::mutex probe_mutex;

}  // namespace

void DetectedHardware::start() {
  const std::lock_guard lock(probe_mutex);
  if (!probe_future().valid()) probe_future() = std::async(std::launch::async, probe_hardware).share();
}

DetectedHardware DetectedHardware::detect() {
  start();
  std::shared_future<DetectedHardware> future;
  {
    const std::lock_guard lock(probe_mutex);
    future = probe_future();
  }
  return future.get();
}

std::optional<DetectedHardware> DetectedHardware::ready() {
  std::shared_future<DetectedHardware> future;
  {
    const std::lock_guard lock(probe_mutex);
    future = probe_future();
  }
  if (!future.valid() || future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
  return future.get();
}

SetupAnswers SetupAnswers::defaults(const DetectedHardware& hardware) {
  SetupAnswers answers;
  answers.use_cpu = hardware.gpus == 0;
  answers.distributed_type = hardware.gpus > 1 ? "MULTI_GPU" : (hardware.cpu_cores > 1 ? "MULTI_CPU" : "NO");
  answers.processes_per_machine = hardware.gpus > 0
                                      ? std::max(1, hardware.gpus)
                                      : std::max(1, std::min(hardware.cpu_cores, std::max(2, hardware.cpu_cores / 2)));
  if (answers.distributed_type == "NO") answers.processes_per_machine = 1;
  answers.mixed_precision = hardware.gpus > 0 ? "bf16" : "no";
  answers.working_directory = QDir::currentPath();
  return answers;
}

SetupAnswers SetupAnswers::from_config(const RunConfig& config, SetupAnswers base, const LaunchTarget* target) {
  SetupAnswers a = from_file(config, std::move(base));
  if (target) {
    // The target file's settings come last: its Slurm nodes and tasks are what the job asks for.
    a.take_target(*target);
    if (config.sagemaker()) a.where = Where::SageMaker;
  }
  return a;
}

SetupAnswers SetupAnswers::from_file(const RunConfig& config, SetupAnswers base) {
  SetupAnswers a = std::move(base);
  a.distributed_type = config.distributed_type();
  a.mixed_precision = config.mixed_precision();
  a.use_cpu = config.use_cpu();
  a.num_machines = std::max(1, config.num_machines());
  if (config.sagemaker()) {
    a.where = Where::SageMaker;
    a.region = config.text("region", a.region);
    a.iam_role_name = config.text("iam_role_name", a.iam_role_name);
    a.profile = config.text("profile", "");
    a.image_uri = config.text("image_uri", "");
    a.ec2_instance_type = config.text("ec2_instance_type", a.ec2_instance_type);
    a.inputs_file = config.text("sagemaker_inputs_file", "");
    a.metrics_file = config.text("sagemaker_metrics_file", "");
    return a;
  }
  if (a.where == Where::SageMaker) a.where = Where::Local;
  a.machine_rank = config.machine_rank();
  a.main_process_ip = QString::fromStdString(config.main_process_ip());
  if (config.main_process_port() > 0) a.main_process_port = config.main_process_port();
  a.same_network = config.same_network();
  a.processes_per_machine = config.num_processes() > 0 ? std::max(1, config.num_processes() / a.num_machines) : 1;
  a.gpu_ids = config.gpu_ids();
  return a;
}

RunConfig SetupAnswers::to_config(const std::string& name, const RunConfig* base) const {
  if (where == Where::SageMaker) {
    YAML::Node root;
    root["compute_environment"] = yaml_string("AMAZON_SAGEMAKER");
    root["distributed_type"] = yaml_string(distributed_type == "NO" ? "NO" : "DATA_PARALLEL");
    root["region"] = yaml_string(region);
    root["iam_role_name"] = yaml_string(iam_role_name);
    if (!profile.empty()) root["profile"] = yaml_string(profile);
    if (!inputs_file.empty()) root["sagemaker_inputs_file"] = yaml_string(inputs_file);
    if (!metrics_file.empty()) root["sagemaker_metrics_file"] = yaml_string(metrics_file);
    root["image_uri"] = yaml_string(image_uri);
    root["ec2_instance_type"] = yaml_string(ec2_instance_type);
    root["num_machines"] = num_machines;
    root["mixed_precision"] = yaml_string(mixed_precision);
    root["debug"] = base && base->sagemaker() ? base->debug() : false;
    root["use_cpu"] = false;
    if (base && base->sagemaker()) {
      // The opened file's other keys (additional_args, base_job_name...) are kept.
      YAML::Node merged = YAML::Clone(base->node());
      for (const char* key : {"profile", "sagemaker_inputs_file", "sagemaker_metrics_file"}) merged.remove(key);
      for (const auto& entry : root) merged[entry.first.as<std::string>()] = entry.second;
      return RunConfig::from_node(merged, name);
    }
    return RunConfig::from_node(root, name);
  }
  // Edited as YAML and checked once at the end: key by key, a half-edited file can be invalid (rank 2 of 1).
  YAML::Node root = YAML::Clone((base && !base->sagemaker() ? *base : RunConfig::defaults(mixed_precision, 0)).node());
  const bool ssh = where == Where::Ssh;
  const bool slurm = where == Where::Slurm;
  const int machines = ssh ? std::max(1, static_cast<int>(hosts.size())) : num_machines;
  // SSH and Slurm ask no kind of run (the wizard hides it): "CPU only" decides it, as for the same answers on either.
  // One process is a plain one; more need a process group: Accelerate's MULTI_* types.
  std::string kind = ssh || slurm ? "NO" : distributed_type;
  if (kind == "NO" && (machines > 1 || processes_per_machine > 1)) kind = use_cpu ? "MULTI_CPU" : "MULTI_GPU";
  // The devices follow the kind, as Accelerate's questionnaire writes them: MULTI_CPU on CPUs, MULTI_GPU on GPUs.
  const bool cpu = kind == "MULTI_CPU" || (kind != "MULTI_GPU" && use_cpu);
  root["compute_environment"] = yaml_string("LOCAL_MACHINE");
  root["distributed_type"] = yaml_string(kind);
  root["mixed_precision"] = yaml_string(mixed_precision);
  root["num_machines"] = machines;
  root["machine_rank"] = machines > 1 && !ssh && !slurm ? machine_rank : 0;
  if (slurm) {
    // The job's first node is the rendezvous and its port comes from the job id: neither is known before it runs.
    for (const char* key : {"main_process_ip", "main_process_port"}) root.remove(key);
  } else if (machines > 1) {
    root["main_process_ip"] = yaml_string((ssh ? host_part(hosts.front()) : main_process_ip).toStdString());
    root["main_process_port"] = main_process_port;
    root["same_network"] = same_network;
  }
  root["num_processes"] = kind == "NO" ? 1 : processes_per_machine * machines;
  root["use_cpu"] = cpu;
  if (!cpu) root["gpu_ids"] = yaml_string(gpu_ids);
  return RunConfig::from_node(root, name);
}

void SetupAnswers::take_launch(const LaunchRequest& request) {
  program = request.program;
  arguments = request.arguments;
  // A directory removed since is not offered again.
  if (QFileInfo(request.working_directory).isDir()) working_directory = request.working_directory;
  run_name.clear();  // a new run gets a new name (a relaunch's "name (2)" is not the next run's)
  if (where == Where::Slurm) where = Where::Local;
  take_flags(request.flags);
}

void SetupAnswers::take_target(const LaunchTarget& target) {
  where = target.where;
  take_flags(target.launch_flags());
}

void SetupAnswers::take_flags(const QStringList& flags) {
  environment.clear();
  gradient_accumulation_steps = 1;
  max_restarts = 0;
  hang_timeout = 0;
  slurm = SlurmRequest{};
  launch_on.clear();
  if (flags.contains("--slurm")) where = Where::Slurm;  // a switch: before the valued flags that need it
  for (qsizetype i = 0; i + 1 < flags.size(); ++i) {
    const QString& flag = flags[i];
    const QString& value = flags[i + 1];
    if (flag == "--hosts") {
      where = Where::Ssh;
      hosts = split_host_list(value);
    } else if (flag == "--nodes" && where == Where::Slurm) {
      num_machines = std::max(1, value.toInt());
    } else if (flag == "--ntasks_per_node" && where == Where::Slurm) {
      processes_per_machine = std::max(1, value.toInt());
    } else if (flag == "--partition") {
      slurm.partition = value;
    } else if (flag == "--time") {
      slurm.time = value;
    } else if (flag == "--account") {
      slurm.account = value;
    } else if (flag == "--qos") {
      slurm.qos = value;
    } else if (flag == "--gres") {
      slurm.gres = value;
    } else if (flag == "--slurm_args") {
      slurm.extra = split_slurm_args(value);
    } else if (flag == "--slurm_dir") {
      slurm.directory = value;
    } else if (flag == "--on") {
      launch_on = value;
    } else if (flag == "--job_name" && where == Where::Slurm) {
      slurm.job_name = value;
    } else if (flag == "--env") {
      try {
        environment << parse_environment_assignment(value);
      } catch (const LaunchError&) {
      }
    } else if (flag == "--gradient_accumulation_steps") {
      gradient_accumulation_steps = std::max(1, value.toInt());
    } else if (flag == "--max_restarts") {
      max_restarts = std::max(0, value.toInt());
    } else if (flag == "--hang_timeout") {
      hang_timeout = std::max(0, value.toInt());
    }
  }
}

LaunchTarget SetupAnswers::target() const {
  LaunchTarget target;
  target.where = where;
  QStringList& flags = target.flags;
  if (where == Where::Ssh && !hosts.isEmpty()) flags << "--hosts" << hosts.join(',');
  if (where == Where::Slurm) {
    SlurmRequest settings = slurm;
    settings.nodes = std::max(1, num_machines);
    settings.ntasks_per_node = std::max(1, processes_per_machine);
    flags << slurm_flags(settings);
    if (!slurm.directory.isEmpty()) flags << "--slurm_dir" << slurm.directory;
  }
  if (gradient_accumulation_steps > 1) {
    flags << "--gradient_accumulation_steps" << QString::number(gradient_accumulation_steps);
  }
  for (const auto& [name, value] : environment) flags << "--env" << name + "=" + value;
  if (where != Where::SageMaker && max_restarts > 0) flags << "--max_restarts" << QString::number(max_restarts);
  if (where != Where::SageMaker && hang_timeout > 0) flags << "--hang_timeout" << QString::number(hang_timeout);
  if (where != Where::SageMaker && !launch_on.trimmed().isEmpty()) flags << "--on" << launch_on.trimmed();
  return target;
}

LaunchRequest SetupAnswers::launch_request(const QString& config_file, bool with_target) const {
  LaunchRequest request;
  request.config_file = config_file;
  request.working_directory = working_directory;
  request.program = program;
  request.arguments = arguments;
  if (with_target) request.flags << target().launch_flags();
  if (!run_name.trimmed().isEmpty()) request.flags << "--run_name" << run_name.trimmed();
  return request;
}

QStringList split_host_list(const QString& hosts) {
  static const QRegularExpression separators("[,\\s]+");
  return hosts.split(separators, Qt::SkipEmptyParts);
}

QString check_host_list(const QString& hosts) {
  QStringList list = split_host_list(hosts);
  if (list.isEmpty()) return "list at least one host";
  for (const auto& host : list) {
    if (QString problem = check_host(host); !problem.isEmpty()) return problem;
  }
  if (list.removeDuplicates() > 0) return "a host is listed twice";
  return {};
}

QString check_port(const QString& port) {
  bool ok = false;
  const int value = port.trimmed().toInt(&ok);
  return ok && value >= 1 && value <= 65535 ? QString() : "'" + port + "' is not a TCP port (1 to 65535)";
}

QString check_gpu_ids(const QString& ids) {
  static const QRegularExpression list("^[0-9]+(,[0-9]+)*$");
  return ids == "all" || list.match(ids).hasMatch() ? QString() : "'" + ids + "': all, or GPU numbers like 0,1";
}

QString engine_torch_version() {
#ifdef SPUR_TORCH_BUILD_VERSION
  return QStringLiteral(SPUR_TORCH_BUILD_VERSION);
#else
  return {};  // built without the engine (the fuzz targets)
#endif
}

QString check_mixed_precision(const QString& precision, bool on_cpu) {
  const QString torch = engine_torch_version();
  if (precision != "fp16" || !on_cpu || torch_features::has(torch.toStdString(), torch_features::kCpuAutocastHalf)) {
    return {};
  }
  return QString(
             "fp16 on the CPU needs LibTorch %1.%2 or later; this Spur's engine is built against %3, whose CPU "
             "autocast runs bf16 only: choose bf16, or GPUs")
      .arg(torch_features::kCpuAutocastHalf.major)
      .arg(torch_features::kCpuAutocastHalf.minor)
      .arg(torch);
}

QString check_directory(const QString& directory) {
  if (directory.isEmpty()) return "choose a directory";
  return QFileInfo(directory).isDir() ? QString() : directory + " is not a directory";
}

QString check_program(const QString& program, const QString& working_directory) {
  if (program.trimmed().isEmpty()) return "choose the training program";
  if (!program.contains('/')) {
    return QStandardPaths::findExecutable(program).isEmpty() ? program + " is not on PATH" : QString();
  }
  const QFileInfo file(QDir(working_directory).filePath(program));
  if (!file.exists()) return file.filePath() + " does not exist";
  if (!file.isFile() || !file.isExecutable()) return file.filePath() + " is not an executable file";
  return {};
}

QList<QPair<QString, QString>> parse_environment(const QString& lines) {
  QList<QPair<QString, QString>> assignments;
  for (const auto& line : lines.split('\n')) {
    if (!line.trimmed().isEmpty()) assignments << parse_environment_assignment(line.trimmed());
  }
  return assignments;
}

QString check_environment(const QString& lines) {
  int number = 0;
  for (const auto& line : lines.split('\n')) {
    ++number;
    if (line.trimmed().isEmpty()) continue;
    try {
      parse_environment_assignment(line.trimmed());
    } catch (const LaunchError&) {
      return QString("line %1: '%2' is not NAME=VALUE").arg(number).arg(line.trimmed());
    }
  }
  return {};
}

QString check_region(const QString& region) {
  static const QRegularExpression pattern("^[a-z]{2}(-[a-z]+)+-[0-9]+$");
  return pattern.match(region).hasMatch() ? QString() : "'" + region + "' is not an AWS region (like us-east-1)";
}

QString check_instance_type(const QString& type) {
  static const QRegularExpression pattern("^ml\\.[a-z0-9]+\\.[a-z0-9]+$");
  return pattern.match(type).hasMatch() ? QString() : "'" + type + "' is not a SageMaker instance type (ml.*)";
}

QString check_image_uri(const QString& uri) {
  return uri.trimmed().isEmpty() || uri.contains(' ') ? QString("the training image's URI (your container with Spur)")
                                                      : QString();
}

namespace {

// What spur launch --slurm would say of a request holding only this setting (its own check, not a copy).
QString slurm_problem(const std::function<void(SlurmRequest&)>& set) {
  SlurmRequest request;
  set(request);
  try {
    check_request(request);
    return {};
  } catch (const SlurmError& e) {
    return QString::fromUtf8(e.what());
  }
}

}  // namespace

QString check_slurm_partition(const QString& partition) {
  return slurm_problem([&](SlurmRequest& r) { r.partition = partition.trimmed(); }).replace("--partition ", "");
}

QString check_slurm_name(const QString& name) {
  return slurm_problem([&](SlurmRequest& r) { r.account = name.trimmed(); }).replace("--account ", "");
}

QString check_slurm_time(const QString& time) {
  return slurm_problem([&](SlurmRequest& r) { r.time = time.trimmed(); }).replace("--time ", "");
}

QString check_slurm_gres(const QString& gres) {
  return slurm_problem([&](SlurmRequest& r) { r.gres = gres.trimmed(); }).replace("--gres ", "");
}

QString check_launch_machine(const QString& machine) {
  if (machine.trimmed().isEmpty()) return {};
  try {
    QString destination;
    int port = 0;
    parse_on(machine.trimmed(), destination, port);
    return {};
  } catch (const LaunchError& e) {
    return QString::fromUtf8(e.what());
  }
}

QString unused_file_name(const QString& path) {
  if (path.isEmpty() || !QFileInfo::exists(path)) return path;
  const QFileInfo file(path);
  const QString suffix = file.completeSuffix().isEmpty() ? QString() : "." + file.completeSuffix();
  QString stem = file.baseName();
  // "run-2.yaml" goes on to "run-3.yaml", not "run-2-2.yaml".
  static const QRegularExpression numbered("^(.*)-([0-9]+)$");
  int n = 2;
  if (const auto m = numbered.match(stem); m.hasMatch()) stem = m.captured(1), n = m.captured(2).toInt() + 1;
  for (;; ++n) {
    QString candidate = file.dir().filePath(QString("%1-%2%3").arg(stem).arg(n).arg(suffix));
    if (!QFileInfo::exists(candidate)) return candidate;
  }
}

QString check_slurm_directory(const QString& directory, const QString& working_directory) {
  const QString typed = directory.trimmed();
  const bool by_default = typed.isEmpty() && !working_directory.trimmed().isEmpty();
  const QString judged = by_default ? QDir(working_directory.trimmed()).filePath("spur-slurm") : typed;
  QString problem = slurm_problem([&](SlurmRequest& r) { r.directory = judged; });
  if (problem.isEmpty()) return {};
  problem.replace("give --slurm_dir a path without them", "choose a folder without them");
  if (by_default) problem = "empty means spur-slurm in the working directory: " + problem;
  return problem;
}

QString check_slurm_options(const QString& options) {
  return slurm_problem([&](SlurmRequest& r) { r.extra = split_slurm_args(options); }).replace("--slurm_args: ", "");
}

}  // namespace spur::app
