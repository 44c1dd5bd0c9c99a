// SPDX-License-Identifier: Apache-2.0
// The bundled examples, as a user runs them. The MLP: one process, two processes with torchrun's variables set by
// hand, and under torchrun itself (the wheel's, or Debian's python3-torch for Debian's LibTorch). Fashion-MNIST's
// CNN and the byte-level GPT: a few hundred steps on 2 ranks (falling loss, the ranks' parameters agreeing, a
// resume from the last checkpoint), and their bad inputs named on every rank. Each run must print its BLAS line.
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

namespace {

// "step 25/150 loss 0.83" lines, in order.
std::vector<double> losses(const QString& output) {
  std::vector<double> values;
  static const QRegularExpression line(R"(step \d+/\d+ loss ([0-9.]+))");
  auto it = line.globalMatch(output);
  while (it.hasNext()) values.push_back(it.next().captured(1).toDouble());
  return values;
}

void verify_training(const QString& output, int processes) {
  QVERIFY2(output.contains("BLAS "), qPrintable(output));
  QVERIFY2(output.contains(QString("%1 process(es)").arg(processes)), qPrintable(output));
  const auto values = losses(output);
  QVERIFY2(values.size() >= 4, qPrintable(output));
  QVERIFY2(values.back() < 0.7 * values.front(), qPrintable("loss did not fall:\n" + output));
  QVERIFY2(output.contains("accuracy"), qPrintable(output));
}

// "rank N checksum X" of every rank: all equal.
void verify_checksums(RankGroup& ranks, int world) {
  QString first;
  for (int rank = 0; rank < world; ++rank) {
    const auto output = ranks.result(rank).output;
    const auto match = QRegularExpression(QString("rank %1 checksum (\\S+)").arg(rank)).match(output);
    QVERIFY2(match.hasMatch(), qPrintable(ranks.transcript()));
    if (rank == 0) first = match.captured(1);
    QVERIFY2(match.captured(1) == first, qPrintable("the ranks' parameters differ:\n" + ranks.transcript()));
  }
}

// One process of an example, expected to fail; its output.
QString failure(const char* program, const QStringList& arguments) {
  auto env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) env.remove(name);
  const auto result = spur::test::run_process(program, arguments, env, 120000);
  if (result.exit_code == 0 || result.crashed)
    return "expected a clean failure, got exit " + QString::number(result.exit_code) + ":\n" + result.output;
  return result.output;
}

QByteArray gzip(const QByteArray& bytes) {
  QProcess gz;
  gz.start("gzip", {"-c"});
  gz.waitForStarted();
  gz.write(bytes);
  gz.closeWriteChannel();
  gz.waitForFinished();
  return gz.readAllStandardOutput();
}

QByteArray idx_header(uint32_t magic, const std::vector<uint32_t>& dims) {
  QByteArray bytes;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.append(static_cast<char>((v >> shift) & 0xff));
  };
  put(magic);
  for (const auto d : dims) put(d);
  return bytes;
}

void write(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(bytes);
}

}  // namespace

class ExamplesTest : public QObject {
  Q_OBJECT

 private slots:
  void mlp_one_process() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("OMP_NUM_THREADS", "1");
    const auto result = spur::test::run_process(SPUR_EXAMPLE_MLP, {"--epochs", "4"}, env, 120000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    verify_training(result.output, 1);
  }

  void mlp_two_processes_by_hand() {
    RankGroup ranks(SPUR_EXAMPLE_MLP, {"--epochs", "4"}, 2);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    QVERIFY2(ranks.result(0).exit_code == 0 && ranks.result(1).exit_code == 0, qPrintable(ranks.transcript()));
    verify_training(ranks.result(0).output, 2);
    QVERIFY2(!ranks.result(1).output.contains("loss"), "only the main process prints");
  }

