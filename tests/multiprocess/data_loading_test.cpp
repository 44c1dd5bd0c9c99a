// SPDX-License-Identifier: Apache-2.0
// Prepared data loaders on 1-3 real ranks: every flag combination yields the sharding plan (map-style and
// stream, with and without workers, shuffled), ranks stay in step, and metrics count every sample once.
#include <QTest>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

namespace {

void run_scenario(const QString& scenario, int world, int expected_oks) {
  RankGroup ranks(SPUR_TEST_WORKER, {scenario}, world);
  QVERIFY(ranks.start());
  QVERIFY2(ranks.wait(180000), qPrintable(ranks.transcript()));
  for (int rank = 0; rank < world; ++rank) {
    const auto result = ranks.result(rank);
    QVERIFY2(result.exit_code == 0, qPrintable(ranks.transcript()));
    QVERIFY2(!result.output.contains("FAIL"), qPrintable(result.output));
    QVERIFY2(result.output.count("OK ") >= expected_oks, qPrintable(result.output));
  }
}

}  // namespace

class DataLoadingTest : public QObject {
  Q_OBJECT

 private slots:
  void every_flag_combination_data() {
    QTest::addColumn<int>("world");
    QTest::newRow("1 rank") << 1;
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
  }

  void every_flag_combination() {
    QFETCH(int, world);
    run_scenario("data", world, 100);
  }

  void a_failing_dataset_stops_every_rank() {
    RankGroup ranks(SPUR_TEST_WORKER, {"data_error"}, 2);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(60000), qPrintable("a rank hung after its peer's dataset failed:\n" + ranks.transcript()));
    QVERIFY2(ranks.result(1).exit_code != 0 && ranks.result(1).output.contains("get(10) failed: disk read error"),
             qPrintable(ranks.transcript()));
    QVERIFY2(ranks.result(0).exit_code != 0 && ranks.result(0).output.contains("failed on rank 0 of 2"),
             qPrintable(ranks.transcript()));
  }

  void accuracy_counts_each_sample_once_data() {
    QTest::addColumn<int>("world");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
  }

  void accuracy_counts_each_sample_once() {
    QFETCH(int, world);
    run_scenario("metrics", world, 4);
  }
};

SPUR_TEST_CLASS(DataLoadingTest)
#include "data_loading_test.moc"
