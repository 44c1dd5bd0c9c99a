// SPDX-License-Identifier: Apache-2.0
// Building CreateTrainingJob from a SageMaker configuration; see training_job.h. Limits are SageMaker's own
// (job names 63 characters, hyperparameter values 2,500, environment values 512).
#include "sagemaker/training_job.h"

#include "launch/secrets.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>

#include <set>

namespace spur::app {
namespace {

constexpr int kMaxJobName = 63;
constexpr int kMaxHyperparameterValue = 2500;
constexpr int kMaxEnvironmentValue = 512;

// "FILE:LINE: key: why" for a key of the configuration.
[[noreturn]] void fail(const RunConfig& config, const std::string& key, const QString& why) {
  std::string where = config.name();
  if (const YAML::Node* node = config.find(key); node && node->Mark().line >= 0) {
    where += ":" + std::to_string(node->Mark().line + 1);
  }
  throw ConfigError(where + ": " + key + ": " + why.toStdString());
}

QString scalar(const YAML::Node& node) { return QString::fromStdString(node.Scalar()); }

// A tab-separated file as Accelerate reads it: the first line is a header; every other non-empty line has two
// fields.
QList<QPair<QString, QString>> read_tsv(const RunConfig& config, const std::string& key, const QString& base,
                                        const QString& what) {
  const QString name = QString::fromStdString(config.text(key, ""));
  const QString path = QDir::isAbsolutePath(name) ? name : QDir(base).filePath(name);
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly | QIODevice::Text))
    fail(config, key, "cannot read " + path + ": " + file.errorString());
  QList<QPair<QString, QString>> rows;
  int line_number = 0;
  while (!file.atEnd()) {
    const QString line = QString::fromUtf8(file.readLine()).remove('\r').remove('\n');
    if (++line_number == 1 || line.trimmed().isEmpty()) continue;
    const auto fields = line.split('\t');
    if (fields.size() != 2 || fields[0].trimmed().isEmpty() || fields[1].trimmed().isEmpty()) {
      throw ConfigError(QString("%1:%2: expected %3 (two fields separated by a tab)")
                            .arg(path)
                            .arg(line_number)
                            .arg(what)
                            .toStdString());
    }
    rows.append({fields[0].trimmed(), fields[1].trimmed()});
  }
  return rows;
}

QString json_array(const QStringList& items) {
  return QString::fromUtf8(QJsonDocument(QJsonArray::fromStringList(items)).toJson(QJsonDocument::Compact));
}

}  // namespace

QString training_job_name(const QString& base, const QDateTime& now) {
  static const QRegularExpression allowed("^[a-zA-Z0-9](-*[a-zA-Z0-9])*$");
  if (!allowed.match(base).hasMatch()) {
    throw ConfigError("base_job_name '" + base.toStdString() +
                      "': SageMaker job names are letters, digits and single hyphens, starting with a letter or digit");
  }
  const QString stamp = now.toUTC().toString("yyyy-MM-dd-HH-mm-ss-zzz");
  QString head = base.left(kMaxJobName - 1 - static_cast<int>(stamp.size()));
  while (head.endsWith('-')) head.chop(1);
  return head + "-" + stamp;
}

QString account_of_arn(const QString& arn) {
  static const QRegularExpression iam("^arn:aws[a-z-]*:iam::(\\d{12}):role/.+$");
  const auto match = iam.match(arn);
  return match.hasMatch() ? match.captured(1) : QString();
}