  // Issue 14: the Fashion-MNIST CNN on 2 ranks for 200 steps (Debian's dataset), then resumed from its checkpoint.
  // Under ASan + UBSan a step costs several times more: the same paths (loading, sharding, evaluation, checkpoint,
  // resume) in 60 steps.
  void fashion_mnist_two_ranks() {
    if (!QFileInfo::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      QFAIL("Debian's dataset-fashion-mnist is not installed (installer/setup.sh installs it)");
    }
#ifdef SPUR_TEST_SANITIZED
    const int steps = 60, log_every = 10;
#else
    const int steps = 200, log_every = 25;
#endif
    QTemporaryDir out;
    RankGroup ranks(SPUR_EXAMPLE_FASHION,
                    {"--max_steps", QString::number(steps), "--batch_size", "32", "--num_workers", "1", "--log_every",
                     QString::number(log_every), "--output_dir", out.path(), "--checksum"},
                    2);
    ranks.set_env("OMP_NUM_THREADS", "1");
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(600000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < 2; ++rank) QVERIFY2(ranks.result(rank).exit_code == 0, qPrintable(ranks.transcript()));
    verify_training(ranks.result(0).output, 2);
    verify_checksums(ranks, 2);
    QVERIFY2(ranks.result(0).output.contains("on 10000 images"), qPrintable(ranks.result(0).output));
    // Issue 15: its checkpoint is output_dir/checkpoints/checkpoint_0, its TensorBoard file in
    // output_dir/fashion-mnist.
    QVERIFY(QFile::exists(out.filePath("checkpoints/checkpoint_0/spur_state.json")));
    QCOMPARE(QDir(out.filePath("fashion-mnist")).entryList({"events.out.tfevents.*"}, QDir::Files).size(), 1);
    // --resume_from_checkpoint latest: picks up where it stopped and saves checkpoint_1.
    const QString until = QString::number(steps + 5);
    RankGroup resumed(SPUR_EXAMPLE_FASHION,
                      {"--max_steps", until, "--batch_size", "32", "--num_workers", "1", "--log_every", "5",
                       "--output_dir", out.path(), "--resume_from_checkpoint", "latest"},
                      2);
    resumed.set_env("OMP_NUM_THREADS", "1");
    QVERIFY(resumed.start());
    QVERIFY2(resumed.wait(600000), qPrintable(resumed.transcript()));
    for (int rank = 0; rank < 2; ++rank)
      QVERIFY2(resumed.result(rank).exit_code == 0, qPrintable(resumed.transcript()));
    const auto output = resumed.result(0).output;
    QVERIFY2(output.contains("resumed from " + out.filePath("checkpoints/checkpoint_0")) &&
                 output.contains("step " + until + "/" + until) && output.contains("checkpoints/checkpoint_1"),
             qPrintable(output));
  }

