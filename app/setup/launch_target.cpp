// SPDX-License-Identifier: Apache-2.0
// Spur's target file; see launch_target.h.
#include "setup/launch_target.h"

#include <yaml-cpp/yaml.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSet>

#include <utility>
#include <vector>

#include "config/run_config.h"
#include "launch/launch_request.h"
#include "launch/ssh_fanout.h"
#include "setup/setup_answers.h"

namespace spur::app {
namespace {

enum class Kind { Text, Count, Whole, Switch, List, Map, Path };

struct Key {
  const char* name;
  Kind kind;
  int minimum;  // Count: the smallest value; Whole: 0 (0 leaves the flag out)
  // The targets it belongs to: empty for every target.
  std::vector<LaunchTarget::Where> targets;
  QStringCheck check = nullptr;
};

using W = LaunchTarget::Where;

const std::vector<Key>& keys() {
  static const std::vector<Key> all{
      // SSH
      {"hosts", Kind::List, 0, {W::Ssh}, nullptr},
      {"hostfile", Kind::Path, 0, {W::Ssh}, nullptr},
      {"ssh_config", Kind::Path, 0, {W::Ssh}, nullptr},
      {"remote_spur", Kind::Text, 0, {W::Ssh, W::Slurm}, nullptr},
      {"connect_timeout", Kind::Count, 1, {W::Ssh}, nullptr},
      // Slurm (the names of Spur's Slurm settings file and of spur launch's flags)
      {"nodes", Kind::Count, 1, {W::Slurm}, nullptr},
      {"ntasks_per_node", Kind::Count, 1, {W::Slurm}, nullptr},
      {"partition", Kind::Text, 0, {W::Slurm}, check_slurm_partition},
      {"time", Kind::Text, 0, {W::Slurm}, check_slurm_time},
      {"account", Kind::Text, 0, {W::Slurm}, check_slurm_name},
      {"qos", Kind::Text, 0, {W::Slurm}, check_slurm_name},
      {"gres", Kind::Text, 0, {W::Slurm}, check_slurm_gres},
      {"slurm_args", Kind::Text, 0, {W::Slurm}, check_slurm_options},
      {"slurm_dir", Kind::Text, 0, {W::Slurm}, [](const QString& dir) { return check_slurm_directory(dir); }},
      {"job_name", Kind::Text, 0, {W::Slurm, W::SageMaker}, nullptr},
      // SageMaker
      {"poll_interval", Kind::Count, 1, {W::SageMaker}, nullptr},
      {"aws_endpoint_url", Kind::Text, 0, {W::SageMaker}, nullptr},
      {"detach", Kind::Switch, 0, {W::SageMaker, W::Slurm}, nullptr},
      // Where `spur launch` itself runs (spur launch --on): a login node, a workstation reached over SSH
      {"on", Kind::Text, 0, {W::Local, W::Ssh, W::Slurm}, check_launch_machine},
      {"on_dir", Kind::Text, 0, {W::Local, W::Ssh, W::Slurm}, nullptr},
      // Every target
      {"env", Kind::Map, 0, {}, nullptr},
      {"gradient_accumulation_steps", Kind::Count, 1, {}, nullptr},
      {"max_restarts", Kind::Whole, 0, {W::Local, W::Ssh, W::Slurm}, nullptr},
      {"hang_timeout", Kind::Whole, 0, {W::Local, W::Ssh, W::Slurm}, nullptr},
      {"grace_period", Kind::Whole, 0, {W::Local, W::Ssh, W::Slurm}, nullptr},
      {"system_metrics_interval", Kind::Whole, 0, {W::Local, W::Ssh, W::Slurm}, nullptr},
      {"num_cpu_threads_per_process", Kind::Count, 1, {W::Local, W::Ssh, W::Slurm}, nullptr},
  };
  return all;
}

const Key* find_key(const QString& name) {
  for (const auto& key : keys()) {
    if (name == key.name) return &key;
  }
  return nullptr;
}

// Flags that say where the run happens: given on the command line, they replace the file's target.
const QSet<QString>& ssh_group() {
  static const QSet<QString> names{"hosts", "hostfile", "ssh_config", "connect_timeout"};
  return names;
}
const QSet<QString>& slurm_group() {
  static const QSet<QString> names{"slurm", "nodes", "ntasks_per_node", "partition", "time",     "account",
                                   "qos",   "gres",  "slurm_args",      "slurm_dir", "job_name", "slurm_config"};
  return names;
}

QString key_list(W where) {
  QStringList names;
  for (const auto& key : keys()) {
    if (key.targets.empty() || std::find(key.targets.begin(), key.targets.end(), where) != key.targets.end())
      names << key.name;
  }
  return names.join(", ");
}

QString env_name(const QString& assignment) { return assignment.section('=', 0, 0); }

}  // namespace

QString where_name(LaunchTarget::Where where) {
  switch (where) {
    case W::Ssh:
      return "ssh";
    case W::Slurm:
      return "slurm";
    case W::SageMaker:
      return "sagemaker";
    case W::Local:
      break;
  }
  return "local";
}

QString LaunchTarget::path_for(const QString& config_path) {
  const QFileInfo file(config_path);
  QString base = file.fileName();
  for (const char* suffix : {".yaml", ".yml", ".json"}) {
    if (base.endsWith(suffix)) {
      base.chop(static_cast<qsizetype>(qstrlen(suffix)));
      break;
    }
  }
  return QDir(file.path()).filePath(base + ".spur.yaml");
}

std::optional<LaunchTarget> LaunchTarget::load_for(const QString& config_path) {
  const QString path = path_for(config_path);
  if (!QFileInfo::exists(path)) return std::nullopt;
  const std::string text = read_small_file(path.toStdString(), 1 << 20, "Spur's target file");
  return parse(QString::fromStdString(text), path, QFileInfo(path).absolutePath());
}

LaunchTarget LaunchTarget::parse(const QString& text, const QString& name, const QString& folder) {
  YAML::Node root;
  try {
    root = YAML::Load(text.toStdString());
  } catch (const YAML::Exception& e) {
    throw ConfigError(
        QString("%1:%2: not YAML: %3").arg(name).arg(e.mark.line + 1).arg(QString::fromStdString(e.msg)).toStdString());
  }
  LaunchTarget target;
  if (root.IsNull()) return target;
  if (!root.IsMap()) throw ConfigError(name.toStdString() + ": expected keys and values (target: ssh, hosts: ...)");
  const auto where_at = [&](const YAML::Node& node, const YAML::Node& key) {
    return QString("%1:%2: %3").arg(name).arg((node.Mark().line >= 0 ? node.Mark() : key.Mark()).line + 1);
  };
  // The target first: it decides which keys belong.
  for (const auto& entry : root) {
    if (entry.first.as<std::string>("") != "target") continue;
    const QString at = where_at(entry.second, entry.first).arg("target");
    const QString value = entry.second.IsScalar() ? QString::fromStdString(entry.second.Scalar()) : QString();
    if (value == "local") target.where = W::Local;
    else if (value == "ssh") target.where = W::Ssh;
    else if (value == "slurm") target.where = W::Slurm;
    else if (value == "sagemaker") target.where = W::SageMaker;
    else throw ConfigError((at + ": '" + value + "' is not a target (local, ssh, slurm, sagemaker)").toStdString());
  }
  bool hosts = false;
  for (const auto& entry : root) {
    const QString key_name = QString::fromStdString(entry.first.as<std::string>(""));
    if (key_name == "target") continue;
    const YAML::Node& node = entry.second;
    const QString at = where_at(node, entry.first).arg(key_name);
    const Key* key = find_key(key_name);
    if (!key) {
      throw ConfigError((at + ": not a launch setting Spur knows; a " + where_name(target.where) + " target takes " +
                         key_list(target.where))
                            .toStdString());
    }
    if (!key->targets.empty() &&
        std::find(key->targets.begin(), key->targets.end(), target.where) == key->targets.end()) {
      throw ConfigError((at + ": not a setting of a " + where_name(target.where) +
                         " target (target: " + where_name(target.where) + "; it takes " + key_list(target.where) + ")")
                            .toStdString());
    }
    const QString flag = "--" + key_name;
    const auto scalar = [&]() {
      if (!node.IsScalar()) throw ConfigError((at + ": expected a plain value").toStdString());
      return QString::fromStdString(node.Scalar());
    };
    const auto number = [&](int minimum) {
      bool ok = false;
      const QString value = scalar();
      const int n = value.toInt(&ok);
      if (!ok || n < minimum) {
        throw ConfigError(
            (at + ": '" + value + "' is not a whole number of at least " + QString::number(minimum)).toStdString());
      }
      return n;
    };
    switch (key->kind) {
      case Kind::Text: {
        if (node.IsNull()) break;
        const QString value = scalar();
        if (key->check) {
          if (const QString problem = key->check(value); !problem.isEmpty())
            throw ConfigError((at + ": " + problem).toStdString());
        }
        if (!value.isEmpty()) target.flags << flag << value;
        break;
      }
      case Kind::Path: {
        if (node.IsNull()) break;
        const QString value = scalar();
        if (!value.isEmpty()) target.flags << flag << QDir(folder).absoluteFilePath(value);
        hosts = hosts || key_name == "hostfile";
        break;
      }
      case Kind::Count:
        target.flags << flag << QString::number(number(key->minimum));
        break;
      case Kind::Whole: {
        const int n = number(0);
        if (n > 0) target.flags << flag << QString::number(n);
        break;
      }
      case Kind::Switch: {
        const QString value = scalar();
        if (value == "true") target.flags << flag;
        else if (value != "false") throw ConfigError((at + ": '" + value + "' is not true or false").toStdString());
        break;
      }
      case Kind::List: {
        QStringList items;
        if (node.IsSequence()) {
          for (const auto& item : node) {
            if (!item.IsScalar()) throw ConfigError((at + ": expected a list of names").toStdString());
            items << QString::fromStdString(item.Scalar());
          }
        } else {
          items = split_host_list(scalar());
        }
        const QString list = items.join(',');
        if (const QString problem = check_host_list(list); !problem.isEmpty())
          throw ConfigError((at + ": " + problem).toStdString());
        target.flags << flag << list;
        hosts = true;
        break;
      }
      case Kind::Map: {
        if (node.IsNull()) break;
        if (!node.IsMap()) throw ConfigError((at + ": expected NAME: value lines").toStdString());
        for (const auto& variable : node) {
          const QString variable_name = QString::fromStdString(variable.first.as<std::string>(""));
          const QString line =
              QString("%1:%2: env: %3").arg(name).arg(variable.first.Mark().line + 1).arg(variable_name);
          if (!variable.second.IsNull() && !variable.second.IsScalar())
            throw ConfigError((line + ": expected a plain value").toStdString());
          // A name without a value takes the launching shell's (a secret kept out of the file).
          const QString assignment = variable.second.IsNull()
                                         ? variable_name
                                         : variable_name + "=" + QString::fromStdString(variable.second.Scalar());
          try {
            parse_environment_assignment(variable_name + "=");  // the name's shape (its value may come later)
          } catch (const std::exception& e) {
            throw ConfigError((line + ": " + QString::fromUtf8(e.what())).toStdString());
          }
          target.flags << flag << assignment;
        }
        break;
      }
    }
  }
  if (target.where == W::Ssh && !hosts)
    throw ConfigError((name + ": an ssh target needs hosts (a list) or a hostfile").toStdString());
  return target;
}

QStringList LaunchTarget::launch_flags() const {
  QStringList all;
  if (where == W::Slurm) all << "--slurm";
  return all + flags;
}

std::optional<QString> LaunchTarget::value(const QString& name) const {
  for (const auto& flag : split_launch_flags(flags)) {
    if (flag.name == name) return flag.value;
  }
  return std::nullopt;
}

void LaunchTarget::remove(const QSet<QString>& names) {
  QStringList kept;
  for (const auto& flag : split_launch_flags(flags)) {
    if (!names.contains(flag.name)) kept << flag.words;
  }
  flags = kept;
}

QString LaunchTarget::to_yaml(const QString& config_path) const {
  YAML::Emitter yaml;
  yaml << YAML::BeginMap << YAML::Key << "target" << YAML::Value << where_name(where).toStdString();
  // The variables go under one key, where the first of them is among the flags (so that the file reads back in the
  // flags' order).
  std::vector<std::pair<QString, QString>> env;
  for (const auto& flag : split_launch_flags(flags)) {
    if (flag.name == "env")
      env.emplace_back(env_name(flag.value), flag.value.contains('=') ? flag.value.section('=', 1) : QString());
  }
  bool env_written = false;
  for (const auto& flag : split_launch_flags(flags)) {
    const Key* key = find_key(flag.name);
    if (!key) continue;  // not a setting the file holds (a run's name): the caller's own
    if (key->kind == Kind::Map) {
      if (env_written) continue;
      env_written = true;
      yaml << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
      for (const auto& [variable, value] : env) {
        yaml << YAML::Key << variable.toStdString() << YAML::Value;
        if (value.isNull()) yaml << YAML::Null;
        else yaml << YAML::DoubleQuoted << value.toStdString();
      }
      yaml << YAML::EndMap;
      continue;
    }
    yaml << YAML::Key << key->name << YAML::Value;
    switch (key->kind) {
      case Kind::List:
        yaml << YAML::Flow << YAML::BeginSeq;
        for (const auto& item : flag.value.split(',', Qt::SkipEmptyParts)) yaml << item.toStdString();
        yaml << YAML::EndSeq;
        break;
      case Kind::Switch:
        yaml << true;
        break;
      case Kind::Count:
      case Kind::Whole:
        yaml << flag.value.toInt();
        break;
      default:
        // Quoted where YAML would read another type ("2:00:00" is a sexagesimal number to YAML 1.1 readers).
        yaml << YAML::DoubleQuoted << flag.value.toStdString();
        break;
    }
  }
  yaml << YAML::EndMap;
  return "# Spur's launch settings for " + QFileInfo(config_path).fileName() +
         " (Accelerate's loader does not read this file).\n# `spur launch --config_file " +
         QFileInfo(config_path).fileName() + " PROGRAM` reads both; flags given on its command line win.\n" +
         QString::fromUtf8(yaml.c_str()) + "\n";
}

void LaunchTarget::save_for(const QString& config_path) const {
  const QString path = path_for(config_path);
  if (empty()) {
    if (QFileInfo::exists(path) && !QFile::remove(path)) {
      throw ConfigError(path.toStdString() + ": an old target file that cannot be removed");
    }
    return;
  }
  write_private_file(path.toStdString(), to_yaml(config_path).toStdString());
}

QString LaunchTarget::describe() const {
  QString value_of_host_list;
  QString hostfile, nodes = "1", tasks = "1", partition;
  for (const auto& flag : split_launch_flags(flags)) {
    if (flag.name == "hosts") value_of_host_list = flag.value;
    if (flag.name == "hostfile") hostfile = flag.value;
    if (flag.name == "nodes") nodes = flag.value;
    if (flag.name == "ntasks_per_node") tasks = flag.value;
    if (flag.name == "partition") partition = flag.value;
  }
  switch (where) {
    case W::Ssh:
      return !value_of_host_list.isEmpty() ? "over SSH on " + value_of_host_list.split(',').join(", ")
                                           : "over SSH on the hosts of " + hostfile;
    case W::Slurm:
      return "a Slurm job of " + nodes + " node(s) x " + tasks + " task(s)" +
             (partition.isEmpty() ? QString() : " in partition " + partition);
    case W::SageMaker:
      return "a SageMaker training job";
    case W::Local:
      break;
  }
  return "this machine";
}

QStringList merge_launch_flags(const LaunchTarget& target, const QStringList& given) {
  const auto mine = split_launch_flags(given);
  QSet<QString> named, variables;
  for (const auto& flag : mine) {
    named.insert(flag.name);
    if (flag.name == "env") variables.insert(env_name(flag.value));
  }
  const bool other_hosts = named.contains("hosts") || named.contains("hostfile");
  const bool other_slurm = named.contains("slurm");
  QStringList merged;
  for (const auto& flag : split_launch_flags(target.launch_flags())) {
    if (flag.name == "env" ? variables.contains(env_name(flag.value)) : named.contains(flag.name)) continue;
    if (other_hosts && (slurm_group().contains(flag.name) || ssh_group().contains(flag.name))) continue;
    if (other_slurm && ssh_group().contains(flag.name)) continue;
    merged << flag.words;
  }
  return merged + given;
}

}  // namespace spur::app
