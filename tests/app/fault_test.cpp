// SPDX-License-Identifier: Apache-2.0
// Surviving faults with real processes (issue 16): `spur launch --max_restarts` starts the group again after a
// rank is SIGKILLed mid-epoch, and the run ends with exactly the parameters of an uninterrupted one; with
// `--hang_timeout` the launcher names the rank the others wait for and stops the run, or restarts it. Also the
// progress file's writer and reader, and the hang report's wording.
#include <signal.h>
#include <stdlib.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <limits>

#include "launch/local_launcher.h"
#include <spur/core/progress_file.h>
#include "rank_group.h"
#include "test_main.h"

namespace {

QProcessEnvironment isolated(const QTemporaryDir& dir) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("XDG_CONFIG_HOME", dir.path() + "/config");  // no default configuration of the user's
  env.insert("SPUR_HISTORY", dir.path() + "/history.db");
  env.insert("HF_HOME", dir.path() + "/hf");
  env.remove("OMP_NUM_THREADS");
  return env;
}

spur::test::RankResult spur_command(const QTemporaryDir& dir, const QStringList& arguments, int timeout_ms = 180000) {
  return spur::test::run_process(SPUR_CLI, arguments, isolated(dir), timeout_ms);
}

QByteArray contents(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// The first number captured by `pattern` in `text`, or -1.
qint64 number(const QString& text, const QString& pattern) {
  const auto match = QRegularExpression(pattern).match(text);
  return match.hasMatch() ? match.captured(1).toLongLong() : -1;
}

spur::app::RankProgress rank(const QString& label, std::optional<int64_t> step, const std::string& op,
                             double op_seconds = 0, double silent_seconds = 0, std::optional<int> exited = {}) {
  spur::app::RankProgress progress;
  progress.label = label;
  if (step) {
    progress.snapshot = spur::progress::Snapshot{};
    progress.snapshot->step = *step;
    progress.snapshot->op = op;
  }
  progress.op_seconds = op_seconds;
  progress.idle_seconds = 31;
  progress.silent_seconds = silent_seconds;
  progress.exited = exited;
  return progress;
}

// The same with a /proc state letter.
spur::app::RankProgress in_state(spur::app::RankProgress progress, char state) {
  progress.state = state;
  return progress;
}

}  // namespace

Q_DECLARE_METATYPE(std::vector<spur::app::RankProgress>)

class FaultToleranceTest : public QObject {
  Q_OBJECT

 private slots:
  // The rank's side stores, the launcher's side reads: nested operations, steps, and nothing before attaching.
  void progress_files_carry_operations_and_steps() {
    QTemporaryDir dir;
    const QString path = dir.filePath("rank0");
    QVERIFY(spur::progress::create_file(path.toStdString()));
    const spur::progress::Reader reader(path.toStdString());
    QVERIFY2(!reader.read(), "a file no rank attached to reads as nothing");
    ::setenv("SPUR_PROGRESS_FILE", path.toLocal8Bit().constData(), 1);
    auto& writer = spur::progress::Writer::instance();  // this process's first use: attaches to the file
    ::unsetenv("SPUR_PROGRESS_FILE");
    QVERIFY(writer.active());
    auto first = reader.read();
    QVERIFY(first);
    QCOMPARE(first->op, std::string());
    QCOMPARE(first->step, int64_t{0});
    {
      spur::progress::Scope outer("backward");
      spur::progress::Scope inner("all-reduce");
      const auto inside = reader.read();
      QCOMPARE(inside->op, std::string("all-reduce in backward"));
      QVERIFY(inside->op_since > 0);
      QVERIFY(inside->activity != first->activity);
    }
    writer.step();
    writer.step();
    const auto after = reader.read();
    QCOMPARE(after->op, std::string());
    QCOMPARE(after->op_since, int64_t{0});
    QCOMPARE(after->step, int64_t{2});
    // A long name is cut, never overflows.
    {
      spur::progress::Scope long_name(
          "an operation whose name is longer than the seventy-nine bytes that the progress file keeps for it");
      QCOMPARE(reader.read()->op.size(), spur::progress::kMaxOp);
    }
    // Not a progress file: too small, or absent.
    QFile small(dir.filePath("small"));
    QVERIFY(small.open(QIODevice::WriteOnly));
    small.write("x");
    small.close();
    QVERIFY(!spur::progress::Reader(small.fileName().toStdString()).read());
    QVERIFY(!spur::progress::Reader(dir.filePath("absent").toStdString()).read());
  }

