// SPDX-License-Identifier: Apache-2.0
// Amazon SageMaker with the real `aws` CLI against a loopback endpoint the test runs (tests/rigs/fake_aws.py),
// which records and checks every request: the CreateTrainingJob request, following status and CloudWatch logs,
// failures, Ctrl-C stopping the job, credentials kept out of everything; then the container side with a
// simulated /opt/ml for two hosts on loopback.
#include <signal.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include "rank_group.h"
#include "sagemaker/job_follower.h"
#include "sagemaker/training_job.h"
#include "test_main.h"

#include <spur/history/reader.h>

namespace {

constexpr const char* kSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTESTSECRET";

// What a running process has written so far (the test reads it without stopping the process).
QString drain(QProcess& process, QString& seen) {
  seen += QString::fromUtf8(process.readAll());
  return seen;
}

void write_file(const QString& path, const QByteArray& text) {
  QDir().mkpath(QFileInfo(path).path());
  QFile file(path);
  QVERIFY2(file.open(QIODevice::WriteOnly), qPrintable(path));
  file.write(text);
}

QByteArray json(const QJsonObject& object) { return QJsonDocument(object).toJson(QJsonDocument::Compact); }

// The loopback endpoint: started with a scenario, stopped (by PID, through QProcess) when it goes out of scope.
class FakeAws {
 public:
  FakeAws(const QString& dir, const QJsonObject& scenario) : log_(dir + "/requests.jsonl") {
    write_file(dir + "/scenario.json", json(scenario));
    process_.setProcessChannelMode(QProcess::SeparateChannels);
    process_.start("/usr/bin/python3", {SPUR_RIGS_DIR "/fake_aws.py", dir + "/scenario.json", log_});
    if (!process_.waitForStarted(10000)) return;
    QElapsedTimer timer;
    timer.start();
    while (!process_.canReadLine() && timer.elapsed() < 15000) process_.waitForReadyRead(200);
    const QString line = QString::fromUtf8(process_.readLine()).trimmed();
    if (line.startsWith("PORT ")) port_ = line.mid(5).toInt();
  }
  ~FakeAws() {
    process_.kill();
    process_.waitForFinished(5000);
  }
  bool ok() const { return port_ > 0; }
  QString url() const { return QString("http://127.0.0.1:%1").arg(port_); }
  QList<QJsonObject> requests() const {
    QList<QJsonObject> out;
    QFile file(log_);
    if (!file.open(QIODevice::ReadOnly)) return out;
    for (const auto& line : file.readAll().split('\n')) {
      if (!line.trimmed().isEmpty()) out << QJsonDocument::fromJson(line).object();
    }
    return out;
  }
  QList<QJsonObject> requests(const QString& target) const {
    QList<QJsonObject> out;
    for (const auto& request : requests()) {
      if (request.value("target").toString() == target) out << request;
    }
    return out;
  }
  QByteArray raw_log() const {
    QFile file(log_);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
  }

 private:
  QString log_;
  QProcess process_;
  int port_ = 0;
};

// Dummy credentials only, as the reference says: nothing of the user's AWS configuration is read.
QProcessEnvironment aws_environment(const QTemporaryDir& dir) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("AWS_ACCESS_KEY_ID", "AKIDSPURTEST");
  env.insert("AWS_SECRET_ACCESS_KEY", kSecret);
  env.insert("AWS_DEFAULT_REGION", "us-west-2");
  env.insert("AWS_CONFIG_FILE", "/dev/null");
  env.insert("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
  env.insert("AWS_EC2_METADATA_DISABLED", "true");
  env.insert("AWS_MAX_ATTEMPTS", "1");  // the CLI's own retries off: Spur's are under test
  env.insert("XDG_CONFIG_HOME", dir.filePath("config"));
  env.insert("HF_HOME", dir.filePath("hf"));
  env.remove("SPUR_SAGEMAKER_ROOT");
  env.insert("SPUR_NVIDIA_PROC", dir.filePath("no-gpus"));  // as on a CPU instance, whatever this machine has
  QDir().mkpath(dir.filePath("tmp"));
  env.insert("TMPDIR", dir.filePath("tmp"));  // where the request file is written, and must be gone from
  return env;
}

QJsonObject status(const QString& status, const QString& secondary, const QString& reason = {}) {
  QJsonObject object{{"TrainingJobStatus", status}, {"SecondaryStatus", secondary}};
  if (!reason.isEmpty()) object["FailureReason"] = reason;
  return object;
}

const QByteArray kConfig =
    "compute_environment: AMAZON_SAGEMAKER\n"
    "distributed_type: DATA_PARALLEL\n"
    "ec2_instance_type: ml.c5.2xlarge\n"
    "iam_role_name: spur-training\n"
    "image_uri: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/spur-mlp:1\n"
    "mixed_precision: bf16\n"
    "num_machines: 2\n"
    "region: eu-west-1\n"
    "base_job_name: spur-mlp\n"
    "sagemaker_metrics_file: metrics.tsv\n"
    "sagemaker_inputs_file: inputs.tsv\n"
    "additional_args:\n"
    "  max_run: 3600\n"
    "  environment:\n"
    "    FROM_FILE: 'yes'\n"
    "  hyperparameters:\n"
    "    lr: 0.1\n";

}  // namespace

