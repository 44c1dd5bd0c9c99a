// SPDX-License-Identifier: Apache-2.0
// Tracking in one process: what trackers receive (keys, steps, order, tensors), the csv tracker's file, the
// tensorboard tracker's event files read back by TensorBoard's own readers (also after a crash), a tracker that
// fails for a while (records kept and delivered later; a bounded backlog drops the oldest), and the progress bar
// staying quiet off a terminal.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <cmath>
#include <iostream>
#include <mutex>
#include <sstream>

#include <thread>

#include <sqlite3.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <spur/spur.h>

#include <spur/core/http.h>
#include <spur/core/mlflow.h>

#include "expect_error.h"
#include "rank_group.h"
#include "test_main.h"

namespace {

using spur::test::expect_error;

// Keeps what it is given; fails while `failing` is set, counting the attempts.
class Recording : public spur::Tracker {
 public:
  explicit Recording(bool fail = false) : failing(fail) {}
  std::string name() const override { return "recording"; }
  void start(const spur::TrackingRun& run) override {
    std::lock_guard<std::mutex> lock(mutex);
    project = run.project;
    params = spur::json::write(run.params);
    total = run.total_steps;
  }
  void write(const spur::MetricBatch& batch) override {
    std::lock_guard<std::mutex> lock(mutex);
    ++attempts;
    if (failing) throw std::runtime_error("disk full");
    for (const auto& r : batch.records) seen.emplace_back(batch.keys[r.key], r.step, r.value);
  }
  void set_total_steps(int64_t steps) override { total = steps; }
  void finish(const std::string& s) override { status = s; }

