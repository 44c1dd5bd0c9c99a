// SPDX-License-Identifier: Apache-2.0
// `spur config`: the terminal questionnaire (machines without a display), `config default`, `config show` and
// `config validate`. Files are Accelerate's format: a file written here loads in Accelerate, and back.
#include <QFileInfo>
#include <QTextStream>

#include <functional>
#include <iostream>
#include <string>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"
#include "launch/detached_launch.h"
#include "launch/launch_request.h"
#include "setup/launch_target.h"
#include "setup/setup_answers.h"

namespace spur::cli {
namespace {

std::string target_path(const Arguments& args) {
  if (auto file = args.value("config_file")) return file->toStdString();
  return app::default_config_path();
}

// Configurations are not written through a symbolic link (it may point anywhere, a history or another user's
// file), and `config default` does not replace an existing one without --force, as `accelerate config default`.
void check_writable(const std::string& path, bool replace_existing) {
  const QFileInfo info(QString::fromStdString(path));
  if (info.isSymLink()) {
    throw UsageError(QString::fromStdString(path) + " is a symbolic link (to " + info.symLinkTarget() +
                     "): spur config does not write through links; give the file itself with --config_file");
  }
  if (info.exists() && !info.isFile()) {
    throw UsageError(QString::fromStdString(path) + " exists and is not a regular file");
  }
  if (info.exists() && !replace_existing) {
    throw UsageError("a configuration already exists at " + QString::fromStdString(path) +
                     "; it is kept (pass --force to replace it, or --config_file for another file)");
  }
}

void print_notes(QTextStream& out, const app::RunConfig& config) {
  for (const auto& note : config.unsupported()) out << "note: " << QString::fromStdString(note) << "\n";
}

// One question on the terminal; empty answer = the default; asked again until `accept` takes the answer.
class Questionnaire {
 public:
  std::string ask(const std::string& question, const std::string& fallback,
                  const std::function<std::string(const std::string&)>& accept) {
    for (;;) {
      std::cout << question << " [" << fallback << "]: " << std::flush;
      std::string answer;
      if (!std::getline(std::cin, answer)) throw UsageError("no answer (end of input): nothing was saved");
      answer = QString::fromStdString(answer).trimmed().toStdString();
      if (answer.empty()) answer = fallback;
      const std::string problem = accept(answer);
      if (problem.empty()) return answer;
      std::cout << "  " << problem << "\n";
    }
  }
  std::string choose(const std::string& question, const std::vector<std::string>& options,
                     const std::string& fallback) {
    std::string list;
    for (const auto& o : options) list += (list.empty() ? "" : "/") + o;
    return ask(question + " (" + list + ")", fallback, [&](const std::string& a) {
      return std::find(options.begin(), options.end(), a) != options.end() ? "" : "answer one of " + list;
    });
  }
  int integer(const std::string& question, int fallback, int minimum, int maximum) {
    return std::stoi(ask(question, std::to_string(fallback), [&](const std::string& a) -> std::string {
      bool ok = false;
      const int v = QString::fromStdString(a).toInt(&ok);
      if (!ok || v < minimum || v > maximum) {
        return "a number from " + std::to_string(minimum) + " to " + std::to_string(maximum);
      }
      return "";
    }));
  }
  bool yes(const std::string& question, bool fallback) {
    return choose(question, {"yes", "no"}, fallback ? "yes" : "no") == "yes";
  }
};

// The questions of the Studio's wizard, on a terminal: where the run happens (this machine, machines over SSH, a
// Slurm job, SageMaker), then what each target needs. The answers make the configuration and its target file.
app::SetupAnswers questionnaire() {
  Questionnaire q;
  const auto hardware = app::DetectedHardware::detect();
  std::cout << "Spur's questions are Accelerate's (`accelerate config`) and the Studio's; the file is Accelerate's\n"
            << "format, and where the run happens goes into a target file beside it.\n"
            << "Detected: " << hardware.cpu_cores << " CPU cores, " << hardware.gpus << " GPU(s).\n";
  auto a = app::SetupAnswers::defaults(hardware);
  const auto where =
      q.choose("Where does the run happen?", {"this_machine", "ssh", "slurm", "sagemaker"}, "this_machine");
  const auto check = [](app::QStringCheck check) {
    return [check](const std::string& answer) { return check(QString::fromStdString(answer)).toStdString(); };
  };
  const auto none = [](const std::string&) { return std::string(); };
  const auto text = [&](const std::string& question, app::QStringCheck rule) {
    return QString::fromStdString(q.ask(question, "", check(rule)));
  };
  if (where == "ssh" || where == "slurm") {
    // The remote machines' hardware is not this machine's: asked, not detected.
    const bool gpus = q.yes("Do the machines have GPUs?", hardware.gpus > 0);
    a.use_cpu = !gpus;
    a.distributed_type = gpus ? "MULTI_GPU" : "MULTI_CPU";
    if (where == "ssh") {
      a.where = app::SetupAnswers::Where::Ssh;
      a.hosts = app::split_host_list(QString::fromStdString(q.ask(
          "Hosts ([user@]host, separated by commas; the first is the main machine)", "", check(app::check_host_list))));
      a.num_machines = static_cast<int>(a.hosts.size());
      a.main_process_port = q.integer("Main machine's port", 29500, 1, 65535);
      a.processes_per_machine =
          q.integer(gpus ? "Processes per machine (one per GPU)" : "Processes per machine", gpus ? 1 : 2, 1, 4096);
    } else {
      a.where = app::SetupAnswers::Where::Slurm;
      a.num_machines = q.integer("How many nodes?", 1, 1, 100000);
      a.processes_per_machine =
          q.integer(gpus ? "Tasks (ranks) per node (one per GPU)" : "Tasks (ranks) per node", gpus ? 1 : 2, 1, 4096);
      a.slurm.partition = text("Partition (empty: the cluster's default)", app::check_slurm_partition);
      a.slurm.time = text("Time limit (e.g. 30, 2:00:00, 1-00:00:00; empty: the partition's)", app::check_slurm_time);
      a.slurm.account = text("Account (empty: yours by default)", app::check_slurm_name);
      a.slurm.qos = text("QOS (empty: the default)", app::check_slurm_name);
      a.slurm.gres = text(gpus ? "GRES per node (e.g. gpu:4)" : "GRES per node (empty: none)", app::check_slurm_gres);
      a.slurm.extra = app::split_slurm_args(text("More sbatch options (e.g. --exclusive)", app::check_slurm_options));
      a.slurm.directory =
          QString::fromStdString(q.ask("Folder for the jobs' files, seen by every node", "spur-slurm",
                                       check([](const QString& dir) { return app::check_slurm_directory(dir); })));
      a.launch_on = text("Submit from (a login node you reach over SSH, like login1; empty: this machine)",
                         app::check_launch_machine);
    }
    if (gpus) a.gpu_ids = q.ask("Which GPUs (all, or numbers like 0,1)?", "all", check(app::check_gpu_ids));
    a.mixed_precision = q.choose("Mixed precision", {"no", "fp16", "bf16"}, gpus ? "bf16" : "no");
    a.max_restarts = q.integer("Restarts after a failure", 0, 0, 10000);
    return a;
  }
  if (where == "sagemaker") {
    a.where = app::SetupAnswers::Where::SageMaker;
    a.distributed_type = q.choose("Distributed mode", {"NO", "DATA_PARALLEL"}, "DATA_PARALLEL");
    a.region = q.ask("AWS region", a.region, check(app::check_region));
    a.iam_role_name = q.ask("IAM role for the training job", a.iam_role_name,
                            [](const std::string& s) { return s.empty() ? "a role name or ARN" : ""; });
    a.profile = q.ask("AWS profile (empty: the AWS CLI's default credentials)", "", none);
    a.inputs_file = q.ask("Input channels file (TSV: channel<TAB>s3://uri; empty: none)", "", none);
    a.metrics_file = q.ask("Metrics file (TSV: name<TAB>regex; empty: none)", "", none);
    a.image_uri = q.ask("Training image (your container, with Spur and your program)", "", check(app::check_image_uri));
    a.ec2_instance_type = q.ask("Instance type", a.ec2_instance_type, check(app::check_instance_type));
    a.num_machines = q.integer("How many instances?", 1, 1, 1000);
    a.mixed_precision = q.choose("Mixed precision", {"no", "fp16", "bf16"}, "no");
    return a;
  }
  a.distributed_type = q.choose("Which kind of run?", {"NO", "MULTI_CPU", "MULTI_GPU"}, a.distributed_type);
  if (a.distributed_type != "NO") {
    a.num_machines = q.integer("How many machines?", 1, 1, 10000);
    if (a.num_machines > 1) {
      a.machine_rank = q.integer("This machine's rank (0 is the main one)", 0, 0, a.num_machines - 1);
      a.main_process_ip = QString::fromStdString(q.ask("Main machine's IP address", "", check(app::check_host)));
      a.main_process_port = q.integer("Main machine's port", 29500, 1, 65535);
      a.same_network = q.yes("Are all machines on the same local network?", true);
    }
    a.processes_per_machine = q.integer(
        "Processes per machine",
        a.distributed_type == "MULTI_GPU" ? std::max(1, hardware.gpus) : std::max(2, a.processes_per_machine), 1, 4096);
  } else {
    a.processes_per_machine = 1;
  }
  a.use_cpu = a.distributed_type == "MULTI_CPU" || hardware.gpus == 0 || q.yes("Run on the CPU only?", false);
  if (!a.use_cpu) a.gpu_ids = q.ask("Which GPUs (all, or numbers like 0,1)?", "all", check(app::check_gpu_ids));
  a.mixed_precision = q.choose("Mixed precision", {"no", "fp16", "bf16"}, a.use_cpu ? "no" : "bf16");
  return a;
}

// The target file beside `path`, said in one line (and checked: a bad one throws ConfigError).
void print_target(QTextStream& out, const std::string& path) {
  const QString config = QString::fromStdString(path);
  if (const auto target = app::LaunchTarget::load_for(config)) {
    out << "launch settings: " << app::LaunchTarget::path_for(config) << " (" << target->describe() << ")\n";
  }
}

constexpr const char* kConfigUsage =
    "usage: spur config [--config_file F]                  the questionnaire (this machine, SSH, Slurm, SageMaker)\n"
    "       spur config default [--mixed_precision no|fp16|bf16] [--config_file F] [--force]\n"
    "                                                      a configuration for this machine without questions\n"
    "       spur config show [--config_file F]             the configuration in effect, as Accelerate's YAML\n"
    "       spur config validate FILE                      checks a file by Accelerate's rules\n"
    "Files are Accelerate's format; without --config_file, $XDG_CONFIG_HOME/spur/default_config.yaml. Where the\n"
    "run happens (SSH hosts, Slurm settings) and its launch settings go into F's target file, F.spur.yaml.\n";

}  // namespace

int config_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  if (arguments.contains("--help") || arguments.contains("-h")) {
    out << kConfigUsage;
    return 0;
  }
  QStringList rest = arguments;
  const QString sub = rest.isEmpty() || rest.front().startsWith("--") ? QString() : rest.takeFirst();
  try {
    if (sub == "default") {
      const Arguments args(rest, {"mixed_precision", "config_file"}, {"force"});
      const auto precision = args.value("mixed_precision").value_or("no").toStdString();
      const auto path = target_path(args);
      check_writable(path, args.has("force"));
      auto config = app::RunConfig::defaults(precision, app::DetectedHardware::detect().gpus);
      config.save(path);
      out << "Configuration saved at " << QString::fromStdString(path) << "\n";
      return 0;
    }
    if (sub == "show") {
      const Arguments args(rest, {"config_file"}, {});
      const std::string path =
          args.value("config_file") ? args.value("config_file")->toStdString() : app::config_in_effect();
      if (path.empty()) {
        out << "No configuration: none at " << QString::fromStdString(app::default_config_path()) << " nor at "
            << QString::fromStdString(app::accelerate_config_path()) << ". `spur config` writes one.\n";
        return 1;
      }
      const auto config = app::RunConfig::load(path);
      out << "# " << QString::fromStdString(path) << "\n" << QString::fromStdString(config.to_yaml());
      print_notes(out, config);
      print_target(out, path);
      return 0;
    }
    if (sub == "validate") {
      const Arguments args(rest, {}, {});
      if (args.positional().size() != 1) throw UsageError("usage: spur config validate FILE");
      const auto path = args.positional().front().toStdString();
      const auto config = app::RunConfig::load(path);
      print_target(out, path);  // checked before "valid" is said
      out << QString::fromStdString(path) << ": valid\n";
      print_notes(out, config);
      return 0;
    }
    if (sub.isEmpty()) {
      const Arguments args(rest, {"config_file"}, {"force"});
      const auto path = target_path(args);
      check_writable(path, true);  // the questionnaire replaces the file it is asked to write, as Accelerate's
      const auto answers = questionnaire();
      const auto config = answers.to_config(path);
      const auto target = answers.target();
      target.save_for(QString::fromStdString(path));
      config.save(path);
      out << "Configuration saved at " << QString::fromStdString(path) << "\n";
      if (!target.empty()) {
        out << "Launch settings (" << target.describe() << ") saved at "
            << app::LaunchTarget::path_for(QString::fromStdString(path)) << "\n";
      }
      out << "Launch with: " << app::spur_command() << " launch"
          << (args.value("config_file") ? " --config_file " + app::shell_quote({QString::fromStdString(path)}) : "")
          << " PROGRAM [ARGS...]\n";
      print_notes(out, config);
      return 0;
    }
    throw UsageError("unknown sub-command '" + sub + "' (default, show, validate; none for the questionnaire)");
  } catch (const app::ConfigError& e) {
    err << "spur config: " << e.what() << "\n";
    return 1;
  } catch (const UsageError& e) {
    err << "spur config: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace spur::cli
