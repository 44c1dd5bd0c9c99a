// SPDX-License-Identifier: Apache-2.0
// The run history with real processes: two writers and a reader at once, a writer and a training program
// SIGKILLed mid-write, migration of an older file, a 2-rank launched run recorded (loss values and console
// lines), `spur runs` on it, and export round trips.
#include <signal.h>
#include <unistd.h>
#include <sqlite3.h>

#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QTextStream>
#include <QThread>

#include <cstring>
#include <memory>

#include <spur/history/reader.h>
#include <spur/history/writer.h>

#include "rank_group.h"
#include "launch/run_recorder.h"
#include "runs/run_service.h"
#include "test_main.h"

namespace {

using spur::history::HistoryReader;

QString integrity(const QString& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.toUtf8().constData(), &db);
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nullptr);
  QString result;
  while (sqlite3_step(statement) == SQLITE_ROW)
    result += reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return result;
}

// A started process, killed by PID when the test leaves (also on failure).
struct Child {
  std::unique_ptr<QProcess> process = std::make_unique<QProcess>();
  ~Child() {
    if (process->state() != QProcess::NotRunning) {
      process->kill();
      process->waitForFinished(5000);
    }
  }
};

// The last "<word> N" line a process printed so far.
long long last_count(QByteArray& seen, QProcess& process, const QByteArray& word) {
  seen += process.readAllStandardOutput();
  long long count = -1;
  for (const auto& line : seen.split('\n')) {
    if (line.startsWith(word + " ")) count = line.mid(word.size() + 1).toLongLong();
  }
  return count;
}

spur::test::RankResult spur_cli(const QStringList& arguments, const QString& history) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  return spur::test::run_process(SPUR_CLI, arguments, env, 120000);
}

}  // namespace

class HistoryTest : public QObject {
  Q_OBJECT

 private slots:
  // Two processes append while this one reads with cursors: every point arrives once, in order, and the
  // writers' commits interleave without a lost update.
  void two_writers_and_a_reader() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    constexpr long long kPoints = 100000;
    Child a, b;
    // Both at once on a file that does not exist yet: they also race to create and migrate it. Paced (1.5 ms
    // between commits, 1.5 s or more each) so that a slow start of one under load still overlaps the other.
    a.process->start(SPUR_HISTORY_RIG, {path, "a", QString::number(kPoints), "100", "1500"});
    b.process->start(SPUR_HISTORY_RIG, {path, "b", QString::number(kPoints), "70", "1500"});
    QVERIFY(a.process->waitForStarted() && b.process->waitForStarted());