  void hang_report_names_who_waits_for_whom_data() {
    QTest::addColumn<std::vector<spur::app::RankProgress>>("ranks");
    QTest::addColumn<QStringList>("expected");
    QTest::newRow("one rank in its own code")
        << std::vector<spur::app::RankProgress>{rank("rank0", 4, "barrier in wait_for_everyone", 30.4),
                                                rank("rank1", 4, "")}
        << QStringList{"rank0: step 4, waiting in barrier in wait_for_everyone for 30 s",
                       "rank1: step 4, in the program's own code, no progress for 31 s",
                       "The ranks in Spur's operations wait for: rank1"};
    QTest::newRow("a rank that never reported")
        << std::vector<spur::app::RankProgress>{rank("rank0", 0, "rendezvous", 40), rank("rank1", std::nullopt, "")}
        << QStringList{"rank1: never reported", "wait for: rank1"};
    QTest::newRow("a remote rank gone silent")
        << std::vector<spur::app::RankProgress>{rank("hosta rank0", 7, "all-reduce in backward", 40),
                                                rank("hostb rank1", 7, "backward", 0, 35)}
        << QStringList{
               "hostb rank1: step 7, then no report for 35 s: it died "
               "without a trace, or its machine is unreachable",
               "wait for: hostb rank1"};
    QTest::newRow("a rank that ended early")
        << std::vector<spur::app::RankProgress>{rank("rank0", 4, "all-reduce in backward", 40),
                                                rank("rank1", 4, "", 0, 0, 0)}
        << QStringList{"rank1: exited with code 0 after step 4", "wait for: rank1"};
    QTest::newRow("different collectives")
        << std::vector<spur::app::RankProgress>{rank("rank0", 3, "all-reduce", 40), rank("rank1", 3, "broadcast", 40)}
        << QStringList{"waiting in all-reduce", "waiting in broadcast", "wait in different operations"};
    // Issue 31 (7): the last line names the rank the others wait for, from its /proc state or its step.
    QTest::newRow("a stopped rank inside an operation")
        << std::vector<spur::app::RankProgress>{in_state(rank("rank0", 7807, "backward", 40), 'S'),
                                                in_state(rank("rank1", 7806, "backward", 40), 'T')}
        << QStringList{"rank1: step 7806, waiting in backward for 40 s; stopped (SIGSTOP, Ctrl-Z or a debugger",
                       "The others wait for: rank1 (stopped (SIGSTOP, Ctrl-Z or a debugger; /proc state T) at step "
                       "7806)\n"};
    QTest::newRow("a stopped rank in its own code")
        << std::vector<spur::app::RankProgress>{rank("rank0", 4, "barrier", 40), in_state(rank("rank1", 4, ""), 'T')}
        << QStringList{"wait for: rank1 (stopped (SIGSTOP, Ctrl-Z or a debugger; /proc state T) at step 4)\n"};
    QTest::newRow("a rank in the kernel")
        << std::vector<spur::app::RankProgress>{in_state(rank("rank0", 9, "all-reduce", 40), 'S'),
                                                in_state(rank("rank1", 9, "all-reduce", 40), 'D')}
        << QStringList{"The others wait for: rank1 (in the kernel, waiting for a disk or a device"};
    QTest::newRow("a rank one step behind")
        << std::vector<spur::app::RankProgress>{in_state(rank("rank0", 12, "all-reduce in backward", 40), 'S'),
                                                in_state(rank("rank1", 11, "all-reduce in backward", 40), 'R'),
                                                in_state(rank("rank2", 12, "all-reduce in backward", 40), 'S')}
        << QStringList{"The others wait for: rank1 (at step 11, behind the others' 12)\n"};
    QTest::newRow("nobody stands out") << std::vector<spur::app::RankProgress>{rank("rank0", 5, "all-reduce", 40),
                                                                               rank("rank1", 5, "all-reduce", 40)}
                                       << QStringList{
                                              "Every rank waits in all-reduce at the same step: no rank stands out"};
  }

