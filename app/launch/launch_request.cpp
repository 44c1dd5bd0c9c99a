// SPDX-License-Identifier: Apache-2.0
// Launch requests and their command lines; see launch_request.h.
#include "launch/launch_request.h"

#include <QRegularExpression>

#include <stdexcept>

namespace spur::app {

const QSet<QString>& launch_valued_flags() {
  static const QSet<QString> flags{"config_file",
                                   "num_processes",
                                   "num_machines",
                                   "machine_rank",
                                   "main_process_ip",
                                   "main_process_port",
                                   "mixed_precision",
                                   "gpu_ids",
                                   "gradient_accumulation_steps",
                                   "num_cpu_threads_per_process",
                                   "grace_period",
                                   "max_restarts",
                                   "partition",
                                   "nodes",
                                   "ntasks_per_node",
                                   "time",
                                   "account",
                                   "qos",
                                   "gres",
                                   "slurm_args",
                                   "slurm_dir",
                                   "slurm_config",
                                   "hang_timeout",
                                   "system_metrics_interval",
                                   "hosts",
                                   "hostfile",
                                   "ssh_config",
                                   "remote_spur",
                                   "connect_timeout",
                                   "env",
                                   "job_name",
                                   "aws_endpoint_url",
                                   "poll_interval",
                                   "run_name",
                                   "tag",
                                   "notes",
                                   "parent_run",
                                   "system_since",
                                   "history",
                                   "zero_stage",
                                   "fsdp_sharding_strategy",
                                   "fsdp_reshard_after_forward",
                                   "fsdp_state_dict_type",
                                   "ddp_comm_hook",
                                   "on",
                                   "on_dir"};
  return flags;
}

const QSet<QString>& launch_switches() {
  static const QSet<QString> flags{
      "cpu",           "use_cpu",     "dry_run",    "help",          "multi_gpu", "exit_on_stdin_eof", "interactive",
      "no_config",     "detach",      "no_history", "use_deepspeed", "use_fsdp",  "progress_stream",   "slurm",
      "system_stream", "env_on_stdin"};
  return flags;
}

QString shell_quote(const QStringList& words) {
  QStringList quoted;
  static const QRegularExpression plain("^[A-Za-z0-9_./:=,@%+-]+$");
  for (const auto& word : words) {
    quoted << (plain.match(word).hasMatch() ? word : "'" + QString(word).replace("'", "'\\''") + "'");
  }
  return quoted.join(' ');
}

QString shell_word(const QString& word) { return "'" + QString(word).replace("'", "'\\''") + "'"; }

QStringList shell_split(const QString& line) {
  QStringList words;
  QString word;
  bool in_word = false;
  for (qsizetype i = 0; i < line.size(); ++i) {
    const QChar c = line[i];
    if (c == '\'') {
      const qsizetype end = line.indexOf('\'', i + 1);
      if (end < 0) throw std::invalid_argument("unterminated ' in: " + line.toStdString());
      word += line.mid(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        word += line[i];
      }
      if (i >= line.size()) throw std::invalid_argument("unterminated \" in: " + line.toStdString());
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      // A backslash quotes the next character, except a newline: that pair is a line continuation and goes, as
      // in the shell (found by fuzz_launch_arguments: `t\<newline>` did not read back the same).
      if (line[++i] != '\n') {
        word += line[i];
        in_word = true;
      }
    } else if (c.isSpace()) {
      if (in_word) words << word;
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words << word;
  return words;
}

QStringList LaunchRequest::spur_arguments() const {
  QStringList words{"launch"};
  if (!config_file.isEmpty()) words << "--config_file" << config_file;
  if (!history.isEmpty()) words << "--history" << history;
  words << flags << "--" << program << arguments;
  return words;
}

QString launch_command_line(const QString& directory, const QStringList& launch_arguments, const QString& spur) {
  return (directory.isEmpty() ? QString() : "cd " + shell_quote({directory}) + " && ") + shell_quote({spur}) +
         " launch " + shell_quote(launch_arguments);
}

QString LaunchRequest::command_line(const QString& spur) const {
  QStringList words = spur_arguments().mid(1);  // without "launch"
  // The separator goes (the program is the first word that is not a flag) unless the program looks like one.
  if (!program.startsWith('-')) words.removeAt(words.size() - arguments.size() - 2);
  return launch_command_line(working_directory, words, spur);
}

std::vector<LaunchFlag> split_launch_flags(const QStringList& words, qsizetype* end) {
  std::vector<LaunchFlag> flags;
  qsizetype i = 0;
  for (; i < words.size(); ++i) {
    const QString& word = words[i];
    if (word == "--") {
      ++i;
      break;
    }
    if (!word.startsWith("--")) break;
    LaunchFlag flag;
    flag.words << word;
    QString name = word.mid(2);
    const qsizetype equals = name.indexOf('=');
    if (equals >= 0) {
      flag.value = name.mid(equals + 1);
      name.truncate(equals);
    }
    name.replace('-', '_');
    flag.name = name;
    flag.valued = launch_valued_flags().contains(name);
    flag.known = flag.valued || launch_switches().contains(name);
    if (flag.valued && equals < 0) {
      if (i + 1 < words.size()) {
        flag.value = words[++i];
        flag.words << flag.value;
      } else {
        flag.missing_value = true;
      }
    }
    flags.push_back(flag);
  }
  if (end) *end = i;
  return flags;
}

LaunchRequest LaunchRequest::parse(const QString& command_line) {
  QStringList words = shell_split(command_line);
  LaunchRequest request;
  if (words.size() >= 3 && words[0] == "cd" && words[2] == "&&") {
    request.working_directory = words[1];
    words = words.mid(3);
  }
  if (words.size() < 2 || !words[0].endsWith("spur") || words[1] != "launch") {
    throw std::invalid_argument("not a `spur launch` command: " + command_line.toStdString());
  }
  qsizetype end = 0;
  const QStringList rest = words.mid(2);
  for (const auto& flag : split_launch_flags(rest, &end)) {
    if (!flag.known) {
      throw std::invalid_argument("unknown launch flag " + flag.words.front().toStdString() +
                                  " in: " + command_line.toStdString());
    }
    if (flag.missing_value) throw std::invalid_argument(flag.words.front().toStdString() + " has no value");
    if (flag.name == "config_file") {
      request.config_file = flag.value;
    } else if (flag.name == "history") {
      request.history = flag.value;
    } else {
      request.flags << "--" + flag.name;
      if (flag.valued) request.flags << flag.value;
    }
  }
  const qsizetype i = 2 + end;
  if (i >= words.size()) throw std::invalid_argument("no program in: " + command_line.toStdString());
  request.program = words[i];
  request.arguments = words.mid(i + 1);
  return request;
}

}  // namespace spur::app
