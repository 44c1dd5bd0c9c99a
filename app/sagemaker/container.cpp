// SPDX-License-Identifier: Apache-2.0
// The SageMaker training-container contract, read; see container.h.
#include "sagemaker/container.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSaveFile>

#include "sagemaker/training_job.h"

namespace spur::app {
namespace {

QJsonObject read_json(const QString& path, bool required) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (!required) return {};
    throw LaunchError("SageMaker container: cannot read " + path + ": " + file.errorString());
  }
  QJsonParseError error{};
  const auto document = QJsonDocument::fromJson(file.readAll(), &error);
  if (error.error != QJsonParseError::NoError || !document.isObject()) {
    throw LaunchError(QString("SageMaker container: %1 is not a JSON object (%2 at offset %3)")
                          .arg(path, error.errorString())
                          .arg(error.offset));
  }
  return document.object();
}

QStringList string_list(const QJsonObject& hyperparameters, const char* key) {
  const QString text = hyperparameters.value(key).toString();
  if (text.isEmpty()) return {};
  const auto document = QJsonDocument::fromJson(text.toUtf8());
  if (!document.isArray())
    throw LaunchError(QString("SageMaker container: hyperparameter %1 is not a JSON array").arg(key));
  QStringList items;
  for (const auto& item : document.array()) items << item.toString();
  return items;
}

}  // namespace

std::optional<SageMakerContainer> detect_sagemaker_container(const QProcessEnvironment& environment) {
  const QString root = environment.value("SPUR_SAGEMAKER_ROOT", "/opt/ml");
  const QString resources = root + "/input/config/resourceconfig.json";
  if (!QFile::exists(resources)) return std::nullopt;
  SageMakerContainer container;
  container.root = root;
  const auto config = read_json(resources, true);
  container.current_host = config.value("current_host").toString();
  for (const auto& host : config.value("hosts").toArray()) container.hosts << host.toString();
  if (container.hosts.isEmpty() || container.machine_rank() < 0) {
    throw LaunchError("SageMaker container: " + resources + " names current_host '" + container.current_host +
                      "', which is not among its hosts [" + container.hosts.join(", ") + "]");
  }
  container.hyperparameters = read_json(root + "/input/config/hyperparameters.json", false);
  container.network_interface = config.value("network_interface_name").toString();
  if (environment.contains("SM_NUM_GPUS")) {
    container.num_gpus = environment.value("SM_NUM_GPUS").toInt();
  } else {
    // A bring-your-own image has no SageMaker toolkit to set SM_*: ask the driver (one directory per GPU).
    container.num_gpus = static_cast<int>(QDir(environment.value("SPUR_NVIDIA_PROC", "/proc/driver/nvidia/gpus"))
                                              .entryList(QDir::Dirs | QDir::NoDotAndDotDot)
                                              .size());
  }
  return container;
}

QString SageMakerContainer::program() const {
  QString program = hyperparameters.value(kProgramHyperparameter).toString();
  if (program.isEmpty()) {
    throw LaunchError("SageMaker container: no program to launch: the job's hyperparameters have no " +
                      QString(kProgramHyperparameter) + " (submit it with `spur launch`), and none was given");
  }
  return program;
}

QStringList SageMakerContainer::arguments() const { return string_list(hyperparameters, kArgumentsHyperparameter); }

QStringList SageMakerContainer::launch_flags() const {
  return string_list(hyperparameters, kLaunchFlagsHyperparameter);
}

void SageMakerContainer::complete(LaunchOptions& options) const {
  const int machines = static_cast<int>(hosts.size());
  if (!options.num_machines) options.num_machines = machines;
  if (!options.machine_rank) options.machine_rank = machine_rank();
  if (!options.main_process_ip) options.main_process_ip = hosts.front();
  if (!options.num_processes) options.num_processes = machines * std::max(1, options.cpu ? 1 : num_gpus);
  if (!network_interface.isEmpty()) {
    const auto environment = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
      bool given = environment.contains(name);
      for (const auto& [key, value] : options.environment) given = given || key == name;
      if (!given) options.environment.append({name, network_interface});
    }
  }
}

void SageMakerContainer::report_failure(const QString& reason) const {
  QDir().mkpath(root + "/output");
  QSaveFile file(root + "/output/failure");
  if (file.open(QIODevice::WriteOnly)) {
    file.write(reason.toUtf8().left(1024));  // DescribeTrainingJob shows at most 1,024 characters
    file.commit();
  }
}

}  // namespace spur::app