  void hang_report_names_who_waits_for_whom() {
    QFETCH(std::vector<spur::app::RankProgress>, ranks);
    QFETCH(QStringList, expected);
    const QString report = spur::app::describe_hang(ranks, std::chrono::seconds(30));
    QVERIFY2(report.startsWith("no rank made progress for 30 s (--hang_timeout 30)"), qPrintable(report));
    for (const auto& text : expected) QVERIFY2(report.contains(text), qPrintable(text + "\nnot in:\n" + report));
  }

  // A machine's forwarded progress comes over the network: what is out of range is clamped, not cast (a cast of
  // 1e300 to an integer is undefined behaviour), a record without a rank is dropped, other lines are output.
  void progress_records_from_machines_are_not_trusted() {
    const QString key = "0123456789abcdef0123456789abcdef";
    auto parse_progress_record = [&](const QString& line) {
      return spur::app::parse_progress_record(QString(line).replace("@spur {", "@spur:" + key + " {"), key);
    };
    const auto good = parse_progress_record(
        R"(@spur {"activity":12,"op":"barrier","op_seconds":3.5,"pid":4242,"rank":1,"step":7,"type":"progress"})");
    QVERIFY(good && !good->damaged);
    QCOMPARE(good->rank, 1);
    QCOMPARE(good->pid, qint64(4242));
    QCOMPARE(good->snapshot.step, int64_t(7));
    QCOMPARE(good->snapshot.activity, uint64_t(12));
    QCOMPARE(good->snapshot.op, std::string("barrier"));
    QCOMPARE(good->op_seconds, 3.5);
    const auto wild = parse_progress_record(
        R"(@spur {"activity":-1e300,"op_seconds":1e300,"pid":1e300,"rank":1e12,"step":-1e300,"type":"progress"})");
    QVERIFY(wild && !wild->damaged);
    QCOMPARE(wild->rank, std::numeric_limits<int>::max());
    QCOMPARE(wild->pid, std::numeric_limits<qint64>::max());
    QCOMPARE(wild->snapshot.step, std::numeric_limits<int64_t>::lowest());
    QCOMPARE(wild->snapshot.activity, uint64_t(0));
    QCOMPARE(wild->op_seconds, 0.0);
    const auto ended = parse_progress_record(R"(@spur {"exited":1e99,"pid":3,"rank":0,"type":"progress"})");
    QVERIFY(ended && ended->exited == std::numeric_limits<int>::max());
    const auto damaged = parse_progress_record(R"(@spur {"rank":"one","type":"progress"})");
    QVERIFY(damaged && damaged->damaged);
    const auto bad_code = parse_progress_record(R"(@spur {"exited":"x","pid":3,"rank":0,"type":"progress"})");
    QVERIFY(bad_code && bad_code->damaged);
    QVERIFY(!parse_progress_record("rank 0 says hello"));
    QVERIFY(!parse_progress_record(R"(@spur {"key":"loss","type":"metric"})"));
    // Issue 31 (4): without the launch's key (a rank printing one, or a machine of another launch), no record.
    const QString plain =
        R"(@spur {"activity":12,"op":"x","op_seconds":1,"pid":1,"rank":1,"step":7,"type":"progress"})";
    QVERIFY(!spur::app::parse_progress_record(plain, key));
    QVERIFY(!spur::app::parse_progress_record(QString(plain).replace("@spur {", "@spur:" + key.left(31) + "0 {"), key));
    QVERIFY(!spur::app::parse_progress_record(QString(plain).replace("@spur {", "@spur: {"), QString()));
  }

