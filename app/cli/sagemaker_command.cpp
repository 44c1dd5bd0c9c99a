// SPDX-License-Identifier: Apache-2.0
// Amazon SageMaker from the command line: `spur launch` with a SageMaker configuration submits a training job
// and follows it (sagemaker_launch), and `spur sagemaker follow|stop|describe JOB` acts on one later.
#include <QDir>
#include <QJsonDocument>
#include <QTemporaryFile>
#include <QTextStream>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "config/run_config.h"
#include "launch/launch_plan.h"
#include "launch/secrets.h"
#include "sagemaker/aws_cli.h"
#include "sagemaker/job_follower.h"
#include "sagemaker/training_job.h"
#include "launch/supervisor.h"
#include <spur/core/stream_line.h>

namespace spur::cli {
namespace {

const char* kUsage =
    "usage: spur sagemaker follow|stop|describe JOB [--config_file F] [--region R] [--profile P]\n"
    "                      [--aws_endpoint_url URL] [--poll_interval S]\n"
    "  follow    print the job's status changes and its instances' log lines until it ends (Ctrl-C stops it)\n"
    "  stop      ask SageMaker to stop the job\n"
    "  describe  print DescribeTrainingJob's answer (JSON)\n"
    "Region and profile come from the flags, else the SageMaker configuration, else the AWS CLI's own settings.\n";

app::AwsOptions aws_options(const std::optional<app::RunConfig>& config, const Arguments& args) {
  app::AwsOptions options;
  if (config && config->sagemaker()) {
    options.region = QString::fromStdString(config->text("region", "us-east-1"));
    options.profile = QString::fromStdString(config->text("profile", ""));
  }
  if (auto v = args.value("region")) options.region = *v;
  if (auto v = args.value("profile")) options.profile = *v;
  options.endpoint_url = args.value("aws_endpoint_url").value_or(qEnvironmentVariable("SPUR_AWS_ENDPOINT_URL"));
  return options;
}

app::FollowOptions follow_options(const Arguments& args, const QString& who) {
  app::FollowOptions options;
  options.who = who;
  if (auto v = args.integer("poll_interval", 1, 3600)) options.poll = std::chrono::seconds(*v);
  return options;
}

// The SageMaker SDK's default bucket is created on first use; a job whose output bucket is missing fails only
// when it uploads its model, at the end.
void ensure_bucket(const app::AwsCli& aws, const QString& bucket, const QString& region, QTextStream& err) {
  try {
    aws.call("s3api", "head-bucket", {"--bucket", bucket});
    return;
  } catch (const app::AwsError& e) {
    if (e.error_code() != "404") {
      throw app::AwsError("the output bucket s3://" + bucket + " cannot be used (" + e.what() +
                              "); set additional_args.output_path to a bucket you own",
                          e.exit_code(), e.error_code());
    }
  }
  QStringList arguments{"--bucket", bucket};
  if (region != "us-east-1")
    arguments << "--create-bucket-configuration"
              << "LocationConstraint=" + region;
  aws.call("s3api", "create-bucket", arguments);
  err << "spur launch: created the output bucket s3://" << bucket << "\n";
}

}  // namespace

int sagemaker_launch(const app::RunConfig& config, const Arguments& args, const QStringList& given) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  for (const char* local : {"hosts", "hostfile", "machine_rank", "main_process_ip", "main_process_port", "gpu_ids"}) {
    if (args.has(local)) {
      throw UsageError(QString("--%1 is for runs on your own machines; %2 is a SageMaker configuration")
                           .arg(local, QString::fromStdString(config.name())));
    }
  }
  app::TrainingJobOptions job;
  job.program = args.positional().front();
  job.arguments = args.positional().mid(1);
  job.base_directory = QDir::currentPath();
  if (auto v = args.value("job_name")) job.job_name = *v;
  if (auto v = args.integer("num_machines", 1, 100000)) job.instance_count = static_cast<int>(*v);
  for (const auto& assignment : args.values("env")) job.environment << app::parse_environment_assignment(assignment);
  // The job's ranks print their metrics as "@spur" lines; following the logs records them here.
  bool trackers_chosen = false;
  for (const auto& [name, value] : job.environment) trackers_chosen = trackers_chosen || name == "SPUR_TRACKERS";
  if (!trackers_chosen) job.environment.append(qMakePair(QString("SPUR_TRACKERS"), QString("stream")));
  // Only lines carrying this launch's key are records (stream_line.h): a rank's other output is console text.
  const QString stream_key = QString::fromStdString(stream_line::new_key());
  job.environment.append(qMakePair(QString(stream_line::kKeyVariable), stream_key));
  // What the container's `spur launch` needs to run the program as configured here.
  const QString precision = args.value("mixed_precision").value_or(QString::fromStdString(config.mixed_precision()));
  job.launch_flags << "--mixed_precision" << precision;
  if (args.has("cpu") || args.has("use_cpu") || config.use_cpu()) job.launch_flags << "--cpu";
  for (const char* flag : {"num_processes", "gradient_accumulation_steps", "num_cpu_threads_per_process"}) {
    if (auto v = args.integer(flag, 1, 10'000'000)) job.launch_flags << QString("--") + flag << QString::number(*v);
  }

