// SPDX-License-Identifier: Apache-2.0
// `spur launch [--config_file F] [flags] PROGRAM [ARGS...]`: Accelerate's launch flags over the configuration in
// effect, then this machine's ranks, supervised. `--dry_run` prints the plan and starts nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QTextStream>
#include <QThread>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"
#include "launch/launch_plan.h"
#include "launch/local_launcher.h"

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
    "  --dry_run (print the plan) --grace_period S (SIGTERM to SIGKILL, default 5)\n";

}  // namespace

int launch_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments,
                         {"config_file", "num_processes", "num_machines", "machine_rank", "main_process_ip",
                          "main_process_port", "mixed_precision", "gpu_ids", "gradient_accumulation_steps",
                          "num_cpu_threads_per_process", "grace_period"},
                         {"cpu", "use_cpu", "dry_run", "help", "multi_gpu"}, /*stop_at_positional=*/true);
    if (args.has("help")) {
      out << kUsage;
      return 0;
    }
    if (args.positional().isEmpty()) throw UsageError(QString("no program to launch\n") + kUsage);

    std::optional<app::RunConfig> config;
    const std::string path = args.value("config_file") ? args.value("config_file")->toStdString() : app::config_in_effect();
    if (!path.empty()) config = app::RunConfig::load(path);

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
    app::MachineFacts machine;
    machine.cpu_cores = QThread::idealThreadCount();
    machine.free_port = free_port;
    const QString program = args.positional().front();
    const auto plan = app::make_plan(config, options, program, args.positional().mid(1), machine);

    if (args.has("dry_run")) {
      if (!path.empty()) out << "configuration: " << QString::fromStdString(path) << "\n";
      out << plan.describe();
      return 0;
    }
    for (const auto& note : plan.notes) err << "spur launch: note: " << note << "\n";
    err.flush();
    app::SupervisionOptions supervision;
    if (auto v = args.integer("grace_period", 0, 3600)) supervision.grace = std::chrono::seconds(*v);
    app::LocalLauncher launcher(plan, supervision, out, err);
    return launcher.run();
  } catch (const app::ConfigError& e) {
    err << "spur launch: " << e.what() << "\n";
  } catch (const app::LaunchError& e) {
    err << "spur launch: " << e.what() << "\n";
  } catch (const UsageError& e) {
    err << "spur launch: " << e.what() << "\n";
  }
  return 2;
}

}  // namespace spur::cli