  // Two ranks train; on the first attempt rank 1 SIGKILLs itself at step 13, between the checkpoints of steps 10
  // and 15. The launcher stops rank 0, starts both again (attempt 1, a new port), they resume from checkpoint 10
  // and end with exactly the parameters of a run nobody killed. Both attempts are in the history's console.
  void a_killed_rank_restarts_and_ends_bit_exact() {
    QTemporaryDir killed, whole;
    const QStringList common{"launch", "--num_processes", "2", "--hang_timeout", "60"};
    const QStringList training{SPUR_TEST_WORKER, "restart", "--steps", "30", "--k", "5", "--save_at", "13"};
    const auto uninterrupted =
        spur_command(whole, common + training + QStringList{"--out", whole.path(), "--crash_rank", "-1"});
    QVERIFY2(uninterrupted.exit_code == 0, qPrintable(uninterrupted.output));
    const auto restarted = spur_command(killed, common + QStringList{"--max_restarts", "2"} + training +
                                                    QStringList{"--out", killed.path(), "--crash_rank", "1"});
    QVERIFY2(restarted.exit_code == 0, qPrintable(restarted.output));
    QVERIFY2(restarted.output.contains("rank1 (pid") && restarted.output.contains("killed by SIGKILL"),
             qPrintable(restarted.output));
    QVERIFY2(
        restarted.output.contains("spur launch: restart 1 of 2 (attempt 2), after: rank1 failed: killed by SIGKILL"),
        qPrintable(restarted.output));
    QVERIFY2(restarted.output.contains("resuming from") && restarted.output.contains("checkpoint_1"),
             qPrintable(restarted.output));
    QVERIFY2(!restarted.output.contains("restart 2 of 2"), qPrintable(restarted.output));
    for (const QString file : {"final_rank0.bin", "final_rank1.bin"}) {
      const QByteArray expected = contents(whole.filePath(file));
      QVERIFY2(!expected.isEmpty(), qPrintable(file));
      QVERIFY2(contents(killed.filePath(file)) == expected, qPrintable(file + " differs from the uninterrupted run's"));
    }
    // The restart's cost: from the kill to both ranks of the new attempt in the group.
    const qint64 died = number(restarted.output, R"(killed (\d+) at step 13)");
    const qint64 joined = number(restarted.output, R"(\[rank1\] attempt 1 joined (\d+))");
    QVERIFY(died > 0 && joined > died);
    qInfo("restart: %.2f s from the SIGKILL to the new attempt's rank 1 in the group", (joined - died) / 1e9);
    // The history: one run, finished, whose console holds the restart.
    const auto logs = spur_command(killed, {"runs", "logs", "1"});
    QVERIFY2(logs.output.contains("restart 1 of 2 (attempt 2)"), qPrintable(logs.output));
    QVERIFY2(logs.output.contains("attempt 0 joined") && logs.output.contains("attempt 1 joined"),
             qPrintable(logs.output));
    const auto show = spur_command(killed, {"runs", "show", "1"});
    QVERIFY2(show.output.contains("finished"), qPrintable(show.output));
  }

  // Rank 1 stays in its own code while rank 0 waits in wait_for_everyone: within the timeout (plus a tick) the
  // launcher names rank 1 as the one waited for, says where rank 0 waits, stops both and exits 124; the report is
  // the run's failure in the history.
  void a_hang_names_the_stuck_rank_and_stops_the_run() {
    QTemporaryDir dir;
    QElapsedTimer timer;
    timer.start();
    const auto result = spur_command(dir, {"launch", "--num_processes", "2", "--hang_timeout", "10", SPUR_TEST_WORKER,
                                           "hang", "--steps", "10", "--save_at", "3", "--crash_rank", "1"});
    QCOMPARE(result.exit_code, spur::app::kHangExitCode);
    QVERIFY2(timer.elapsed() < 120000, "the hang was not stopped");
    QVERIFY2(result.output.contains("no rank made progress for 10 s (--hang_timeout 10)"), qPrintable(result.output));
    QVERIFY2(QRegularExpression(R"(rank0 \(pid \d+\): step 4, waiting in barrier in wait_for_everyone for \d+ s)")
                 .match(result.output)
                 .hasMatch(),
             qPrintable(result.output));
    QVERIFY2(
        QRegularExpression(R"(rank1 \(pid \d+\): step 4, in the program's own code)").match(result.output).hasMatch(),
        qPrintable(result.output));
    QVERIFY2(result.output.contains("The ranks in Spur's operations wait for: rank1"), qPrintable(result.output));
    QVERIFY2(!result.output.contains("done after"), qPrintable(result.output));
    const auto show = spur_command(dir, {"runs", "show", "1"});
    QVERIFY2(show.output.contains("failed  no rank made progress for 10 s"), qPrintable(show.output));
    const auto logs = spur_command(dir, {"runs", "logs", "1"});
    QVERIFY2(logs.output.contains("The ranks in Spur's operations wait for: rank1"), qPrintable(logs.output));
  }

