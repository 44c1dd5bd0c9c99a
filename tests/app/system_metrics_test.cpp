// SPDX-License-Identifier: Apache-2.0
// System metrics (issue 18), from real 2-rank runs of `spur launch`: every second the launcher records each rank's
// CPU use and resident memory as system/ series; ranks that spin show about a core each and ranks that sleep show
// nearly none; --system_metrics_interval 0 records none; a bad interval is refused by name.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>

#include <spur/history/reader.h>

#include "rank_group.h"
#include "test_main.h"

namespace {

spur::test::RankResult launch(const QString& history, const QStringList& arguments) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  return spur::test::run_process(SPUR_CLI, QStringList{"launch", "--num_processes", "2"} + arguments, env, 120000);
}

// The largest value of a run's series; -1 when it has no points.
double peak(spur::history::HistoryReader& reader, int64_t run, const std::string& key) {
  double most = -1;
  for (const auto& point : reader.series(run, key)) most = std::max(most, point.value);
  return most;
}

}  // namespace

class SystemMetricsTest : public QObject {
  Q_OBJECT

 private slots:
  void ranks_are_sampled_every_second() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    // Two ranks that spin for about 4 s (4 million turns of a shell loop with no command in it: the rank's own
    // process burns the CPU), then two that sleep.
    auto spin = launch(history, {"/bin/sh", "-c", "i=0; while [ $i -lt 4000000 ]; do i=$((i+1)); done"});
    QVERIFY2(spin.exit_code == 0, qPrintable(spin.output));
    auto sleep = launch(history, {"/bin/sh", "-c", "sleep 4"});
    QVERIFY2(sleep.exit_code == 0, qPrintable(sleep.output));
    spur::history::HistoryReader reader(history.toStdString());
    for (const int64_t run : {1, 2}) {
      // The samples' steps are seconds: they are not the run's steps (a shell logs none), nor its progress.
      QCOMPARE(reader.run(run)->last_step, int64_t(-1));
      for (const int rank : {0, 1}) {
        const std::string prefix = "system/rank" + std::to_string(rank) + "/";
        const auto memory = reader.series(run, prefix + "rss_mib");
        QVERIFY2(memory.size() >= 2,
                 qPrintable(QString("run %1 rank %2: %3 memory samples").arg(run).arg(rank).arg(memory.size())));
        for (const auto& point : memory) QVERIFY(point.value > 0.1 && point.value < 1024);  // a shell: a few MiB
        // Steps count the seconds since the start, one sample a second.
        QVERIFY2(memory.back().step >= 2 && memory.back().step <= 30, qPrintable(QString::number(memory.back().step)));
        QVERIFY(reader.series(run, prefix + "cpu_percent").size() >= 2);
      }
    }
    for (const int rank : {0, 1}) {
      const std::string key = "system/rank" + std::to_string(rank) + "/cpu_percent";
      QVERIFY2(peak(reader, 1, key) > 40, qPrintable(QString::number(peak(reader, 1, key))));  // spinning
      QVERIFY2(peak(reader, 2, key) < 10, qPrintable(QString::number(peak(reader, 2, key))));  // asleep
    }
  }

  void sampling_can_be_turned_off() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    const auto result = launch(history, {"--system_metrics_interval", "0", "/bin/sh", "-c", "sleep 2"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    spur::history::HistoryReader reader(history.toStdString());
    QVERIFY(reader.metric_keys(1).empty());
    const auto bad = launch(history, {"--system_metrics_interval", "-1", "/bin/true"});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.output.contains("--system_metrics_interval"), qPrintable(bad.output));
  }
};

SPUR_TEST_CLASS(SystemMetricsTest)
#include "system_metrics_test.moc"
