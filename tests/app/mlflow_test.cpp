// SPDX-License-Identifier: Apache-2.0
// MLflow both ways (issue 40), against a real `mlflow server` (the pinned Python environment's, on loopback, with a
// SQLite backend in the test's folder, stopped by its process group): a 2-rank launched run's parameters, tags and
// every loss point read back with MLflow's own Python client; runs logged by MLflow's client imported with
// `spur runs import mlflow://` point for point, once unless asked again; a server that is down from the start, and
// one killed mid-run: the run finishes, says what was not sent, and its history holds every point.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cmath>
#include <memory>

#include <spur/history/reader.h>

#include "rank_group.h"
#include "test_main.h"
#include <spur/core/http.h>
#include <spur/core/mlflow.h>

namespace {

using spur::history::HistoryReader;

int free_port() {
  QTcpServer probe;
  probe.listen(QHostAddress::LocalHost, 0);
  return probe.serverPort();
}

// `mlflow server` in its own process group (it starts uvicorn workers), stopped by that group when the test leaves,
// also on failure; a test that crashes takes it along (parent-death signal).
class MlflowServer {
 public:
  explicit MlflowServer(const QString& dir) {
    for (int attempt = 0; attempt < 3 && url_.isEmpty(); ++attempt) start(dir);
  }
  ~MlflowServer() { stop(); }
  const QString& url() const { return url_; }
  const QString& problem() const { return problem_; }
  void stop() {
    if (!process_ || process_->state() == QProcess::NotRunning) return;
    const auto group = static_cast<pid_t>(process_->processId());
    ::kill(-group, SIGKILL);  // a crash, not a shutdown: nothing more is answered
    process_->waitForFinished(10000);
    spur::test::kill_processes_under(dir_);
  }

 private:
  void start(const QString& dir) {
    dir_ = dir;
    const int port = free_port();
    process_ = std::make_unique<QProcess>();
    process_->setProcessChannelMode(QProcess::MergedChannels);
    process_->setStandardOutputFile(dir + "/server.log", QIODevice::Append);
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false");  // no job runners: a tracking server only
    process_->setProcessEnvironment(env);
    process_->setChildProcessModifier([] {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    });
    process_->start(SPUR_PEER_PYTHON, {"-m", "mlflow", "server", "--host", "127.0.0.1", "--port", QString::number(port),
                                       "--workers", "1", "--backend-store-uri", "sqlite:///" + dir + "/mlflow.db",
                                       "--default-artifact-root", dir + "/artifacts"});
    const QString url = QString("http://127.0.0.1:%1").arg(port);
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < 60000 && process_->state() != QProcess::NotRunning) {
      try {
        spur::http::Request health;
        health.url = (url + "/health").toStdString();
        health.timeout = std::chrono::milliseconds(2000);
        if (spur::http::send(health).status == 200) {
          url_ = url;
          return;
        }
      } catch (const spur::http::TransportError&) {
      }
      QThread::msleep(200);
    }
    QFile log(dir + "/server.log");
    log.open(QIODevice::ReadOnly);
    problem_ = "mlflow server did not answer on port " + QString::number(port) + ": " + log.readAll().right(2000);
    stop();
  }

  QString dir_, url_, problem_;
  std::unique_ptr<QProcess> process_;
};

// MLflow's own client on the server: tests/rigs/mlflow_rig.py ACTION URI EXPERIMENT, its last line as JSON.
QJsonArray mlflow_rig(const QString& action, const QString& url, const QString& experiment) {
  const auto result =
      spur::test::run_process(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/mlflow_rig.py", action, url, experiment},
                              QProcessEnvironment::systemEnvironment(), 180000);
  if (result.exit_code != 0) qFatal("mlflow_rig.py %s failed: %s", qPrintable(action), qPrintable(result.output));
  const QString output = result.output.trimmed();
  return QJsonDocument::fromJson(output.mid(output.lastIndexOf('\n') + 1).toUtf8()).array();
}

