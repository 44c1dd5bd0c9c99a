// SPDX-License-Identifier: Apache-2.0
// The bundled MLP example, as a user runs it: one process, two processes with torchrun's variables set by hand,
// and under torchrun itself (the wheel's, or Debian's python3-torch for Debian's LibTorch). Each run must print its BLAS line and a falling loss.
#include <QFileInfo>
#include <QRegularExpression>
#include <QTest>

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

  void mlp_under_torchrun() {
    // The torchrun of the torch this tree is built against (the wheel's, or Debian's python3-torch): the agent
    // store's protocol differs between them.
    const QString python = SPUR_TORCHRUN_PYTHON;
    auto env = QProcessEnvironment::systemEnvironment();
    QVERIFY2(spur::test::run_process(python, {"-c", "import torch.distributed.run"}, env, 60000).exit_code == 0,
             qPrintable(python + " has no torch.distributed.run: run installer/setup.sh deps"));
    // Debian's torchrun 1.13 on Python 3.11 crashes on the default --redirects/--tee "0"; "1" avoids it.
    const auto result = spur::test::run_process(
        python,
        {"-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
         QString::number(spur::test::free_port()), "--redirects", "1", "--tee", "1", "--no_python", SPUR_EXAMPLE_MLP,
         "--epochs", "4"},
        env, 180000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    verify_training(result.output, 2);
  }
};

SPUR_TEST_CLASS(ExamplesTest)
#include "examples_test.moc"