  // Issue 14: the GPT (a smaller one, for time) on 2 ranks for 300 steps on the default corpus.
  void gpt_two_ranks() {
    QTemporaryDir out;
    RankGroup ranks(SPUR_EXAMPLE_GPT,
                    {"--max_steps", "300", "--batch_size", "16",  "--block_size", "64",       "--n_layer",      "2",
                     "--n_embd",    "64",  "--n_head",     "4",   "--eval_every", "150",      "--eval_batches", "4",
                     "--log_every", "25",  "--save_every", "150", "--output_dir", out.path(), "--sample_bytes", "40",
                     "--checksum"},
                    2);
    ranks.set_env("OMP_NUM_THREADS", "1");
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(600000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < 2; ++rank) QVERIFY2(ranks.result(rank).exit_code == 0, qPrintable(ranks.transcript()));
    const auto output = ranks.result(0).output;
    verify_checksums(ranks, 2);
    const auto values = losses(output);
    QVERIFY2(values.size() >= 10 && values.back() < 0.7 * values.front(), qPrintable("loss did not fall:\n" + output));
    QVERIFY2(output.contains("validation loss") && output.contains("unigram entropy") && output.contains("--- sample"),
             qPrintable(output));
    // Resumed from its last checkpoint, it picks up at step 300 and samples from it.
    auto env = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) env.remove(name);
    const auto sample = spur::test::run_process(
        SPUR_EXAMPLE_GPT,
        {"--block_size", "64", "--n_layer", "2", "--n_embd", "64", "--n_head", "4", "--output_dir", out.path(),
         "--resume_from_checkpoint", "latest", "--sample", "import ", "--sample_bytes", "30"},
        env, 120000);
    QVERIFY2(sample.exit_code == 0 && sample.output.contains("import "), qPrintable(sample.output));
  }

  // Issue 37: the GPT's blocks are spur::fully_shard units; under FSDP's FULL_SHARD (Accelerate's variables) it
  // trains as under DDP: the same logged losses and final weights (clipping sums the shards' norms in another order:
  // 1e-5 relative), its checkpoints written, its sample drawn from the gathered weights on the main process alone.
  void gpt_full_shard_equals_ddp() {
    auto run = [](const QString& dir, bool full_shard) {
      RankGroup ranks(SPUR_EXAMPLE_GPT,
                      {"--max_steps", "40", "--batch_size", "8",  "--block_size", "32", "--n_layer",      "2",
                       "--n_embd",    "32", "--n_head",     "2",  "--eval_every", "20", "--eval_batches", "2",
                       "--log_every", "10", "--save_every", "20", "--output_dir", dir,  "--sample_bytes", "20",
                       "--checksum"},
                      2);
      ranks.set_env("OMP_NUM_THREADS", "1");
      if (full_shard) {
        ranks.set_env("ACCELERATE_USE_FSDP", "true");
        ranks.set_env("FSDP_SHARDING_STRATEGY", "FULL_SHARD");
      }
      const bool ok =
          ranks.start() && ranks.wait(300000) && ranks.result(0).exit_code == 0 && ranks.result(1).exit_code == 0;
      return std::pair{ok, ok ? ranks.result(0).output : ranks.transcript()};
    };
    QTemporaryDir ddp_dir, shard_dir;
    const auto ddp = run(ddp_dir.path(), false);
    QVERIFY2(ddp.first, qPrintable(ddp.second));
    const auto sharded = run(shard_dir.path(), true);
    QVERIFY2(sharded.first, qPrintable(sharded.second));
    const auto a = losses(ddp.second), b = losses(sharded.second);
    QCOMPARE(b.size(), a.size());
    QVERIFY(a.size() >= 4);
    for (size_t i = 0; i < a.size(); ++i) {
      QVERIFY2(std::abs(a[i] - b[i]) <= 1e-5 * std::abs(a[i]),
               qPrintable(QString("loss %1: %2 under DDP, %3 under FULL_SHARD").arg(i).arg(a[i]).arg(b[i])));
    }
    const QRegularExpression checksum("rank 0 checksum (\\S+)");
    const double ddp_sum = checksum.match(ddp.second).captured(1).toDouble();
    const double shard_sum = checksum.match(sharded.second).captured(1).toDouble();
    QVERIFY2(ddp_sum > 0 && std::abs(ddp_sum - shard_sum) <= 1e-5 * ddp_sum,
             qPrintable(QString("checksums %1 and %2").arg(ddp_sum).arg(shard_sum)));
    QVERIFY2(sharded.second.contains("--- sample"), qPrintable(sharded.second));
    QVERIFY(QFile::exists(shard_dir.filePath("checkpoints/checkpoint_1/model.safetensors")));
  }

  // Issue 14, bad input: each is an error naming the file and what is wrong, not a crash.
  void examples_name_their_bad_input() {
    QTemporaryDir dir;
    // Fashion-MNIST: a missing folder, a file that is not gzip, a wrong magic number, a truncated file.
    auto output = failure(SPUR_EXAMPLE_FASHION, {"--data_dir", dir.filePath("nowhere"), "--max_steps", "1"});
    QVERIFY2(output.contains(dir.filePath("nowhere") + "/train-images-idx3-ubyte.gz: no such file"),
             qPrintable(output));
    QDir(dir.path()).mkpath("bad");
    const QString bad = dir.filePath("bad");
    write(bad + "/train-images-idx3-ubyte.gz", QByteArray("\x1f\x8b\x08\x00", 4) + " this is not gzip data at all");
    output = failure(SPUR_EXAMPLE_FASHION, {"--data_dir", bad, "--max_steps", "1"});
    QVERIFY2(output.contains(bad + "/train-images-idx3-ubyte.gz:") && output.contains("gzip"), qPrintable(output));
    write(bad + "/train-images-idx3-ubyte.gz", gzip(idx_header(0x00000801, {4}) + QByteArray(4, '\0')));
    output = failure(SPUR_EXAMPLE_FASHION, {"--data_dir", bad, "--max_steps", "1"});
    QVERIFY2(output.contains("magic number 0x00000801") && output.contains("images"), qPrintable(output));
    write(bad + "/train-images-idx3-ubyte.gz", gzip(idx_header(0x00000803, {10, 28, 28}) + QByteArray(100, '\0')));
    output = failure(SPUR_EXAMPLE_FASHION, {"--data_dir", bad, "--max_steps", "1"});
    QVERIFY2(output.contains("promises 7840 bytes") && output.contains("(truncated)"), qPrintable(output));
    // GPT: an empty corpus, a context longer than the corpus, a checkpoint of another model.
    QDir(dir.path()).mkpath("empty");
    output = failure(SPUR_EXAMPLE_GPT, {"--data", dir.filePath("empty"), "--max_steps", "1"});
    QVERIFY2(output.contains(dir.filePath("empty") + ": the corpus is empty"), qPrintable(output));
    write(dir.filePath("tiny.txt"), "print('hello')\n");
    output = failure(SPUR_EXAMPLE_GPT, {"--data", dir.filePath("tiny.txt"), "--max_steps", "1"});
    QVERIFY2(output.contains("fewer than --block_size + 1 (129)"), qPrintable(output));
    const QString mlp_dir = dir.filePath("mlp_run");
    QDir(dir.path()).mkpath("mlp_run");
    auto env = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) env.remove(name);
    const auto cnn = spur::test::run_process(
        SPUR_EXAMPLE_FASHION, {"--max_steps", "2", "--epochs", "1", "--output_dir", mlp_dir, "--batch_size", "8"}, env,
        300000);
    QVERIFY2(cnn.exit_code == 0, qPrintable(cnn.output));
    QByteArray lines;
    for (int i = 0; i < 100; ++i) lines += "print('hello world')\n";
    write(dir.filePath("small.txt"), lines);
    output =
        failure(SPUR_EXAMPLE_GPT, {"--data", dir.filePath("small.txt"), "--block_size", "4", "--resume_from_checkpoint",
                                   mlp_dir + "/checkpoints/checkpoint_0", "--max_steps", "1"});
    QVERIFY2(output.contains(mlp_dir + "/checkpoints/checkpoint_0"), qPrintable(output));
  }

  // Issue 33: every example answers --help with its usage, on standard output, and exits 0 (it said "unknown
  // argument"); the flags it lists are the ones it takes.
  void examples_answer_help_data() {
    QTest::addColumn<QString>("program");
    QTest::addColumn<QString>("flag");
    QTest::newRow("train_mlp") << SPUR_EXAMPLE_MLP << "--lr LR";
    QTest::newRow("train_fashion_mnist") << SPUR_EXAMPLE_FASHION << "--max_steps N";
    QTest::newRow("train_gpt") << SPUR_EXAMPLE_GPT << "--block_size T";
  }
  void examples_answer_help() {
    QFETCH(QString, program);
    QFETCH(QString, flag);
    for (const char* help : {"--help", "-h"}) {
      QProcess process;
      process.start(program, {help});
      QVERIFY(process.waitForFinished(60000));
      const QString out = QString::fromUtf8(process.readAllStandardOutput());
      QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0,
               qPrintable(out + process.readAllStandardError()));
      QVERIFY2(out.startsWith("usage: " + QFileInfo(program).fileName()) && out.contains(flag) &&
                   out.contains("spur launch --num_processes N"),
               qPrintable(out));
    }
  }

  void mlp_under_torchrun() {
    // The torchrun of the torch this tree is built against (the wheel's, or Debian's python3-torch): the agent
    // store's protocol differs between them.
    const QString python = SPUR_TORCHRUN_PYTHON;
    auto env = QProcessEnvironment::systemEnvironment();
    QVERIFY2(spur::test::run_process(python, {"-c", "import torch.distributed.run"}, env, 60000).exit_code == 0,
             qPrintable(python + " has no torch.distributed.run: run installer/setup.sh deps"));
    // Debian's torchrun 1.13 on Python 3.11 crashes on the default --redirects/--tee "0"; "1" avoids it.
    const auto result =
        spur::test::run_process(python,
                                {"-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                                 QString::number(spur::test::free_port()), "--redirects", "1", "--tee", "1",
                                 "--no_python", SPUR_EXAMPLE_MLP, "--epochs", "4"},
                                env, 180000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    verify_training(result.output, 2);
  }
};

SPUR_TEST_CLASS(ExamplesTest)
#include "examples_test.moc"
