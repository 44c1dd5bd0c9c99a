// SPDX-License-Identifier: Apache-2.0
// Rendezvous: late ranks are waited for; a rank that never comes, or a store nobody hosts, is a clear error
// naming host, port and timeout within that timeout; a malformed environment names the variable.
#include <QElapsedTimer>
#include <QFile>
#include <QTest>
#include <QThread>

#include "rank_group.h"
#include "test_main.h"
#include <spur/core/torch_features.h>

using spur::test::RankGroup;

class RendezvousTest : public QObject {
  Q_OBJECT

 private slots:
  void late_rank_is_waited_for() {
    RankGroup ranks(SPUR_TEST_WORKER, {"rendezvous"}, 3);
    QVERIFY(ranks.start({0, 1}));
    QThread::msleep(1500);
    QVERIFY(ranks.start({2}));
    QVERIFY2(ranks.wait(60000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < 3; ++rank) {
      QVERIFY2(ranks.result(rank).exit_code == 0, qPrintable(ranks.transcript()));
      QVERIFY(ranks.result(rank).output.contains(QString("joined as rank %1").arg(rank)));
    }
  }

  void missing_rank_is_named() {
    RankGroup ranks(SPUR_TEST_WORKER, {"rendezvous"}, 2);
    ranks.set_env("SPUR_RENDEZVOUS_TIMEOUT", "2");
    QVERIFY(ranks.start({0}));
    // Generous bound: the point is "an error, not a hang"; the message carries the 2 s.
    QVERIFY2(ranks.wait(30000), "rank 0 hung waiting for a rank that never came");
    const auto result = ranks.result(0);
    QVERIFY2(result.exit_code != 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("rendezvous at 127.0.0.1:" + QString::number(ranks.port())),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("timed out after 2 s"), qPrintable(result.output));
    QVERIFY2(result.output.contains("missing rank(s) 1"), qPrintable(result.output));
  }

  // Issue 31 (3): rank 0's store listens on MASTER_ADDR (loopback here), not on every interface, where anyone who
  // can reach the machine could connect to it during training.
  void the_store_listens_on_the_master_address_only() {
    if (!spur::torch_features::has(SPUR_TORCH_VERSION_TEXT, spur::torch_features::kStoreListeningSocket)) {
      QSKIP("this LibTorch's store cannot be told where to listen (docs/security.md)");
    }
    RankGroup ranks(SPUR_TEST_WORKER, {"rendezvous"}, 2);
    ranks.set_env("SPUR_RENDEZVOUS_TIMEOUT", "8");
    QVERIFY(ranks.start({0}));
    const QString port = QString("%1").arg(ranks.port(), 4, 16, QChar('0')).toUpper();
    QStringList listening;
    for (int i = 0; i < 100 && listening.isEmpty(); ++i) {
      for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        QFile file(table);
        if (!file.open(QIODevice::ReadOnly)) continue;
        for (const auto& line : QString::fromLatin1(file.readAll()).split('\n')) {
          const auto fields = line.simplified().split(' ');
          if (fields.size() > 3 && fields[3] == "0A" && fields[1].endsWith(":" + port)) listening << fields[1];
        }
      }
      if (listening.isEmpty()) QThread::msleep(50);
    }
    QVERIFY2(!listening.isEmpty(), "rank 0 never listened");
    QCOMPARE(listening, QStringList{"0100007F:" + port});
    QVERIFY(ranks.start({1}));
    QVERIFY2(ranks.wait(60000) && ranks.result(0).exit_code == 0 && ranks.result(1).exit_code == 0,
             qPrintable(ranks.transcript()));
  }

  void unreachable_store_is_named() {
    RankGroup ranks(SPUR_TEST_WORKER, {"rendezvous"}, 2);
    ranks.set_env("SPUR_RENDEZVOUS_TIMEOUT", "2");
    QVERIFY(ranks.start({1}));
    QVERIFY2(ranks.wait(30000), "rank 1 hung on a store nobody hosts");
    const auto result = ranks.result(1);
    QVERIFY2(result.exit_code != 0, qPrintable(result.output));
    QVERIFY2(
        result.output.contains("could not reach the rendezvous store at 127.0.0.1:" + QString::number(ranks.port())),
        qPrintable(result.output));
    QVERIFY2(result.output.contains("within 2 s"), qPrintable(result.output));
  }

  void malformed_environment_names_the_variable_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("expected");
    QTest::newRow("rank not a number") << "RANK"
                                       << "abc"
                                       << "RANK='abc' is not an integer";
    QTest::newRow("rank too large") << "RANK"
                                    << "7"
                                    << "RANK=7 is out of range [0, 1]";
    QTest::newRow("bad precision") << "SPUR_MIXED_PRECISION"
                                   << "fp64"
                                   << "SPUR_MIXED_PRECISION='fp64'";
  }

  void malformed_environment_names_the_variable() {
    QFETCH(QString, name);
    QFETCH(QString, value);
    QFETCH(QString, expected);
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("RANK", "0");
    env.insert("WORLD_SIZE", "2");
    env.insert("MASTER_ADDR", "127.0.0.1");
    env.insert("MASTER_PORT", QString::number(spur::test::free_port()));
    env.insert(name, value);
    const auto result = spur::test::run_process(SPUR_TEST_WORKER, {"rendezvous"}, env, 30000);
    QVERIFY2(result.exit_code != 0, qPrintable(result.output));
    QVERIFY2(result.output.contains(expected), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(RendezvousTest)
#include "rendezvous_test.moc"