class SageMakerTest : public QObject {
  Q_OBJECT

  // A directory holding the configuration and its TSV files; spur runs there.
  static QString prepare(const QTemporaryDir& dir, const QByteArray& config = kConfig) {
    write_file(dir.filePath("sm.yaml"), config);
    write_file(dir.filePath("metrics.tsv"), "name\tregex\nloss\tloss ([0-9.]+)\naccuracy\taccuracy ([0-9.]+)\n");
    write_file(dir.filePath("inputs.tsv"), "channel\ts3_uri\ntrain\ts3://bucket/train/\n");
    return dir.filePath("sm.yaml");
  }

  static spur::test::RankResult spur(const QTemporaryDir& dir, const QStringList& arguments, int timeout_ms = 90000) {
    QProcess process;
    process.setWorkingDirectory(dir.path());
    process.setProcessEnvironment(aws_environment(dir));
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(SPUR_CLI, arguments);
    spur::test::RankResult result;
    if (!process.waitForFinished(timeout_ms)) {
      process.kill();
      process.waitForFinished(5000);
      result.output = "TIMED OUT\n" + QString::fromUtf8(process.readAll());
      return result;
    }
    result.exit_code = process.exitCode();
    result.output = QString::fromUtf8(process.readAll());
    return result;
  }

 private slots:
  void job_names_follow_sagemaker_rules_data() {
    QTest::addColumn<QString>("base");
    QTest::addColumn<QString>("expected");
    QTest::newRow("short") << "spur-mlp"
                           << "spur-mlp-2026-11-29-08-05-09-042";
    QTest::newRow("cut to 63") << QString(60, 'a') << QString(39, 'a') + "-2026-11-29-08-05-09-042";
    QTest::newRow("no hyphen before the stamp")
        << QString(38, 'a') + "-b" << QString(38, 'a') + "-2026-11-29-08-05-09-042";
  }

  void job_names_follow_sagemaker_rules() {
    QFETCH(QString, base);
    QFETCH(QString, expected);
    const QDateTime now(QDate(2026, 11, 29), QTime(8, 5, 9, 42), Qt::UTC);
    const QString name = spur::app::training_job_name(base, now);
    QCOMPARE(name, expected);
    QVERIFY(name.size() <= 63);
    QVERIFY_THROWS_EXCEPTION(spur::app::ConfigError, spur::app::training_job_name("my_job", now));
    QCOMPARE(spur::app::instance_of_log_stream("job-1", "job-1/algo-2-1700000000"), QString("algo-2"));
  }

