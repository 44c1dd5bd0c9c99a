// SPDX-License-Identifier: Apache-2.0
// Issue 15 on real ranks: gather_object, broadcast_object_list, split_between_processes (padding on uneven
// counts), triggers, the batch-size search agreeing across ranks, the logger; automatic checkpoints rotating
// while a rank dies mid-save; the porting guide's checkpoint-and-TensorBoard loop (docs/porting.md) interrupted and
// resumed bit for bit.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

namespace {

QByteArray contents(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

}  // namespace

class ProcessHelpersTest : public QObject {
  Q_OBJECT

 private slots:
  void helpers_data() {
    QTest::addColumn<int>("world");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("3 ranks") << 3;
  }

  void helpers() {
    QFETCH(int, world);
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"helpers", "--out", out.path()}, world);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < world; ++rank) {
      const auto result = ranks.result(rank);
      QVERIFY2(result.exit_code == 0, qPrintable(ranks.transcript()));
      QVERIFY2(!result.output.contains("FAIL"), qPrintable(result.output));
      QVERIFY2(result.output.count("OK ") >= 18, qPrintable(result.output));
      // The logger: main-only lines on rank 0 without a rank; every-rank lines carry it; debug is below INFO.
      QCOMPARE(result.output.contains(QRegularExpression("\\d\\d:\\d\\d:\\d\\d INFO helpers: main only line")),
               rank == 0);
      QVERIFY2(result.output.contains(QString("WARNING [rank %1] helpers: every rank line").arg(rank)),
               qPrintable(result.output));
      QVERIFY(!result.output.contains("a debug line"));
      // The failing rank says which batch sizes ran out of memory.
      if (rank == world - 1) {
        QVERIFY2(result.output.contains("batch size 32 ran out of memory (std::bad_alloc)"), qPrintable(result.output));
      }
    }
    // in_order: rank 0, 1, 2 for each call, in the one file every rank appended to.
    QFile file(out.filePath("ordered.log"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto lines = QString::fromUtf8(file.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 3 * world);
    for (int i = 0; i < lines.size(); ++i) {
      QVERIFY2(lines[i].endsWith(QString("INFO [rank %1] helpers: ordered %2").arg(i % world).arg(i / world)),
               qPrintable(lines.join('\n')));
    }
  }

  // Rotation under a crash: total_limit 2, rank 1 dies inside the 4th save (checkpoint_3). Checkpoints 1 and 2
  // stay whole, nothing named checkpoint_3 exists, and a rerun resumes from checkpoint_2 and saves checkpoint_3.
  void rotation_survives_a_crash_mid_save() {
    QTemporaryDir out;
    {
      RankGroup ranks(SPUR_TEST_WORKER,
                      {"rotate", "--out", out.path(), "--steps", "6", "--save_at", "3", "--crash_rank", "1"}, 2);
      ranks.set_env("SPUR_COLLECTIVE_TIMEOUT", "30");
      QVERIFY(ranks.start());
      QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
      QCOMPARE(ranks.result(1).exit_code, 3);
      QVERIFY2(ranks.result(0).exit_code != 0, qPrintable(ranks.transcript()));
      QVERIFY2(ranks.result(0).output.contains("checkpoints/checkpoint_2"), qPrintable(ranks.transcript()));
    }
    QDir checkpoints(out.filePath("checkpoints"));
    QStringList complete;
    for (const auto& name : checkpoints.entryList(QDir::Dirs | QDir::NoDotAndDotDot | QDir::Hidden)) {
      if (QRegularExpression("^checkpoint_\\d+$").match(name).hasMatch()) complete << name;
    }
    complete.sort();
    QCOMPARE(complete, QStringList({"checkpoint_1", "checkpoint_2"}));
    for (const auto& name : complete) QVERIFY(QFile::exists(checkpoints.filePath(name + "/spur_state.json")));

    RankGroup again(SPUR_TEST_WORKER, {"rotate", "--out", out.path(), "--load", "1"}, 2);
    QVERIFY(again.start());
    QVERIFY2(again.wait(120000), qPrintable(again.transcript()));
    for (int rank = 0; rank < 2; ++rank) QVERIFY2(again.result(rank).exit_code == 0, qPrintable(again.transcript()));
    const auto output = again.result(0).output;
    QVERIFY2(output.contains(QRegularExpression("loaded \\S+checkpoints/checkpoint_2 weight 2 next 3")),
             qPrintable(output));
    QVERIFY2(output.contains("saved " + out.filePath("checkpoints/checkpoint_3")), qPrintable(output));
    // total_limit 2: checkpoint_1 went once checkpoint_3 was complete.
    QTRY_VERIFY_WITH_TIMEOUT(!QFile::exists(checkpoints.filePath("checkpoint_1")), 10000);
    QVERIFY(QFile::exists(checkpoints.filePath("checkpoint_3/spur_state.json")));
  }

  // The porting guide's loop: 4 epochs straight, against 2 epochs then a resume to 4 (from the newest automatic
  // checkpoint) in another project directory. Same parameters bit for bit; total_limit 3 kept checkpoints 1-3; and
  // TensorBoard reads one loss series over both runs' event files, with the hyperparameters.
  void readme_project_resumes_bit_for_bit() {
    QTemporaryDir straight, resumed;
    auto run = [](const QString& dir, int epochs) {
      RankGroup ranks(SPUR_TEST_WORKER,
                      {"readme_project", "--out", dir, "--steps", QString::number(epochs), "--rows", "256"}, 2);
      ranks.set_env("SPUR_TRACKERS", "none");  // TensorBoard only (log_with), no history
      if (!ranks.start() || !ranks.wait(180000)) return ranks.transcript();
      for (int rank = 0; rank < 2; ++rank) {
        if (ranks.result(rank).exit_code != 0) return ranks.transcript();
      }
      return QString();
    };
    QString failure = run(straight.path(), 4);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    failure = run(resumed.path(), 2);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    failure = run(resumed.path(), 4);
    QVERIFY2(failure.isEmpty(), qPrintable(failure));
    for (int rank = 0; rank < 2; ++rank) {
      const QString name = QString("/rank%1.bin").arg(rank);
      QVERIFY(!contents(straight.path() + name).isEmpty());
      QVERIFY2(contents(straight.path() + name) == contents(resumed.path() + name), "the resumed run differs");
    }
    QStringList kept = QDir(resumed.filePath("out/checkpoints")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    kept.sort();
    QCOMPARE(kept, QStringList({"checkpoint_1", "checkpoint_2", "checkpoint_3"}));

    QProcess reader;
    reader.start(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/read_tensorboard.py", resumed.filePath("out/mlp")});
    QVERIFY(reader.waitForFinished(120000));
    QVERIFY2(reader.exitCode() == 0, reader.readAllStandardError().constData());
    const auto read = QJsonDocument::fromJson(reader.readAllStandardOutput()).object();
    QCOMPARE(read["files"].toInt(), 2);
    const auto loss = read["scalars"].toObject()["loss"].toArray();
    QCOMPARE(loss.size(), 8);  // 2 batches per rank and epoch, 4 epochs
    for (int i = 0; i < loss.size(); ++i) QCOMPARE(loss[i].toArray()[0].toInt(), i);
    QCOMPARE(read["hparams"].toObject()["batch_size"].toDouble(), 64.0);
  }
};

SPUR_TEST_CLASS(ProcessHelpersTest)
#include "process_helpers_test.moc"
