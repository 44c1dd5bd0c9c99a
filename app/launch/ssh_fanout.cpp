// SPDX-License-Identifier: Apache-2.0
// SSH fan-out; see ssh_fanout.h. Teardown works without a tty: killing the local ssh closes the remote command's
// stdin, and the remote `spur launch --exit_on_stdin_eof` then stops its ranks.
#include "launch/ssh_fanout.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>

#include <memory>

#include "config/run_config.h"
#include "launch/byte_text.h"
#include "launch/launch_request.h"

namespace spur::app {

QString check_host(const QString& host) {
  static const QRegularExpression user("^[A-Za-z0-9_][A-Za-z0-9._-]*$");
  static const QRegularExpression name(
      "^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*\\.?$");
  static const QRegularExpression ipv6("^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.-]+)?$");
  if (host.isEmpty()) return "a host name is empty";
  const auto at = host.lastIndexOf('@');
  if (at >= 0 && !user.match(host.left(at)).hasMatch()) return "'" + host + "': not a user name before @";
  const QString machine = host.mid(at + 1);
  if (machine.size() > 253 || !(name.match(machine).hasMatch() || ipv6.match(machine).hasMatch())) {
    // host:port, as --on takes it: ssh's port for a host is set in ~/.ssh/config.
    static const QRegularExpression with_port("^(.+):([0-9]+)$");
    if (const auto m = with_port.match(machine); m.hasMatch() && name.match(m.captured(1)).hasMatch()) {
      return "'" + host + "': no port here; give it in ~/.ssh/config (Host " + m.captured(1) + ", Port " +
             m.captured(2) + ") and list " + host.left(at + 1) + m.captured(1);
    }
    return "'" + host + "' is not a host name or address";
  }
  return {};
}

std::vector<Host> parse_host_list(const QString& list) {
  std::vector<Host> hosts;
  QSet<QString> seen;
  for (const auto& part : list.split(',')) {
    const QString name = part.trimmed();
    if (name.isEmpty()) throw LaunchError("--hosts '" + list + "' has an empty host name");
    if (const QString problem = check_host(name); !problem.isEmpty()) throw LaunchError("--hosts: " + problem);
    if (seen.contains(name)) throw LaunchError("--hosts names " + name + " twice");
    seen.insert(name);
    hosts.push_back({name, 0});
  }
  return hosts;
}

std::vector<Host> read_hostfile(const QString& path) {
  QByteArray text;
  try {
    text = QByteArray::fromStdString(read_small_file(path.toStdString(), 1 << 20, "a hostfile"));
  } catch (const ConfigError& e) {
    throw LaunchError(e.what());
  }
  std::vector<Host> hosts;
  QSet<QString> seen;
  static const QRegularExpression line_pattern(R"(^\s*(\S+)(?:\s+slots\s*=\s*(\d+))?\s*$)");
  int number = 0;
  for (QString line : QString::fromUtf8(text).split('\n')) {
    ++number;
    line = line.section('#', 0, 0);
    if (line.trimmed().isEmpty()) continue;
    const auto match = line_pattern.match(line);
    const QString where = QString("%1:%2: ").arg(path).arg(number);
    if (!match.hasMatch()) throw LaunchError(where + "expected 'host slots=N', not '" + line.trimmed() + "'");
    const QString name = match.captured(1);
    if (const QString problem = check_host(name); !problem.isEmpty()) throw LaunchError(where + problem);
    if (seen.contains(name)) throw LaunchError(where + "host " + name + " is listed twice");
    seen.insert(name);
    const int count = match.captured(2).isEmpty() ? 0 : match.captured(2).toInt();
    if (!match.captured(2).isEmpty() && count < 1) throw LaunchError(where + "slots must be at least 1");
    hosts.push_back({name, count});
  }
  if (hosts.empty()) throw LaunchError(path + ": the hostfile names no host");
  return hosts;
}

QStringList ssh_arguments(const SshOptions& options, const QString& host, const QString& remote_command) {
  QStringList args;
  if (!options.config_file.isEmpty()) args << "-F" << options.config_file;
  // Never a password prompt; a dead peer is noticed within 45 s.
  args << "-o"
       << "BatchMode=yes"
       << "-o" << QString("ConnectTimeout=%1").arg(options.connect_timeout) << "-o"
       << "ServerAliveInterval=15"
       << "-o"
       << "ServerAliveCountMax=3"
       << "--" << host << remote_command;
  return args;
}

void take_hosts(const std::vector<Host>& hosts, LaunchOptions& options, bool config_gives_processes) {
  const int machines = static_cast<int>(hosts.size());
  if (options.num_machines && *options.num_machines != machines) {
    throw LaunchError(QString("--num_machines %1 but %2 hosts are listed").arg(*options.num_machines).arg(machines));
  }
  const int per_host = hosts.front().processes;
  for (const auto& host : hosts) {
    if (host.processes != per_host) {
      throw LaunchError("every host needs the same slots (" + hosts.front().name + ": " + QString::number(per_host) +
                        ", " + host.name + ": " + QString::number(host.processes) + ")");
    }
  }
  if (per_host > 0) {
    if (options.num_processes && *options.num_processes != per_host * machines) {
      throw LaunchError(QString("--num_processes %1 but the hostfile gives %2 hosts x %3 slots")
                            .arg(*options.num_processes)
                            .arg(machines)
                            .arg(per_host));
    }
    options.num_processes = per_host * machines;
  } else if (!options.num_processes && !config_gives_processes) {
    options.num_processes = machines;  // one per host unless told otherwise
  }
  options.num_machines = machines;
  options.machine_rank = 0;
}

QString unreachable_hosts(const SshOptions& options, const std::vector<Host>& hosts) {
  SshOptions probe = options;
  probe.connect_timeout = std::min(options.connect_timeout, 5);
  try {
    preflight(probe, hosts);
  } catch (const LaunchError& e) {
    return QString(e.what()).section('\n', 1);
  }
  return {};
}

void preflight(const SshOptions& options, const std::vector<Host>& hosts) {
  std::vector<std::unique_ptr<QProcess>> checks;
  for (const auto& host : hosts) {
    auto check = std::make_unique<QProcess>();
    check->start(options.ssh, ssh_arguments(options, host.name, "true"));
    checks.push_back(std::move(check));
  }
  QStringList problems;
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto& check = *checks[i];
    if (!check.waitForStarted(10000)) {
      throw LaunchError("cannot run the SSH client '" + options.ssh + "': " + check.errorString());
    }
    if (!check.waitForFinished((options.connect_timeout + 5) * 1000)) {
      check.kill();
      check.waitForFinished();
      problems << hosts[i].name + ": no answer within " + QString::number(options.connect_timeout + 5) + " s";
      continue;
    }
    if (check.exitStatus() != QProcess::NormalExit || check.exitCode() != 0) {
      QString reason = QString::fromLocal8Bit(check.readAllStandardError()).trimmed();
      if (reason.isEmpty()) reason = QString("ssh exited with %1").arg(check.exitCode());
      problems << hosts[i].name + ": " + reason.split('\n').last();
    }
  }
  if (!problems.isEmpty()) {
    throw LaunchError("cannot reach every host over SSH (BatchMode: keys only, no password prompts):\n  " +
                      problems.join("\n  "));
  }
}

