// SPDX-License-Identifier: GPL-3.0-or-later
// The screenshots of docs/sweeps.md, from a real sweep: `spur sweep run` of a random search with Hyperband over the
// Fashion-MNIST example (10 runs, 2 at a time), then the Studio on its history with the sweep's runs selected
// (filtered by the sweep's tag) on the Hyperparameters tab, in the light and the dark theme, a brush drawn on the
// learning rate; the runs table grouped by sweep, and the wizard's Sweep page. ImageMagick's `import -window root`
// takes each picture. Run it under xvfb-run through take_screenshots.sh; `sweep_screens SPUR TRAIN_FASHION_MNIST
// OUT_DIR`.
#include <QApplication>
#include <QCheckBox>
#include <QLineEdit>
#include <QRadioButton>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QSplitter>
#include <QTabWidget>
#include <QStandardPaths>
#include <QTreeView>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>

#include "hparams/hparams_view.h"
#include "main/main_window.h"
#include "screens.h"
#include "main/theme.h"
#include "studio/runs_model.h"
#include "sweep/sweep_form.h"
#include "wizard/setup_wizard.h"

namespace {

using spur::screens::out_dir;

void shoot(const QString& name) { spur::screens::shoot(name, 800); }

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: sweep_screens SPUR TRAIN_FASHION_MNIST OUT_DIR (under xvfb-run)\n");
    return 2;
  }
  spur::screens::name_application();
  const QString spur = argv[1], example = argv[2];
  out_dir = argv[3];
  QTemporaryDir dir;
  const QString history = dir.filePath("history.db");
  const QString sweep_file = dir.filePath("fashion_mnist_hyperband.yaml");
  QFile file(sweep_file);
  if (!file.open(QIODevice::WriteOnly)) return 1;
  file.write(("name: fmnist-lr-search\n"
              "program: " +
              example +
              "\n"
              "method: random\n"
              "run_cap: 10\n"
              "metric: {name: loss, goal: minimize}\n"
              "early_terminate: {type: hyperband, min_iter: 4, eta: 2}\n"
              "parameters:\n"
              "  lr: {distribution: log_uniform_values, min: 0.0001, max: 0.03}\n"
              "  batch_size: {values: [32, 64, 128]}\n"
              "  weight_decay: {values: [0.0, 0.01, 0.05]}\n"
              "  max_steps: {value: 200}\n"
              "  log_every: {value: 10}\n"
              "  num_workers: {value: 1}\n")
                 .toUtf8());
  file.close();

  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  // A run of its own before the sweep: the grouped table shows it apart.
  std::fprintf(stderr, "one run of the example, then the sweep (10 runs, 2 at a time)\n");
  QProcess single;
  single.setProcessEnvironment(env);
  single.setWorkingDirectory(dir.path());
  single.start(spur, {"launch", "--run_name", "baseline", "--", example, "--max_steps", "100", "--log_every", "10",
                      "--num_workers", "1"});
  single.waitForFinished(600000);
  QProcess sweep;
  sweep.setProcessEnvironment(env);
  sweep.setWorkingDirectory(dir.path());
  sweep.setProcessChannelMode(QProcess::MergedChannels);
  sweep.start(spur, {"sweep", "run", sweep_file, "--parallel", "2", "--seed", "3"});
  sweep.waitForFinished(3600000);
  const QString output = QString::fromUtf8(sweep.readAll());
  const auto id = QRegularExpression("spur sweep ([a-z0-9]{8})").match(output).captured(1);
  std::fprintf(stderr, "%s\n", qPrintable(output.section('\n', -3)));

  for (const auto theme : {spur::studio::Theme::light, spur::studio::Theme::dark}) {
    spur::studio::apply_theme(theme);
    spur::studio::MainWindow window(history);
    window.resize(1400, 860);
    if (auto* splitter = window.findChild<QSplitter*>("splitter")) splitter->setSizes({520, 880});
    window.move(0, 0);
    window.show();
    QTest::qWait(1000);
    window.filter_runs("sweep:" + id);
    QList<qint64> runs;
    for (int row = 0; row < window.runs()->rowCount(); ++row) runs << window.runs()->run(row).id;
    window.show_runs(runs);
    window.show_hparams();
    auto* model = window.hparams()->model();
    for (int waited = 0; model->rowCount() != static_cast<int>(runs.size()) && waited < 20000; waited += 100) {
      QTest::qWait(100);
    }
    model->set_metrics({"loss", "accuracy"});
    QTest::qWait(500);
    if (theme == spur::studio::Theme::light) {
      shoot("studio-hparams.png");
      // Brushing the learning rate's upper half: the runs there are selected in the table.
      for (int a = 0; a < static_cast<int>(model->axes().size()); ++a) {
        if (model->axes()[static_cast<size_t>(a)].label == "lr") model->set_brush(a, 0.5, 1.0);
      }
      shoot("studio-hparams-brushed.png");
      // The runs table grouped by sweep, the sweep's row selected (its runs on the dashboard).
      window.filter_runs({});
      window.group_runs("sweep");
      window.findChild<QTabWidget*>("tabs")->setCurrentIndex(0);  // the dashboard
      QTest::qWait(300);
      auto* table = window.runs_view();
      for (int row = 0; row < table->model()->rowCount(); ++row) {
        const QModelIndex group = table->model()->index(row, 0);
        if (group.data().toString().contains(id)) {
          table->selectionModel()->select(group, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
        }
      }
      QTest::qWait(1500);
      shoot("studio-runs-grouped.png");
      window.group_runs({});
      // The wizard's Sweep page, filled as the sweep above was written.
      auto* wizard = window.make_wizard();
      wizard->move(120, 40);
      wizard->show();
      wizard->findChild<QRadioButton*>("where_local")->setChecked(true);
      wizard->next();
      wizard->next();
      wizard->next();
      wizard->findChild<QLineEdit*>("program")->setText(example);
      wizard->findChild<QLineEdit*>("arguments")->setText("--num_workers 1 --log_every 10");
      wizard->findChild<QCheckBox*>("as_sweep")->setChecked(true);
      wizard->next();
      spur::app::SweepForm form;
      form.name = "fmnist-grid";
      form.metric = "loss";
      form.parallel = 2;
      form.parameters = spur::app::SweepForm::parse_parameters(
          "lr: 0.003, 0.001, 0.0003\nbatch_size: 64, 128\nweight_decay: 0.0, 0.01\nmax_steps: 150");
      wizard->set_sweep(form);
      QTest::qWait(500);
      shoot("studio-wizard-sweep.png");
      wizard->next();
      QTest::qWait(500);
      shoot("studio-wizard-sweep-summary.png");
      wizard->reject();
    } else {
      shoot("studio-hparams-dark.png");
    }
  }
  return 0;
}
