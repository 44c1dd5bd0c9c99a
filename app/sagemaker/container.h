// SPDX-License-Identifier: Apache-2.0
// Inside a SageMaker training container: what `spur launch` learns from /opt/ml (the hosts, this host, the
// hyperparameters carrying the program) and where it reports a failure for DescribeTrainingJob to show.
#pragma once

#include <QJsonObject>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <optional>

#include "launch/launch_plan.h"

namespace spur::app {

struct SageMakerContainer {
  QString root;  // /opt/ml, or $SPUR_SAGEMAKER_ROOT (tests)
  QString current_host;
  QStringList hosts;  // algo-1, algo-2, ...: the first is the rendezvous host
  QJsonObject hyperparameters;
  /// SM_NUM_GPUS where the SageMaker training toolkit sets it, else the GPUs the NVIDIA driver lists.
  int num_gpus = 0;
  /// resourceconfig.json's network_interface_name (eth0): Gloo and NCCL are told to use it.
  QString network_interface;

  int machine_rank() const { return static_cast<int>(hosts.indexOf(current_host)); }
  /// The program, its arguments and launch flags the job carries (training_job.h); LaunchError if absent.
  QString program() const;
  QStringList arguments() const;
  QStringList launch_flags() const;
  /// Fills what the flags left unset: machines, this machine's rank, the rendezvous host, processes per host
  /// (one per GPU, else one), and GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME unless the environment has them.
  void complete(LaunchOptions& options) const;
  /// Writes output/failure, whose text DescribeTrainingJob shows as FailureReason.
  void report_failure(const QString& reason) const;
};

/// The container's description when resourceconfig.json exists under the root; LaunchError if it is unreadable.
std::optional<SageMakerContainer> detect_sagemaker_container(
    const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment());

}  // namespace spur::app