TrainingJobRequest make_training_job_request(const RunConfig& config, const TrainingJobOptions& options) {
  if (!config.sagemaker()) throw ConfigError(config.name() + ": compute_environment is not AMAZON_SAGEMAKER");
  TrainingJobRequest result;
  result.region = QString::fromStdString(config.text("region", "us-east-1"));

  const QString image = QString::fromStdString(config.text("image_uri", ""));
  if (image.isEmpty()) {
    throw ConfigError(config.name() +
                      ": image_uri is missing: Spur runs your program in your own container image "
                      "(with Spur and the program installed, ENTRYPOINT [\"spur\", \"launch\"]); see "
                      "docs/launch.md (Amazon SageMaker)");
  }
  const std::string type = config.distributed_type();
  if (type == "MODEL_PARALLEL") {
    fail(config, "distributed_type",
         "MODEL_PARALLEL is SageMaker's Python model-parallel library; Spur runs NO or "
         "DATA_PARALLEL");
  }
  const int instances = options.instance_count.value_or(config.num_machines());
  if (instances < 1) throw ConfigError("--num_machines must be at least 1");
  if (type == "NO" && instances > 1) {
    fail(config, "num_machines",
         QString("%1 instances with distributed_type NO would run %1 unrelated copies: use "
                 "DATA_PARALLEL, or 1 machine")
             .arg(instances));
  }

  QString role = options.role_arn;
  if (role.isEmpty()) role = QString::fromStdString(config.text("iam_role_name", ""));
  if (!role.startsWith("arn:")) fail(config, "iam_role_name", "'" + role + "' was not resolved to a role ARN");

  // additional_args: the SageMaker Python SDK's Estimator arguments, which Accelerate passes through.
  QJsonObject hyperparameters, environment;
  QJsonArray tags;
  int max_run = 24 * 3600, volume = 30;
  QString input_mode = "File", output_path;
  if (const YAML::Node* extra = config.find("additional_args"); extra && extra->IsMap()) {
    for (const auto& item : *extra) {
      const std::string key = item.first.Scalar();
      const YAML::Node& value = item.second;
      const std::string where = "additional_args." + key;
      auto integer = [&](int minimum) {
        try {
          const int v = value.as<int>();
          if (v < minimum) throw YAML::Exception(value.Mark(), "too small");
          return v;
        } catch (const YAML::Exception&) {
          fail(config, "additional_args",
               QString::fromStdString(key) + " must be a whole number of at least " + QString::number(minimum));
        }
      };
      if (key == "max_run") {
        max_run = integer(1);
      } else if (key == "volume_size") {
        volume = integer(1);
      } else if (key == "output_path" && value.IsScalar()) {
        output_path = scalar(value);
      } else if (key == "input_mode" && value.IsScalar()) {
        input_mode = scalar(value);
      } else if ((key == "hyperparameters" || key == "environment") && value.IsMap()) {
        for (const auto& entry : value) {
          if (!entry.second.IsScalar())
            fail(config, "additional_args", QString::fromStdString(where) + " values must be strings");
          (key == "environment" ? environment : hyperparameters)[scalar(entry.first)] = scalar(entry.second);
        }
      } else if (key == "tags" && value.IsSequence()) {
        for (const auto& tag : value) {
          if (!tag.IsMap() || !tag["Key"] || !tag["Value"])
            fail(config, "additional_args", "tags are {Key, Value} maps");
          tags.append(QJsonObject{{"Key", scalar(tag["Key"])}, {"Value", scalar(tag["Value"])}});
        }
      } else {
        result.notes << QString::fromStdString(where) + ": a SageMaker Python SDK setting Spur does not use";
      }
    }
  }
  for (const char* key : {"pytorch_version", "transformers_version", "py_version"}) {
    if (config.find(key))
      result.notes << QString(key) + ": Accelerate picks a Python image with it; Spur runs image_uri";
  }
  if (output_path.isEmpty()) {
    const QString account = account_of_arn(role);
    if (account.isEmpty())
      fail(config, "iam_role_name",
           "cannot tell the account from '" + role +
               "' for the default "
               "output bucket; set additional_args.output_path");
    result.default_bucket = "sagemaker-" + result.region + "-" + account;
    output_path = "s3://" + result.default_bucket + "/";
  }

  hyperparameters[kProgramHyperparameter] = options.program;
  hyperparameters[kArgumentsHyperparameter] = json_array(options.arguments);
  hyperparameters[kLaunchFlagsHyperparameter] = json_array(options.launch_flags);
  for (auto it = hyperparameters.begin(); it != hyperparameters.end(); ++it) {
    if (it.value().toString().size() > kMaxHyperparameterValue) {
      throw ConfigError(QString("hyperparameter %1 is %2 characters long; SageMaker allows %3 (shorten the program's "
                                "arguments, or read them from a file in the image or an input channel)")
                            .arg(it.key())
                            .arg(it.value().toString().size())
                            .arg(kMaxHyperparameterValue)
                            .toStdString());
    }
  }
  for (const auto& [name, value] : options.environment) environment[name] = value;
  // Hyperparameters and the environment are shown in the console and by DescribeTrainingJob to anyone who can
  // list jobs: a secret (launch/secrets.h's rule) deserves a warning.
  auto warn_if_secret = [&](const QString& name, const QString& where, const QString& value = QString()) {
    if (is_secret(name, value)) {
      result.notes << where + " " + name +
                          " looks like a secret, and jobs show it to anyone who can describe them: "
                          "read secrets in the job from AWS Secrets Manager instead";
    }
  };
  for (auto it = hyperparameters.begin(); it != hyperparameters.end(); ++it) {
    warn_if_secret(it.key(), "hyperparameter", it.value().toString());
  }
  for (auto it = environment.begin(); it != environment.end(); ++it) {
    warn_if_secret(it.key(), "environment variable", it.value().toString());
  }
  for (const auto& argument : options.arguments) {
    if (argument.startsWith('-'))
      warn_if_secret(argument.section('=', 0, 0).mid(argument.startsWith("--") ? 2 : 1), "argument");
  }
  static const std::set<QString> credentials = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"};
  for (auto it = environment.begin(); it != environment.end(); ++it) {
    if (credentials.contains(it.key())) {
      throw ConfigError(it.key().toStdString() +
                        ": credentials never go into a job (it runs with its IAM role, "
                        "iam_role_name)");
    }
    if (it.value().toString().size() > kMaxEnvironmentValue) {
      throw ConfigError(QString("environment variable %1 is longer than SageMaker's %2 characters")
                            .arg(it.key())
                            .arg(kMaxEnvironmentValue)
                            .toStdString());
    }
  }

  QJsonObject algorithm{{"TrainingImage", image}, {"TrainingInputMode", input_mode}};
  if (config.find("sagemaker_metrics_file")) {
    QJsonArray metrics;
    for (const auto& [name, regex] :
         read_tsv(config, "sagemaker_metrics_file", options.base_directory, "metric_name<TAB>regex")) {
      if (!QRegularExpression(regex).isValid()) {
        fail(config, "sagemaker_metrics_file", "the regex of metric " + name + " is not valid: " + regex);
      }
      metrics.append(QJsonObject{{"Name", name}, {"Regex", regex}});
    }
    if (!metrics.isEmpty()) algorithm["MetricDefinitions"] = metrics;
  }

  result.job_name = options.job_name.isEmpty()
                        ? training_job_name(QString::fromStdString(config.text("base_job_name", "spur")), options.now)
                        : options.job_name;
  QJsonObject& request = result.request;
  request["TrainingJobName"] = result.job_name;
  request["AlgorithmSpecification"] = algorithm;
  request["RoleArn"] = role;
  request["ResourceConfig"] =
      QJsonObject{{"InstanceType", QString::fromStdString(config.text("ec2_instance_type", ""))},
                  {"InstanceCount", instances},
                  {"VolumeSizeInGB", volume}};
  request["OutputDataConfig"] = QJsonObject{{"S3OutputPath", output_path}};
  request["StoppingCondition"] = QJsonObject{{"MaxRuntimeInSeconds", max_run}};
  request["HyperParameters"] = hyperparameters;
  if (!environment.isEmpty()) request["Environment"] = environment;
  if (!tags.isEmpty()) request["Tags"] = tags;
  if (config.find("sagemaker_inputs_file")) {
    QJsonArray channels;
    for (const auto& [channel, uri] :
         read_tsv(config, "sagemaker_inputs_file", options.base_directory, "channel_name<TAB>s3_uri")) {
      if (!uri.startsWith("s3://"))
        fail(config, "sagemaker_inputs_file", "channel " + channel + ": '" + uri + "' is not an s3:// URI");
      channels.append(QJsonObject{
          {"ChannelName", channel},
          {"DataSource", QJsonObject{{"S3DataSource", QJsonObject{{"S3DataType", "S3Prefix"},
                                                                  {"S3Uri", uri},
                                                                  {"S3DataDistributionType", "FullyReplicated"}}}}}});
    }
    if (!channels.isEmpty()) request["InputDataConfig"] = channels;
  }
  return result;
}

}  // namespace spur::app