  std::mutex mutex;
  std::string project, params, status;
  int64_t total = 0;
  std::vector<std::tuple<std::string, int64_t, double>> seen;
  std::atomic<bool> failing;
  std::atomic<int> attempts{0};
};

// Waits (up to 10 s) until the writer has tried to deliver at least `n` batches.
bool attempted(const Recording& tracker, int n) {
  for (int i = 0; i < 1000 && tracker.attempts < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return tracker.attempts >= n;
}

spur::TrackingOptions only(std::shared_ptr<spur::Tracker> tracker) {
  spur::TrackingOptions options;
  options.trackers = {"none"};
  options.custom = {std::move(tracker)};
  options.flush_interval = std::chrono::milliseconds(10);
  return options;
}

// tests/rigs/read_tensorboard.py: TensorBoard's own readers on a run folder.
QJsonObject read_tensorboard(const QString& dir) {
  QProcess rig;
  rig.start(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/read_tensorboard.py", dir});
  if (!rig.waitForFinished(120000) || rig.exitCode() != 0) {
    qWarning("%s", rig.readAllStandardError().constData());
    return {};
  }
  return QJsonDocument::fromJson(rig.readAllStandardOutput()).object();
}

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

class TrackingTest : public QObject {
  Q_OBJECT

 private slots:
  // The engine's JSON (tracker parameters, checkpoint state, safetensors headers) reads back what it writes, of
  // the same type: a whole double stays a double. Found by tests/fuzz/fuzz_json: -0.0 was written as "-0" and
  // read back as the integer 0.
  void json_round_trips_numbers_and_their_types() {
    for (const double d : {-0.0, 1.0, -3.0, 1e300, 0.1, -2.5e-7, 123456789.0}) {
      const std::string text = spur::json::write(spur::json::Value(d));
      const auto back = spur::json::parse(text);
      QVERIFY2(back.is_number() && !back.is_int(), text.c_str());
      QCOMPARE(std::signbit(back.as_double()), std::signbit(d));
      QCOMPARE(back.as_double(), d);
      QCOMPARE(spur::json::write(back), text);
    }
    QCOMPARE(spur::json::write(spur::json::Value(int64_t{-7})), std::string("-7"));
    QVERIFY(spur::json::parse("-7").is_int());
  }

  void trackers_get_every_value_in_order() {
    auto tracker = std::make_shared<Recording>();
    {
      spur::Accelerator accelerator;
      auto options = only(tracker);
      options.total_steps = 30;
      accelerator.init_trackers("unit", {{"lr", 0.5}, {"name", "mlp"}}, options);
      accelerator.log({{"loss", 1.5}, {"acc", torch::tensor(0.25)}});  // step 0
      accelerator.log({{"loss", 1.0}});                                // step 1
      accelerator.log({{"loss", 0.5}}, 10);
      accelerator.log(std::vector<std::pair<std::string, double>>{{"eval/loss", 2.0}});  // step 11
      accelerator.set_total_steps(40);
      accelerator.end_training();
      accelerator.log({{"loss", 9.0}});  // after the end: ignored
    }
    QCOMPARE(tracker->project, std::string("unit"));
    QCOMPARE(tracker->params, std::string(R"({"lr": 0.5, "name": "mlp"})"));
    QCOMPARE(tracker->status, std::string("finished"));
    QCOMPARE(tracker->total, int64_t{40});
    using Row = std::tuple<std::string, int64_t, double>;
    const std::vector<Row> expected{
        {"loss", 0, 1.5}, {"acc", 0, 0.25}, {"loss", 1, 1.0}, {"loss", 10, 0.5}, {"eval/loss", 11, 2.0}};
    QVERIFY(tracker->seen == expected);
  }

  // Issue 36: a run's checkpoints (save_state) and exported models (save_model) are listed with it in the history,
  // with the last step logged before each and its size on disk, for the Studio's run overview.
  void checkpoints_and_models_are_listed_with_the_run() {
    QTemporaryDir dir;
    const std::string history = dir.filePath("history.db").toStdString();
    {
      spur::AcceleratorOptions options;
      options.project_config.project_dir = dir.filePath("project").toStdString();
      options.project_config.automatic_checkpoint_naming = true;
      spur::Accelerator accelerator(options);
      torch::nn::Linear net(3, 2);
      auto model = accelerator.prepare(net);
      accelerator.init_trackers("unit", {}, only(spur::make_sqlite_tracker(history)));
      accelerator.log({{"loss", 1.0}}, 7);
      accelerator.save_state();
      accelerator.log({{"loss", 0.5}}, 9);
      accelerator.save_model(*net, dir.filePath("exported").toStdString());
      accelerator.end_training();
    }
    // Read with SQLite itself (the engine's history library is inside libspur).
    struct Row {
      std::string kind, path, host;
      int64_t step = 0, bytes = 0;
      double wall = 0;
    };
    std::vector<Row> files;
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(history.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* query = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db, "SELECT kind, path, step, bytes, wall, host FROM files ORDER BY id", -1, &query,
                                nullptr),
             SQLITE_OK);
    const auto text = [&](int column) {
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(query, column)));
    };
    while (sqlite3_step(query) == SQLITE_ROW) {
      files.push_back({text(0), text(1), text(5), sqlite3_column_int64(query, 2), sqlite3_column_int64(query, 3),
                       sqlite3_column_double(query, 4)});
    }
    sqlite3_finalize(query);
    sqlite3_close(db);
    const auto bytes_in = [](const QString& folder) {
      qint64 total = 0;
      for (const auto& info : QDir(folder).entryInfoList(QDir::Files)) total += info.size();
      return total;
    };
    QCOMPARE(QString::fromStdString(files[0].kind), QString("checkpoint"));
    QCOMPARE(QString::fromStdString(files[0].path), dir.filePath("project/checkpoints/checkpoint_0"));
    QCOMPARE(files[0].step, int64_t{7});
    QCOMPARE(files[0].bytes, bytes_in(dir.filePath("project/checkpoints/checkpoint_0")));
    QVERIFY(files[0].bytes > 0);
    QCOMPARE(QString::fromStdString(files[1].kind), QString("model"));
    QCOMPARE(QString::fromStdString(files[1].path), dir.filePath("exported"));
    QCOMPARE(files[1].step, int64_t{9});
    QCOMPARE(files[1].bytes, bytes_in(dir.filePath("exported")));
    QVERIFY(!files[1].host.empty());
    QVERIFY(files[1].wall >= files[0].wall && files[0].wall > 0);
  }