  app::AwsCli aws(aws_options(config, args));
  const QString role = QString::fromStdString(config.text("iam_role_name", ""));
  const bool dry_run = args.has("dry_run");
  // From here on Ctrl-C only counts: a job created while the user interrupts is stopped, never left behind.
  app::SignalCounter counting;
  const int signals_before = app::SignalCounter::count();
  auto interrupted = [&] { return app::SignalCounter::count() > signals_before; };
  if (role.startsWith("arn:")) {
    job.role_arn = role;
  } else if (dry_run) {
    job.role_arn = "arn:aws:iam::000000000000:role/" + role;  // looked up at submission
  } else {
    job.role_arn = aws.call("iam", "get-role", {"--role-name", role}).value("Role").toObject().value("Arn").toString();
  }
  const auto request = app::make_training_job_request(config, job);
  for (const auto& note : request.notes) err << "spur launch: note: " << note << "\n";

  const QByteArray json = QJsonDocument(request.request).toJson(QJsonDocument::Indented);
  if (dry_run) {
    // What is shown has the secrets' values redacted (the request sent keeps them: the job needs them).
    QJsonObject shown = request.request;
    for (const char* part : {"Environment", "HyperParameters"}) {
      if (shown.contains(part)) shown[part] = app::redacted_variables(shown[part].toObject());
    }
    out << "SageMaker training job " << request.job_name << " in " << aws.options().region << "; would run:\n  "
        << aws.command("sagemaker", "create-training-job", {"--cli-input-json", "file://REQUEST"}).join(' ')
        << "\nwith REQUEST (secrets' values shown as <redacted>):\n"
        << QJsonDocument(shown).toJson(QJsonDocument::Indented);
    if (!role.startsWith("arn:")) out << "(the role's ARN and the default output bucket are looked up on submission)\n";
    if (!request.default_bucket.isEmpty()) out << "(the output bucket is created if it does not exist)\n";
    return 0;
  }
  if (!request.default_bucket.isEmpty() && !interrupted())
    ensure_bucket(aws, request.default_bucket, request.region, err);
  if (interrupted()) {
    err << "spur launch: interrupted before submitting; no job was created\n";
    return 128 + app::SignalCounter::last();
  }
  const auto resources = request.request.value("ResourceConfig").toObject();
  err << "spur launch: submitting SageMaker training job " << request.job_name << " ("
      << resources.value("InstanceCount").toInt() << " x " << resources.value("InstanceType").toString() << ", "
      << aws.options().region << ")\n";
  err.flush();
  {
    QTemporaryFile file(QDir::tempPath() + "/spur-sagemaker-XXXXXX.json");  // mode 0600; holds no credentials
    if (!file.open() || file.write(json) != json.size() || !file.flush()) {
      throw app::LaunchError("cannot write the request to " + file.fileName() + ": " + file.errorString());
    }
    aws.call("sagemaker", "create-training-job", {"--cli-input-json", "file://" + file.fileName()});
  }  // the request file goes as soon as it is sent
  if (interrupted()) {
    err << "spur launch: interrupted while submitting: stopping job " << request.job_name << "\n";
    aws.call("sagemaker", "stop-training-job", {"--training-job-name", request.job_name});
    return 128 + app::SignalCounter::last();
  }
  if (args.has("detach")) {
    out << request.job_name << "\n";
    err << "spur launch: follow it with `spur sagemaker follow " << request.job_name << "`, stop it with "
        << "`spur sagemaker stop " << request.job_name << "`\n";
    return 0;
  }
  err.flush();
  auto recording = record_options(
      args, given, "sagemaker",
      QString("%1 x %2").arg(resources.value("InstanceCount").toInt()).arg(resources.value("InstanceType").toString()),
      config.to_yaml(), stream_key, request.job_name);
  recording.hold_signals = false;  // the follower counts them (launch/signals.h)
  app::Supervisor supervisor(std::move(recording), out, err);
  auto options = follow_options(args, "spur launch");
  options.on_line = supervisor.line_hook();
  options.after_poll = supervisor.poll_hook();
  int code = 1;
  app::JobFollower follower(aws, request.job_name, options, out, err);
  try {
    code = follower.run();
  } catch (...) {
    supervisor.finish(1, false, "lost track of the job");
    throw;
  }
  return supervisor.finish(code, follower.final_status() == "Stopped");
}

int sagemaker_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments, {"config_file", "region", "profile", "aws_endpoint_url", "poll_interval"},
                         {"help"});
    if (args.has("help")) {
      out << kUsage;
      return 0;
    }
    if (args.positional().size() != 2) throw UsageError(QString("expected an action and a job name\n") + kUsage);
    const QString action = args.positional()[0];
    const QString job = args.positional()[1];
    std::optional<app::RunConfig> config;
    const std::string path =
        args.value("config_file") ? args.value("config_file")->toStdString() : app::config_in_effect();
    if (!path.empty()) config = app::RunConfig::load(path);
    app::AwsCli aws(aws_options(config, args));
    if (action == "follow") return app::JobFollower(aws, job, follow_options(args, "spur sagemaker"), out, err).run();
    if (action == "stop") {
      aws.call("sagemaker", "stop-training-job", {"--training-job-name", job});
      err << "spur sagemaker: asked SageMaker to stop " << job << "\n";
      return 0;
    }
    if (action == "describe") {
      out << QJsonDocument(aws.call("sagemaker", "describe-training-job", {"--training-job-name", job})).toJson();
      return 0;
    }
    throw UsageError("unknown action '" + action + "'\n" + kUsage);
  } catch (const UsageError& e) {
    err << "spur sagemaker: " << e.what() << "\n";
  } catch (const app::ConfigError& e) {
    err << "spur sagemaker: " << e.what() << "\n";
  } catch (const app::AwsError& e) {
    err << "spur sagemaker: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace spur::cli