QStringList machine_launch_arguments(const QString& spur, const LaunchPlan& plan, const LaunchOptions& launch,
                                     const QString& program, const QStringList& arguments, int grace_seconds,
                                     const QString& machine_rank, const QString& master_addr, bool progress_stream,
                                     EnvironmentPassing passing, int system_interval, double system_since) {
  QStringList remote{spur,
                     "launch",
                     "--no_config",
                     "--no_history",
                     "--exit_on_stdin_eof",
                     "--num_processes",
                     QString::number(plan.world_size),
                     "--num_machines",
                     QString::number(plan.num_machines),
                     "--machine_rank",
                     machine_rank,
                     "--main_process_ip",
                     master_addr,
                     "--main_process_port",
                     QString::number(plan.master_port),
                     "--mixed_precision",
                     plan.mixed_precision,
                     "--grace_period",
                     QString::number(grace_seconds)};
  if (plan.use_cpu) remote << "--cpu";
  if (progress_stream) remote << "--progress_stream";
  // What the run costs each machine, sampled there and sent back as metric records ("@spur" lines).
  if (system_interval > 0) {
    remote << "--system_metrics_interval" << QString::number(system_interval) << "--system_stream";
    if (system_since > 0) remote << "--system_since" << QString::number(system_since, 'f', 3);
  } else {
    remote << "--system_metrics_interval"
           << "0";
  }
  if (plan.zero_stage > 0)
    remote << "--use_deepspeed"
           << "--zero_stage" << QString::number(plan.zero_stage);
  if (!plan.state_dict_type.isEmpty()) remote << "--fsdp_state_dict_type" << plan.state_dict_type;
  if (!plan.comm_hook.isEmpty()) remote << "--ddp_comm_hook" << plan.comm_hook;
  if (launch.gpu_ids) remote << "--gpu_ids" << *launch.gpu_ids;
  if (launch.gradient_accumulation_steps) {
    remote << "--gradient_accumulation_steps" << QString::number(*launch.gradient_accumulation_steps);
  }
  if (launch.num_cpu_threads_per_process) {
    remote << "--num_cpu_threads_per_process" << QString::number(*launch.num_cpu_threads_per_process);
  }
  if (passing == EnvironmentPassing::on_stdin) {
    if (!launch.environment.isEmpty()) remote << "--env_on_stdin";
  } else {
    QSet<QString> named;
    for (const auto& [name, value] : launch.environment) {
      if (!named.contains(name)) remote << "--env" << name;
      named.insert(name);
    }
  }
  remote << "--" << program << arguments;
  return remote;
}

