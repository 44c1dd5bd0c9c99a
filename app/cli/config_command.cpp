// SPDX-License-Identifier: Apache-2.0
// `spur config`: the terminal questionnaire (machines without a display), `config default`, `config show` and
// `config validate`. Files are Accelerate's format: a file written here loads in Accelerate, and back.
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTextStream>
#include <QThread>

#include <functional>
#include <iostream>
#include <string>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"

namespace spur::cli {
namespace {

int detected_gpus() {
  const QString smi = QStandardPaths::findExecutable("nvidia-smi");
  if (smi.isEmpty()) return 0;
  QProcess process;
  process.start(smi, {"-L"});
  if (!process.waitForFinished(10000) || process.exitCode() != 0) return 0;
  return static_cast<int>(QString::fromLocal8Bit(process.readAllStandardOutput()).trimmed().split('\n', Qt::SkipEmptyParts).size());
}

std::string target_path(const Arguments& args) {
  if (auto file = args.value("config_file")) return file->toStdString();
  return app::default_config_path();
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
  std::string choose(const std::string& question, const std::vector<std::string>& options, const std::string& fallback) {
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

YAML::Node str(const std::string& s) {
  YAML::Node node(s);
  node.SetTag("!");  // a string, whatever it looks like ('NO', '0')
  return node;
}

app::RunConfig questionnaire(const std::string& path) {
  Questionnaire q;
  const int gpus = detected_gpus();
  std::cout << "Spur's questions are Accelerate's (`accelerate config`); the file is Accelerate's format.\n"
            << "Detected: " << QThread::idealThreadCount() << " CPU cores, " << gpus << " GPU(s).\n";
  const auto where = q.choose("Where does the run happen?", {"this_machine", "sagemaker"}, "this_machine");
  auto config = app::RunConfig::defaults("no", gpus);
  if (where == "sagemaker") {
    YAML::Node root;
    root["compute_environment"] = str("AMAZON_SAGEMAKER");
    root["distributed_type"] = str(q.choose("Distributed mode", {"NO", "DATA_PARALLEL"}, "DATA_PARALLEL"));
    root["region"] = str(q.ask("AWS region", "us-east-1", [](const std::string& a) { return a.empty() ? "a region" : ""; }));
    root["iam_role_name"] = str(q.ask("IAM role for the training job", "spur_sagemaker_execution_role",
                                      [](const std::string& a) { return a.empty() ? "a role name or ARN" : ""; }));
    const auto none = [](const std::string&) { return std::string(); };
    if (auto profile = q.ask("AWS profile (empty: the AWS CLI's default credentials)", "", none); !profile.empty()) {
      root["profile"] = str(profile);
    }
    if (auto inputs = q.ask("Input channels file (TSV: channel<TAB>s3://uri; empty: none)", "", none); !inputs.empty()) {
      root["sagemaker_inputs_file"] = str(inputs);
    }
    if (auto metrics = q.ask("Metrics file (TSV: name<TAB>regex; empty: none)", "", none); !metrics.empty()) {
      root["sagemaker_metrics_file"] = str(metrics);
    }
    root["image_uri"] = str(q.ask("Training image (your container, with Spur and your program)", "",
                                  [](const std::string& a) { return a.empty() ? "an ECR image URI" : ""; }));
    root["ec2_instance_type"] = str(q.ask("Instance type", "ml.p3.2xlarge",
                                          [](const std::string& a) { return a.rfind("ml.", 0) == 0 ? "" : "an ml.* type"; }));
    root["num_machines"] = q.integer("How many instances?", 1, 1, 1000);
    root["mixed_precision"] = str(q.choose("Mixed precision", {"no", "fp16", "bf16"}, "no"));
    root["debug"] = false;
    root["use_cpu"] = false;
    YAML::Emitter out;
    out << root;
    config = app::RunConfig::parse(out.c_str(), path);
  } else {
    const auto kind = q.choose("Which kind of run?", {"NO", "MULTI_CPU", "MULTI_GPU"},
                               gpus > 1 ? "MULTI_GPU" : (QThread::idealThreadCount() > 1 ? "MULTI_CPU" : "NO"));
    config.set("distributed_type", str(kind));
    if (kind != "NO") {
      const int machines = q.integer("How many machines?", 1, 1, 10000);
      config.set("num_machines", YAML::Node(machines));
      if (machines > 1) {
        config.set("machine_rank", YAML::Node(q.integer("This machine's rank (0 is the main one)", 0, 0, machines - 1)));
        config.set("main_process_ip", str(q.ask("Main machine's IP address", "", [](const std::string& a) {
                     return a.empty() ? "the address the other machines reach it at" : "";
                   })));
        config.set("main_process_port", YAML::Node(q.integer("Main machine's port", 29500, 1, 65535)));
        config.set("same_network", YAML::Node(q.yes("Are all machines on the same local network?", true)));
      }
      const int per_machine_default = kind == "MULTI_GPU" ? std::max(1, gpus) : std::max(2, QThread::idealThreadCount() / 2);
      const int per_machine = q.integer("Processes per machine", per_machine_default, 1, 4096);
      config.set("num_processes", YAML::Node(per_machine * machines));
    } else {
      config.set("num_processes", YAML::Node(1));
    }
    const bool cpu = kind == "MULTI_CPU" || gpus == 0 || q.yes("Run on the CPU only?", false);
    config.set("use_cpu", YAML::Node(cpu));
    if (!cpu) {
      config.set("gpu_ids", str(q.ask("Which GPUs (all, or numbers like 0,1)?", "all", [](const std::string& a) {
                   return a == "all" || QString::fromStdString(a).contains(QRegularExpression("^[0-9]+(,[0-9]+)*$"))
                              ? ""
                              : "all, or numbers like 0,1";
                 })));
    }
    config.set("mixed_precision", str(q.choose("Mixed precision", {"no", "fp16", "bf16"}, cpu ? "no" : "bf16")));
  }
  return config;
}

}  // namespace

int config_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  QStringList rest = arguments;
  const QString sub = rest.isEmpty() || rest.front().startsWith("--") ? QString() : rest.takeFirst();
  try {
    if (sub == "default") {
      const Arguments args(rest, {"mixed_precision", "config_file"}, {});
      const auto precision = args.value("mixed_precision").value_or("no").toStdString();
      const auto path = target_path(args);
      auto config = app::RunConfig::defaults(precision, detected_gpus());
      config.save(path);
      out << "Configuration saved at " << QString::fromStdString(path) << "\n";
      return 0;
    }
    if (sub == "show") {
      const Arguments args(rest, {"config_file"}, {});
      const std::string path = args.value("config_file") ? args.value("config_file")->toStdString() : app::config_in_effect();
      if (path.empty()) {
        out << "No configuration: none at " << QString::fromStdString(app::default_config_path()) << " nor at "
            << QString::fromStdString(app::accelerate_config_path()) << ". `spur config` writes one.\n";
        return 1;
      }
      const auto config = app::RunConfig::load(path);
      out << "# " << QString::fromStdString(path) << "\n" << QString::fromStdString(config.to_yaml());
      print_notes(out, config);
      return 0;
    }
    if (sub == "validate") {
      const Arguments args(rest, {}, {});
      if (args.positional().size() != 1) throw UsageError("usage: spur config validate FILE");
      const auto path = args.positional().front().toStdString();
      const auto config = app::RunConfig::load(path);
      out << QString::fromStdString(path) << ": valid\n";
      print_notes(out, config);
      return 0;
    }
    if (sub.isEmpty()) {
      const Arguments args(rest, {"config_file"}, {});
      const auto path = target_path(args);
      const auto config = questionnaire(path);
      config.save(path);
      out << "Configuration saved at " << QString::fromStdString(path) << "\n";
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
