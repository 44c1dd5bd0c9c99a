// SPDX-License-Identifier: Apache-2.0
// A history on another machine (ssh://HOST/PATH) through a real sshd on a loopback port: `spur runs` answers the
// same over SSH as on the file itself, changes made over SSH land there, `logs --follow` survives its serve being
// killed (reconnecting, nothing lost or repeated), and every way a remote can be wrong (unreachable, refused key,
// no Spur, an older Spur, another protocol, garbage, a missing history) is a clear message that changes nothing.
#include <signal.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QScopeGuard>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cmath>
#include <limits>

#include <spur/history/writer.h>

#include "launch/run_recorder.h"
#include "rank_group.h"
#include "runs/history_protocol.h"
#include "runs/history_server.h"
#include "runs/remote_history.h"
#include "runs/run_service.h"
#include "setup/launch_target.h"
#include "sshd_rig.h"
#include "studio/console_model.h"
#include "studio/pending_launches.h"
#include "studio/run_actions.h"
#include "studio/runs_model.h"
#include "studio/series_loader.h"
#include "test_main.h"

namespace {

using spur::history::ConsoleLine;
using spur::history::HistoryWriter;

// Two finished runs (one with a NaN among its points, a non-ASCII console line) and their configuration.
void fill_history(const QString& path) {
  HistoryWriter writer(path.toStdString());
  const double t = 1796500000;
  for (int i = 1; i <= 2; ++i) {
    spur::history::Run run;
    run.name = i == 1 ? "alpha" : "beta, with ünïcode";
    run.project = "remote";
    run.status = "finished";
    run.created = t + i;
    run.started = t + i;
    run.ended = t + i + 90;
    run.exit_code = 0;
    run.params = R"({"lr":0.1,"batch":64})";
    run.config = "compute_environment: LOCAL_MACHINE\nnum_processes: 2\n";
    run.command = "cd /tmp && spur launch prog --epochs 1";
    run.tags = {"baseline"};
    const auto id = writer.create_run(run);
    writer.append_metrics(id, {{"train/loss", {{0, 2.5, t}, {1, std::nan(""), t + 1}, {2, 1.25, t + 2}}},
                               {"eval/accuracy", {{2, 0.875, t + 2}}}});
    writer.append_console({ConsoleLine{0, id, "vm", 0, "stdout", t + 1, "époque 1: loss 2.5"},
                           ConsoleLine{0, id, "vm", -1, "stderr", t + 2, "spur launch: done"}});
  }
}

}  // namespace

class RemoteHistoryTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<spur::test::ThrowawaySshd> sshd_;

  QString address(const QString& path, const QString& host = "machine1") const { return "ssh://" + host + path; }
  spur::test::RankResult spur(const QStringList& arguments, const QString& remote_spur = SPUR_CLI) const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.remove("SPUR_HISTORY");
    QStringList args = arguments;
    args << "--ssh_config" << sshd_->client_config() << "--remote_spur" << remote_spur;
    return spur::test::run_process(SPUR_CLI, args, env, 60000);
  }
  QString local(const QStringList& arguments) const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("SPUR_HISTORY");
    return spur::test::run_process(SPUR_CLI, arguments, env, 60000).output;
  }
  // A configuration file in `dir`: one process or `processes` on the CPU.
  static QString cpu_config(const QTemporaryDir& dir, const QString& name, int processes) {
    QString path = dir.filePath(name);
    QFile file(path);
    file.open(QIODevice::WriteOnly);
    file.write(QString("compute_environment: LOCAL_MACHINE\ndistributed_type: %1\nnum_processes: %2\nuse_cpu: true\n")
                   .arg(processes > 1 ? "MULTI_CPU" : "'NO'")
                   .arg(processes)
                   .toUtf8());
    return path;
  }
  static QString script(const QTemporaryDir& dir, const QString& name, const QString& body) {
    QString path = dir.filePath(name);
    QFile file(path);
    file.open(QIODevice::WriteOnly);
    file.write(("#!/bin/sh\n" + body + "\n").toUtf8());
    file.close();
    file.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    return path;
  }

 private slots:
  void initTestCase() {
    sshd_ = std::make_unique<spur::test::ThrowawaySshd>();
    if (!sshd_->problem().isEmpty()) QFAIL(qPrintable("no sshd for the test: " + sshd_->problem()));
  }
  void cleanupTestCase() { sshd_.reset(); }

  void addresses_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("destination");
    QTest::addColumn<int>("port");
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("error");
    QTest::newRow("host and path") << "ssh://gpu1/data/h.db"
                                   << "gpu1" << 0 << "/data/h.db"
                                   << "";
    QTest::newRow("user, port") << "ssh://ana@gpu1.lab:2222/h.db"
                                << "ana@gpu1.lab" << 2222 << "/h.db"
                                << "";
    QTest::newRow("home") << "ssh://gpu1/~/runs/h.db"
                          << "gpu1" << 0 << "~/runs/h.db"
                          << "";
    QTest::newRow("default history") << "ssh://gpu1"
                                     << "gpu1" << 0 << ""
                                     << "";
    QTest::newRow("ipv6") << "ssh://[::1]:22/h.db"
                          << "::1" << 22 << "/h.db"
                          << "";
    QTest::newRow("space in path") << "ssh://gpu1/my%20runs/h.db"
                                   << "gpu1" << 0 << "/my runs/h.db"
                                   << "";
    QTest::newRow("no host") << "ssh:///h.db"
                             << "" << 0 << ""
                             << "no host";
    QTest::newRow("option as host") << "ssh://-oProxyCommand=x/h.db"
                                    << "" << 0 << ""
                                    << "hostname";
    QTest::newRow("password") << "ssh://ana:secret@gpu1/h.db"
                              << "" << 0 << ""
                              << "password";
    QTest::newRow("query") << "ssh://gpu1/h.db?x=1"
                           << "" << 0 << ""
                           << "no meaning";
  }
  void addresses() {
    QFETCH(QString, text);
    QFETCH(QString, destination);
    QFETCH(int, port);
    QFETCH(QString, path);
    QFETCH(QString, error);
    try {
      const auto address = spur::app::HistoryAddress::parse(text);
      QVERIFY2(error.isEmpty(), "accepted");
      QVERIFY(address);
      QCOMPARE(address->destination(), destination);
      QCOMPARE(address->port, port);
      QCOMPARE(address->path, path);
      QCOMPARE(spur::app::HistoryAddress::parse(address->text())->path, path);  // written back, read again
    } catch (const spur::app::RunServiceError& e) {
      QVERIFY2(!error.isEmpty() && QString(e.what()).contains(error) && QString(e.what()).contains(text), e.what());
    }
    QVERIFY(!spur::app::HistoryAddress::parse("/data/h.db"));  // a file is not an address
  }

  // The wire format in-process: every read decodes to what the local service returns (NaN, non-ASCII), and what
  // the serve cannot read is an error answer after which it goes on.
  void serve_answers_as_the_local_service() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    fill_history(path);
    spur::app::RunService service(path.toStdString());
    spur::app::HistoryServer server(service, "test");
    namespace protocol = spur::app::protocol;
    const auto hello = protocol::decode_hello(server.hello());
    QCOMPARE(hello.protocol, protocol::kVersion);
    QVERIFY(hello.exists && !hello.read_only);
    auto ask = [&](qint64 id, const QString& call, const QJsonObject& arguments) {
      const auto answer =
          protocol::decode_answer(server.answer(protocol::encode_request(id, call, arguments).trimmed()));
      if (answer.id != id || !answer.error_kind.isEmpty()) {
        throw std::runtime_error((answer.error_kind + ": " + answer.error_message).toStdString());
      }
      return answer.result;
    };
    spur::history::RunFilter filter;
    filter.newest_first = true;
    const auto runs = protocol::decode_runs(ask(1, "runs", {{"filter", protocol::encode(filter)}}));
    const auto expected = service.runs(filter);
    QCOMPARE(runs.size(), expected.size());
    for (size_t i = 0; i < runs.size(); ++i) {
      QCOMPARE(runs[i].id, expected[i].id);
      QCOMPARE(runs[i].name, expected[i].name);
      QCOMPARE(runs[i].tags, expected[i].tags);
      QCOMPARE(runs[i].params, expected[i].params);
      QCOMPARE(runs[i].ended, expected[i].ended);
      QVERIFY(runs[i].config.empty());  // lists go without
    }
    const auto one = protocol::decode_run(ask(2, "find", {{"run", 1}}));
    QCOMPARE(one.config, service.run(1).config);
    QVERIFY(ask(3, "find", {{"run", 99}}).isNull());
    const auto briefs = protocol::decode_briefs(ask(4, "metric_briefs", {{"run", 1}}));
    const auto local_briefs = service.metric_briefs(1);
    QCOMPARE(briefs.size(), local_briefs.size());
    for (size_t i = 0; i < briefs.size(); ++i) {
      QCOMPARE(briefs[i].key, local_briefs[i].key);
      QCOMPARE(briefs[i].points, local_briefs[i].points);
      QCOMPARE(briefs[i].min, local_briefs[i].min);
    }
    const auto lines = protocol::decode_console(ask(5, "console", {{"run", 1}, {"after", 0}}));
    QCOMPARE(lines.size(), size_t{2});
    QCOMPARE(QString::fromStdString(lines[0].text), QString("époque 1: loss 2.5"));
    QCOMPARE(ask(6, "export", {{"run", 1}, {"format", "csv"}, {"keys", QJsonArray()}}).toString().toUtf8(),
             service.export_metrics(1, spur::app::ExportFormat::csv));
    QCOMPARE(protocol::to_integer(ask(7, "count_runs", {{"filter", protocol::encode(filter)}}), "count"), 2);
    // Failures are answers, and the serve goes on.
    for (const QByteArray& wrong : {QByteArray("not json"), QByteArray(R"({"id":8,"call":"nonsense"})"),
                                    QByteArray(R"({"id":9,"call":"find","run":"one"})"),
                                    QByteArray(R"({"id":10,"call":"rename","run":99,"name":"x"})")}) {
      const auto answer = protocol::decode_answer(server.answer(wrong));
      QVERIFY2(!answer.error_kind.isEmpty(), wrong.constData());
    }
    QCOMPARE(protocol::decode_answer(server.answer(R"({"id":10,"call":"rename","run":99,"name":"x"})")).error_kind,
             QString("run"));
    QCOMPARE(ask(11, "state", {}).toObject().value("exists").toBool(), true);
    // A run's files (issue 36: its checkpoints, listed in the Studio's overview) travel whole.
    spur::history::HistoryWriter(path.toStdString())
        .add_files({{0, 1, "checkpoint", "/data/ckpt/checkpoint_3", 300, 123456, 1000.5, "gpu1"}});
    const auto files = protocol::decode_files(ask(12, "files", {{"run", 1}}));
    const auto local_files = service.files(1);
    QCOMPARE(files.size(), std::size_t{1});
    QCOMPARE(local_files.size(), std::size_t{1});
    QCOMPARE(files[0].kind, local_files[0].kind);
    QCOMPARE(files[0].path, std::string("/data/ckpt/checkpoint_3"));
    QCOMPARE(files[0].step, int64_t{300});
    QCOMPARE(files[0].bytes, int64_t{123456});
    QCOMPARE(files[0].wall, 1000.5);
    QCOMPARE(files[0].host, std::string("gpu1"));
    QVERIFY(protocol::decode_files(ask(13, "files", {{"run", 2}})).empty());
  }

  // The Studio's pollers ask for many runs and series at once (one round trip over SSH): each answer equals the
  // local one, bucket for bucket (a bucket of one point travels as the point: its NaN, its sum of 0 for NaN), an
  // error answer in the middle of a batch is thrown after the whole batch was read, and the next call is answered.
  void batched_reads_over_ssh_equal_the_local_ones() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    fill_history(path);
    spur::app::RunService here(path.toStdString());
    spur::app::RemoteOptions options;
    options.ssh_config = sshd_->client_config();
    options.remote_spur = SPUR_CLI;
    options.batch_mode = true;
    spur::app::RunService there(address(path).toStdString(), options);
    const std::vector<int64_t> runs{2, 1, 99};
    QCOMPARE(there.metric_keys(runs), here.metric_keys(runs));
    const auto points_there = there.last_points(runs);
    const auto points_here = here.last_points(runs);
    QCOMPARE(points_there.size(), size_t{3});
    for (size_t i = 0; i < runs.size(); ++i) {
      QCOMPARE(points_there[i].size(), points_here[i].size());
      for (const auto& [key, point] : points_here[i]) QCOMPARE(points_there[i].at(key).step, point.step);
    }
    auto same = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
    std::vector<spur::app::RunService::SummaryRead> reads;
    for (const int64_t run : {1, 2}) {
      for (const int64_t width : {1000, 1}) {  // raw (buckets of one point, one of them NaN), then one bucket
        spur::history::SeriesRange range;
        range.width = width;
        reads.push_back({run, "train/loss", range});
      }
    }
    const auto summaries_there = there.summaries(reads);
    const auto summaries_here = here.summaries(reads);
    QCOMPARE(summaries_there.size(), reads.size());
    for (size_t i = 0; i < reads.size(); ++i) {
      const auto& a = summaries_there[i];
      const auto& b = summaries_here[i];
      QCOMPARE(a.points_per_bucket, b.points_per_bucket);
      QCOMPARE(a.total_points, b.total_points);
      QCOMPARE(a.buckets.size(), b.buckets.size());
      for (size_t k = 0; k < a.buckets.size(); ++k) {
        const auto& x = a.buckets[k];
        const auto& y = b.buckets[k];
        QVERIFY2(x.count == y.count && x.step_lo == y.step_lo && x.step_hi == y.step_hi && x.finite == y.finite &&
                     same(x.wall_lo, y.wall_lo) && same(x.wall_hi, y.wall_hi) && same(x.min, y.min) &&
                     same(x.max, y.max) && same(x.first, y.first) && same(x.last, y.last) && same(x.sum, y.sum),
                 qPrintable(QString("summary %1, bucket %2").arg(i).arg(k)));
      }
    }
    QCOMPARE(summaries_here[0].buckets.size(), size_t{3});  // the raw case had its NaN point to carry
    QVERIFY(std::isnan(summaries_there[0].buckets[1].first) && summaries_there[0].buckets[1].finite == 0);
    std::vector<spur::app::RunService::SeriesRead> follow_there{{1, "train/loss", {}}, {2, "eval/accuracy", {}}};
    auto follow_here = follow_there;
    const auto series_there = there.series(follow_there);
    const auto series_here = here.series(follow_here);
    for (size_t i = 0; i < follow_there.size(); ++i) {
      QCOMPARE(series_there[i].size(), series_here[i].size());
      QCOMPARE(follow_there[i].cursor.chunk_id, follow_here[i].cursor.chunk_id);
      QCOMPARE(follow_there[i].cursor.points_in_chunk, follow_here[i].cursor.points_in_chunk);
    }
    QVERIFY(there.series(follow_there)[0].empty());  // from the advanced cursors: nothing new
    // An error answer mid-batch: thrown once all three were read; the connection stays in step.
    spur::app::RemoteHistory remote(*spur::app::HistoryAddress::parse(address(path)), options);
    QVERIFY_THROWS_EXCEPTION(
        std::exception,
        remote.call_all("find", {QJsonObject{{"run", 1}}, QJsonObject{{"run", "one"}}, QJsonObject{{"run", 2}}}));
    const auto after = remote.call_all("find", {QJsonObject{{"run", 2}}, QJsonObject{{"run", 1}}});
    QCOMPARE(after[0].toObject().value("id").toInteger(), 2);
    QCOMPARE(after[1].toObject().value("id").toInteger(), 1);
    QCOMPARE(remote.connections(), 1);
  }

  // What a person types on one machine works the same on the other's history, and changes land there.
  void the_cli_answers_the_same_over_ssh() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    fill_history(path);
    const QString remote = address(path);
    for (const QStringList& command :
         {QStringList{"list"}, QStringList{"list", "--json"}, QStringList{"list", "--tag", "baseline", "--limit", "1"},
          QStringList{"show", "2"}, QStringList{"export", "1", "--format", "csv"},
          QStringList{"export", "2", "--format", "json", "--metrics", "train/loss"}, QStringList{"config", "1"},
          QStringList{"logs", "2"}, QStringList{"logs", "1", "--rank", "0"}}) {
      const auto over_ssh = spur(QStringList{"runs"} + command + QStringList{"--history", remote});
      QVERIFY2(over_ssh.exit_code == 0, qPrintable(command.join(' ') + ": " + over_ssh.output));
      QCOMPARE(over_ssh.output, local(QStringList{"runs"} + command + QStringList{"--history", path}));
    }
    for (const QStringList& change : {QStringList{"rename", "1", "first"}, QStringList{"tag", "1", "remote-tag"},
                                      QStringList{"note", "1", "set over ssh"}, QStringList{"rm", "2"}}) {
      const auto result = spur(QStringList{"runs"} + change + QStringList{"--history", remote});
      QVERIFY2(result.exit_code == 0, qPrintable(change.join(' ') + ": " + result.output));
    }
    spur::app::RunService here(path.toStdString());
    const auto run = here.run(1);
    QCOMPARE(run.name, std::string("first"));
    QCOMPARE(run.notes, std::string("set over ssh"));
    QVERIFY(std::find(run.tags.begin(), run.tags.end(), "remote-tag") != run.tags.end());
    QVERIFY(!here.find(2));
    // What is refused there is refused the same, naming the machine; import belongs on that machine.
    const auto missing = spur({"runs", "show", "7", "--history", remote});
    QVERIFY2(missing.exit_code == 2 && missing.output.contains("no run 7 in " + remote), qPrintable(missing.output));
    const auto empty_name = spur({"runs", "tag", "1", " ", "--history", remote});
    QVERIFY2(empty_name.exit_code == 2 && empty_name.output.contains("a tag cannot be empty"),
             qPrintable(empty_name.output));
    const auto import = spur({"runs", "import", dir.path(), "--history", remote});
    QVERIFY2(import.exit_code != 0 && import.output.contains("import there"), qPrintable(import.output));
  }

  // The serve killed under `logs --follow`: it says it reconnects, and every line arrives once, in order.
  void follow_resumes_after_the_connection_drops() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    QProcess owner;  // the running run's "launcher", alive on this machine until the run ends
    owner.start("sleep", {"300"});
    QVERIFY(owner.waitForStarted());
    int64_t id = 0;
    {
      HistoryWriter writer(path.toStdString());
      spur::history::Run run;
      run.name = "live";
      run.status = "running";
      run.created = spur::history::now_seconds();
      run.started = run.created;
      run.pid = owner.processId();
      run.host = spur::app::local_host_name().toStdString();
      id = writer.create_run(run);
    }
    auto append = [&](int from, int to) {
      HistoryWriter writer(path.toStdString());
      std::vector<ConsoleLine> lines;
      for (int i = from; i <= to; ++i) {
        lines.push_back({0, id, "vm", 0, "stdout", spur::history::now_seconds(), "line " + std::to_string(i)});
      }
      writer.append_console(lines);
    };
    append(1, 3);
    QProcess follow;
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("SPUR_HISTORY");
    follow.setProcessEnvironment(env);
    follow.start(SPUR_CLI, {"runs", "logs", QString::number(id), "--follow", "--history", address(path), "--ssh_config",
                            sshd_->client_config(), "--remote_spur", SPUR_CLI});
    QVERIFY(follow.waitForStarted());
    QByteArray out, err;
    auto wait_for = [&](const QByteArray& text, QByteArray& stream) {
      QElapsedTimer timer;
      timer.start();
      while (!stream.contains(text) && timer.elapsed() < 30000 && follow.state() == QProcess::Running) {
        follow.waitForReadyRead(200);
        out += follow.readAllStandardOutput();
        err += follow.readAllStandardError();
      }
      return stream.contains(text);
    };
    QVERIFY2(wait_for("line 3", out), out + err);
    // Kill the serve on the "remote" side (by its own command line, which names this test's history only).
    QProcess::execute("pkill", {"-KILL", "-f", "runs serve --stdio --history " + path});
    append(4, 6);
    QVERIFY2(wait_for("reconnected", err), out + err);
    QVERIFY2(wait_for("line 6", out), out + err);
    owner.kill();  // the launcher dies: the run is over for its machine, and follow ends
    owner.waitForFinished();
    QVERIFY2(follow.waitForFinished(30000), out + err);
    out += follow.readAllStandardOutput();
    err += follow.readAllStandardError();
    QCOMPARE(follow.exitCode(), 0);
    QVERIFY2(err.contains("lost the connection to " + address(path).toUtf8()) && err.contains("reconnecting"), err);
    for (int i = 1; i <= 6; ++i) QVERIFY2(out.count("line " + QByteArray::number(i) + "\n") == 1, out);
    QVERIFY(out.indexOf("line 3") < out.indexOf("line 4"));
  }

  // The Studio's readers (the runs table's, the plots', the console's) on ssh://HOST/PATH while `spur launch` runs
  // a 2-rank training there, headless: the run is seen running with its loss growing, then finished with every
  // point and console line that the history holds.
  void the_studio_readers_watch_a_run_there_live() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    qputenv("SPUR_SSH_CONFIG", sshd_->client_config().toUtf8());
    qputenv("SPUR_REMOTE_SPUR", SPUR_CLI);
    auto restore = qScopeGuard([] {
      qunsetenv("SPUR_SSH_CONFIG");
      qunsetenv("SPUR_REMOTE_SPUR");
    });
    QProcess launch;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", path);
    launch.setProcessEnvironment(env);
    launch.setProcessChannelMode(QProcess::MergedChannels);
    launch.start(SPUR_CLI, {"launch", "--num_processes", "2", "--run_name", "there", SPUR_EXAMPLE_MLP, "--epochs",
                            "100", "--log_every", "2"});
    QVERIFY(launch.waitForStarted());
    auto stop = qScopeGuard([&] {
      if (launch.state() != QProcess::NotRunning) {
        launch.kill();
        launch.waitForFinished();
      }
    });
    spur::app::RunsReader runs(address(path));
    spur::app::SeriesLoader loader(address(path));
    qint64 loss_points = 0;
    connect(&loader, &spur::app::SeriesLoader::loaded, this, [&](const QVector<spur::app::SeriesDelta>& deltas) {
      for (const auto& delta : deltas) {
        if (delta.key == "loss") loss_points = delta.total_points;
      }
    });
    std::vector<qint64> seen_while_running;  // the loss's points at each read while the run ran
    int64_t id = 0;
    while (!launch.waitForFinished(300)) {
      const auto snapshot = runs.read();
      QVERIFY2(snapshot.error.isEmpty(), qPrintable(snapshot.error));
      if (snapshot.runs.empty()) continue;
      id = snapshot.runs.back().id;
      if (snapshot.statuses.back() != "running") continue;
      loader.set_runs({id});
      loader.poll();
      seen_while_running.push_back(loss_points);
    }
    QVERIFY2(launch.exitCode() == 0, launch.readAll().constData());
    QVERIFY2(seen_while_running.size() >= 3 && seen_while_running.back() > seen_while_running.front(),
             qPrintable(QString("loss points seen while running: %1 reads, %2 to %3")
                            .arg(seen_while_running.size())
                            .arg(seen_while_running.empty() ? -1 : seen_while_running.front())
                            .arg(seen_while_running.empty() ? -1 : seen_while_running.back())));
    spur::app::RunsSnapshot last;
    for (int i = 0; i < 50 && last.runs.empty(); ++i, QThread::msleep(100)) last = runs.read();  // a whole read
    QVERIFY(!last.runs.empty());
    QCOMPARE(last.statuses.back(), QString("finished"));
    loader.poll();
    spur::app::RunService here(path.toStdString());
    QCOMPARE(loss_points, here.summary(id, "loss").total_points);
    spur::app::ConsoleSource console(address(path));
    spur::app::ConsoleQuery query;
    query.run = id;
    const auto batch = console.read(query);
    QVERIFY2(batch.error.isEmpty(), qPrintable(batch.error));
    QCOMPARE(batch.lines.size(), here.console(id).size());
    QVERIFY(batch.record && batch.record->name == "there");
  }

  // spur launch --on: the configuration travels as a file, the ranks run there detached, recording into that
  // machine's history, and this side prints their console and ends with the run's exit code.
  void launch_on_runs_there_and_follows_it() {
    QTemporaryDir dir;
    const QString history = dir.filePath("there.db");
    const QString config = cpu_config(dir, "two.yaml", 2);
    const auto result = spur::test::run_process(
        SPUR_CLI,
        {"launch", "--on", "machine1", "--ssh_config", sshd_->client_config(), "--remote_spur", SPUR_CLI, "--history",
         history, "--config_file", config, "--run_name", "far", SPUR_LAUNCH_RIG, "it's"},
        QProcessEnvironment::systemEnvironment(), 120000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("[rank1] hello from rank 1 of 2") && result.output.contains("argument: it's") &&
                 result.output.contains("finished on machine1 (exit code 0)"),
             qPrintable(result.output));
    spur::app::RunService there(history.toStdString());
    const auto run = there.run(1);
    QCOMPARE(run.name, std::string("far"));
    QCOMPARE(run.status, std::string("finished"));
    QVERIFY2(QString::fromStdString(run.config).contains("num_processes: 2"), run.config.c_str());
    QVERIFY2(!QString::fromStdString(run.command).contains(config), run.command.c_str());  // a copy there
    // A launch that fails there says why, with its exit code.
    const auto missing = spur::test::run_process(SPUR_CLI,
                                                 {"launch", "--on", "machine1", "--ssh_config", sshd_->client_config(),
                                                  "--remote_spur", SPUR_CLI, "--history", history, "/no/such/program"},
                                                 QProcessEnvironment::systemEnvironment(), 60000);
    QVERIFY2(missing.exit_code == 2 && missing.output.contains("cannot run '/no/such/program'"),
             qPrintable(missing.output));
    const auto secret =
        spur::test::run_process(SPUR_CLI, {"launch", "--on", "machine1", "--env", "TOKEN=abc", SPUR_LAUNCH_RIG},
                                QProcessEnvironment::systemEnvironment(), 60000);
    QVERIFY2(secret.exit_code != 0 && secret.output.contains("--env TOKEN=...: values do not travel"),
             qPrintable(secret.output));
  }

  // The desktop's side of a --on launch dies (a laptop closed): the run goes on there, and is found again and
  // followed to its end; Ctrl-C on another --on launch stops its run there.
  void launch_on_outlives_this_side_and_stops_on_ctrl_c() {
    QTemporaryDir dir;
    const QString history = dir.filePath("there.db");
    auto start = [&](QProcess& launch, const QString& name) {
      launch.setProcessChannelMode(QProcess::MergedChannels);
      launch.start(SPUR_CLI,
                   QStringList{"launch", "--on", "machine1", "--ssh_config", sshd_->client_config(), "--remote_spur",
                               SPUR_CLI, "--history", history, "--num_processes", "2", "--run_name", name} +
                       (name == "detached" ? QStringList{"--detach"} : QStringList{}) +
                       QStringList{SPUR_EXAMPLE_MLP, "--epochs", "80", "--log_every", "2"});
      QByteArray output;
      QElapsedTimer timer;
      timer.start();
      while (!output.contains("[rank0] step") && timer.elapsed() < 60000 && launch.state() != QProcess::NotRunning) {
        launch.waitForReadyRead(200);
        output += launch.readAll();
      }
      return output;
    };
    QProcess first;
    const auto began = start(first, "outlives");
    QVERIFY2(began.contains("runs on machine1, detached"), began.constData());
    ::kill(static_cast<pid_t>(first.processId()), SIGKILL);  // this side gone, its SSH connections with it
    first.waitForFinished();
    const auto follow =
        spur({"runs", "logs", "1", "--follow", "--history", address(history)}, SPUR_CLI);  // found again, to its end
    QVERIFY2(follow.exit_code == 0 && follow.output.contains("epoch 80 accuracy"), qPrintable(follow.output));
    QCOMPARE(spur::app::RunService(history.toStdString()).run(1).status, std::string("finished"));

    QProcess second;
    const auto second_began = start(second, "stopped");
    QVERIFY2(second_began.contains("runs on machine1, detached"), second_began.constData());
    ::kill(static_cast<pid_t>(second.processId()), SIGINT);
    QVERIFY(second.waitForFinished(60000));
    const QByteArray said = second_began + second.readAll();
    QVERIFY2(said.contains("stopping run 2 on machine1") && second.exitCode() != 0, said.constData());
    QCOMPARE(spur::app::RunService(history.toStdString()).run(2).status, std::string("stopped"));

    // --detach: back at once; the Studio's Stop (RunActions) on that history stops it through that machine.
    QProcess third;
    const auto third_began = start(third, "detached");
    QVERIFY(third.state() == QProcess::NotRunning || third.waitForFinished(60000));
    const QByteArray third_said = third_began + third.readAll();
    QVERIFY2(third.exitCode() == 0 && third_said.contains("runs on machine1, detached") &&
                 !third_said.contains("[rank0] step"),
             third_said.constData());
    qputenv("SPUR_SSH_CONFIG", sshd_->client_config().toUtf8());
    qputenv("SPUR_REMOTE_SPUR", SPUR_CLI);
    auto restore = qScopeGuard([] {
      qunsetenv("SPUR_SSH_CONFIG");
      qunsetenv("SPUR_REMOTE_SPUR");
    });
    spur::app::RunActions actions(address(history));
    auto stopped = actions.stop(3);
    stopped.waitForFinished();
    QCOMPARE(stopped.result(), QString());
    QTRY_COMPARE_WITH_TIMEOUT(spur::app::RunService(history.toStdString()).run(3).status, std::string("stopped"),
                              30000);
  }

  // The Studio's Relaunch in a window on another machine's history: the run's configuration comes back over SSH,
  // the new run starts there through `spur launch --on ... --detach` started here, is recorded there with the run
  // it came from, and the pending launch settles on the run its launcher named.
  void a_run_there_is_relaunched_from_here() {
    QTemporaryDir dir;
    const QString history = dir.filePath("there.db");
    const QString config = cpu_config(dir, "one.yaml", 1);
    const auto first =
        spur::test::run_process(SPUR_CLI,
                                {"launch", "--on", "machine1", "--ssh_config", sshd_->client_config(), "--remote_spur",
                                 SPUR_CLI, "--history", history, "--on_dir", dir.path(), "--config_file", config,
                                 "--run_name", "first", SPUR_LAUNCH_RIG, "--lines", "2"},
                                QProcessEnvironment::systemEnvironment(), 120000);
    QVERIFY2(first.exit_code == 0, qPrintable(first.output));
    spur::app::RemoteOptions options;
    options.ssh_config = sshd_->client_config();
    options.remote_spur = SPUR_CLI;
    options.batch_mode = true;
    const auto address = *spur::app::HistoryAddress::parse(this->address(history));
    spur::app::RunService there(address.text().toStdString(), options);
    const QString copy = dir.filePath("relaunch/run-1.yaml");
    QVERIFY(QDir().mkpath(dir.filePath("relaunch")));
    there.export_config(1, copy);  // what the Studio's actions do before it launches
    const auto request = spur::app::launched_from_here(
        spur::app::RunService::relaunch_request(there.run(1), copy, "again"), address, options);
    QCOMPARE(request.flags.mid(0, 4), (QStringList{"--on", "machine1", "--on_dir", dir.path()}));
    QVERIFY(QDir().mkpath(dir.filePath("logs")));
    qputenv("SPUR_PROGRAM", SPUR_CLI);  // the Studio's own spur, found beside it when installed
    auto restore = qScopeGuard([] { qunsetenv("SPUR_PROGRAM"); });
    spur::app::PendingLaunches pending(address.text(), dir.filePath("logs"));
    QCOMPARE(pending.launch(request, 1), QString());
    std::vector<spur::app::PendingLaunches::Outcome> outcomes;
    QElapsedTimer timer;
    timer.start();
    while (outcomes.empty() && timer.elapsed() < 90000) {
      QThread::msleep(300);
      spur::history::RunFilter all;
      outcomes = pending.settle(there.runs(all));
    }
    QCOMPARE(outcomes.size(), size_t{1});
    QVERIFY2(outcomes.front().run == 2, qPrintable(outcomes.front().output));
    QTRY_COMPARE_WITH_TIMEOUT(spur::app::RunService(history.toStdString()).run(2).status, std::string("finished"),
                              30000);
    const auto again = spur::app::RunService(history.toStdString()).run(2);
    QCOMPARE(again.name, std::string("again"));
    QCOMPARE(again.parent, int64_t{1});
    QVERIFY2(QString::fromStdString(again.config).contains("num_processes: 1"), again.config.c_str());
  }

  // The Studio's Launch of a configuration whose target file says where spur launch runs (on: machine1, a login
  // node): the run is recorded in that machine's history, and the pending launch in this machine's window settles
  // as soon as the launcher here names it, with that history to open (ssh://machine1/...).
  void a_launch_from_a_file_naming_another_machine_settles_there() {
    QTemporaryDir dir;
    const QString history = dir.filePath("there.db");
    const QString config = cpu_config(dir, "run.yaml", 1);
    spur::app::LaunchTarget target;
    target.flags = {"--on", "machine1", "--on_dir", dir.path()};
    target.save_for(config);
    spur::app::LaunchRequest request;
    request.config_file = config;
    request.program = SPUR_LAUNCH_RIG;
    request.arguments = {"--lines", "2", "--sleep", "3"};
    request.flags = {"--run_name", "from the file", "--history", history};  // --history: that machine's file
    request.working_directory = dir.path();
    auto environment = QProcessEnvironment::systemEnvironment();
    environment.insert("SPUR_SSH_CONFIG", sshd_->client_config());
    environment.insert("SPUR_REMOTE_SPUR", SPUR_CLI);
    environment.insert("SPUR_PROGRAM", SPUR_CLI);
    qputenv("SPUR_PROGRAM", SPUR_CLI);
    auto restore = qScopeGuard([] { qunsetenv("SPUR_PROGRAM"); });
    QVERIFY(QDir().mkpath(dir.filePath("logs")));
    const QString here = dir.filePath("here.db");  // this machine's window: the run is not in it
    spur::app::PendingLaunches pending(here, dir.filePath("logs"));
    QCOMPARE(pending.launch(request, 0, environment), QString());
    std::vector<spur::app::PendingLaunches::Outcome> outcomes;
    QElapsedTimer timer;
    timer.start();
    while (outcomes.empty() && timer.elapsed() < 60000) {
      QThread::msleep(200);
      outcomes = pending.settle({});
    }
    QCOMPARE(outcomes.size(), size_t{1});
    QCOMPARE(outcomes.front().run, qint64{1});
    QCOMPARE(outcomes.front().there, address(history));
    QTRY_COMPARE_WITH_TIMEOUT(spur::app::RunService(history.toStdString()).run(1).status, std::string("finished"),
                              30000);
    QCOMPARE(spur::app::RunService(history.toStdString()).run(1).name, std::string("from the file"));
    QVERIFY(!QFileInfo::exists(here));
  }

  void bad_remotes_say_what_is_wrong_data() {
    QTest::addColumn<QString>("host");
    QTest::addColumn<QString>("serve");  // a script standing in for spur there; empty: the real one
    QTest::addColumn<QString>("message");
    QTest::newRow("unreachable") << "closed"
                                 << ""
                                 << "cannot reach closed over SSH";
    QTest::newRow("refused key") << "locked"
                                 << ""
                                 << "Permission denied";
    QTest::newRow("no spur") << "machine1"
                             << "-"
                             << "has no";
    QTest::newRow("older spur") << "machine1"
                                << "echo \"spur runs: unknown action 'serve'\" >&2; exit 2"
                                << "older than this one";
    QTest::newRow("another protocol") << "machine1"
                                      << R"(echo '{"spur":"serve","protocol":99,"version":"9.9"}'; cat >/dev/null)"
                                      << "runs Spur 9.9, which speaks history protocol 99";
    QTest::newRow("garbage") << "machine1"
                             << R"(echo '{"spur":"serve","protocol":1,"version":"x"}'; read l; echo '{"id":[]}')"
                             << "not Spur's history protocol";
    QTest::newRow("greeting, then gone") << "machine1"
                                         << "echo 'Welcome to the cluster'; exit 0"
                                         << "Welcome to the cluster";
  }
  // Each a message naming the machine and what to do, a failing exit code, and nothing written.
  void bad_remotes_say_what_is_wrong() {
    QFETCH(QString, host);
    QFETCH(QString, serve);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    const QString remote_spur = serve.isEmpty() ? QString(SPUR_CLI)
                                : serve == "-"  ? dir.filePath("no-such-spur")
                                                : script(dir, "spur", serve);
    QElapsedTimer timer;
    timer.start();
    const auto result = spur({"runs", "list", "--history", address(path, host)}, remote_spur);
    QVERIFY2(result.exit_code == 1 && result.output.contains(message), qPrintable(result.output));
    QVERIFY2(timer.elapsed() < 30000, "not within the connect timeout");
    QVERIFY(!QFile::exists(path));
  }

  // A history that is not there yet reads as empty (as a local one), and is not made by reading it.
  // A key with a passphrase, in a window (no terminal to prompt on): asked through SSH_ASKPASS (forced, so also
  // where the Studio was started from a terminal), which answers it, once for all of the window's readers (one
  // shared connection); a wrong answer is a refusal in seconds, naming the machine; without SSH_ASKPASS nothing is
  // asked (BatchMode) and the refusal is as quick.
  void a_passphrase_is_asked_through_askpass() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    fill_history(path);
    const QString asked = dir.filePath("asked");
    const QString right =
        script(dir, "right", QString("echo \"$1\" >> '%1'\necho '%2'").arg(asked, spur::test::kGuardedPassphrase));
    const QString wrong = script(dir, "wrong", QString("echo \"$1\" >> '%1'\necho 'not it'").arg(asked));
    qputenv("SPUR_SSH_CONFIG", sshd_->client_config().toUtf8());
    qputenv("SPUR_REMOTE_SPUR", SPUR_CLI);
    auto restore = qScopeGuard([] {
      qunsetenv("SPUR_SSH_CONFIG");
      qunsetenv("SPUR_REMOTE_SPUR");
      qunsetenv("SSH_ASKPASS");
    });
    const QString guarded = address(path, "guarded");
    qputenv("SSH_ASKPASS", right.toUtf8());
    QVERIFY(spur::app::RemoteOptions::from_environment(false).askpass);
    QVERIFY(!spur::app::RemoteOptions::from_environment(true).askpass);  // the command line prompts on its terminal
    spur::app::RunsReader reader(guarded);
    const auto snapshot = reader.read();
    QVERIFY2(snapshot.error.isEmpty(), qPrintable(snapshot.error));
    QCOMPARE(snapshot.runs.size(), size_t{2});
    spur::app::RunsReader second(guarded);  // another of the window's readers: through the same connection
    QVERIFY2(second.read().error.isEmpty(), "the second reader did not connect");
    QFile prompts(asked);
    QVERIFY(prompts.open(QIODevice::ReadOnly));
    const QByteArray said = prompts.readAll();
    QVERIFY2(said.contains("guarded_key"), "the passphrase was not asked through SSH_ASKPASS");
    QCOMPARE(said.count('\n'), 1);  // asked once for both
    // The connection made is this process's for that machine for 10 s more (share_connection): the refusals
    // below go through a configuration of their own, as another window's would.
    const QString other = dir.filePath("other_config");
    QVERIFY(QFile::copy(sshd_->client_config(), other));
    qputenv("SPUR_SSH_CONFIG", other.toUtf8());
    for (const bool with_askpass : {true, false}) {
      if (with_askpass) {
        qputenv("SSH_ASKPASS", wrong.toUtf8());
      } else {
        qunsetenv("SSH_ASKPASS");
      }
      QElapsedTimer timer;
      timer.start();
      spur::app::RunsReader refused(guarded);
      const auto failed = refused.read();
      QVERIFY2(failed.error.contains("cannot reach guarded over SSH") && failed.error.contains("Permission denied"),
               qPrintable(failed.error));
      QVERIFY2(timer.elapsed() < 30000, qPrintable(QString("%1 ms").arg(timer.elapsed())));
    }
  }

  void a_missing_remote_history_reads_empty() {
    QTemporaryDir dir;
    const QString path = dir.filePath("not-yet.db");
    const auto list = spur({"runs", "list", "--history", address(path)});
    QVERIFY2(list.exit_code == 0 && list.output.contains("no run history at " + address(path) + " yet"),
             qPrintable(list.output));
    const auto show = spur({"runs", "show", "1", "--history", address(path)});
    QVERIFY2(show.exit_code == 2 && show.output.contains("no run 1 in " + address(path)), qPrintable(show.output));
    QVERIFY(!QFile::exists(path));
  }

  // SPUR_HISTORY=ssh://... is for reading: spur launch refuses it up front, naming it, rather than making a file
  // called "ssh:".
  void launch_refuses_a_remote_history() {
    QTemporaryDir dir;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", "ssh://machine1/" + dir.filePath("h.db"));
    auto launch = QStringList{"launch", "--cpu", "--num_processes", "1", SPUR_LAUNCH_RIG};
    const auto result = spur::test::run_process(SPUR_CLI, launch, env, 60000);
    QVERIFY2(result.exit_code == 2 && result.output.contains("not ssh://machine1/") &&
                 result.output.contains("records into a history on this machine"),
             qPrintable(result.output));
    QVERIFY(QDir(dir.path()).isEmpty());
    QVERIFY(!QFile::exists("ssh:"));
  }
};

SPUR_TEST_CLASS(RemoteHistoryTest)
#include "remote_history_test.moc"