double json_number(const QJsonValue& value) {
  if (value.isString()) {
    if (value.toString() == "NaN") return std::nan("");
    return value.toString() == "Infinity" ? INFINITY : -INFINITY;
  }
  return value.toDouble();
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

QProcessEnvironment tracking_environment(const QString& history, const QString& url, const QString& experiment) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  env.insert("SPUR_TRACKERS", "sqlite,mlflow");
  env.insert("MLFLOW_TRACKING_URI", url);
  env.insert("MLFLOW_EXPERIMENT_NAME", experiment);
  return env;
}

// Every point MLflow holds for `key` equals the history's, in value, step and time (MLflow keeps milliseconds).
void compare_with_history(HistoryReader& reader, int64_t run, const QString& key, const QJsonArray& mlflow_points) {
  const auto points = reader.series(run, key.toStdString());
  QCOMPARE(static_cast<qsizetype>(points.size()), mlflow_points.size());
  for (qsizetype i = 0; i < mlflow_points.size(); ++i) {
    const auto want = mlflow_points[i].toArray();
    const auto& point = points[static_cast<std::size_t>(i)];
    QCOMPARE(point.step, want[0].toInteger());
    QVERIFY2(same(point.value, json_number(want[1])), qPrintable(QString("%1 step %2: %3 here, %4 in MLflow")
                                                                     .arg(key)
                                                                     .arg(point.step)
                                                                     .arg(point.value)
                                                                     .arg(json_number(want[1]))));
    QCOMPARE(static_cast<qint64>(std::llround(point.wall * 1000.0)), want[2].toInteger());
  }
}

}  // namespace

class MlflowTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<MlflowServer> server_;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(QDir().mkpath(dir_.path() + "/server"));
    server_ = std::make_unique<MlflowServer>(dir_.path() + "/server");
    QVERIFY2(!server_->url().isEmpty(), qPrintable(server_->problem()));
  }
  void cleanupTestCase() { server_.reset(); }

  void a_two_rank_runs_parameters_and_every_point_reach_mlflow() {
    const QString history = dir_.path() + "/launched.db";
    auto env = tracking_environment(history, server_->url(), "two ranks");
    env.insert("MLFLOW_TRACKING_TOKEN", "tok-3c1e9a-never-stored");  // sent, never written anywhere
    const auto launched = spur::test::run_process(
        SPUR_CLI,
        {"launch", "--num_processes", "2", SPUR_EXAMPLE_MLP, "--epochs", "2", "--log_every", "1", "--lr", "0.003"}, env,
        180000);
    QVERIFY2(launched.exit_code == 0, qPrintable(launched.output));
    QVERIFY2(!launched.output.contains("mlflow ("), qPrintable(launched.output));  // nothing to say: all went

    HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), std::size_t{1});
    const int64_t id = runs[0].id;
    const auto mlflow_runs = mlflow_rig("read", server_->url(), "two ranks");
    QCOMPARE(mlflow_runs.size(), 1);
    const auto run = mlflow_runs[0].toObject();
    QCOMPARE(run["status"].toString(), QString("FINISHED"));
    // The parameters as Accelerate's MLflowTracker logs them (Python's str of each value).
    const auto params = run["params"].toObject();
    QCOMPARE(params["lr"].toString(), QString("0.003"));
    QCOMPARE(params["batch_size"].toString(), QString("64"));
    QCOMPARE(params["epochs"].toString(), QString("2"));
    const auto tags = run["tags"].toObject();
    QCOMPARE(tags["spur.run_id"].toString(), QString::number(id));
    QVERIFY2(tags["spur.launch_command"].toString().contains("spur launch --num_processes 2"),
             qPrintable(tags["spur.launch_command"].toString()));
    QCOMPARE(tags["spur.project"].toString(), QString("mlp"));
    // Every loss and accuracy point, equal to the history's.
    const auto metrics = run["metrics"].toObject();
    QCOMPARE(metrics.keys(), (QStringList{"accuracy", "epoch", "loss"}));
    QVERIFY(metrics["loss"].toArray().size() >= 60);
    for (const auto& key : metrics.keys()) compare_with_history(reader, id, key, metrics[key].toArray());
    // The token went in a header only: not in the history, not in MLflow.
    QFile file(history);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QVERIFY(!file.readAll().contains("tok-3c1e9a"));
    QVERIFY(!QJsonDocument(run).toJson().contains("tok-3c1e9a"));

    // MLFLOW_RUN_ID continues that run: one more epoch's points join it, and it ends FINISHED again. Its
    // parameters stay (MLflow refuses changed ones: epochs 1 now), and that is said.
    env.insert("MLFLOW_RUN_ID", run["run_id"].toString());
    const auto continued =
        spur::test::run_process(SPUR_EXAMPLE_MLP, {"--epochs", "1", "--log_every", "1", "--lr", "0.003"}, env, 120000);
    QVERIFY2(continued.exit_code == 0 && continued.output.contains("keeps its earlier parameters") &&
                 !continued.output.contains("not sent") && !continued.output.contains("cannot be reached"),
             qPrintable(continued.output));
    const auto after = mlflow_rig("read", server_->url(), "two ranks");
    QCOMPARE(after.size(), 1);
    QCOMPARE(after[0].toObject()["status"].toString(), QString("FINISHED"));
    QCOMPARE(after[0].toObject()["params"].toObject()["epochs"].toString(), QString("2"));
    QCOMPARE(after[0].toObject()["metrics"].toObject()["loss"].toArray().size(), metrics["loss"].toArray().size() + 64);
  }

  void mlflow_runs_are_imported_point_for_point() {
    const auto written = mlflow_rig("write", server_->url(), "logged by mlflow");
    QCOMPARE(written.size(), 2);
    const QString history = dir_.path() + "/imported.db";
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", history);
    const QString address = "mlflow://" + server_->url().mid(7) + "/logged%20by%20mlflow";
    const auto imported = spur::test::run_process(SPUR_CLI, {"runs", "import", address}, env, 180000);
    QVERIFY2(imported.exit_code == 0, qPrintable(imported.output));
    QVERIFY2(imported.output.contains("\"lr-sweep 1\" (2 series, 30004 points, 4 hyperparameters)"),
             qPrintable(imported.output));

    HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), std::size_t{2});
    for (const auto& value : written) {
      const auto want = value.toObject();
      const auto match = std::find_if(runs.begin(), runs.end(), [&](const auto& run) {
        return QString::fromStdString(run.name) == want["run_name"].toString();
      });
      QVERIFY(match != runs.end());
      QCOMPARE(QString::fromStdString(match->project), QString("logged by mlflow"));
      QCOMPARE(QString::fromStdString(match->status),
               want["status"].toString() == "FINISHED" ? QString("finished") : QString("failed"));
      const auto metrics = want["metrics"].toObject();
      QCOMPARE(static_cast<qsizetype>(reader.metric_keys(match->id).size()), metrics.size());
      for (const auto& key : metrics.keys()) compare_with_history(reader, match->id, key, metrics[key].toArray());
      // Parameters typed as they read: numbers as numbers, True as true, words as text.
      const auto params = QJsonDocument::fromJson(QByteArray::fromStdString(match->params)).object();
      if (want["run_name"].toString() == "lr-sweep 1") {
        QCOMPARE(params["lr"].toDouble(), 0.003);
        QCOMPARE(params["batch_size"].toInteger(), 64);
        QCOMPARE(params["optimizer"].toString(), QString("adamw"));
        QCOMPARE(params["warmup"].toBool(), true);
      }
    }

    // Once, unless asked again; one run by its id.
    const auto again = spur::test::run_process(SPUR_CLI, {"runs", "import", address}, env, 180000);
    QVERIFY2(again.exit_code == 0 && again.output.count("already imported as run") == 2, qPrintable(again.output));
    const QString first_id = written[0].toObject()["run_id"].toString();
    const auto forced =
        spur::test::run_process(SPUR_CLI, {"runs", "import", address, "--run", first_id, "--again"}, env, 180000);
    QVERIFY2(forced.exit_code == 0 && forced.output.contains("as run 3"), qPrintable(forced.output));
    QCOMPARE(HistoryReader(history.toStdString()).runs().size(), std::size_t{3});

    // Bad addresses name what is wrong.
    const auto missing = spur::test::run_process(
        SPUR_CLI, {"runs", "import", "mlflow://" + server_->url().mid(7) + "/nope"}, env, 60000);
    QVERIFY2(missing.exit_code != 0 && missing.output.contains("no experiment 'nope'") &&
                 missing.output.contains("logged by mlflow"),
             qPrintable(missing.output));
    const auto closed = spur::test::run_process(
        SPUR_CLI, {"runs", "import", QString("mlflow://127.0.0.1:%1/x").arg(free_port())}, env, 60000);
    QVERIFY2(closed.exit_code != 0 && closed.output.contains("127.0.0.1"), qPrintable(closed.output));
  }

  void a_server_that_is_down_is_said_once_and_the_run_goes_on() {
    const QString history = dir_.path() + "/down.db";
    const auto env = tracking_environment(history, QString("http://127.0.0.1:%1").arg(free_port()), "down");
    const auto run = spur::test::run_process(SPUR_EXAMPLE_MLP, {"--epochs", "1", "--log_every", "1"}, env, 120000);
    QVERIFY2(run.exit_code == 0, qPrintable(run.output));
    QCOMPARE(run.output.count("cannot be reached"), 1);
    QVERIFY2(run.output.contains(QRegularExpression(R"((\d+) of \1 logged value\(s\) were not sent)")),
             qPrintable(run.output));
    HistoryReader reader(history.toStdString());
    QCOMPARE(reader.series(reader.runs().at(0).id, "loss").size(), std::size_t{64});  // one epoch of 64 steps

    // Bad settings: named, before training.
    auto bad = env;
    bad.insert("MLFLOW_TRACKING_URI", "./mlruns");
    const auto refused = spur::test::run_process(SPUR_EXAMPLE_MLP, {"--epochs", "1"}, bad, 120000);
    QVERIFY2(refused.exit_code != 0 && refused.output.contains("MLFLOW_TRACKING_URI './mlruns'"),
             qPrintable(refused.output));
    bad.remove("MLFLOW_TRACKING_URI");
    const auto unset = spur::test::run_process(SPUR_EXAMPLE_MLP, {"--epochs", "1"}, bad, 120000);
    QVERIFY2(unset.exit_code != 0 && unset.output.contains("needs MLFLOW_TRACKING_URI"), qPrintable(unset.output));
  }

  // Last: it kills the server.
  void a_server_killed_mid_run_leaves_the_run_whole() {
    const QString history = dir_.path() + "/killed.db";
    QProcess training;
    training.setProcessChannelMode(QProcess::MergedChannels);
    training.setProcessEnvironment(tracking_environment(history, server_->url(), "killed mid-run"));
    training.start(SPUR_EXAMPLE_MLP, {"--epochs", "60", "--log_every", "1"});
    QVERIFY(training.waitForStarted());
    // Once MLflow holds some of the loss, the server goes.
    spur::mlflow::Client client(spur::mlflow::server_from_environment(server_->url().toStdString(), "url"));
    QElapsedTimer timer;
    timer.start();
    std::size_t seen = 0;
    while (seen == 0 && timer.elapsed() < 60000 && training.state() == QProcess::Running) {
      QThread::msleep(100);
      try {
        if (const auto experiment = client.experiment_id("killed mid-run")) {
          const auto runs = client.runs(*experiment);
          if (!runs.empty()) seen = client.metric_history(runs[0].run_id, "loss").size();
        }
      } catch (const std::exception&) {
      }
    }
    QVERIFY2(seen > 0 && training.state() == QProcess::Running, "the run ended before MLflow saw its loss");
    server_->stop();
    QVERIFY(training.waitForFinished(180000));
    const QString output = QString::fromLocal8Bit(training.readAll());
    QVERIFY2(training.exitCode() == 0, qPrintable(output));
    QCOMPARE(output.count("cannot be reached"), 1);
    const auto said =
        QRegularExpression(R"((\d+) of (\d+) logged value\(s\) were not sent, nor run \w+.s status FINISHED)")
            .match(output);
    QVERIFY2(said.hasMatch() && said.captured(1).toLongLong() > 0 &&
                 said.captured(1).toLongLong() < said.captured(2).toLongLong(),
             qPrintable(output));
    // The history holds every point: 60 epochs of 64 steps.
    HistoryReader reader(history.toStdString());
    QCOMPARE(reader.series(reader.runs().at(0).id, "loss").size(), std::size_t{60} * 64);
  }
};

SPUR_TEST_CLASS(MlflowTest)
#include "mlflow_test.moc"
