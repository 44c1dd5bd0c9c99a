// SPDX-License-Identifier: Apache-2.0
// The CreateTrainingJob request for a SageMaker run configuration: your own container image runs
// `spur launch`, which finds the program, its arguments and the launch flags in the job's hyperparameters.
#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>

#include <optional>

#include "config/run_config.h"

namespace spur::app {

/// The hyperparameters (strings, visible in the SageMaker console: never secrets) that carry the run.
inline constexpr const char* kProgramHyperparameter = "spur_program";
inline constexpr const char* kArgumentsHyperparameter = "spur_arguments";       // a JSON array of strings
inline constexpr const char* kLaunchFlagsHyperparameter = "spur_launch_flags";  // a JSON array of strings

struct TrainingJobOptions {
  QString program;
  QStringList arguments;
  /// Flags for `spur launch` in the container (--mixed_precision bf16, --gradient_accumulation_steps 4...).
  QStringList launch_flags;
  /// `--env NAME=VALUE` flags, over additional_args.environment.
  QList<QPair<QString, QString>> environment;
  /// The execution role's ARN (iam_role_name resolved); empty: iam_role_name must itself be an ARN.
  QString role_arn;
  /// Empty: base_job_name (or "spur") and the time, as the SageMaker SDK names jobs.
  QString job_name;
  /// Overrides num_machines (the instance count).
  std::optional<int> instance_count;
  /// Where relative sagemaker_inputs_file / sagemaker_metrics_file paths are read from.
  QString base_directory = ".";
  QDateTime now = QDateTime::currentDateTimeUtc();
};

struct TrainingJobRequest {
  QJsonObject request;  // CreateTrainingJob's input, for --cli-input-json
  QString job_name;
  QString region;
  QStringList notes;  // settings in the file that Spur does not use, values that look like secrets
  /// The SageMaker SDK's default bucket (sagemaker-REGION-ACCOUNT) when no output_path was given: created on
  /// submission if missing, as the SDK does. Empty otherwise.
  QString default_bucket;
};

/// "<base>-YYYY-MM-DD-HH-MM-SS-mmm", cut to SageMaker's 63 characters; ConfigError for a base it cannot name.
QString training_job_name(const QString& base, const QDateTime& now);

/// Builds the request; ConfigError naming the file, line and key (or the TSV file and line) on bad input.
TrainingJobRequest make_training_job_request(const RunConfig& config, const TrainingJobOptions& options);

/// The account in "arn:aws:iam::123456789012:role/name"; empty when it is not an IAM ARN.
QString account_of_arn(const QString& arn);

}  // namespace spur::app
