// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's main window; see main_window.h. The GUI thread only paints: the history is read by a
// SeriesLoader on its own thread, which hands over new points.
#include "main/main_window.h"

#include <QAction>
#include <QFile>
#include <QFileDialog>
#include <QHeaderView>
#include <QInputDialog>
#include <QLineEdit>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QVBoxLayout>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>

#include "console/console_view.h"
#include "dashboard/dashboard.h"
#include "dashboard/series_loader.h"
#include "runs/runs_model.h"

#include <spur/history/writer.h>

namespace spur::studio {

MainWindow::MainWindow(QString history_path, QWidget* parent)
    : QMainWindow(parent), path_(std::move(history_path)), runs_(new app::RunsModel(path_, this)),
      shown_(new QSortFilterProxyModel(this)), search_(new QLineEdit(this)), table_(new QTableView(this)),
      dashboard_(new Dashboard(this)), console_(new ConsoleView(path_, this)),
      timer_(new QTimer(this)),
      loader_(new SeriesLoader(path_)) {
  setWindowTitle(tr("Spur Studio"));
  shown_->setSourceModel(runs_);
  shown_->setSortRole(app::RunsModel::SortRole);
  shown_->setFilterKeyColumn(-1);  // any column
  shown_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  table_->setModel(shown_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(app::RunsModel::Id, Qt::AscendingOrder);
  search_->setObjectName("run_search");
  search_->setPlaceholderText(tr("Filter runs (name, project, status, tags)"));
  search_->setClearButtonEnabled(true);
  connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) { filter_runs(text); });
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  for (const int hidden : {app::RunsModel::Project, app::RunsModel::Target, app::RunsModel::Tags}) {
    table_->hideColumn(hidden);
  }
  auto* splitter = new QSplitter(this);
  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(search_);
  left_layout->addWidget(table_);
  splitter->addWidget(left);
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
  build_actions();
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
      table_->selectRow(shown_->mapFromSource(runs_->index(runs_->rowCount() - 1, 0)).row());
    } else {
      QItemSelection selection;
      for (const qint64 id : wanted_) {
        const int row = runs_->row_of(id);
        if (row >= 0) {
          selection.select(shown_->mapFromSource(runs_->index(row, 0)),
                           shown_->mapFromSource(runs_->index(row, app::RunsModel::ColumnCount - 1)));
        }
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
    const auto& run = runs_->run(shown_->mapToSource(index).row());
    shown.insert(run.id, QString::fromStdString(run.name));
    ids << run.id;
  }
  dashboard_->set_runs(shown);
  // The console follows the newest selected run.
  console_->set_run(ids.isEmpty() ? 0 : *std::max_element(ids.begin(), ids.end()));
  QMetaObject::invokeMethod(loader_, [loader = loader_, ids] { loader->set_runs(ids); }, Qt::QueuedConnection);
  QMetaObject::invokeMethod(loader_, &SeriesLoader::poll, Qt::QueuedConnection);
}

void MainWindow::filter_runs(const QString& text) {
  shown_->setFilterFixedString(text);
  if (search_->text() != text) search_->setText(text);
}

qint64 MainWindow::current_run() const {
  const auto index = table_->currentIndex();
  return index.isValid() ? runs_->run(shown_->mapToSource(index).row()).id : 0;
}

void MainWindow::report(const QString& error) {
  if (!error.isEmpty()) QMessageBox::warning(this, tr("Spur Studio"), error);
}

