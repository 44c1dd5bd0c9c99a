// SPDX-License-Identifier: Apache-2.0
// Real 1-3 rank runs on Gloo over loopback: DDP training equals one process on the concatenated batch, gradient
// accumulation equals the large-batch step, and a rank that dies stops its peers with a clear error.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <vector>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

namespace {

std::vector<float> read_floats(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  const QByteArray bytes = file.readAll();
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.constData(), values.size() * sizeof(float));
  return values;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

void run_reference(const QString& out, int steps, int rows) {
  auto env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) env.remove(name);
  auto result = spur::test::run_process(SPUR_TEST_WORKER,
                                        {"reference", "--out", out, "--steps", QString::number(steps), "--rows",
                                         QString::number(rows)},
                                        env, 60000);
  QVERIFY2(result.exit_code == 0 && !result.crashed, qPrintable(result.output));
}

// Every rank exited 0, printed no FAIL line, and wrote parameters identical to rank 0's and within `tolerance`
// of the single-process reference.
void verify_ranks(RankGroup& ranks, int world, const QString& out, double tolerance) {
  QVERIFY2(ranks.wait(180000), qPrintable("ranks did not finish:\n" + ranks.transcript()));
  for (int rank = 0; rank < world; ++rank) {
    const auto result = ranks.result(rank);
    QVERIFY2(result.exit_code == 0 && !result.crashed, qPrintable(ranks.transcript()));
    QVERIFY2(!result.output.contains("FAIL"), qPrintable(result.output));
  }
  const auto reference = read_floats(out + "/reference.bin");
  QVERIFY(!reference.empty());
  const auto rank0 = read_floats(out + "/rank0.bin");
  QCOMPARE(rank0.size(), reference.size());
  for (int rank = 1; rank < world; ++rank) {
    const auto other = read_floats(out + QString("/rank%1.bin").arg(rank));
    QVERIFY2(other == rank0, qPrintable(QString("rank %1 parameters differ from rank 0's by up to %2")
                                            .arg(rank)
                                            .arg(max_abs_diff(other, rank0))));
  }
  const double diff = max_abs_diff(rank0, reference);
  QVERIFY2(diff < tolerance, qPrintable(QString("distributed run differs from one process by %1").arg(diff)));
}

}  // namespace

class DistributedTrainingTest : public QObject {
  Q_OBJECT

 private slots:
  void ddp_matches_single_process_data() {
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("bucket_bytes");
    QTest::newRow("2 ranks, default buckets") << 2 << 0;
    QTest::newRow("3 ranks, default buckets") << 3 << 0;
    QTest::newRow("2 ranks, 512-byte buckets") << 2 << 512;
    QTest::newRow("3 ranks, 256-byte buckets") << 3 << 256;
  }

  void ddp_matches_single_process() {
    QFETCH(int, world);
    QFETCH(int, bucket_bytes);
    QTemporaryDir out;
    const int steps = 8;
    run_reference(out.path(), steps, 12);
    RankGroup ranks(SPUR_TEST_WORKER,
                    {"ddp", "--out", out.path(), "--steps", QString::number(steps), "--bucket_bytes",
                     QString::number(bucket_bytes)},
                    world);
    QVERIFY(ranks.start());
    verify_ranks(ranks, world, out.path(), 2e-5);
  }

  void accumulation_matches_large_batch_data() {
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("k");
    QTest::newRow("1 rank, 3 micro-steps") << 1 << 3;
    QTest::newRow("2 ranks, 3 micro-steps") << 2 << 3;
    QTest::newRow("3 ranks, 2 micro-steps") << 3 << 2;
  }

  void accumulation_matches_large_batch() {
    QFETCH(int, world);
    QFETCH(int, k);
    QTemporaryDir out;
    const int steps = 5;
    run_reference(out.path(), steps, world * k * 2);
    RankGroup ranks(SPUR_TEST_WORKER, {"accumulate", "--out", out.path(), "--steps", QString::number(steps)}, world);
    ranks.set_env("SPUR_GRADIENT_ACCUMULATION_STEPS", QString::number(k));
    QVERIFY(ranks.start());
    verify_ranks(ranks, world, out.path(), 2e-5);
  }

  void dead_rank_stops_its_peers() {
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"ddp", "--out", out.path(), "--steps", "50", "--crash_rank", "1"}, 2);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(60000), qPrintable("a peer of the dead rank hung:\n" + ranks.transcript()));
    QCOMPARE(ranks.result(1).exit_code, 3);
    const auto survivor = ranks.result(0);
    QVERIFY2(survivor.exit_code != 0, qPrintable(survivor.output));
    QVERIFY2(survivor.output.contains("failed on rank 0 of 2"), qPrintable(survivor.output));
  }
};

SPUR_TEST_CLASS(DistributedTrainingTest)
#include "distributed_training_test.moc"