QByteArray environment_block(const QList<QPair<QString, QString>>& environment) {
  QByteArray block = "spur-env 1\n";
  for (const auto& [name, value] : environment) {
    block += name.toUtf8() + '=' + bytes_from_text(value).toBase64() + '\n';
  }
  return block + "end\n";
}

QList<QPair<QString, QString>> read_environment_block(int fd, int timeout_ms) {
  QList<QPair<QString, QString>> environment;
  QElapsedTimer clock;
  clock.start();
  auto next_line = [&]() {
    QByteArray line;
    for (;;) {
      const qint64 left = timeout_ms - clock.elapsed();
      struct pollfd ready {};
      ready.fd = fd;
      ready.events = POLLIN;
      const int polled = left > 0 ? ::poll(&ready, 1, static_cast<int>(left)) : 0;
      if (polled < 0 && errno == EINTR) continue;
      if (polled <= 0) {
        throw LaunchError(QString("--env_on_stdin: the environment did not arrive on standard input within %1 s")
                              .arg(timeout_ms / 1000));
      }
      char c = 0;
      const ssize_t n = ::read(fd, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw LaunchError("--env_on_stdin: standard input ended before the environment did");
      if (c == '\n') return line;
      if (line.size() > (64 << 20)) throw LaunchError("--env_on_stdin: a line longer than 64 MiB");
      line += c;
    }
  };
  if (next_line() != "spur-env 1") throw LaunchError("--env_on_stdin: standard input does not start with spur-env 1");
  for (;;) {
    const QByteArray line = next_line();
    if (line == "end") return environment;
    const auto eq = line.indexOf('=');
    const auto value = QByteArray::fromBase64Encoding(line.mid(eq + 1), QByteArray::AbortOnBase64DecodingErrors);
    if (eq <= 0 || !value) throw LaunchError("--env_on_stdin: a malformed line in the environment block");
    environment << parse_environment_assignment(QString::fromUtf8(line.left(eq)) + "=" + text_from_bytes(*value));
  }
}

std::vector<RankSpec> fanout_children(const SshOptions& options, const std::vector<Host>& hosts, const LaunchPlan& plan,
                                      const LaunchOptions& launch, const QString& program, const QStringList& arguments,
                                      int grace_seconds) {
  std::vector<RankSpec> children;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const QStringList remote = machine_launch_arguments(
        options.remote_spur, plan, launch, program, arguments, grace_seconds, QString::number(i), plan.master_addr,
        options.progress_stream, EnvironmentPassing::on_stdin, options.system_interval, options.system_since);
    QStringList quoted;
    for (const auto& part : remote) quoted << shell_word(part);
    const QString command = "cd " + shell_word(options.remote_directory) + " && exec " + quoted.join(' ');
    RankSpec child;
    child.rank = static_cast<int>(i);
    child.local_rank = static_cast<int>(i);
    child.label = hosts[i].name;
    child.program = options.ssh;
    child.arguments = ssh_arguments(options, hosts[i].name, command);
    if (!launch.environment.isEmpty()) child.input = environment_block(launch.environment);
    children.push_back(child);
  }
  return children;
}

}  // namespace spur::app