namespace {

// One history write; its error as text.
template <typename F>
QString with_writer(const QString& path, F&& action) {
  try {
    spur::history::HistoryWriter writer(path.toStdString());
    action(writer);
    return {};
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
}

}  // namespace

QString MainWindow::rename_run(qint64 run, const QString& name) {
  if (name.trimmed().isEmpty()) return tr("A run needs a name.");
  const QString error = with_writer(path_, [&](auto& w) { w.set_names(run, "", name.trimmed().toStdString()); });
  refresh();
  return error;
}

QString MainWindow::tag_run(qint64 run, const QString& tag) {
  if (tag.trimmed().isEmpty()) return tr("A tag cannot be empty.");
  const QString error = with_writer(path_, [&](auto& w) { w.add_tag(run, tag.trimmed().toStdString()); });
  refresh();
  return error;
}

QString MainWindow::set_notes(qint64 run, const QString& notes) {
  const QString error = with_writer(path_, [&](auto& w) { w.set_notes(run, notes.toStdString()); });
  refresh();
  return error;
}

QString MainWindow::delete_run(qint64 run) {
  const QString error = with_writer(path_, [&](auto& w) { w.delete_run(run); });
  refresh();
  return error;
}

QString MainWindow::export_config(qint64 run, const QString& file) {
  const int row = runs_->row_of(run);
  if (row < 0) return tr("No run %1.").arg(run);
  const auto& config = runs_->run(row).config;
  if (config.empty()) return tr("Run %1 was not started by spur launch: it has no configuration.").arg(run);
  QFile out(file);
  if (!out.open(QIODevice::WriteOnly) || out.write(config.data(), static_cast<qint64>(config.size())) < 0) {
    return tr("Cannot write %1: %2").arg(file, out.errorString());
  }
  return {};
}

void MainWindow::build_actions() {
  auto* menu = menuBar()->addMenu(tr("&Run"));
  auto add = [this, menu](const QString& text, const QKeySequence& keys, auto slot) {
    auto* action = new QAction(text, this);
    action->setShortcut(keys);
    connect(action, &QAction::triggered, this, slot);
    menu->addAction(action);
    table_->addAction(action);
    return action;
  };
  add(tr("&Rename..."), QKeySequence(Qt::Key_F2), [this] {
    const qint64 run = current_run();
    if (!run) return;
    bool ok = false;
    const QString name = QInputDialog::getText(this, tr("Rename run"), tr("Name:"), QLineEdit::Normal,
                                               QString::fromStdString(runs_->run(runs_->row_of(run)).name), &ok);
    if (ok) report(rename_run(run, name));
  });
  add(tr("&Tag..."), QKeySequence(Qt::CTRL | Qt::Key_T), [this] {
    const qint64 run = current_run();
    bool ok = false;
    const QString tag = run ? QInputDialog::getText(this, tr("Tag run"), tr("Tag:"), QLineEdit::Normal, {}, &ok) : QString();
    if (ok) report(tag_run(run, tag));
  });
  add(tr("&Notes..."), QKeySequence(Qt::CTRL | Qt::Key_N), [this] {
    const qint64 run = current_run();
    bool ok = false;
    const QString notes = run ? QInputDialog::getMultiLineText(this, tr("Run notes"), tr("Notes:"),
                                                               QString::fromStdString(runs_->run(runs_->row_of(run)).notes), &ok)
                              : QString();
    if (ok) report(set_notes(run, notes));
  });
  add(tr("&Export config..."), QKeySequence(Qt::CTRL | Qt::Key_E), [this] {
    const qint64 run = current_run();
    if (!run) return;
    const QString file = QFileDialog::getSaveFileName(this, tr("Export the run's configuration"),
                                                      QString("run-%1.yaml").arg(run), tr("YAML (*.yaml *.yml)"));
    if (!file.isEmpty()) report(export_config(run, file));
  });
  menu->addSeparator();
  add(tr("&Delete"), QKeySequence(QKeySequence::Delete), [this] {
    const qint64 run = current_run();
    if (!run) return;
    if (QMessageBox::question(this, tr("Delete run"),
                              tr("Delete run %1 and everything recorded for it? This cannot be undone.").arg(run)) ==
        QMessageBox::Yes) {
      report(delete_run(run));
    }
  });
  table_->setContextMenuPolicy(Qt::ActionsContextMenu);
}

}  // namespace spur::studio