  void submits_the_job_and_follows_its_logs() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(
        dir.path(),
        {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
         {"describe", QJsonArray{status("InProgress", "Starting"), status("InProgress", "Training"),
                                 status("Completed", "Completed")}},
         {"logs", QJsonObject{{"algo-1", QJsonArray{"epoch 1 loss 0.5", "epoch 2 loss 0.3", "accuracy 0.97",
                                                    QString(R"(@spur:@KEY@ {"type": "metric", "key": "loss", )"
                                                            R"("step": 2, "value": 0.3, "wall": 1700000000.5})"),
                                                    // Issue 31 (4): without the key, console text.
                                                    R"(@spur {"type": "run", "name": "forged-name"})"}},
                              {"algo-2", QJsonArray{"rank 1 ready"}}}}});
    QVERIFY(aws.ok());
    const auto result =
        spur(dir, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(), "--poll_interval", "1", "--env",
                   "SEED=7", "--env", "HF_TOKEN=hf_secret_value", "--gradient_accumulation_steps", "2",
                   "/opt/spur/train_mlp", "--epochs", "3; rm -rf ~", "a b"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    for (const char* line : {"[algo-1] epoch 1 loss 0.5", "[algo-1] epoch 2 loss 0.3", "[algo-1] accuracy 0.97",
                             "[algo-2] rank 1 ready", "InProgress - Training", "completed"}) {
      QVERIFY2(result.output.contains(line), qPrintable(QString(line) + " missing:\n" + result.output));
    }
    QCOMPARE(result.output.count("[algo-1] epoch 1 loss 0.5"), 1);  // each line once, however many polls
    // The job's records became the run's metrics on this machine, off the console; the line without the key is
    // the job's output.
    QVERIFY2(!result.output.contains("@spur:") && result.output.contains("[algo-1] @spur {\"type\": \"run\""),
             qPrintable(result.output));
    spur::history::HistoryReader history(aws_environment(dir).value("SPUR_HISTORY").toStdString());
    const auto runs = history.runs();
    QVERIFY(!runs.empty());
    const auto& run = runs.back();
    QCOMPARE(QString::fromStdString(run.target), QString("sagemaker"));
    QCOMPARE(QString::fromStdString(run.status), QString("finished"));
    // The record's command is the launch as given (what a relaunch runs), a secret passed by name only (a relaunch
    // takes its value from the environment), as every target's record (the launch supervisor's one rule; SageMaker
    // kept "spur launch PROGRAM" without its flags before).
    const QString command = QString::fromStdString(run.command);
    QVERIFY2(command.contains("spur launch --config_file") && command.contains("--env HF_TOKEN --") &&
                 !command.contains("hf_secret_value") && command.contains("'3; rm -rf ~'"),
             qPrintable(command));
    QVERIFY2(result.output.contains(QString("recorded as run %1 (spur runs show %1)").arg(run.id)),
             qPrintable(result.output));
    const auto loss = history.series(run.id, "loss");
    QCOMPARE(loss.size(), size_t{1});
    QCOMPARE(loss[0].step, int64_t{2});
    QCOMPARE(loss[0].value, 0.3);
    QVERIFY(!history.console(run.id).empty());

    // The role name was resolved through IAM, then one request built from the file, the flags and the program.
    const auto roles = aws.requests("IAM.GetRole");
    QCOMPARE(roles.size(), 1);
    QCOMPARE(roles[0]["body"].toObject()["RoleName"].toString(), QString("spur-training"));
    const auto creates = aws.requests("SageMaker.CreateTrainingJob");
    QCOMPARE(creates.size(), 1);
    const auto body = creates[0]["body"].toObject();
    QVERIFY(QRegularExpression("^spur-mlp-\\d{4}-\\d\\d-\\d\\d-\\d\\d-\\d\\d-\\d\\d-\\d{3}$")
                .match(body["TrainingJobName"].toString())
                .hasMatch());
    QCOMPARE(body["RoleArn"].toString(), QString("arn:aws:iam::123456789012:role/spur-training"));
    const auto algorithm = body["AlgorithmSpecification"].toObject();
    QCOMPARE(algorithm["TrainingImage"].toString(), QString("123456789012.dkr.ecr.eu-west-1.amazonaws.com/spur-mlp:1"));
    QCOMPARE(algorithm["TrainingInputMode"].toString(), QString("File"));
    QCOMPARE(algorithm["MetricDefinitions"].toArray().size(), 2);
    QCOMPARE(algorithm["MetricDefinitions"].toArray()[0].toObject()["Regex"].toString(), QString("loss ([0-9.]+)"));
    const auto resources = body["ResourceConfig"].toObject();
    QCOMPARE(resources["InstanceType"].toString(), QString("ml.c5.2xlarge"));
    QCOMPARE(resources["InstanceCount"].toInt(), 2);
    QCOMPARE(body["StoppingCondition"].toObject()["MaxRuntimeInSeconds"].toInt(), 3600);
    QCOMPARE(body["OutputDataConfig"].toObject()["S3OutputPath"].toString(),
             QString("s3://sagemaker-eu-west-1-123456789012/"));
    const auto channel = body["InputDataConfig"].toArray()[0].toObject();
    QCOMPARE(channel["ChannelName"].toString(), QString("train"));
    QCOMPARE(channel["DataSource"].toObject()["S3DataSource"].toObject()["S3Uri"].toString(),
             QString("s3://bucket/train/"));
    const auto hyper = body["HyperParameters"].toObject();
    QCOMPARE(hyper["spur_program"].toString(), QString("/opt/spur/train_mlp"));
    QCOMPARE(QJsonDocument::fromJson(hyper["spur_arguments"].toString().toUtf8()).array(),
             (QJsonArray{"--epochs", "3; rm -rf ~", "a b"}));
    QCOMPARE(QJsonDocument::fromJson(hyper["spur_launch_flags"].toString().toUtf8()).array(),
             (QJsonArray{"--mixed_precision", "bf16", "--gradient_accumulation_steps", "2"}));
    QCOMPARE(hyper["lr"].toString(), QString("0.1"));
    auto environment = body["Environment"].toObject();
    QVERIFY(QRegularExpression("^[0-9a-f]{32}$").match(environment.take("SPUR_STREAM_KEY").toString()).hasMatch());
    // (The job needs its secrets: they go in the request, which SageMaker keeps; only the record and the dry run
    // leave their values out.)
    QCOMPARE(environment,
             (QJsonObject{
                 {"FROM_FILE", "yes"}, {"HF_TOKEN", "hf_secret_value"}, {"SEED", "7"}, {"SPUR_TRACKERS", "stream"}}));

    // Every call signed for the configuration's region, by the CLI, with the environment's key; no secret
    // anywhere in what was sent, and nothing wrong with any request.
    for (const auto& request : aws.requests()) {
      QVERIFY2(request["problems"].toArray().isEmpty(), json(request).constData());
      const auto scope = request["scope"].toObject();
      QCOMPARE(scope["key_id"].toString(), QString("AKIDSPURTEST"));
      if (scope["service"].toString() != "iam") QCOMPARE(scope["region"].toString(), QString("eu-west-1"));
    }
    QVERIFY(aws.requests("Logs_20140328.GetLogEvents").size() >= 2);
    // The SDK's default bucket did not exist: created in the configuration's region before the job.
    const auto buckets = aws.requests("S3.CreateBucket");
    QCOMPARE(buckets.size(), 1);
    QCOMPARE(buckets[0]["body"].toObject()["Bucket"].toString(), QString("sagemaker-eu-west-1-123456789012"));
    QVERIFY(buckets[0]["body"].toObject()["Configuration"].toString().contains("<LocationConstraint>eu-west-1<"));
    // The request file went as soon as it was sent; nothing else was left behind.
    QVERIFY2(QDir(dir.filePath("tmp")).isEmpty(), qPrintable(QDir(dir.filePath("tmp")).entryList().join(", ")));
  }

