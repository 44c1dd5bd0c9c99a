// SPDX-License-Identifier: Apache-2.0
// The sbatch script, Slurm's commands and the job follower; see slurm_job.h.
#include "slurm/slurm_job.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTextStream>
#include <QThread>

#include <optional>

#include <yaml-cpp/yaml.h>

#include "config/run_config.h"
#include "launch/byte_text.h"
#include "launch/launch_request.h"
#include "launch/signals.h"
#include "launch/ssh_fanout.h"

namespace spur::app {
namespace {

// 143: srun stopped the node's launcher (SIGTERM) because another node failed, or the job was ended. (A launcher
// SIGKILLed by Slurm writes no code at all; 137 is a rank's own SIGKILL, such as the kernel's OOM killer.)
bool killed_by_slurm(int code) { return code == 128 + 15; }

}  // namespace

namespace {

// The option of spur launch's that an sbatch option word sets, if any. sbatch reads its options with getopt_long,
// so a long option may be any unambiguous prefix of its name ("--out=/x" is --output), and short options combine
// ("-vo/x" is -v -o /x: the first letter that takes a value takes the rest of the word).
std::optional<QString> owned_option(const QString& word) {
  static const QStringList owned_long{"output", "error", "open-mode",       "chdir",    "parsable",
                                      "wrap",   "nodes", "ntasks-per-node", "job-name", "ntasks"};
  static const QString owned_short = "oeDNJn";
  // sbatch's short options that take no value; any other letter takes the rest of the word as its value.
  static const QString flags = "hHIkOQsvVWu";
  if (word.startsWith("--")) {
    const QString name = word.mid(2).section('=', 0, 0);
    if (name.isEmpty()) return std::nullopt;
    for (const auto& option : owned_long) {
      if (option.startsWith(name)) return "--" + option;
    }
    return std::nullopt;
  }
  for (qsizetype i = 1; i < word.size(); ++i) {
    const QChar letter = word[i];
    if (owned_short.contains(letter)) return QString("-") + letter;
    if (!flags.contains(letter)) break;
  }
  return std::nullopt;
}

}  // namespace

QStringList split_slurm_args(const QString& text) {
  static const QRegularExpression space(R"(\s+)");
  return text.split(space, Qt::SkipEmptyParts);
}

void check_request(const SlurmRequest& request) {
  static const QRegularExpression name("^[A-Za-z0-9_.:+-]+$");
  for (const auto& [flag, value] : {std::pair<const char*, QString>{"--job_name", request.job_name},
                                    {"--account", request.account},
                                    {"--qos", request.qos}}) {
    if (!value.isEmpty() && !name.match(value).hasMatch()) {
      throw SlurmError(QString("%1 '%2': letters, digits and _.:+- only").arg(flag, value));
    }
  }
  // sbatch takes a list of partitions: the job starts in whichever can run it first. A partition's name has no ':'
  // ("2:00:00" typed into the partition is a time limit).
  static const QRegularExpression partitions("^[A-Za-z0-9_.+-]+(,[A-Za-z0-9_.+-]+)*$");
  if (!request.partition.isEmpty() && !partitions.match(request.partition).hasMatch()) {
    static const QRegularExpression looks_like_time(R"(^[0-9]+([:-][0-9]+)+$)");
    throw SlurmError("--partition '" + request.partition +
                     (looks_like_time.match(request.partition).hasMatch()
                          ? "' looks like a time limit (that is --time); a partition is a name, like gpu"
                          : "': letters, digits and _.+- only, with commas between partitions"));
  }
  static const QRegularExpression gres("^[A-Za-z0-9_.:,=-]+$");
  if (!request.gres.isEmpty() && !gres.match(request.gres).hasMatch())
    throw SlurmError("--gres '" + request.gres + "' is not a generic resource list (like gpu:4)");
  // sbatch's forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]]; or no limit.
  static const QRegularExpression time(R"(^([0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|UNLIMITED|INFINITE)$)",
                                       QRegularExpression::CaseInsensitiveOption);
  if (!request.time.isEmpty() && !time.match(request.time).hasMatch()) {
    throw SlurmError("--time '" + request.time +
                     "' is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED)");
  }
  for (const auto& word : request.extra) {
    if (!word.startsWith("-")) {
      throw SlurmError("--slurm_args: '" + word +
                       "' is not an sbatch option (they start with -; give values as --name=value)");
    }
    if (word.contains(QRegularExpression(R"(\s)"))) {
      throw SlurmError("--slurm_args: '" + word + "' holds white space (a tab or a line break) inside an option");
    }
    if (const auto owned = owned_option(word)) {
      const QString given = word.section('=', 0, 0);
      throw SlurmError("--slurm_args: " + (given == *owned ? given + " is" : given + " sets " + *owned + ", which is") +
                       " spur launch's to set (--slurm_dir, --nodes, --ntasks_per_node, --job_name)");
    }
  }
  // #SBATCH lines take the path as it is: no quoting, and % starts one of Slurm's file-name patterns.
  static const QRegularExpression unsafe(R"([\s%'"\\$`])");
  if (request.directory.contains(unsafe)) {
    throw SlurmError("the job's directory '" + request.directory +
                     "' holds a space, quote, $ or %, which #SBATCH lines cannot carry: give --slurm_dir a path "
                     "without them");
  }
}

QString sbatch_script(const SlurmRequest& request, const QStringList& node_command, int max_restarts) {
  const QString dir = request.directory;
  QStringList quoted;
  for (const auto& word : node_command) {
    if (word == "@MACHINE_RANK@") quoted << "\"$SLURM_NODEID\"";
    else if (word == "@MASTER_ADDR@") quoted << "\"$master\"";
    else if (word == "@MASTER_PORT@") quoted << "\"$port\"";
    else quoted << shell_word(word);
  }
  QString script;
  QTextStream s(&script);
  s << "#!/bin/bash\n"
    << "# Written by `spur launch --slurm`: srun starts one `spur launch` per node (the part after 'node' below),\n"
    << "# which starts that node's ranks; every node's output and exit code land in " << dir << ".\n"
    << "#SBATCH --job-name=" << request.job_name << "\n"
    << "#SBATCH --nodes=" << request.nodes << "\n"
    << "#SBATCH --ntasks-per-node=" << request.ntasks_per_node << "\n"
    << "#SBATCH --output=" << dir << "/batch-%j.out\n";
  if (!request.partition.isEmpty()) s << "#SBATCH --partition=" << request.partition << "\n";
  if (!request.time.isEmpty()) s << "#SBATCH --time=" << request.time << "\n";
  if (!request.account.isEmpty()) s << "#SBATCH --account=" << request.account << "\n";
  if (!request.qos.isEmpty()) s << "#SBATCH --qos=" << request.qos << "\n";
  if (!request.gres.isEmpty()) s << "#SBATCH --gres=" << request.gres << "\n";
  for (const auto& word : request.extra) s << "#SBATCH " << word << "\n";
  s << "set -u\n"
    << "if [ \"${1:-}\" = node ]; then\n"
    << "  master=$2 port=$3\n"
    << "  export SPUR_RESTART_COUNT=$4 TORCHELASTIC_RESTART_COUNT=$4\n"
    << "  # Where a restart begins in this node's output (the follower forgets the node's earlier failure there).\n"
    << "  if [ \"$4\" -gt 0 ]; then echo \"spur: attempt $(($4 + 1)) on this node\"; fi\n"
    << "  # The launcher runs as a child the shell waits for, so that when srun stops this node (another failed)\n"
    << "  # the shell passes the signal on and records the launcher's own code (143), instead of dying first.\n"
    << "  child=\n"
    << "  trap '[ -n \"$child\" ] && kill -TERM \"$child\" 2>/dev/null' TERM INT\n"
    << "  " << quoted.join(' ') << " &\n"
    << "  child=$!\n"
    << "  wait \"$child\"\n"
    << "  code=$?\n"
    << "  # A wait the trap interrupted returns 128 + the signal: wait again while the launcher is there (alive or\n"
    << "  # not yet reaped) for its own code. (Not 'while code > 128': a launcher's own 137 would loop for ever,\n"
    << "  # since bash's wait gives a reaped child's status again.)\n"
    << "  while kill -0 \"$child\" 2>/dev/null; do wait \"$child\"; code=$?; done\n"
    << "  echo \"$code\" > " << shell_word(dir) << "/node-\"$SLURMD_NODENAME\".exit\n"
    << "  exit \"$code\"\n"
    << "fi\n"
    << "# The run's --env variables: exported from a file only the user can read, removed once read, so that no\n"
    << "# value is in this script or in an argument list (srun passes them on to every node's launcher).\n"
    << "if [ -f " << shell_word(dir + "/env") << " ]; then\n"
    << "  set -a; . " << shell_word(dir + "/env") << "; set +a\n"
    << "  rm -f " << shell_word(dir + "/env") << "\n"
    << "fi\n"
    << "master=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
    << "# The address Slurm itself reaches the first node at, when it has one (NodeAddr), else its name.\n"
    << "address=$(scontrol show node \"$master\" -o 2>/dev/null | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')\n"
    << "master=${address:-$master}\n"
    << "attempt=0\n"
    << "while :; do\n"
    << "  port=$((15000 + (SLURM_JOB_ID * 7919 + attempt * 104729) % 20000))\n"
    << "  rm -f " << shell_word(dir) << "/node-*.exit\n"
    << "  srun --export=ALL --kill-on-bad-exit=1 --ntasks-per-node=1 --ntasks=\"$SLURM_JOB_NUM_NODES\" "
       "--cpus-per-task=\"$SLURM_CPUS_ON_NODE\" \\\n"
    << "    --open-mode=append --output=" << shell_word(dir + "/node-%N.out") << " /bin/bash "
    << shell_word(dir + "/job.sh") << " node \"$master\" \"$port\" \"$attempt\"\n"
    << "  code=$?\n"
    << R"(  if [ "$code" -eq 0 ] || [ "$attempt" -ge )" << max_restarts << " ]; then break; fi\n"
    << "  attempt=$((attempt + 1))\n"
    << "  echo \"spur: restart $attempt of " << max_restarts
    << " (attempt $((attempt + 1))), after the step's exit code $code\"\n"
    << "done\n"
    << "exit \"$code\"\n";
  s.flush();
  return script;
}

QByteArray environment_file(const QList<QPair<QString, QString>>& environment) {
  QByteArray file = "# spur launch --slurm: the run's --env variables, read by job.sh and removed\n";
  for (const auto& [name, value] : environment) {
    file += name.toUtf8() + "='" + bytes_from_text(value).replace("'", "'\\''") + "'\n";
  }
  return file;
}

QString SlurmCli::program(const QString& name) const {
  const QString bin = qEnvironmentVariable("SPUR_SLURM_BIN");
  QString found = bin.isEmpty() ? QStandardPaths::findExecutable(name) : QStandardPaths::findExecutable(name, {bin});
  if (found.isEmpty()) {
    throw SlurmError(QString("Slurm's %1 is not installed here (%2): run on a machine that can submit jobs "
                             "(Debian: slurm-client), or set SPUR_SLURM_BIN to the directory that holds it")
                         .arg(name, bin.isEmpty() ? "not on PATH" : "not in SPUR_SLURM_BIN=" + bin));
  }
  return found;
}

QString SlurmCli::run(const QString& name, const QStringList& arguments, int timeout_ms) const {
  QProcess process;
  process.setStandardInputFile(QProcess::nullDevice());
  process.start(program(name), arguments);
  if (!process.waitForStarted(10000)) throw SlurmError(name + " could not be started: " + process.errorString());
  if (!process.waitForFinished(timeout_ms)) {
    process.kill();
    process.waitForFinished(1000);
    throw SlurmError(QString("%1 %2 did not answer within %3 s").arg(name, arguments.join(' ')).arg(timeout_ms / 1000));
  }
  QString output = QString::fromLocal8Bit(process.readAllStandardOutput());
  if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0) {
    QString reason = QString::fromLocal8Bit(process.readAllStandardError()).trimmed();
    if (reason.isEmpty()) reason = QString("exit code %1").arg(process.exitCode());
    throw SlurmError(QString("%1 %2 failed: %3").arg(name, arguments.join(' '), reason));
  }
  return output;
}

QString submit(const SlurmCli& slurm, const QString& script_path) {
  QString answer;
  try {
    answer = slurm.run("sbatch", {"--parsable", script_path}).trimmed();
  } catch (const SlurmError& e) {
    throw SlurmError(QString("Slurm refused the job: ") + e.what());
  }
  // --parsable: "jobid" or "jobid;cluster"
  QString id = answer.section(';', 0, 0).split('\n').last().trimmed();
  static const QRegularExpression number("^[0-9]+$");
  if (!number.match(id).hasMatch()) throw SlurmError("sbatch --parsable answered '" + answer + "', not a job id");
  return id;
}

std::map<QString, QString> job_fields(const SlurmCli& slurm, const QString& job) {
  std::map<QString, QString> fields;
  QString text;
  try {
    text = slurm.run("scontrol", {"show", "job", "-o", job});
  } catch (const SlurmError& e) {
    if (QString(e.what()).contains("Invalid job id")) return fields;  // forgotten (MinJobAge) or never known
    throw;  // the controller did not answer: not an answer about the job
  }
  // One line of Key=Value pairs separated by spaces; values may hold spaces only in a few keys (Command is last
  // but one); a token without '=' belongs to the value before it.
  QString key;
  for (const auto& token : text.trimmed().split(' ', Qt::SkipEmptyParts)) {
    const auto eq = token.indexOf('=');
    if (eq > 0 && token.left(eq).contains(QRegularExpression("^[A-Za-z:/]+$"))) {
      key = token.left(eq);
      fields[key] = token.mid(eq + 1);
    } else if (!key.isEmpty()) {
      fields[key] += " " + token;
    }
  }
  return fields;
}

SlurmOutcome job_outcome(const std::map<QString, int>& node_codes, const QString& job_state,
                         const std::map<QString, QString>& node_failures) {
  SlurmOutcome outcome;
  if (job_state.startsWith("CANCELLED")) {
    outcome.status = "stopped";
    outcome.exit_code = 1;
    outcome.detail = "job cancelled";
    return outcome;
  }
  for (const auto& [node, code] : node_codes) {
    if (code == 0 || killed_by_slurm(code)) continue;
    outcome.status = "failed";
    outcome.exit_code = code;
    const auto failure = node_failures.find(node);
    outcome.detail =
        "node " + node + ": " + (failure != node_failures.end() ? failure->second : QString("exit code %1").arg(code));
    return outcome;
  }
  const bool all_done = !node_codes.empty() &&
                        std::all_of(node_codes.begin(), node_codes.end(), [](const auto& n) { return n.second == 0; });
  if (all_done && (job_state.isEmpty() || job_state == "COMPLETED")) {
    outcome.status = "finished";
    return outcome;
  }
  outcome.status = "failed";
  outcome.exit_code = 1;
  for (const auto& [node, code] : node_codes) {
    if (code != 0) outcome.exit_code = code;
  }
  outcome.detail = "job " + (job_state.isEmpty() ? QString("ended") : job_state) +
                   (node_codes.empty() ? QString(" before any node's launcher reported") : QString());
  return outcome;
}

SlurmFollower::SlurmFollower(const SlurmCli& slurm, QString job, QString directory, SlurmFollowOptions options,
                             QTextStream& out, QTextStream& err)
    : slurm_(slurm),
      job_(std::move(job)),
      directory_(std::move(directory)),
      options_(std::move(options)),
      out_(out),
      err_(err) {}

void SlurmFollower::drain(bool final) {
  const QDir dir(directory_);
  QStringList files = dir.entryList({"node-*.out"}, QDir::Files, QDir::Name);
  files.prepend("batch-" + job_ + ".out");
  // A node's launcher names the failure: a rank that failed, or a hang (--hang_timeout) it stopped.
  static const QRegularExpression failure(R"(^spur launch: ((rank\d+ .*failed: |no rank made progress ).*)$)");
  for (const auto& name : files) {
    QFile file(dir.filePath(name));
    if (!file.open(QIODevice::ReadOnly)) continue;
    auto& tail = tails_[name];
    if (file.size() < tail.offset) tail = Tail{};  // rewritten (a resubmitted job's directory)
    file.seek(tail.offset);
    tail.partial += file.readAll();
    tail.offset = file.pos();
    const QString node = name.startsWith("node-") ? name.mid(5, name.size() - 9) : QString("batch");
    qsizetype newline;
    while ((newline = tail.partial.indexOf('\n')) >= 0 || (final && !tail.partial.isEmpty())) {
      const qsizetype length = newline >= 0 ? newline : tail.partial.size();
      const QString line = text_from_bytes(tail.partial.left(length));
      tail.partial.remove(0, newline >= 0 ? length + 1 : length);
      // The first failure of each node's latest attempt: the node's own marker of a restart (its output file
      // holds every attempt) forgets the one before, however much of the files one pass reads.
      if (node != "batch" && line.startsWith("spur: attempt ")) node_failures_.erase(node);
      if (const auto match = failure.match(line); match.hasMatch() && !node_failures_.contains(node))
        node_failures_[node] = match.captured(1);
      if (options_.on_line && options_.on_line(node, line)) continue;
      out_ << "[" << node << "] " << line << "\n";
    }
  }
  out_.flush();
}

int SlurmFollower::run() {
  SignalCounter counting;
  int handled = SignalCounter::count();
  int cancelled_by = 0;
  int failed_polls = 0;
  QString state;
  auto last_poll = std::chrono::steady_clock::now() - options_.poll;
  for (;;) {
    drain(false);
    if (SignalCounter::count() > handled) {
      handled = SignalCounter::count();
      if (!cancelled_by) {
        cancelled_by = SignalCounter::last();
        err_ << options_.who << ": " << signal_name(cancelled_by) << ": cancelling job " << job_
             << " (scancel; a second Ctrl-C leaves it to Slurm)\n";
        err_.flush();
        try {
          slurm_.run("scancel", {job_});
        } catch (const SlurmError& e) {
          err_ << options_.who << ": " << e.what() << "\n";
        }
      } else {
        err_ << options_.who << ": leaving job " << job_ << " to Slurm; `spur slurm stop " << job_ << "` cancels it\n";
        err_.flush();
        outcome_ = {128 + cancelled_by, "stopped", "left while being cancelled"};
        return outcome_.exit_code;
      }
    }
    if (std::chrono::steady_clock::now() - last_poll >= options_.poll) {
      last_poll = std::chrono::steady_clock::now();
      QString now;
      bool ended = false;
      try {
        now = slurm_.run("squeue", {"-h", "-j", job_, "-o", "%T %R"}).trimmed();
        ended = now.isEmpty();
        failed_polls = 0;
      } catch (const SlurmError& e) {
        // "Invalid job id": squeue no longer knows the job, it ended. Anything else (a busy or restarting
        // controller) is asked again; after a minute of failures, scontrol decides.
        const QString why = e.what();
        if (why.contains("Invalid job id")) {
          ended = true;
        } else if (++failed_polls == 1) {
          err_ << options_.who << ": squeue failed, asking again: " << why << "\n";
          err_.flush();
        } else if (failed_polls * options_.poll >= std::chrono::minutes(1)) {
          try {
            const auto fields = job_fields(slurm_, job_);
            const QString job_state = fields.contains("JobState") ? fields.at("JobState") : QString();
            static const QStringList live{"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"};
            ended = fields.empty() || !live.contains(job_state);
          } catch (const SlurmError&) {
            // The controller is away: keep following (the job runs on without it).
          }
          failed_polls = 0;
        }
      }
      if (ended) break;
      if (now.isEmpty()) {
        if (options_.after_poll) options_.after_poll();
        QThread::msleep(200);
        continue;
      }
      if (now != state) {
        state = now;
        err_ << options_.who << ": job " << job_ << ": " << now << "\n";
        err_.flush();
      }
      if (options_.after_poll) options_.after_poll();
    }
    QThread::msleep(200);
  }
  // The nodes' files may still be closing: one more read after the job left the queue.
  QThread::msleep(200);
  drain(true);
  std::map<QString, QString> fields;
  try {
    fields = job_fields(slurm_, job_);
  } catch (const SlurmError& e) {
    err_ << options_.who << ": " << e.what() << "\n";  // the outcome comes from the nodes' own codes
  }
  const QString job_state = fields.contains("JobState") ? fields.at("JobState") : QString();
  std::map<QString, int> codes;
  const QDir dir(directory_);
  for (const auto& name : dir.entryList({"node-*.exit"}, QDir::Files, QDir::Name)) {
    QFile file(dir.filePath(name));
    bool ok = false;
    const int code = file.open(QIODevice::ReadOnly) ? file.readAll().trimmed().toInt(&ok) : 0;
    if (ok) codes[name.mid(5, name.size() - 10)] = code;
  }
  outcome_ = job_outcome(codes, job_state, node_failures_);
  if (cancelled_by) {
    outcome_.status = "stopped";
    outcome_.exit_code = 128 + cancelled_by;
  }
  err_ << options_.who << ": job " << job_ << " " << (job_state.isEmpty() ? QString("ended") : job_state)
       << (outcome_.detail.isEmpty() ? "" : ": ") << outcome_.detail << "\n";
  err_.flush();
  if (options_.after_poll) options_.after_poll();
  return outcome_.exit_code;
}

}  // namespace spur::app

namespace spur::app {

QString default_slurm_file() { return QString::fromStdString(config_home()) + "/spur/slurm.yaml"; }

SlurmRequest read_slurm_file(const QString& path, SlurmRequest request) {
  if (!QFileInfo::exists(path)) return request;
  std::string text;
  try {
    text = read_small_file(path.toStdString(), 1 << 20, "a Slurm settings file");
  } catch (const ConfigError& e) {
    throw SlurmError(e.what());
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw SlurmError(QString("%1:%2: not YAML: %3").arg(path).arg(e.mark.line + 1).arg(QString::fromStdString(e.msg)));
  }
  if (root.IsNull()) return request;
  if (!root.IsMap()) throw SlurmError(path + ": expected keys and values (partition: gpu ...)");
  for (const auto& entry : root) {
    const QString key = QString::fromStdString(entry.first.as<std::string>(""));
    const YAML::Node& node = entry.second;
    const int line = (node.Mark().line >= 0 ? node.Mark() : entry.first.Mark()).line + 1;
    const QString where = QString("%1:%2: %3").arg(path).arg(line).arg(key);
    if (!node.IsScalar() && !node.IsNull()) throw SlurmError(where + ": expected a plain value");
    const QString value = node.IsNull() ? QString() : QString::fromStdString(node.Scalar());
    const auto count = [&] {
      bool ok = false;
      const int number = value.toInt(&ok);
      if (!ok || number < 1) throw SlurmError(where + ": '" + value + "' is not a positive whole number");
      return number;
    };
    if (key == "partition") request.partition = value;
    else if (key == "nodes") request.nodes = count();
    else if (key == "ntasks_per_node") request.ntasks_per_node = count();
    else if (key == "time") request.time = value;
    else if (key == "account") request.account = value;
    else if (key == "qos") request.qos = value;
    else if (key == "gres") request.gres = value;
    else if (key == "slurm_args") request.extra = split_slurm_args(value);
    else if (key == "slurm_dir") request.directory = value;
    else if (key == "job_name") request.job_name = value;
    else {
      throw SlurmError(where +
                       ": not a Slurm setting Spur knows (partition, nodes, ntasks_per_node, time, account, "
                       "qos, gres, slurm_args, slurm_dir, job_name)");
    }
  }
  return request;
}

QStringList slurm_flags(const SlurmRequest& request) {
  QStringList flags{"--nodes", QString::number(request.nodes), "--ntasks_per_node",
                    QString::number(request.ntasks_per_node)};
  for (const auto& [flag, value] : {std::pair<const char*, QString>{"--partition", request.partition},
                                    {"--time", request.time},
                                    {"--account", request.account},
                                    {"--qos", request.qos},
                                    {"--gres", request.gres},
                                    {"--job_name", request.job_name}}) {
    if (!value.isEmpty()) flags << flag << value;
  }
  if (!request.extra.isEmpty()) flags << "--slurm_args" << request.extra.join(' ');
  return flags;
}

QString slurm_yaml(const SlurmRequest& request) {
  YAML::Emitter yaml;
  yaml << YAML::BeginMap;
  const auto put = [&](const char* key, const QString& value) {
    if (!value.isEmpty()) yaml << YAML::Key << key << YAML::Value << value.toStdString();
  };
  put("job_name", request.job_name);
  put("partition", request.partition);
  yaml << YAML::Key << "nodes" << YAML::Value << request.nodes;
  yaml << YAML::Key << "ntasks_per_node" << YAML::Value << request.ntasks_per_node;
  put("time", request.time);
  put("account", request.account);
  put("qos", request.qos);
  put("gres", request.gres);
  put("slurm_args", request.extra.join(' '));
  put("slurm_dir", request.directory);
  yaml << YAML::EndMap;
  return QString::fromUtf8(yaml.c_str()) + "\n";
}

}  // namespace spur::app