  // Issue 31 (7): rank 1 stopped from outside (SIGSTOP) while both train: the report's last line names it, stopped;
  // the run then ends on SIGTERM (the launcher continues a stopped rank after it), not on the grace period's
  // SIGKILL.
  void a_stopped_rank_is_named_as_the_one_waited_for() {
    QTemporaryDir dir;
    QProcess spur;
    spur.setProcessEnvironment(isolated(dir));
    spur.setProcessChannelMode(QProcess::MergedChannels);
    spur.start(SPUR_CLI, {"launch", "--num_processes", "2", "--hang_timeout", "5", "--grace_period", "60",
                          SPUR_TEST_WORKER, "hang", "--steps", "100000000", "--save_at", "-1"});
    QVERIFY(spur.waitForStarted());
    const QRegularExpression training(R"(rank 1 is training \(pid (\d+)\))");
    QByteArray printed;
    spur::test::read_until(
        spur, printed, [&](const QByteArray& seen) { return training.match(QString::fromUtf8(seen)).hasMatch(); },
        60000);
    QString output = QString::fromUtf8(printed);
    const auto pid = static_cast<pid_t>(training.match(output).captured(1).toLongLong());
    QVERIFY2(pid > 0, qPrintable(output));
    QVERIFY(::kill(pid, SIGSTOP) == 0);
    QVERIFY(spur.waitForFinished(120000));
    output += QString::fromUtf8(spur.readAll());
    QCOMPARE(spur.exitCode(), spur::app::kHangExitCode);
    const QString report = output.mid(output.indexOf("no rank made progress"));
    QVERIFY2(
        QRegularExpression(R"(\n  rank1 \(pid \d+\): step \d+, [^\n]*; stopped \(SIGSTOP)").match(report).hasMatch(),
        qPrintable(report));
    QVERIFY2(
        QRegularExpression(R"(wait for: rank1 \(stopped \(SIGSTOP, Ctrl-Z or a debugger; /proc state T\) at step )")
            .match(report)
            .hasMatch(),
        qPrintable(report));
    QVERIFY2(!output.contains("SIGKILL"), qPrintable(output));
  }

  // The same hang with --max_restarts 1: the second attempt does not hang and the run succeeds.
  void a_hang_restarts_with_max_restarts() {
    QTemporaryDir dir;
    const auto result = spur_command(
        dir, {"launch", "--num_processes", "2", "--hang_timeout", "10", "--max_restarts", "1", SPUR_TEST_WORKER, "hang",
              "--steps", "10", "--save_at", "3", "--crash_rank", "1", "--load", "1"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("restart 1 of 1 (attempt 2), after: no rank made progress for 10 s"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("[rank0] rank 0 done after attempt 1") &&
                 result.output.contains("[rank1] rank 1 done after attempt 1"),
             qPrintable(result.output));
  }

  // A rank that fails on every attempt: N restarts, then the failure, with the count.
  void restarts_stop_after_max_restarts() {
    QTemporaryDir dir;
    const auto result = spur_command(dir, {"launch", "--num_processes", "2", "--max_restarts", "2", SPUR_LAUNCH_RIG,
                                           "--fail_rank", "1", "--code", "7", "--sleep", "30"});
    QCOMPARE(result.exit_code, 7);
    QVERIFY2(result.output.contains("restart 1 of 2") && result.output.contains("restart 2 of 2"),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("restart 3"), qPrintable(result.output));
    const auto show = spur_command(dir, {"runs", "show", "1"});
    QVERIFY2(show.output.contains("after 2 restart(s): rank1 failed: exit code 7"), qPrintable(show.output));
  }

  void bad_flags_are_named_data() {
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("message");
    QTest::newRow("negative restarts") << QStringList{"--max_restarts", "-1"}
                                       << "--max_restarts must be between 0 and 10000, not -1";
    QTest::newRow("zero hang timeout") << QStringList{"--hang_timeout", "0"}
                                       << "--hang_timeout must be between 1 and 31536000, not 0";
    QTest::newRow("not a number") << QStringList{"--hang_timeout", "soon"}
                                  << "--hang_timeout needs an integer, not 'soon'";
    QTest::newRow("machines by hand") << QStringList{"--max_restarts",  "1", "--num_machines",    "2",
                                                     "--num_processes", "2", "--main_process_ip", "127.0.0.1"}
                                      << "--max_restarts 1 needs every machine under one launcher";
  }

  void bad_flags_are_named() {
    QFETCH(QStringList, flags);
    QFETCH(QString, message);
    QTemporaryDir dir;
    const auto result = spur_command(dir, QStringList{"launch"} + flags + QStringList{"true"}, 30000);
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains(message), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(FaultToleranceTest)
#include "fault_test.moc"