  // Issue 35: a SageMaker configuration with its target file (what the wizard saves) submits with nothing but the
  // file and the program: the environment, the accumulation and the follower's settings come from the file.
  void a_saved_sagemaker_configuration_launches_headless() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(dir.path(), {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
                             {"describe", QJsonArray{status("Completed", "Completed")}},
                             {"logs", QJsonObject{{"algo-1", QJsonArray{"done"}}}}});
    QVERIFY(aws.ok());
    write_file(dir.filePath("sm.spur.yaml"), "target: sagemaker\naws_endpoint_url: " + aws.url().toUtf8() +
                                                 "\npoll_interval: 1\ngradient_accumulation_steps: 2\n"
                                                 "env:\n  SEED: \"7\"\n");
    const auto result = spur(dir, {"launch", "--config_file", config, "/opt/spur/train_mlp"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    const auto creates = aws.requests("SageMaker.CreateTrainingJob");
    QCOMPARE(creates.size(), 1);
    const auto body = creates[0]["body"].toObject();
    QCOMPARE(
        QJsonDocument::fromJson(body["HyperParameters"].toObject()["spur_launch_flags"].toString().toUtf8()).array(),
        (QJsonArray{"--mixed_precision", "bf16", "--gradient_accumulation_steps", "2"}));
    QCOMPARE(body["Environment"].toObject()["SEED"].toString(), QString("7"));
    // A SageMaker target beside a configuration for this machine is refused, naming both files.
    write_file(dir.filePath("local.yaml"), "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n");
    write_file(dir.filePath("local.spur.yaml"), "target: sagemaker\n");
    const auto wrong = spur(dir, {"launch", "--config_file", dir.filePath("local.yaml"), "--dry_run", "/bin/true"});
    QVERIFY2(wrong.exit_code == 2 && wrong.output.contains(dir.filePath("local.spur.yaml") + ": target: sagemaker") &&
                 wrong.output.contains(dir.filePath("local.yaml")),
             qPrintable(wrong.output));
  }

  void a_failed_job_reports_its_reason() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(dir.path(),
                {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
                 {"describe", QJsonArray{status("Failed", "Failed", "AlgorithmError: rank1 failed: exit code 3")}},
                 {"describe_errors", 1},
                 {"logs", QJsonObject{{"algo-1", QJsonArray{"Traceback: out of memory"}}}}});
    QVERIFY(aws.ok());
    const auto result = spur(dir, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(),
                                   "--poll_interval", "1", "/opt/spur/train_mlp"});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.output.contains("(ThrottlingException)") && result.output.contains("retrying in 2 s"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("failed: AlgorithmError: rank1 failed: exit code 3") &&
                 result.output.contains("[algo-1] Traceback: out of memory"),
             qPrintable(result.output));
  }

  void refusals_are_named_data() {
    QTest::addColumn<QJsonObject>("scenario");
    QTest::addColumn<QString>("expected");
    QTest::newRow("job name in use") << QJsonObject{{"role_arn", "arn:aws:iam::123456789012:role/r"},
                                                    {"create_error",
                                                     QJsonObject{{"status", 400},
                                                                 {"type", "ResourceInUse"},
                                                                 {"message", "Training job names must be unique"}}}}
                                     << "(ResourceInUse) when calling the CreateTrainingJob operation";
    QTest::newRow("unknown role") << QJsonObject{} << "The role with name spur-training cannot be found";
    QTest::newRow("someone else's bucket")
        << QJsonObject{{"role_arn", "arn:aws:iam::123456789012:role/r"},
                       {"buckets", QJsonObject{{"sagemaker-eu-west-1-123456789012", 403}}}}
        << "the output bucket s3://sagemaker-eu-west-1-123456789012 cannot be used";
  }

  void refusals_are_named() {
    QFETCH(QJsonObject, scenario);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QString config = prepare(dir);
    scenario["describe"] = QJsonArray{status("Completed", "Completed")};
    FakeAws aws(dir.path(), scenario);
    QVERIFY(aws.ok());
    const auto result =
        spur(dir, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(), "/opt/spur/train"});
    QCOMPARE(result.exit_code, 1);
    // The error is the last thing said, in one line.
    QVERIFY2(result.output.trimmed().split('\n').last().contains(expected), qPrintable(result.output));
    QVERIFY(aws.requests("SageMaker.DescribeTrainingJob").isEmpty());
  }

  // Ctrl-C while CreateTrainingJob is on its way: the job it created is stopped, not left running unseen.
  void ctrl_c_while_submitting_stops_the_new_job() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(dir.path(), {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
                             {"create_delay", 3},
                             {"describe", QJsonArray{status("InProgress", "Training")}}});
    QVERIFY(aws.ok());
    QProcess process;
    process.setWorkingDirectory(dir.path());
    process.setProcessEnvironment(aws_environment(dir));
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(SPUR_CLI, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(), "/opt/spur/train"});
    QVERIFY(process.waitForStarted());
    QElapsedTimer timer;
    timer.start();
    while (aws.requests("SageMaker.CreateTrainingJob").isEmpty() && timer.elapsed() < 60000) QThread::msleep(50);
    ::kill(static_cast<pid_t>(process.processId()), SIGINT);
    const bool finished = process.waitForFinished(60000);
    if (!finished) process.kill();
    const QString output = QString::fromUtf8(process.readAll());
    QVERIFY2(finished && process.exitCode() == 128 + SIGINT, qPrintable(output));
    QVERIFY2(output.contains("interrupted while submitting: stopping job spur-mlp-"), qPrintable(output));
    QCOMPARE(aws.requests("SageMaker.StopTrainingJob").size(), 1);
  }

  void spur_test_refuses_a_sagemaker_config() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    const auto result = spur(dir, {"test", "--config_file", config});
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains("is a SageMaker configuration") && result.output.contains("spur-check"),
             qPrintable(result.output));
  }

  void ctrl_c_stops_the_job() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(dir.path(), {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
                             {"describe", QJsonArray{status("InProgress", "Training")}},
                             {"after_stop", QJsonArray{"Stopping", "Stopped"}}});
    QVERIFY(aws.ok());
    QProcess process;
    process.setWorkingDirectory(dir.path());
    process.setProcessEnvironment(aws_environment(dir));
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(SPUR_CLI, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(), "--poll_interval", "1",
                             "/opt/spur/train"});
    QVERIFY(process.waitForStarted());
    QElapsedTimer timer;
    timer.start();
    while (aws.requests("SageMaker.DescribeTrainingJob").isEmpty() && timer.elapsed() < 60000) QThread::msleep(100);
    QVERIFY2(!aws.requests("SageMaker.DescribeTrainingJob").isEmpty(),
             qPrintable(QString::fromUtf8(process.readAll())));
    ::kill(static_cast<pid_t>(process.processId()), SIGINT);
    const bool finished = process.waitForFinished(60000);
    if (!finished) process.kill();
    const QString output = QString::fromUtf8(process.readAll());
    QVERIFY2(finished, qPrintable(output));
    QCOMPARE(process.exitCode(), 128 + SIGINT);
    QCOMPARE(aws.requests("SageMaker.StopTrainingJob").size(), 1);
    QVERIFY2(output.contains("SIGINT: stopping job spur-mlp-") && output.contains(": Stopped"), qPrintable(output));
  }

  void detach_then_follow_and_stop() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    FakeAws aws(dir.path(),
                {{"role_arn", "arn:aws:iam::123456789012:role/spur-training"},
                 {"describe", QJsonArray{status("InProgress", "Training"), status("Completed", "Completed")}},
                 {"logs", QJsonObject{{"algo-1", QJsonArray{"done"}}}}});
    QVERIFY(aws.ok());
    const auto submitted = spur(dir, {"launch", "--config_file", config, "--aws_endpoint_url", aws.url(), "--detach",
                                      "--job_name", "nightly-42", "/opt/spur/train"});
    QVERIFY2(submitted.exit_code == 0 && submitted.output.contains("spur sagemaker follow nightly-42"),
             qPrintable(submitted.output));
    QVERIFY(aws.requests("SageMaker.DescribeTrainingJob").isEmpty());
    const QStringList common{"--config_file", config, "--aws_endpoint_url", aws.url()};
    const auto followed = spur(dir, QStringList{"sagemaker", "follow", "nightly-42", "--poll_interval", "1"} + common);
    QVERIFY2(followed.exit_code == 0 && followed.output.contains("[algo-1] done"), qPrintable(followed.output));
    const auto stopped = spur(dir, QStringList{"sagemaker", "stop", "nightly-42"} + common);
    QVERIFY2(stopped.exit_code == 0, qPrintable(stopped.output));
    QCOMPARE(aws.requests("SageMaker.StopTrainingJob").size(), 1);
    const auto unknown = spur(dir, QStringList{"sagemaker", "describe", "nope"} + common);
    QVERIFY2(unknown.exit_code == 1 && unknown.output.contains("Requested resource not found"),
             qPrintable(unknown.output));
  }

  // Bad input is refused before anything reaches AWS (--dry_run: the CLI is never called).
  void bad_sagemaker_input_is_named_data() {
    QTest::addColumn<QByteArray>("config");
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("expected");
    const QByteArray arn = "iam_role_name: arn:aws:iam::123456789012:role/r\n";
    const QByteArray base =
        "compute_environment: AMAZON_SAGEMAKER\nec2_instance_type: ml.c5.xlarge\n"
        "mixed_precision: 'no'\n" +
        arn;
    QTest::newRow("no image") << base + "distributed_type: 'NO'\n" << QStringList{} << "sm.yaml: image_uri is missing";
    QTest::newRow("model parallel") << base + "image_uri: i\ndistributed_type: MODEL_PARALLEL\n"
                                    << QStringList{} << "sm.yaml:6: distributed_type: MODEL_PARALLEL";
    QTest::newRow("NO on two machines") << base + "image_uri: i\ndistributed_type: 'NO'\nnum_machines: 2\n"
                                        << QStringList{} << "sm.yaml:7: num_machines: 2 instances";
    QTest::newRow("credentials in the environment")
        << base + "image_uri: i\ndistributed_type: 'NO'\n"
        << QStringList{"--env", "AWS_SECRET_ACCESS_KEY=x"} << "AWS_SECRET_ACCESS_KEY: credentials never go into a job";
    QTest::newRow("bad metrics file") << base +
                                             "image_uri: i\ndistributed_type: 'NO'\nsagemaker_metrics_file: bad.tsv\n"
                                      << QStringList{} << "bad.tsv:3: expected metric_name<TAB>regex";
    QTest::newRow("missing inputs file")
        << base + "image_uri: i\ndistributed_type: 'NO'\nsagemaker_inputs_file: none.tsv\n"
        << QStringList{} << "sm.yaml:7: sagemaker_inputs_file: cannot read";
    QTest::newRow("hosts") << base + "image_uri: i\ndistributed_type: 'NO'\n"
                           << QStringList{"--hosts", "a,b"} << "--hosts is for runs on your own machines";
  }

  void bad_sagemaker_input_is_named() {
    QFETCH(QByteArray, config);
    QFETCH(QStringList, flags);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    write_file(dir.filePath("sm.yaml"), config);
    write_file(dir.filePath("bad.tsv"), "name\tregex\nloss\tloss (.*)\nno tab here\n");
    auto env = aws_environment(dir);
    env.insert("SPUR_AWS_CLI", "/bin/false");  // would fail loudly if anything were called
    QProcess process;
    process.setWorkingDirectory(dir.path());
    process.setProcessEnvironment(env);
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(SPUR_CLI, QStringList{"launch", "--config_file", dir.filePath("sm.yaml"), "--dry_run"} + flags +
                                QStringList{"/opt/train"});
    QVERIFY(process.waitForFinished(30000));
    const QString output = QString::fromUtf8(process.readAll());
    QVERIFY2(process.exitCode() == 2, qPrintable(output));
    QVERIFY2(output.contains(expected), qPrintable(expected + " missing:\n" + output));
  }

  void dry_run_prints_the_request() {
    QTemporaryDir dir;
    const QString config = prepare(dir);
    // Issue 31 (1): a secret's value is shown as <redacted> (the request sent keeps it: the job needs it).
    auto result =
        spur(dir, {"launch", "--config_file", config, "--env", "WANDB_API_KEY=wandb_sm_secret", "--env",
                   "DATABASE_URL=mysql://u:sm-pass@db/x", "--dry_run", "/opt/spur/train_mlp", "--epochs", "2"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("\"WANDB_API_KEY\": \"<redacted>\"") &&
                 result.output.contains("\"DATABASE_URL\": \"<redacted>\"") &&
                 !result.output.contains("wandb_sm_secret") && !result.output.contains("sm-pass"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("sagemaker create-training-job --cli-input-json") &&
                 result.output.contains("\"InstanceType\": \"ml.c5.2xlarge\"") &&
                 result.output.contains("\"spur_program\": \"/opt/spur/train_mlp\""),
             qPrintable(result.output));
  }

  // Inside the job's containers: two "hosts" on loopback, each with its own /opt/ml, run the program the job
  // carries (spur-check) and rendezvous on the first host.
  void containers_rendezvous_on_the_first_host() {
    QTemporaryDir dir;
    const int port = spur::test::free_port();
    const QString check = QFileInfo(SPUR_CLI).path() + "/spur-check";
    const QStringList hosts{"127.0.0.1", "localhost"};
    std::vector<std::unique_ptr<QProcess>> machines;
    for (const auto& host : hosts) {
      const QString root = dir.filePath(host);
      write_file(root + "/input/config/resourceconfig.json", json({{"current_host", host},
                                                                   {"hosts", QJsonArray::fromStringList(hosts)},
                                                                   {"network_interface_name", "lo"}}));
      write_file(root + "/input/config/hyperparameters.json",
                 json({{"spur_program", check},
                       {"spur_arguments", "[]"},
                       {"spur_launch_flags", R"(["--mixed_precision","bf16"])"}}));
      auto env = aws_environment(dir);
      env.insert("SPUR_SAGEMAKER_ROOT", root);
      auto process = std::make_unique<QProcess>();
      process->setProcessEnvironment(env);
      process->setProcessChannelMode(QProcess::MergedChannels);
      // What SageMaker runs: the image's entry point (`spur launch`) with "train".
      // --cpu: two "hosts" on one machine must not share its GPU.
      process->start(SPUR_CLI, {"launch", "--cpu", "--main_process_port", QString::number(port), "train"});
      machines.push_back(std::move(process));
    }
    QStringList outputs;
    for (auto& machine : machines) {
      const bool finished = machine->waitForFinished(90000);
      if (!finished) machine->kill();
      machine->waitForFinished(5000);
      outputs << QString::fromUtf8(machine->readAll());
      QVERIFY2(finished && machine->exitCode() == 0, qPrintable(outputs.join("\n---\n")));
    }
    QVERIFY2(outputs[0].contains("spur-check: OK: 2 process(es) over 2 machine(s) rendezvoused at 127.0.0.1:" +
                                 QString::number(port)),
             qPrintable(outputs[0]));
    QVERIFY2(outputs[1].contains("rank 1 of 2 (local 0 of 1, machine 1)") && outputs[1].contains("training step (bf16"),
             qPrintable(outputs[1]));
  }

  // A bring-your-own image has no SageMaker toolkit: no SM_NUM_GPUS, so the driver's GPU list counts; the job's
  // launch flags apply to a program given in the entry point too, and SageMaker's trailing "train" is dropped.
  void containers_plan_one_rank_per_gpu_data() {
    QTest::addColumn<QStringList>("launch");
    QTest::addColumn<QStringList>("expected");
    QTest::newRow("program from the job") << QStringList{"train"} << QStringList{"4 process(es) over 2 machine(s)",
                                                                                 "[rank3] /bin/echo from job",
                                                                                 "MASTER_ADDR=algo-1",
                                                                                 "GROUP_RANK=1",
                                                                                 "GLOO_SOCKET_IFNAME=eth0",
                                                                                 "NCCL_SOCKET_IFNAME=eth0",
                                                                                 "SPUR_MIXED_PRECISION=bf16"};
    QTest::newRow("program in the entry point") << QStringList{"/bin/echo", "mine", "train"}
                                                << QStringList{"[rank2] /bin/echo mine\n", "SPUR_MIXED_PRECISION=bf16"};
    QTest::newRow("flags win") << QStringList{"--num_processes", "2", "--mixed_precision", "no", "train"}
                               << QStringList{"2 process(es) over 2 machine(s)", "[rank1] /bin/echo from job",
                                              "SPUR_MIXED_PRECISION=no"};
  }

  void containers_plan_one_rank_per_gpu() {
    QFETCH(QStringList, launch);
    QFETCH(QStringList, expected);
    QTemporaryDir dir;
    const QString root = dir.filePath("ml");
    write_file(root + "/input/config/resourceconfig.json", json({{"current_host", "algo-2"},
                                                                 {"hosts", QJsonArray{"algo-1", "algo-2"}},
                                                                 {"network_interface_name", "eth0"}}));
    write_file(root + "/input/config/hyperparameters.json",
               json({{"spur_program", "/bin/echo"},
                     {"spur_arguments", "[\"from job\"]"},
                     {"spur_launch_flags", R"(["--mixed_precision","bf16"])"}}));
    QDir().mkpath(dir.filePath("gpus/0000:00:1e.0"));
    QDir().mkpath(dir.filePath("gpus/0000:00:1f.0"));
    auto env = aws_environment(dir);
    env.insert("SPUR_SAGEMAKER_ROOT", root);
    env.insert("SPUR_NVIDIA_PROC", dir.filePath("gpus"));
    env.remove("GLOO_SOCKET_IFNAME");
    env.remove("NCCL_SOCKET_IFNAME");
    const auto result = spur::test::run_process(SPUR_CLI, QStringList{"launch", "--dry_run"} + launch, env, 30000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    for (const auto& line : expected)
      QVERIFY2(result.output.contains(line), qPrintable(line + " missing:\n" + result.output));
    QVERIFY2(!result.output.contains(" train"), qPrintable(result.output));
  }

  void a_container_failure_becomes_the_failure_reason() {
    QTemporaryDir dir;
    const QString root = dir.filePath("ml");
    write_file(root + "/input/config/resourceconfig.json",
               json({{"current_host", "algo-1"}, {"hosts", QJsonArray{"algo-1"}}}));
    write_file(root + "/input/config/hyperparameters.json",
               json({{"spur_program", "/bin/sh"}, {"spur_arguments", R"(["-c","echo out of memory; exit 3"])"}}));
    auto env = aws_environment(dir);
    env.insert("SPUR_SAGEMAKER_ROOT", root);
    auto result = spur::test::run_process(SPUR_CLI, {"launch", "train"}, env, 30000);
    QCOMPARE(result.exit_code, 3);
    QFile failure(root + "/output/failure");
    QVERIFY(failure.open(QIODevice::ReadOnly));
    const QString reason = QString::fromUtf8(failure.readAll());
    QVERIFY2(reason.contains("rank0 failed: exit code 3") && reason.contains("out of memory"), qPrintable(reason));

    write_file(root + "/input/config/hyperparameters.json", "{}");
    result = spur::test::run_process(SPUR_CLI, {"launch", "train"}, env, 30000);
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains("no spur_program"), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(SageMakerTest)
#include "sagemaker_test.moc"