    std::optional<HistoryReader> reader;
    QElapsedTimer timer;
    timer.start();
    while (!reader && timer.elapsed() < 10000) {
      try {
        reader.emplace(path.toStdString());
      } catch (const spur::history::HistoryError&) {
        QThread::msleep(10);
      }
    }
    QVERIFY(reader);
    spur::history::SeriesCursor cursors[2];
    std::vector<spur::history::Point> seen[2];
    bool saw_partial = false;  // a read in the middle of both writers' work
    auto read_all = [&] {
      const auto runs = reader->runs();
      for (const auto& run : runs) {
        const int which = run.name == "a" ? 0 : 1;
        for (const auto& point : reader->series(run.id, "x", &cursors[which])) seen[which].push_back(point);
      }
      saw_partial = saw_partial || (runs.size() == 2 && !seen[0].empty() && !seen[1].empty() &&
                                    static_cast<long long>(seen[0].size()) < kPoints &&
                                    static_cast<long long>(seen[1].size()) < kPoints);
    };
    while ((a.process->state() != QProcess::NotRunning || b.process->state() != QProcess::NotRunning) &&
           timer.elapsed() < 120000) {
      read_all();
      a.process->waitForFinished(5);
      b.process->waitForFinished(5);
    }
    QVERIFY2(a.process->exitCode() == 0, a.process->readAllStandardError().constData());
    QVERIFY2(b.process->exitCode() == 0, b.process->readAllStandardError().constData());
    read_all();
    QVERIFY2(saw_partial, "the reader should have read while both writers wrote");
    for (const auto& points : seen) {
      QCOMPARE(static_cast<long long>(points.size()), kPoints);
      for (long long i = 0; i < kPoints; ++i) {
        if (points[i].step != i || points[i].value != static_cast<double>(i)) {
          QFAIL(qPrintable(QString("point %1 is step %2").arg(i).arg(points[i].step)));
        }
      }
    }
    QCOMPARE(integrity(path), QString("ok"));
  }

  // SIGKILL between or inside commits: the file passes integrity_check and holds every point reported flushed.
  void a_writer_killed_mid_write_loses_nothing_flushed() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    Child writer;
    writer.process->start(SPUR_HISTORY_RIG, {path, "killed", "100000000", "257"});
    QVERIFY(writer.process->waitForStarted());
    QByteArray seen;
    QElapsedTimer timer;
    timer.start();
    while (last_count(seen, *writer.process, "flushed") < 200000 && timer.elapsed() < 60000) {
      writer.process->waitForReadyRead(100);
    }
    ::kill(static_cast<pid_t>(writer.process->processId()), SIGKILL);
    writer.process->waitForFinished(5000);
    const long long flushed = last_count(seen, *writer.process, "flushed");
    QVERIFY(flushed >= 200000);
    QCOMPARE(integrity(path), QString("ok"));
    HistoryReader reader(path.toStdString());
    const auto points = reader.series(reader.runs().front().id, "x");
    QVERIFY2(static_cast<long long>(points.size()) >= flushed,
             qPrintable(QString("%1 points, %2 flushed").arg(points.size()).arg(flushed)));
    for (size_t i = 0; i < points.size(); ++i) QCOMPARE(points[i].step, static_cast<int64_t>(i));
  }

  // The same through the engine: a training program logging through accelerator.log, SIGKILLed. Values
  // logged two seconds before the kill (twenty flush intervals) are in the history.
  void a_training_program_killed_keeps_what_it_logged() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    Child worker;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", path);
    env.remove("SPUR_RUN_ID");
    env.remove("RANK");
    env.remove("WORLD_SIZE");
    worker.process->setProcessEnvironment(env);
    worker.process->start(SPUR_TEST_WORKER, {"track", "--steps", "100000000"});
    QByteArray seen;
    QElapsedTimer timer;
    timer.start();
    while (last_count(seen, *worker.process, "logged") < 2000 && timer.elapsed() < 60000) {
      worker.process->waitForReadyRead(100);
    }
    const long long logged_before = last_count(seen, *worker.process, "logged");
    QVERIFY2(logged_before >= 2000, seen.constData());
    QThread::msleep(2000);
    ::kill(static_cast<pid_t>(worker.process->processId()), SIGKILL);
    worker.process->waitForFinished(5000);
    QCOMPARE(integrity(path), QString("ok"));
    HistoryReader reader(path.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(runs[0].project), QString("kill-test"));
    const auto points = reader.series(runs[0].id, "x");
    QVERIFY2(
        static_cast<long long>(points.size()) >= logged_before,
        qPrintable(QString("%1 points, %2 logged two seconds before the kill").arg(points.size()).arg(logged_before)));
    for (size_t i = 0; i < points.size(); ++i) QCOMPARE(points[i].step, static_cast<int64_t>(i));
    // Marked running by a process that is gone: `spur runs list` says it failed.
    const auto listed = spur_cli({"runs", "list", "--json"}, path);
    QCOMPARE(QJsonDocument::fromJson(listed.output.toUtf8()).array()[0].toObject()["status"].toString(),
             QString("failed"));
  }

  // A file at schema version 1 (before notes, tags and params) opens, migrates and keeps its data.
  void migrates_an_older_schema() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("v1.db").toStdString();
    spur::history::Database::create_at_version(path, 1);
    {
      sqlite3* v1 = nullptr;
      QCOMPARE(sqlite3_open(path.c_str(), &v1), SQLITE_OK);
      auto exec = [&](const char* sql) { return sqlite3_exec(v1, sql, nullptr, nullptr, nullptr); };
      QCOMPARE(exec("SELECT 1 FROM runs"), SQLITE_OK);
      sqlite3_stmt* version = nullptr;
      sqlite3_prepare_v2(v1, "PRAGMA user_version", -1, &version, nullptr);
      sqlite3_step(version);
      QCOMPARE(sqlite3_column_int(version, 0), 1);
      sqlite3_finalize(version);
      QVERIFY(exec("SELECT notes FROM runs") != SQLITE_OK);  // version 1 has no notes yet
      QCOMPARE(exec("INSERT INTO runs(id, name, project, status, created) VALUES(7, 'old', 'p', 'finished', 1.5)"),
               SQLITE_OK);
      QCOMPARE(exec("INSERT INTO series(id, run_id, key) VALUES(1, 7, 'loss')"), SQLITE_OK);
      const double values[2] = {0.5, 0.25}, walls[2] = {10, 11};
      const int64_t steps[2] = {3, 4};
      unsigned char blob[48];
      for (std::ptrdiff_t i = 0; i < 2; ++i) {
        std::memcpy(blob + 24 * i, &steps[i], 8);
        std::memcpy(blob + 24 * i + 8, &values[i], 8);
        std::memcpy(blob + 24 * i + 16, &walls[i], 8);
      }
      sqlite3_stmt* insert = nullptr;
      sqlite3_prepare_v2(v1, "INSERT INTO points(series_id, count, data) VALUES(1, 2, ?)", -1, &insert, nullptr);
      sqlite3_bind_blob(insert, 1, blob, sizeof(blob), SQLITE_TRANSIENT);
      QCOMPARE(sqlite3_step(insert), SQLITE_DONE);
      sqlite3_finalize(insert);
      sqlite3_close(v1);
    }
    spur::history::HistoryWriter writer(path);  // migrates
    QCOMPARE(writer.database().schema_version(), spur::history::Database::kSchemaVersion);
    writer.add_tag(7, "kept");
    writer.set_notes(7, "from v1");
    HistoryReader reader(path);
    const auto run = reader.run(7);
    QVERIFY(run);
    QCOMPARE(QString::fromStdString(run->name), QString("old"));
    QCOMPARE(QString::fromStdString(run->params), QString("{}"));
    QCOMPARE(run->tags, std::vector<std::string>{"kept"});
    QCOMPARE(QString::fromStdString(run->notes), QString("from v1"));
    const auto loss = reader.series(7, "loss");
    QCOMPARE(loss.size(), size_t{2});
    QCOMPARE(loss[1].step, int64_t{4});
    QCOMPARE(loss[1].value, 0.25);
  }

  // A newer file than this build knows is refused, not damaged.
  void refuses_a_newer_schema() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("new.db").toStdString();
    { spur::history::HistoryWriter writer(path); }
    {
      spur::history::HistoryWriter writer(path);
      writer.database().exec("PRAGMA user_version = 99");
    }
    QVERIFY_THROWS_EXCEPTION(spur::history::HistoryError, HistoryReader reader(path));
  }

  // Issue 18: a run launched again keeps its name (with " (2)"), tags and notes and records where it came from:
  // `spur launch --run_name --tag --notes --parent_run`, as the Studio's Relaunch sends them.
  void a_launch_records_its_name_tags_notes_and_parent() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    const auto first = spur_cli({"launch", "--run_name", "sweep", "/bin/true"}, path);
    QVERIFY2(first.exit_code == 0, qPrintable(first.output));
    const auto second = spur_cli({"launch", "--run_name", "sweep (2)", "--tag", "lr-0.1", "--tag", "warm", "--notes",
                                  "second try\nafter the fix", "--parent_run", "1", "/bin/true"},
                                 path);
    QVERIFY2(second.exit_code == 0, qPrintable(second.output));
    HistoryReader reader(path.toStdString());
    const auto run = reader.run(2);
    QVERIFY(run);
    QCOMPARE(run->name, std::string("sweep (2)"));
    QCOMPARE(run->parent, int64_t{1});
    QCOMPARE(run->tags, (std::vector<std::string>{"lr-0.1", "warm"}));
    QCOMPARE(run->notes, std::string("second try\nafter the fix"));
    QCOMPARE(reader.run(1)->parent, int64_t{0});
    const auto shown = spur_cli({"runs", "show", "2"}, path);
    QVERIFY2(shown.output.contains("parent      run 1 (launched again from it)"), qPrintable(shown.output));
    const auto listed = spur_cli({"runs", "list", "--json"}, path);
    QVERIFY2(listed.output.contains("\"parent\": 1") || listed.output.contains("\"parent\":1"),
             qPrintable(listed.output));
    // Refused before anything starts or is submitted (a Slurm job would have run unrecorded).
    for (const QStringList& bad : {QStringList{"--parent_run", "0"}, QStringList{"--parent_run", "first"},
                                   QStringList{"--tag", " "}, QStringList{"--slurm", "--parent_run", "0"}}) {
      const auto refused = spur_cli(QStringList{"launch"} + bad + QStringList{"/bin/true"}, path);
      QCOMPARE(refused.exit_code, 2);
      QVERIFY2(refused.output.contains(bad.contains("--tag") ? "--tag" : "--parent_run") &&
                   !refused.output.contains("sbatch"),
               qPrintable(refused.output));
    }
    QCOMPARE(HistoryReader(path.toStdString()).runs().size(), std::size_t{2});  // nothing recorded for them

    // The names and flags a relaunch gives.
    using spur::app::RunService;
    QCOMPARE(RunService::next_name("sweep"), QString("sweep (2)"));
    QCOMPARE(RunService::next_name("sweep (2)"), QString("sweep (3)"));
    QCOMPARE(RunService::next_name("sweep", {"sweep (2)", "sweep (3)"}), QString("sweep (4)"));
    QCOMPARE(RunService::next_name("run (x)"), QString("run (x) (2)"));
    QCOMPARE(RunService::next_name("acc%1"), QString("acc%1 (2)"));  // not a format string
    auto parent = *reader.run(2);
    parent.config = "compute_environment: LOCAL_MACHINE\n";
    parent.command =
        "cd /work && spur launch --run_name 'sweep (2)' --tag old --notes x --parent_run=1 --env A=1 "
        "-- ./train --lr 0.1";
    const auto request = RunService::relaunch_request(parent, "/tmp/run-2.yaml");
    QCOMPARE(request.working_directory, QString("/work"));
    QCOMPARE(request.config_file, QString("/tmp/run-2.yaml"));
    QCOMPARE(request.program, QString("./train"));
    QCOMPARE(request.arguments, (QStringList{"--lr", "0.1"}));
    QCOMPARE(request.flags, (QStringList{"--env", "A=1", "--run_name", "sweep (3)", "--tag", "lr-0.1", "--tag", "warm",
                                         "--notes", "second try\nafter the fix", "--parent_run", "2"}));
    parent.config.clear();
    QVERIFY_THROWS_EXCEPTION(spur::app::RunServiceError, RunService::relaunch_request(parent, "/tmp/x.yaml"));
  }

  // Issue 36: a launch lists the configuration it ran with among the run's files, and a rank's file records (the
  // stream tracker's, from a machine whose history is elsewhere) join them with their machine.
  void a_launch_lists_its_configuration_and_a_ranks_files() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    const QString config = dir.filePath("one.yaml");
    QFile file(config);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n");
    file.close();
    const auto launched = spur_cli({"launch", "--config_file", config, "/bin/true"}, path);
    QVERIFY2(launched.exit_code == 0, qPrintable(launched.output));
    const auto files = HistoryReader(path.toStdString()).files(1);
    QCOMPARE(files.size(), std::size_t{1});
    QCOMPARE(files[0].kind, std::string("config"));
    QCOMPARE(QString::fromStdString(files[0].path), QFileInfo(config).absoluteFilePath());
    QCOMPARE(files[0].bytes, QFileInfo(config).size());

    QString errors;
    QTextStream err(&errors);
    spur::app::RunRecorderOptions options;
    options.stream_key = "0123456789abcdef0123456789abcdef";
    spur::history::Run run;
    run.name = "remote";
    spur::app::RunRecorder recorder(path.toStdString(), run, err, options);
    QVERIFY(recorder.recording());
    const QString record = "[gpu1] [rank0] @spur:" + options.stream_key +
                           R"( {"type":"file","kind":"checkpoint","path":"/scratch/ckpt/checkpoint_2","step":200,)"
                           R"("bytes":4096,"wall":1700000000.5,"host":"gpu1"})";
    QVERIFY(recorder.line("gpu1", -1, false, record));
    QVERIFY(!recorder.line("gpu1", -1, false, R"(@spur:wrongkey {"type":"file","path":"/etc/passwd"})"));
    QVERIFY(recorder.finish(0, false));
    const auto remote = HistoryReader(path.toStdString()).files(recorder.run_id());
    QCOMPARE(remote.size(), std::size_t{1});
    QCOMPARE(remote[0].path, std::string("/scratch/ckpt/checkpoint_2"));
    QCOMPARE(remote[0].step, int64_t{200});
    QCOMPARE(remote[0].bytes, int64_t{4096});
    QCOMPARE(remote[0].host, std::string("gpu1"));
  }

  // `spur launch` of 2 ranks: the run, its loss values (as the program printed them) and both ranks' console
  // lines are in the history; `spur runs` shows, exports and relaunches it.
  void a_launched_run_is_recorded_and_exported() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    const auto launched = spur_cli({"launch", "--num_processes", "2", "--run_name", "mlp-2", SPUR_EXAMPLE_MLP,
                                    "--epochs", "1", "--log_every", "8"},
                                   path);
    QVERIFY2(launched.exit_code == 0, qPrintable(launched.output));
    QVERIFY2(launched.output.contains("recorded as run 1"), qPrintable(launched.output));
    const auto rig = spur_cli({"launch", "--num_processes", "2", SPUR_LAUNCH_RIG}, path);
    QVERIFY2(rig.exit_code == 0, qPrintable(rig.output));

    HistoryReader reader(path.toStdString());
    const auto run = reader.run(1);
    QVERIFY(run);
    QCOMPARE(QString::fromStdString(run->name), QString("mlp-2"));
    QCOMPARE(QString::fromStdString(run->project), QString("mlp"));
    QCOMPARE(QString::fromStdString(run->status), QString("finished"));
    QCOMPARE(run->exit_code.value_or(-1), 0);
    QCOMPARE(run->last_step, run->total_steps);
    // Every "step S/T loss L" line rank 0 printed is a point of the "loss" series.
    static const QRegularExpression printed(R"(\[rank0\] step (\d+)/\d+ loss ([0-9.]+))");
    std::vector<std::pair<int64_t, double>> expected;
    for (auto it = printed.globalMatch(launched.output); it.hasNext();) {
      const auto match = it.next();
      expected.emplace_back(match.captured(1).toLongLong(), match.captured(2).toDouble());
    }
    const auto loss = reader.series(1, "loss");
    QVERIFY(expected.size() >= 4);
    QCOMPARE(loss.size(), expected.size());
    for (size_t i = 0; i < loss.size(); ++i) {
      QCOMPARE(loss[i].step, expected[i].first);
      QVERIFY(std::abs(loss[i].value - expected[i].second) < 1e-5);
    }
    const auto console = reader.console(1);
    QVERIFY(std::any_of(console.begin(), console.end(),
                        [](const auto& l) { return l.rank == 0 && l.text.find("accuracy") != std::string::npos; }));
    const auto rig_console = reader.console(2);
    for (int rank : {0, 1}) {
      QVERIFY2(std::any_of(rig_console.begin(), rig_console.end(),
                           [rank](const auto& l) {
                             return l.rank == rank && l.text.find("hello from rank " + std::to_string(rank)) == 0;
                           }),
               "each rank's own lines, under its rank");
    }

    // spur runs: list (JSON fields), config (relaunchable), logs by rank, export round trips.
    const auto list = spur_cli({"runs", "list", "--json"}, path);
    const auto runs = QJsonDocument::fromJson(list.output.toUtf8()).array();
    QCOMPARE(runs.size(), 2);
    for (const char* key : {"id", "name", "status", "started", "ended", "exit_code", "target"}) {
      QVERIFY2(runs[0].toObject().contains(key), key);
    }
    QCOMPARE(runs[0].toObject()["target"].toString(), QString("local"));
    const auto config = spur_cli({"runs", "config", "1"}, path);
    QVERIFY2(config.output.contains("num_processes: 2") && config.output.contains("distributed_type: MULTI_"),
             qPrintable(config.output));
    QFile saved(dir.filePath("saved.yaml"));
    QVERIFY(saved.open(QIODevice::WriteOnly));
    saved.write(config.output.toUtf8());
    saved.close();
    const auto relaunch = spur_cli({"launch", "--config_file", saved.fileName(), "--dry_run", SPUR_LAUNCH_RIG}, path);
    QVERIFY2(relaunch.exit_code == 0 && relaunch.output.contains("2 process(es)"), qPrintable(relaunch.output));
    const auto logs = spur_cli({"runs", "logs", "2", "--rank", "1"}, path);
    QVERIFY2(logs.output.contains("[rank1] hello from rank 1") && !logs.output.contains("[rank0]"),
             qPrintable(logs.output));

    const auto json = spur_cli({"runs", "export", "1", "--format", "json"}, path);
    const auto exported = QJsonDocument::fromJson(json.output.toUtf8()).object();
    const auto points = exported["metrics"].toObject()["loss"].toArray();
    QCOMPARE(static_cast<size_t>(points.size()), loss.size());
    for (size_t i = 0; i < loss.size(); ++i) {
      QCOMPARE(points[static_cast<qsizetype>(i)].toArray()[0].toInteger(), loss[i].step);
      QCOMPARE(points[static_cast<qsizetype>(i)].toArray()[1].toDouble(), loss[i].value);  // exact
    }
    const auto csv = spur_cli({"runs", "export", "1", "--format", "csv", "--metrics", "loss"}, path);
    const auto lines = csv.output.trimmed().split('\n');
    QCOMPARE(lines.front(), QString("key,step,value,wall_time"));
    QCOMPARE(static_cast<size_t>(lines.size() - 1), loss.size());
    for (size_t i = 0; i < loss.size(); ++i) {
      const auto fields = lines[static_cast<qsizetype>(i) + 1].split(',');
      QCOMPARE(fields[0], QString("loss"));
      QCOMPARE(fields[1].toLongLong(), loss[i].step);
      QCOMPARE(fields[2].toDouble(), loss[i].value);
    }
    const auto unknown = spur_cli({"runs", "export", "1", "--format", "csv", "--metrics", "nope"}, path);
    QVERIFY2(unknown.exit_code == 2 && unknown.output.contains("no metric 'nope'"), qPrintable(unknown.output));
    // Issue 12, defect 9: an export never replaces the history, by its name, through a link or over its WAL.
    const qint64 history_size = QFileInfo(path).size();
    QVERIFY(QFile::link(path, dir.filePath("link.db")));
    for (const QString& target : {path, dir.filePath("link.db"), path + "-wal"}) {
      if (!QFileInfo::exists(target)) continue;
      const auto over = spur_cli({"runs", "export", "1", "--format", "json", "--output", target}, path);
      QVERIFY2(over.exit_code == 2 && over.output.contains("is the run history"),
               qPrintable(target + ": " + over.output));
    }
    QCOMPARE(QFileInfo(path).size(), history_size);
    QCOMPARE(spur_cli({"runs", "list", "--json"}, path).output, list.output);
    QCOMPARE(
        spur_cli({"runs", "export", "1", "--format", "json", "--output", dir.filePath("out.json")}, path).exit_code, 0);
    QVERIFY(QFileInfo(dir.filePath("out.json")).size() > 0);

    // rename, tag, note, rm.
    QCOMPARE(spur_cli({"runs", "rename", "1", "lr", "0.1"}, path).exit_code, 0);
    const auto unnamed = spur_cli({"runs", "rename", "1", " "}, path);
    QVERIFY2(unnamed.exit_code == 2 && unnamed.output.contains("needs a name"), qPrintable(unnamed.output));
    const auto nobody = spur_cli({"runs", "rename", "99", "x"}, path);
    QVERIFY2(nobody.exit_code == 2 && nobody.output.contains("no run 99"), qPrintable(nobody.output));
    QCOMPARE(spur_cli({"runs", "tag", "1", "baseline"}, path).exit_code, 0);
    QCOMPARE(spur_cli({"runs", "note", "1", "first", "try"}, path).exit_code, 0);
    const auto shown = spur_cli({"runs", "show", "1"}, path);
    QVERIFY2(shown.output.contains("baseline") && shown.output.contains("first try") && shown.output.contains("loss"),
             qPrintable(shown.output));
    QVERIFY2(shown.output.startsWith("name        lr 0.1\n"), qPrintable(shown.output));
    QCOMPARE(spur_cli({"runs", "rm", "2"}, path).exit_code, 0);
    const auto gone = spur_cli({"runs", "show", "2"}, path);
    QVERIFY2(gone.exit_code == 2 && gone.output.contains("no run 2"), qPrintable(gone.output));
  }

  // Before any run is recorded: `spur runs list` says where the history will be and lists nothing; asking for a
  // run says there is no history yet; a change to a run refuses without making an empty history.
  void a_history_not_made_yet_is_said_and_not_made() {
    QTemporaryDir dir;
    const QString path = dir.filePath("none/history.db");
    const auto list = spur_cli({"runs", "list"}, path);
    QVERIFY2(list.exit_code == 0 && list.output.contains("no run history at " + path + " yet"),
             qPrintable(list.output));
    for (const QStringList& asked :
         {QStringList{"runs", "show", "1"}, QStringList{"runs", "rename", "1", "x"},
          QStringList{"runs", "tag", "1", "x"}, QStringList{"runs", "note", "1", "x"}, QStringList{"runs", "rm", "1"},
          QStringList{"runs", "export", "1", "--format", "csv"}, QStringList{"runs", "logs", "1"}}) {
      const auto result = spur_cli(asked, path);
      QVERIFY2(result.exit_code == 2 && result.output.contains("no run history at " + path + " yet"),
               qPrintable(asked.join(' ') + ": " + result.output));
    }
    QVERIFY(!QFileInfo::exists(path));
    QVERIFY(!QFileInfo::exists(dir.filePath("none")));
  }

  // `spur runs logs --follow` prints lines as the ranks print them and returns when the run ends.
  void logs_follow_a_running_run() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", path);
    Child launch, follow;
    launch.process->setProcessEnvironment(env);
    launch.process->start(SPUR_CLI, {"launch", "--num_processes", "2", SPUR_LAUNCH_RIG, "--sleep", "2"});
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < 30000) {
      const auto list = spur_cli({"runs", "list", "--json"}, path);
      if (QJsonDocument::fromJson(list.output.toUtf8()).array().size() == 1) break;
      QThread::msleep(50);
    }
    follow.process->setProcessEnvironment(env);
    follow.process->setProcessChannelMode(QProcess::MergedChannels);
    follow.process->start(SPUR_CLI, {"runs", "logs", "1", "--follow"});
    QVERIFY(follow.process->waitForFinished(60000));
    const QString output = QString::fromUtf8(follow.process->readAll());
    QCOMPARE(follow.process->exitCode(), 0);
    QVERIFY(launch.process->waitForFinished(30000));
    for (int rank : {0, 1}) {
      QVERIFY2(output.contains(QString("[rank%1] hello from rank %1").arg(rank)) &&
                   output.contains(QString("[rank%1] rank %1 done").arg(rank)),
               qPrintable(output));
    }
  }

  // A history that cannot be written (its folder is a file) never stops the run: one warning, exit 0.
  // Issue 31 (2): a history this user can read but not write (a colleague's, an archive on read-only storage) is
  // read as any other by spur runs list, show, logs and export, also with commits still in its write-ahead log (a
  // writer killed), and a change is refused by name; nothing is created or changed beside it.
  void a_history_that_cannot_be_written_is_read_data() {
    QTest::addColumn<QString>("how");
    QTest::addColumn<bool>("log");  // its writer was killed: commits still in the -wal file
    QTest::newRow("another user's") << "nobody" << false;
    QTest::newRow("another user's, with a write-ahead log") << "nobody" << true;
    QTest::newRow("read-only storage") << "read-only mount" << false;
    QTest::newRow("read-only storage, with a write-ahead log") << "read-only mount" << true;
  }
  void a_history_that_cannot_be_written_is_read() {
    QFETCH(QString, how);
    QFETCH(bool, log);
    if (::geteuid() != 0) QSKIP("needs root, to be another user or to mount read-only");
    QTemporaryDir dir;
    QVERIFY(QFile::setPermissions(dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner |
                                                  QFileDevice::ReadOther | QFileDevice::ExeOther));
    const QString folder = dir.filePath("h");
    QVERIFY(QDir().mkpath(folder));
    const QString path = folder + "/history.db";
    Child writer;
    writer.process->start(SPUR_HISTORY_RIG, {path, "archived", log ? "100000000" : "500", "50"});
    QVERIFY(writer.process->waitForStarted());
    QByteArray seen;
    if (log) {
      while (last_count(seen, *writer.process, "flushed") < 5000) QVERIFY(writer.process->waitForReadyRead(30000));
      ::kill(static_cast<pid_t>(writer.process->processId()), SIGKILL);
    }
    QVERIFY(writer.process->waitForFinished(60000));
    const long long flushed = log ? last_count(seen, *writer.process, "flushed") : 500;
    QCOMPARE(QFileInfo::exists(path + "-wal") && QFileInfo(path + "-wal").size() > 0, log);
    for (const QString& file : QDir(folder).entryList(QDir::Files)) {
      QFile::setPermissions(folder + "/" + file, QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                                     QFileDevice::ReadGroup | QFileDevice::ReadOther);
    }
    QFile::setPermissions(folder, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner |
                                      QFileDevice::ReadOther | QFileDevice::ExeOther);
    auto listing = [&] {
      QStringList files;
      for (const auto& info : QDir(folder).entryInfoList(QDir::Files | QDir::Hidden, QDir::Name)) {
        files << info.fileName() + " " + QString::number(info.size()) + " " +
                     QString::number(info.lastModified().toMSecsSinceEpoch());
      }
      return files;
    };
    const QStringList before = listing();
    auto run = [&](const QStringList& arguments) {
      QStringList command;
      QString program;
      if (how == "nobody") {
        program = "setpriv";
        command = QStringList{"--reuid=65534", "--regid=65534", "--clear-groups", SPUR_CLI} + arguments;
      } else {
        program = "unshare";
        QStringList quoted;
        for (const auto& word : QStringList{SPUR_CLI} + arguments) quoted << "'" + word + "'";
        command = {"-m", "sh", "-c",
                   "mount --bind -o ro '" + folder + "' '" + folder + "' && exec " + quoted.join(' ')};
      }
      auto env = QProcessEnvironment::systemEnvironment();
      env.insert("SPUR_HISTORY", path);
      env.insert("HOME", dir.path());
      return spur::test::run_process(program, command, env, 60000);
    };
    const auto list = run({"runs", "list"});
    QVERIFY2(list.exit_code == 0 && list.output.contains("archived"), qPrintable(list.output));
    const auto show = run({"runs", "show", "1"});
    QVERIFY2(show.exit_code == 0 && show.output.contains("archived"), qPrintable(show.output));
    QCOMPARE(run({"runs", "logs", "1"}).exit_code, 0);
    const auto exported = run({"runs", "export", "1", "--format", "csv"});
    QVERIFY2(exported.exit_code == 0, qPrintable(exported.output));
    QVERIFY2(exported.output.count('\n') >= flushed,
             qPrintable(QString("%1 lines exported, %2 flushed").arg(exported.output.count('\n')).arg(flushed)));
    const auto rename = run({"runs", "rename", "1", "other"});
    QVERIFY2(rename.exit_code != 0 && rename.output.contains("is read-only here"), qPrintable(rename.output));
    QCOMPARE(listing(), before);
  }

  void an_unwritable_history_does_not_stop_training() {
    QTemporaryDir dir;
    QFile blocker(dir.filePath("not-a-folder"));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    const auto result = spur_cli({"launch", "--num_processes", "2", SPUR_EXAMPLE_MLP, "--epochs", "1"},
                                 dir.filePath("not-a-folder/history.db"));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("epoch 1 accuracy"), qPrintable(result.output));
    QCOMPARE(result.output.count("the run history cannot be written"), 1);
    QVERIFY2(result.output.contains("spur: tracking: sqlite"), qPrintable(result.output));
  }

  // Issue 12, private files: consoles and configurations can hold secrets, so a new history, its WAL and shared
  // memory files and the folders made for it are the owner's only; an existing file keeps its permissions.
  void a_new_history_is_private() {
    QTemporaryDir dir;
    const QString path = dir.filePath("new/deeper/history.db");
    {
      spur::history::HistoryWriter writer(path.toStdString());
      spur::history::Run run;
      run.name = "private";
      writer.create_run(run);
      const auto owner_only = QFileDevice::ReadOwner | QFileDevice::WriteOwner;
      for (const QString& file : {path, path + "-wal", path + "-shm"}) {
        QVERIFY2(QFileInfo::exists(file), qPrintable(file));
        QCOMPARE(QFileInfo(file).permissions() & QFileDevice::Permissions(0x7077), owner_only);
      }
      for (const QString& folder : {dir.filePath("new"), dir.filePath("new/deeper")}) {
        QCOMPARE(QFileInfo(folder).permissions() & QFileDevice::Permissions(0x7077),
                 owner_only | QFileDevice::ExeOwner);
      }
    }
    QVERIFY(QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadGroup));
    { spur::history::HistoryWriter writer(path.toStdString()); }
    QVERIFY(QFileInfo(path).permissions() & QFileDevice::ReadGroup);
  }

  // Several processes opening a brand-new history at once: switching it to WAL needs an exclusive lock that
  // SQLite refuses without waiting ("database is locked"), which failed writers under load. Every one of them
  // now gets in, in every round.
  void a_new_history_opened_by_many_at_once() {
    for (int round = 0; round < 6; ++round) {
      QTemporaryDir dir;
      const QString path = dir.filePath("history.db");
      std::vector<Child> writers(6);
      for (int i = 0; i < 6; ++i) {
        writers[i].process->setProcessChannelMode(QProcess::MergedChannels);
        writers[i].process->start(SPUR_HISTORY_RIG, {path, QString("w%1").arg(i), "50", "10"});
      }
      for (auto& writer : writers) {
        QVERIFY(writer.process->waitForFinished(60000));
        QVERIFY2(writer.process->exitCode() == 0, writer.process->readAll().constData());
      }
      HistoryReader reader(path.toStdString());
      QCOMPARE(reader.runs().size(), size_t{6});
    }
  }

  // Issue 12, defect 2: four launches at once, each printing 40,000 lines, while another connection holds the
  // history's write lock for longer than any busy timeout, from their first lines until after their ranks have
  // ended. Before the fix, runs stayed "running" without an exit code and lost their console lines, yet said
  // "recorded". Now every run ends "finished" with exit code 0 and every line, in order, and each launcher says
  // "recorded" only once it is true.
  void concurrent_launches_lose_nothing() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    { spur::history::HistoryWriter created(history.toStdString()); }  // created (and migrated) before the race
    constexpr int kLaunches = 4;
    constexpr int kLines = 40000;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", history);
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    std::vector<Child> launches(kLaunches);
    std::vector<QByteArray> seen(kLaunches);
    for (auto& launch : launches) {
      launch.process->setProcessEnvironment(env);
      launch.process->setProcessChannelMode(QProcess::MergedChannels);
      launch.process->start(
          SPUR_CLI, {"launch", "--num_processes", "1", "/bin/sh", "-c", QString("seq 1 %1; sleep 3").arg(kLines)});
      QVERIFY(launch.process->waitForStarted());
    }
    // Waits until every launch printed `line` (its runs exist once the ranks print anything).
    auto wait_for_line = [&](const QByteArray& line) {
      QElapsedTimer timer;
      timer.start();
      for (int i = 0; i < kLaunches; ++i) {
        while (!seen[i].contains(line) && timer.elapsed() < 120000) {
          launches[i].process->waitForReadyRead(100);
          seen[i] += launches[i].process->readAll();
        }
        if (!seen[i].contains(line)) return false;
      }
      return true;
    };
    QVERIFY(wait_for_line("[rank0] 1\n"));
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(history.toUtf8().constData(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 30000);
    QCOMPARE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    const bool printed = wait_for_line(QByteArray("[rank0] ") + QByteArray::number(kLines) + "\n");
    QThread::msleep(5000);  // the ranks sleep 3 s, then exit: the launchers end while the lock is held
    QCOMPARE(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    QVERIFY(printed);
    QStringList outputs;
    for (auto& launch : launches) {
      QVERIFY(launch.process->waitForFinished(180000));
      const QString output = QString::fromUtf8(seen[&launch - launches.data()] + launch.process->readAll());
      QVERIFY2(launch.process->exitCode() == 0, qPrintable(output));
      QVERIFY2(output.contains("recorded as run") && !output.contains("incomplete"), qPrintable(output));
      outputs << output;
    }
    QCOMPARE(integrity(history), QString("ok"));
    HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(static_cast<int>(runs.size()), kLaunches);
    for (const auto& run : runs) {
      QCOMPARE(QString::fromStdString(run.status), QString("finished"));
      QVERIFY(run.exit_code.has_value());
      QCOMPARE(*run.exit_code, 0);
      // The rank's lines, every one, in order; beside them the launcher's own (its start and end).
      std::vector<spur::history::ConsoleLine> console;
      int launcher = 0;
      for (auto& line : reader.console(run.id)) {
        if (line.rank >= 0) console.push_back(std::move(line));
        else ++launcher;
      }
      QCOMPARE(launcher, 2);
      QCOMPARE(static_cast<int>(console.size()), kLines);
      for (int i = 0; i < kLines; ++i) {
        if (console[i].text != std::to_string(i + 1)) {
          QFAIL(qPrintable(
              QString("run %1, line %2: '%3'").arg(run.id).arg(i).arg(QString::fromStdString(console[i].text))));
        }
      }
    }
  }
};

SPUR_TEST_CLASS(HistoryTest)
#include "history_test.moc"
