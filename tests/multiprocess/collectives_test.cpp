// SPDX-License-Identifier: Apache-2.0
// gather / reduce / broadcast / pad_across_processes on uneven shapes, nested containers and odd dtypes, with
// 2 and 3 real ranks; the worker checks values on every rank and this test checks that every rank agreed.
#include <QTemporaryDir>
#include <QTest>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

class CollectivesTest : public QObject {
  Q_OBJECT

 private slots:
  void collectives_data() {
    QTest::addColumn<int>("world");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
  }

  void collectives() {
    QFETCH(int, world);
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"collectives", "--out", out.path()}, world);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < world; ++rank) {
      const auto result = ranks.result(rank);
      QVERIFY2(result.exit_code == 0, qPrintable(ranks.transcript()));
      QVERIFY2(!result.output.contains("FAIL"), qPrintable(result.output));
      QVERIFY2(result.output.count("OK ") >= 14, qPrintable(result.output));
      // print() speaks on the main process only.
      QCOMPARE(result.output.contains("printed by main"), rank == 0);
    }
  }
};

SPUR_TEST_CLASS(CollectivesTest)
#include "collectives_test.moc"