  void a_failing_tracker_gets_its_values_later() {
    auto tracker = std::make_shared<Recording>(/*fail=*/true);
    spur::Accelerator accelerator;
    accelerator.init_trackers("unit", {}, only(tracker));
    for (int step = 0; step < 25; ++step) accelerator.log({{"x", step}}, step);
    QVERIFY(attempted(*tracker, 1));
    for (int step = 25; step < 50; ++step) accelerator.log({{"x", step}}, step);
    QVERIFY(attempted(*tracker, 2));
    tracker->failing = false;  // the disk has room again
    accelerator.end_training();
    QCOMPARE(tracker->seen.size(), size_t{50});
    for (int step = 0; step < 50; ++step)
      QCOMPARE(std::get<1>(tracker->seen[static_cast<size_t>(step)]), int64_t{step});
  }

  // While a tracker cannot write, only the newest max_backlog values are kept for it.
  void the_backlog_is_bounded() {
    auto tracker = std::make_shared<Recording>(/*fail=*/true);
    spur::Accelerator accelerator;
    auto options = only(tracker);
    options.max_backlog = 100;
    accelerator.init_trackers("unit", {}, options);
    for (int step = 0; step < 1000; ++step) accelerator.log({{"x", step}}, step);
    QVERIFY(attempted(*tracker, 1));
    tracker->failing = false;
    accelerator.end_training();  // prints how many values were not recorded
    QCOMPARE(tracker->seen.size(), size_t{100});
    QCOMPARE(std::get<1>(tracker->seen.front()), int64_t{900});
    QCOMPARE(std::get<1>(tracker->seen.back()), int64_t{999});
  }

