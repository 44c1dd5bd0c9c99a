// SPDX-License-Identifier: GPL-3.0-or-later
// The screenshots of docs/studio.md, from real runs: trains the Fashion-MNIST example (two finished runs and one that
// fails), launches a live one from the Studio, and photographs each screen (dashboard, System section, Compare
// tab, console, overview, Relaunch, wizard pages, dark theme) with ImageMagick's `import -window
// root`. Run it under xvfb-run through take_screenshots.sh; `studio_screens SPUR TRAIN_FASHION_MNIST OUT_DIR`.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDialog>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QRadioButton>
#include <QScrollArea>
#include <QScrollBar>

#include <QSignalSpy>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTreeView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QWizard>

#include <algorithm>
#include <cstdio>

#include "compare/compare_view.h"
#include "setup/setup_answers.h"
#include "dashboard/dashboard.h"
#include "dashboard/metric_plot.h"
#include "main/main_window.h"
#include "screens.h"
#include "main/run_overview.h"
#include "main/theme.h"
#include "studio/runs_model.h"
#include "wizard/setup_wizard.h"

#undef QT_NO_FOREACH
#include <qcustomplot.h>

namespace {

using spur::screens::out_dir;

void shoot(const QString& name) { spur::screens::shoot(name); }

int train(const QString& spur, const QString& history, const QString& directory, const QString& name,
          const QStringList& program) {
  QProcess launcher;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  launcher.setProcessEnvironment(env);
  launcher.setWorkingDirectory(directory);
  launcher.setProcessChannelMode(QProcess::MergedChannels);
  launcher.start(spur, QStringList{"launch", "--config_file", QDir(directory).filePath("spur_config.yaml"),
                                   "--run_name", name, "--"} +
                           program);
  launcher.waitForFinished(300000);
  return launcher.exitCode();
}

void select_rows(spur::studio::MainWindow& window, const QList<qint64>& runs) {
  auto* view = window.runs_view();
  view->clearSelection();
  for (const qint64 run : runs) {
    for (int row = 0; row < view->model()->rowCount(); ++row) {
      if (view->model()->index(row, 0).data(spur::app::RunsModel::RunIdRole).toLongLong() == run) {
        view->selectionModel()->select(view->model()->index(row, 0),
                                       QItemSelectionModel::Select | QItemSelectionModel::Rows);
        view->selectionModel()->setCurrentIndex(view->model()->index(row, 0), QItemSelectionModel::NoUpdate);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: studio_screens SPUR TRAIN_FASHION_MNIST OUT_DIR (under xvfb-run)\n");
    return 2;
  }
  spur::screens::name_application();
  const QString spur = argv[1], example = argv[2];
  out_dir = argv[3];
  qputenv("SPUR_PROGRAM", spur.toUtf8());
  spur::studio::apply_theme(spur::studio::Theme::light);
  QTemporaryDir dir;
  const QString history = dir.filePath("history.db");
  spur::app::SetupAnswers answers;
  answers.distributed_type = "MULTI_CPU";
  answers.processes_per_machine = 2;
  answers.working_directory = dir.path();
  answers.program = example;
  const QString config = dir.filePath("spur_config.yaml");
  answers.to_config(config.toStdString()).save(config.toStdString());

  std::fprintf(stderr, "training the example: two runs to compare, one that fails\n");
  const QStringList common{"--max_steps", "300", "--log_every", "10", "--num_workers", "1"};
  train(spur, history, dir.path(), "lr 3e-3", QStringList{example, "--lr", "3e-3"} + common);
  train(spur, history, dir.path(), "lr 2e-2", QStringList{example, "--lr", "2e-2"} + common);
  train(spur, history, dir.path(), "typo in the flags", {example, "--epochs", "2", "--learning_rate", "0.1"});

  spur::studio::MainWindow window(history);
  window.resize(1400, 860);
  if (auto* splitter = window.findChild<QSplitter*>("splitter")) splitter->setSizes({620, 780});
  window.move(0, 0);
  window.show();
  QTest::qWait(1000);
  window.runs()->set_metric_columns({"loss", "accuracy"});
  auto request = answers.launch_request(config);
  request.arguments = {"--epochs", "3", "--log_every", "10", "--num_workers", "1"};
  QSignalSpy launched(&window, &spur::studio::MainWindow::launched);
  window.launch(request);
  launched.wait(30000);
  const qint64 live = launched.isEmpty() ? 0 : launched.front().front().toLongLong();
  QTest::qWait(30000);
  // Room for the final-value columns in the picture (the user scrolls, or hides columns).
  window.runs_view()->hideColumn(spur::app::RunsModel::Started);
  window.runs_view()->hideColumn(spur::app::RunsModel::Target);
  for (int column = 0; column < window.runs_view()->model()->columnCount(); ++column)
    window.runs_view()->resizeColumnToContents(column);
  select_rows(window, {1, 2, live});
  QTest::qWait(1500);
  if (auto* loss = window.dashboard()->plot("loss")) {
    loss->set_log_y(true);
    auto* plot = loss->plot();
    const QPoint at(plot->xAxis->coordToPixel(plot->xAxis->range().center()), plot->height() / 2);
    QTest::mouseMove(plot, at);
  }
  shoot("studio-dashboard.png");

  // The dashboard's sections: accuracy pinned on top, the program's metrics, the System section below; the hover
  // read-out at one step on every plot with a step axis.
  window.dashboard()->set_pinned("accuracy", true);
  window.dashboard()->set_columns(2);
  QTest::qWait(800);
  if (auto* loss = window.dashboard()->plot("loss")) {
    auto* plot = loss->plot();
    const QPoint at(plot->xAxis->coordToPixel(plot->xAxis->range().lower + 0.6 * plot->xAxis->range().size()),
                    plot->height() / 2);
    QTest::mouseMove(plot, at);
  }
  QTest::qWait(300);
  shoot("studio-sections.png");
  window.dashboard()->set_pinned("accuracy", false);

  // What the runs cost the machine: the dashboard's System section (each rank's CPU and memory, sampled by the
  // launcher every second), scrolled into view.
  QTest::mouseMove(window.runs_view()->viewport(), QPoint(5, 300));  // away from the plots: no read-out
  if (auto* scroll = window.dashboard()->findChild<QScrollArea*>()) {
    // The section's header at the top of the view, its plots below it.
    auto* header = window.dashboard()->system_section();
    scroll->verticalScrollBar()->setValue(header->mapTo(scroll->widget(), QPoint(0, 0)).y() - 4);
    QTest::qWait(300);
    shoot("studio-system.png");
    scroll->verticalScrollBar()->setValue(0);
  }

  // The Compare tab: the two finished runs and the live one side by side, against the first as the baseline (the
  // runs table's metric columns show the deltas too).
  // (the runs table's pane wider: a delta takes room)
  auto* splitter = window.findChild<QSplitter*>("splitter");
  if (splitter) splitter->setSizes({680, 720});
  window.runs_view()->hideColumn(spur::app::RunsModel::Tags);  // none here
  window.runs()->set_metric_columns({"loss"});
  window.compare()->set_baseline(1);
  window.show_compare();
  QTest::qWait(2000);
  shoot("studio-compare.png");
  window.compare()->set_baseline(0);
  window.runs()->set_metric_columns({"loss", "accuracy"});
  window.runs_view()->showColumn(spur::app::RunsModel::Tags);
  if (splitter) splitter->setSizes({620, 780});

  select_rows(window, {3});
  window.findChild<QTabWidget*>("tabs")->setCurrentIndex(1);
  shoot("studio-console-failed.png");

  // A run's overview (double-click), and the Relaunch dialog for it.
  window.findChild<QTabWidget*>("tabs")->setCurrentIndex(0);
  if (auto* overview = window.show_overview(2)) {
    overview->move(160, 20);
    overview->resize(std::max(overview->width(), 760), 820);
    QTest::qWait(1500);
    shoot("studio-run-overview.png");
    overview->close();
  }
  select_rows(window, {2});
  QTest::qWait(300);
  auto* relaunch = window.findChild<QAction*>("relaunch");
  if (relaunch && relaunch->isEnabled()) {
    QTimer::singleShot(500, [] {
      auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget());
      if (!dialog || dialog->objectName() != "relaunch_dialog") {
        std::fprintf(stderr, "no Relaunch dialog to take\n");
        if (dialog) dialog->reject();
        return;
      }
      shoot("studio-relaunch.png");
      dialog->reject();
    });
    relaunch->trigger();
  } else {
    std::fprintf(stderr, "Relaunch is not enabled for run 2\n");
  }

  auto* wizard = window.make_wizard(config);
  wizard->move(120, 60);
  wizard->show();
  wizard->findChild<QRadioButton*>("where_ssh")->setChecked(true);
  wizard->next();
  wizard->findChild<QLineEdit*>("hosts")->setText("gpu-a, gpu-b, me@gpu/c");
  shoot("studio-wizard-machines.png");
  wizard->findChild<QLineEdit*>("hosts")->setText("gpu-a, gpu-b, me@gpu-c");
  wizard->next();
  wizard->next();
  // The program page with a mistake in the environment: its label stays by the box, the error under it.
  auto* environment = wizard->findChild<QPlainTextEdit*>("environment");
  environment->setPlainText("OMP_NUM_THREADS=4\nDATA_DIR /data/fashion-mnist");
  shoot("studio-wizard-program.png");
  environment->setPlainText("OMP_NUM_THREADS=4\nDATA_DIR=/data/fashion-mnist");
  wizard->next();
  shoot("studio-wizard-summary.png");
  wizard->reject();

  // A Slurm cluster: its settings, then the last page with the sbatch script spur launch --dry_run gives.
  auto* slurm = window.make_wizard(config);
  slurm->move(120, 20);
  slurm->resize(900, 820);
  slurm->show();
  slurm->findChild<QRadioButton*>("where_slurm")->setChecked(true);
  slurm->next();
  slurm->findChild<QLineEdit*>("partition")->setText("gpu");
  slurm->findChild<QSpinBox*>("nodes")->setValue(2);
  slurm->findChild<QSpinBox*>("ntasks_per_node")->setValue(4);
  slurm->findChild<QLineEdit*>("time")->setText("2:00:00");
  slurm->findChild<QLineEdit*>("account")->setText("vision-lab");
  slurm->findChild<QLineEdit*>("gres")->setText("gpu:4");
  slurm->findChild<QLineEdit*>("slurm_dir")->setText("/tmp/spur-slurm");  // (the screens' own folder has a space)
  shoot("studio-wizard-slurm.png");
  slurm->next();
  slurm->next();
  slurm->next();
  auto* script = slurm->findChild<QPlainTextEdit*>("sbatch_script");
  for (int waited = 0; waited < 100 && !script->toPlainText().contains("#!/bin/bash"); ++waited) QTest::qWait(100);
  shoot("studio-wizard-slurm-script.png");
  slurm->reject();

  window.findChild<QTabWidget*>("tabs")->setCurrentIndex(0);
  spur::studio::apply_theme(spur::studio::Theme::dark);
  select_rows(window, {1, 2, live});
  QTest::qWait(2000);
  if (auto* loss = window.dashboard()->plot("loss")) {  // the hover read-out in the dark theme
    auto* plot = loss->plot();
    QTest::mouseMove(plot, QPoint(plot->xAxis->coordToPixel(plot->xAxis->range().center()), plot->height() / 2));
  }
  QTest::qWait(300);
  shoot("studio-dark.png");

  if (live) window.stop_run(live);
  QTest::qWait(2000);
  return 0;
}
