// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's main window; see main_window.h. The GUI thread only paints: the history is read by a
// SeriesLoader on its own thread, which hands over new points.
#include "main/main_window.h"

#include <QHeaderView>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>

#include "console/console_view.h"
#include "dashboard/dashboard.h"
#include "dashboard/series_loader.h"
#include "runs/runs_model.h"

namespace spur::studio {

MainWindow::MainWindow(QString history_path, QWidget* parent)
    : QMainWindow(parent), path_(std::move(history_path)), runs_(new app::RunsModel(path_, this)),
      table_(new QTableView(this)), dashboard_(new Dashboard(this)), console_(new ConsoleView(path_, this)),
      timer_(new QTimer(this)),
      loader_(new SeriesLoader(path_)) {
  setWindowTitle(tr("Spur Studio"));
  table_->setModel(runs_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  for (const int hidden : {app::RunsModel::Project, app::RunsModel::Target, app::RunsModel::Tags}) {
    table_->hideColumn(hidden);
  }
  auto* splitter = new QSplitter(this);
  splitter->addWidget(table_);
  auto* tabs = new QTabWidget(this);
  tabs->addTab(dashboard_, tr("&Metrics"));
  tabs->addTab(console_, tr("&Console"));
  splitter->addWidget(tabs);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({420, 860});
  setCentralWidget(splitter);
  statusBar()->showMessage(tr("History: %1").arg(path_));
  resize(1280, 800);

  loader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, loader_, &QObject::deleteLater);
  connect(loader_, &SeriesLoader::loaded, dashboard_, &Dashboard::apply);
  connect(loader_, &SeriesLoader::failed, this, [this](const QString& message) { statusBar()->showMessage(message); });
  reader_thread_.start();

  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { selection_changed(); });
  connect(timer_, &QTimer::timeout, this, [this] { refresh(); });
  timer_->start(250);
  refresh();
}

MainWindow::~MainWindow() {
  reader_thread_.quit();
  reader_thread_.wait();
}

void MainWindow::refresh() {
  const int before = runs_->rowCount();
  if (!runs_->refresh()) statusBar()->showMessage(runs_->error());
  if (runs_->rowCount() != before) table_->resizeColumnsToContents();
  // The newest run is shown at first, so there is something to watch straight away.
  if (!selected_once_ && runs_->rowCount() > 0) {
    selected_once_ = true;
    if (wanted_.isEmpty()) {
      table_->selectRow(runs_->rowCount() - 1);
    } else {
      QItemSelection selection;
      for (const qint64 id : wanted_) {
        const int row = runs_->row_of(id);
        if (row >= 0) selection.select(runs_->index(row, 0), runs_->index(row, app::RunsModel::ColumnCount - 1));
      }
      table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
    }
  }
  QMetaObject::invokeMethod(loader_, &SeriesLoader::poll, Qt::QueuedConnection);
  console_->refresh();
}

void MainWindow::selection_changed() {
  QMap<qint64, QString> shown;
  QList<qint64> ids;
  for (const auto& index : table_->selectionModel()->selectedRows()) {
    const auto& run = runs_->run(index.row());
    shown.insert(run.id, QString::fromStdString(run.name));
    ids << run.id;
  }
  dashboard_->set_runs(shown);
  // The console follows the newest selected run.
  console_->set_run(ids.isEmpty() ? 0 : *std::max_element(ids.begin(), ids.end()));
  QMetaObject::invokeMethod(loader_, [loader = loader_, ids] { loader->set_runs(ids); }, Qt::QueuedConnection);
  QMetaObject::invokeMethod(loader_, &SeriesLoader::poll, Qt::QueuedConnection);
}

}  // namespace spur::studio