  void the_csv_tracker_writes_rows() {
    QTemporaryDir dir;
    spur::Accelerator accelerator;
    spur::TrackingOptions options;
    options.trackers = {"csv"};
    options.csv_directory = dir.path().toStdString();
    options.run_name = "first";
    accelerator.init_trackers("proj", {}, options);
    accelerator.log({{"loss", 0.125}, {"a,b", 2}}, 3);
    accelerator.end_training();
    QFile file(dir.filePath("proj/first/metrics.csv"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto lines = QString::fromUtf8(file.readAll()).trimmed().split('\n');
    QCOMPARE(lines.size(), 3);
    // The one metrics CSV layout (engine/core/include/spur/core/metrics_csv.h), as `spur runs export --format csv`
    // writes.
    QCOMPARE(lines[0], QString("key,step,value,wall_time"));
    QVERIFY2(lines[1].startsWith("loss,3,0.125,"), qPrintable(lines[1]));
    QVERIFY2(lines[2].startsWith("\"a,b\",3,2,"), qPrintable(lines[2]));
    QVERIFY2(QRegularExpression("^loss,3,0.125,\\d+\\.\\d{6}$").match(lines[1]).hasMatch(), qPrintable(lines[1]));
  }

  // A metrics.csv of the older layout (step,key,...) is never appended to in the new one: its columns would mix.
  void the_csv_tracker_leaves_a_file_of_another_layout_alone() {
    QTemporaryDir dir;
    QVERIFY(QDir().mkpath(dir.filePath("proj/old")));
    const QByteArray old = "step,key,value,wall_time\n1,loss,0.5,1700000000.000000\n";
    {
      QFile file(dir.filePath("proj/old/metrics.csv"));
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write(old);
    }
    spur::Accelerator accelerator;
    spur::TrackingOptions options;
    options.trackers = {"csv"};
    options.csv_directory = dir.path().toStdString();
    options.run_name = "old";
    try {
      accelerator.init_trackers("proj", {}, options);
      accelerator.log({{"loss", 0.25}}, 2);
      accelerator.end_training();
    } catch (const spur::Error& e) {
      QVERIFY2(QString(e.what()).contains("has the columns 'step,key,value,wall_time'"), e.what());
    }
    QFile file(dir.filePath("proj/old/metrics.csv"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), old);
  }

  // log_with {"tensorboard"}: logging_dir/<project>/events.out.tfevents.*, read back by TensorBoard with the same
  // scalars (float32, as PyTorch's SummaryWriter writes them), steps, wall times, texts and hyperparameters.
  void the_tensorboard_tracker_writes_what_tensorboard_reads() {
    QTemporaryDir dir;
    const double before = now();
    {
      spur::AcceleratorOptions options;
      options.project_config.project_dir = dir.path().toStdString();
      options.log_with = {"tensorboard"};
      spur::Accelerator accelerator(options);
      spur::TrackingOptions tracking;
      tracking.trackers = {"none"};  // TensorBoard alone (no history)
      tracking.run_name = "first";
      accelerator.init_trackers(
          "proj", {{"lr", 0.001}, {"model", "cnn"}, {"amp", false}, {"optim", spur::json::Object{{"beta", 0.9}}}},
          tracking);
      for (int step = 0; step < 100; ++step) {
        accelerator.log({{"loss", 1.0 / (step + 1)}, {"eval/acc", step * 0.01}}, step);
      }
      accelerator.log({{"sample", "a text, \u00e9"}, {"lr", 0.5}}, 100);
      accelerator.end_training();
    }
    const double after = now();
    const auto read = read_tensorboard(dir.path() + "/proj");
    QCOMPARE(read["files"].toInt(), 1);
    const auto loss = read["scalars"].toObject()["loss"].toArray();
    const auto acc = read["scalars"].toObject()["eval/acc"].toArray();
    QCOMPARE(loss.size(), 100);
    QCOMPARE(acc.size(), 100);
    for (int step = 0; step < 100; ++step) {
      const auto point = loss[step].toArray();
      QCOMPARE(point[0].toInt(), step);
      QCOMPARE(point[1].toDouble(), static_cast<double>(static_cast<float>(1.0 / (step + 1))));
      QVERIFY(point[2].toDouble() >= before - 1 && point[2].toDouble() <= after + 1);
      QCOMPARE(acc[step].toArray()[1].toDouble(), static_cast<double>(static_cast<float>(step * 0.01)));
    }
    QCOMPARE(read["scalars"].toObject()["lr"].toArray()[0].toArray()[0].toInt(), 100);
    const auto text = read["texts"].toObject()["sample/text_summary"].toArray();
    QCOMPARE(text.size(), 1);
    QCOMPARE(text[0].toArray()[0].toInt(), 100);
    QCOMPARE(text[0].toArray()[1].toString(), QString::fromUtf8("a text, \u00e9"));
    const auto hparams = read["hparams"].toObject();
    QCOMPARE(hparams["lr"].toDouble(), 0.001);
    QCOMPARE(hparams["model"].toString(), QString("cnn"));
    QCOMPARE(hparams["amp"].toBool(true), false);
    QCOMPARE(hparams["optim/beta"].toDouble(), 0.9);
    QCOMPARE(read["group_name"].toString(), QString("first"));
    QCOMPARE(read["session_end"].toInt(), 1);  // STATUS_SUCCESS
  }

  // A program that aborts without end_training leaves an event file TensorBoard reads up to the last batch the
  // writer handed over.
  void a_crash_leaves_a_readable_event_file() {
    QTemporaryDir dir;
    QProcess worker;
    worker.setProcessChannelMode(QProcess::MergedChannels);
    worker.start(SPUR_TEST_WORKER, {"tensorboard_crash", "--out", dir.path(), "--steps", "50"});
    QVERIFY(worker.waitForFinished(60000));
    const QString output = QString::fromUtf8(worker.readAll());
    QVERIFY2(worker.exitStatus() == QProcess::CrashExit && output.contains("aborting"), qPrintable(output));
    const auto read = read_tensorboard(dir.path() + "/crash");
    QCOMPARE(read["scalars"].toObject()["loss"].toArray().size(), 50);
    QCOMPARE(read["texts"].toObject()["note/text_summary"].toArray().size(), 1);
    QCOMPARE(read["hparams"].toObject()["lr"].toDouble(), 0.25);
    QVERIFY(read["session_end"].isNull());  // never ended
  }

  // "all" selects every tracker that is available: those that write files (tensorboard and csv) besides the
  // history's default, and mlflow when MLFLOW_TRACKING_URI names a server (as Accelerate's "all").
  void log_with_all_selects_every_available_tracker() {
    QTemporaryDir dir;
    {
      spur::AcceleratorOptions options;
      options.project_config.logging_dir = dir.filePath("logs").toStdString();
      options.log_with = {"all"};
      spur::Accelerator accelerator(options);
      spur::TrackingOptions tracking;
      tracking.trackers = {"none"};
      tracking.csv_directory = dir.filePath("csv").toStdString();
      tracking.run_name = "r";
      accelerator.init_trackers("p", {}, tracking);
      accelerator.log({{"x", 1}}, 0);
      accelerator.end_training();
    }
    QCOMPARE(QDir(dir.filePath("logs/p")).entryList({"events.out.tfevents.*"}, QDir::Files).size(), 1);
    QVERIFY(QFile::exists(dir.filePath("csv/p/r/metrics.csv")));

    // With MLFLOW_TRACKING_URI set, "all" takes the mlflow tracker too (a closed port here: it says so).
    const int port = spur::test::free_port();
    QVERIFY(port > 0);
    const QString uri = QString("http://127.0.0.1:%1").arg(port);
    qputenv("MLFLOW_TRACKING_URI", uri.toUtf8());
    std::ostringstream said;
    {
      struct Restore {  // std::cerr and the environment back as they were, also when the Accelerator throws
        std::streambuf* cerr;
        ~Restore() {
          std::cerr.rdbuf(cerr);
          qunsetenv("MLFLOW_TRACKING_URI");
        }
      } restore{std::cerr.rdbuf(said.rdbuf())};
      spur::AcceleratorOptions options;
      options.project_config.logging_dir = dir.filePath("logs").toStdString();
      options.log_with = {"all"};
      spur::Accelerator accelerator(options);
      accelerator.init_trackers("p", {}, {.trackers = {"none"}, .csv_directory = dir.filePath("csv").toStdString()});
      accelerator.log({{"x", 1}}, 0);
      accelerator.end_training();
    }
    QVERIFY2(QString::fromStdString(said.str()).contains("mlflow (" + uri + ") cannot be reached"), said.str().c_str());
  }

  // An unknown name in log_with, and a logging directory that cannot be made: errors naming the value or path.
  void bad_tracker_settings_are_named() {
    QTemporaryDir dir;
    {
      spur::AcceleratorOptions options;
      options.log_with = {"tensorbord"};
      spur::Accelerator accelerator(options);
      const auto error = expect_error([&] { accelerator.init_trackers("p", {}, {.trackers = {"none"}}); });
      QVERIFY2(error.contains("unknown tracker 'tensorbord' (AcceleratorOptions::log_with"), qPrintable(error));
    }
    QFile file(dir.filePath("a-file"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.close();
    spur::AcceleratorOptions options;
    options.project_config.logging_dir = dir.filePath("a-file/logs").toStdString();
    options.log_with = {"tensorboard"};
    spur::Accelerator accelerator(options);
    const auto error = expect_error([&] { accelerator.init_trackers("p", {}, {.trackers = {"none"}}); });
    QVERIFY2(error.contains("the TensorBoard logging directory " + dir.filePath("a-file/logs/p")), qPrintable(error));
  }

  void unknown_trackers_are_named() {
    spur::Accelerator accelerator;
    spur::TrackingOptions options;
    options.trackers = {"wandb"};
    try {
      accelerator.init_trackers("p", {}, options);
      QFAIL("expected an error");
    } catch (const spur::Error& e) {
      QVERIFY2(std::string(e.what()).find("unknown tracker 'wandb'") != std::string::npos, e.what());
    }
  }

  // An MLflow parameter's text is Python's str() of the value, as Accelerate's MLflowTracker logs it (the values
  // printed by Python 3.11).
  void mlflow_parameters_read_as_pythons_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("python");
    const std::pair<const char*, const char*> cases[] = {
        {"0.003", "0.003"},
        {"100.0", "100.0"},
        {"1e-05", "1e-05"},
        {"1e16", "1e+16"},
        {"1e15", "1000000000000000.0"},
        {"0.0001", "0.0001"},
        {"123456789012345678.0", "1.2345678901234568e+17"},
        {"-2.5", "-2.5"},
        {"1.5e300", "1.5e+300"},
        {"5e-324", "5e-324"},
        {"0.30000000000000004", "0.30000000000000004"},
        {"-0.0", "-0.0"},
        {"0.00030000000000000003", "0.00030000000000000003"},
        {"64", "64"},
        {"true", "True"},
        {"\"adamw\"", "adamw"},
        {"[1, 2]", "[1, 2]"},
    };
    for (const auto& [json, python] : cases) QTest::newRow(json) << json << python;
  }
  void mlflow_parameters_read_as_pythons() {
    QFETCH(QString, json);
    QFETCH(QString, python);
    QCOMPARE(QString::fromStdString(spur::mlflow::param_text(spur::json::parse(json.toStdString()))), python);
  }

  // MLflow's rule for metric and parameter names (mlflow/utils/validation.py): the tracker leaves out what the
  // server would refuse, rather than losing a whole batch.
  void mlflow_names_follow_mlflows_rule_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<bool>("valid");
    QTest::newRow("plain") << "loss" << true;
    QTest::newRow("sections") << "train/loss" << true;
    QTest::newRow("punctuation") << "lr-group 0.max:x_y" << true;
    QTest::newRow("letters") << QString::fromUtf8("pérte") << true;
    QTest::newRow("empty") << "" << false;
    QTest::newRow("at") << "loss@1" << false;
    QTest::newRow("percent") << "acc%" << false;
    QTest::newRow("double slash") << "a//b" << false;
    QTest::newRow("leading slash") << "/a" << false;
    QTest::newRow("trailing slash") << "a/" << false;
    QTest::newRow("dot part") << "a/./b" << false;
    QTest::newRow("dot dot") << "../a" << false;
    QTest::newRow("251 characters") << QString(251, 'x') << false;
    QTest::newRow("250 characters") << QString(250, 'x') << true;
  }
  void mlflow_names_follow_mlflows_rule() {
    QFETCH(QString, key);
    QFETCH(bool, valid);
    QCOMPARE(spur::mlflow::valid_key(key.toStdString()), valid);
  }

  // Addresses in messages never show a password; MLFLOW_TRACKING_URI that is not a server is named.
  void mlflow_addresses_are_checked_and_shown_without_credentials() {
    QCOMPARE(spur::http::without_credentials("https://me:s3cret@host:5000/x@y"), std::string("https://host:5000/x@y"));
    QCOMPARE(spur::http::without_credentials("http://host:5000"), std::string("http://host:5000"));
    const auto error =
        expect_error([] { spur::mlflow::server_from_environment("file:///tmp/mlruns", "MLFLOW_TRACKING_URI"); });
    QVERIFY2(error.contains("MLFLOW_TRACKING_URI 'file:///tmp/mlruns': not a tracking server's http:// or https://"),
             qPrintable(error));
    const auto hidden = expect_error([] { spur::mlflow::server_from_environment("ftp://me:s3cret@h/", "uri"); });
    QVERIFY2(!hidden.contains("s3cret"), qPrintable(hidden));
    qputenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9");
    spur::AcceleratorOptions options;
    options.log_with = {"mlflow"};
    spur::Accelerator accelerator(options);
    qputenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "soon");
    const auto timeout = expect_error([&] { accelerator.init_trackers("p", {}, {.trackers = {"none"}}); });
    qunsetenv("MLFLOW_HTTP_REQUEST_TIMEOUT");
    qunsetenv("MLFLOW_TRACKING_URI");
    QVERIFY2(timeout.contains("MLFLOW_HTTP_REQUEST_TIMEOUT='soon'"), qPrintable(timeout));
  }

  void the_progress_bar_is_quiet_off_a_terminal() {
    spur::ProgressBar bar(10, "train");  // the tests' stderr is a pipe or file
    for (int i = 0; i < 10; ++i) bar.update();
    QCOMPARE(bar.count(), int64_t{10});
    QVERIFY(!bar.shown());
    spur::ProgressBar off(10, "eval", /*enabled=*/false);
    QVERIFY(!off.shown());
  }
};

SPUR_TEST_CLASS(TrackingTest)
#include "tracking_test.moc"
