// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's main window; see main_window.h. The GUI thread only paints: the runs table is read by a
// RunsReaderWorker and metric points by a SeriesLoader (both app/runs), on a thread of their own; changes to runs
// and exports are app::RunActions', on the actions thread; launching and stopping go through app/ (a detached
// `spur launch`, followed by app::PendingLaunches until its run shows).
#include "main/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QHeaderView>
#include <QPushButton>
#include <QScreen>
#include <QFontDatabase>
#include <QFutureWatcher>
#include <QPromise>
#include <QDialogButtonBox>
#include <QDialog>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMouseEvent>
#include <QMenuBar>
#include <QMessageBox>
#include <QScopeGuard>
#include <QScopedValueRollback>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QTableView>
#include <QTextStream>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include "compare/compare_view.h"
#include "main/run_overview.h"
#include "config/setup_answers.h"
#include "console/console_view.h"
#include "dashboard/dashboard.h"
#include "runs/series_loader.h"
#include "runs/summary_builder.h"
#include "launch/detached_launch.h"
#include "main/run_notifier.h"
#include "main/runs_colours.h"
#include "main/theme.h"
#include "runs/compare_model.h"
#include "runs/pending_launches.h"
#include "runs/run_actions.h"
#include "runs/run_service.h"
#include "runs/run_status.h"
#include "runs/runs_model.h"
#include "wizard/setup_wizard.h"

namespace spur::studio {

MainWindow::MainWindow(const QString& history_path, QWidget* parent)
    : QMainWindow(parent),
      path_(QFileInfo(history_path).absoluteFilePath()),
      runs_(new app::RunsModel(path_, this)),
      notifier_(new RunNotifier(QDBusConnection::sessionBus(), this)),
      colours_(new RunsColours(this)),
      shown_(new QSortFilterProxyModel(this)),
      search_(new QLineEdit(this)),
      table_(new QTableView(this)),
      dashboard_(new Dashboard(this)),
      console_(new ConsoleView(path_, this)),
      compare_(new CompareView(this)),
      timer_(new QTimer(this)),
      loader_(new app::SeriesLoader(path_)),
      runs_reader_(new app::RunsReaderWorker(path_)),
      compare_reader_(new app::CompareReaderWorker(path_)),
      actions_(new app::RunActions(path_, this)),
      pending_(path_, QDir(data_directory()).filePath("launches")) {
  setWindowTitle(tr("Spur Studio"));
  setObjectName("main_window");
  colours_->setSourceModel(runs_);
  shown_->setSourceModel(colours_);
  shown_->setSortRole(app::RunsModel::SortRole);
  shown_->setFilterKeyColumn(-1);  // any column
  shown_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  table_->setModel(shown_);
  table_->setSortingEnabled(true);
  // Column widths from the first rows only: measuring 10,000 rows' texts on every new run froze the window.
  table_->horizontalHeader()->setResizeContentsPrecision(200);
  table_->sortByColumn(app::RunsModel::Id, Qt::DescendingOrder);  // newest first; older pages below
  search_->setObjectName("run_search");
  search_->setPlaceholderText(tr("Filter runs (name, project, status, tags)  Ctrl+F"));
  search_->setClearButtonEnabled(true);
  connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) { filter_runs(text); });
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->horizontalHeader()->setToolTip(tr("Right-click: choose the columns, and the metrics shown as columns"));
  connect(table_->horizontalHeader(), &QWidget::customContextMenuRequested, this,
          [this](const QPoint& at) { choose_metric_columns(at); });
  // One line per run, numbers whole ("0.4123" wrapped mid-number in a narrow pane); the name may be elided in the
  // middle (its tooltip and the overview have it whole).
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideMiddle);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  // The columns that fit the pane at its default width; the header's context menu shows the others.
  // Most histories hold one project; the status says failed (the exit code is in the overview and the console);
  // the target and start time are in the overview (and the table sorts newest first by id).
  for (const int column :
       {app::RunsModel::Project, app::RunsModel::Started, app::RunsModel::ExitCode, app::RunsModel::Target}) {
    table_->hideColumn(column);
  }
  table_->viewport()->installEventFilter(this);  // its resizes refit the columns
  // So do metric columns shown or hidden (the header's menu, settings), and the baseline's deltas (below).
  connect(runs_, &QAbstractItemModel::columnsInserted, this, [this] { fit_columns(); });
  // A column the user sizes (dragging or double-clicking a divider) keeps that width through refits and sessions;
  // the header's menu fits them again. Only the user's resizes count: the header's press and release bracket them.
  table_->horizontalHeader()->viewport()->installEventFilter(this);
  connect(table_->horizontalHeader(), &QHeaderView::sectionResized, this, [this](int column, int, int width) {
    auto* header = table_->horizontalHeader();
    int last = header->count() - 1;  // the last shown column takes what is left (the stretch): not a choice
    while (last > 0 && header->isSectionHidden(header->logicalIndex(last))) --last;
    if (user_resizing_ && !fitting_ && width > 0 && column != header->logicalIndex(last)) {
      manual_widths_[runs_->headerData(column, Qt::Horizontal).toString()] = width;
    }
  });
  connect(table_, &QAbstractItemView::doubleClicked, this, [this](const QModelIndex& index) {
    if (index.isValid()) show_overview(runs_->run(shown_->mapToSource(index).row()).id);
  });
  auto* splitter = splitter_ = new QSplitter(this);
  splitter->setObjectName("splitter");
  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(search_);
  left_layout->addWidget(table_);
  splitter->addWidget(left);
  auto* tabs = tabs_ = new QTabWidget(this);
  tabs->setObjectName("tabs");
  tabs->addTab(dashboard_, tr("&Metrics"));
  tabs->addTab(console_, tr("&Console"));
  tabs->addTab(compare_, tr("Com&pare"));
  // The Compare tab's baseline is the runs table's too: its metric columns show each run's delta against it.
  auto follow_baseline = [this] {
    auto* model = compare_->model();
    auto lower_is_better = [model](const QString& key) {
      return model->direction(key) == app::MetricDirection::lower_is_better;
    };
    runs_->set_baseline(model->baseline(), lower_is_better);
    dashboard_->set_baseline(model->baseline(), lower_is_better);
    fit_columns();  // the metric columns' texts grew or shrank by their deltas
  };
  connect(compare_->model(), &QAbstractItemModel::headerDataChanged, this, follow_baseline);
  connect(compare_->model(), &QAbstractItemModel::modelReset, this, follow_baseline);
  connect(tabs, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == compare_) ask_compare();
  });
  splitter->addWidget(tabs);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({500, 780});
  setCentralWidget(splitter);
  statusBar()->showMessage(tr("History: %1").arg(path_));
  // A history others can read (an older Spur's, or loosened by hand) is pointed out for as long as it stays so.
  if (const QString warning = app::history_permission_warning(path_); !warning.isEmpty()) {
    auto* label = new QLabel(tr("History %1").arg(warning), this);
    label->setObjectName("history_permission_warning");
    label->setStyleSheet("color: #b00020; font-weight: bold");
    statusBar()->addPermanentWidget(label);
  }
  resize(1280, 800);

  loader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, loader_, &QObject::deleteLater);
  runs_reader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, runs_reader_, &QObject::deleteLater);
  connect(runs_reader_, &app::RunsReaderWorker::snapshot, this, &MainWindow::apply_snapshot);
  // Scrolling to the end of the table fetches the next page of older runs (10,000 runs open as fast as 500).
  connect(runs_, &app::RunsModel::more_wanted, this, [this] {
    QMetaObject::invokeMethod(runs_reader_, &app::RunsReaderWorker::fetch_more, Qt::QueuedConnection);
  });
  compare_reader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, compare_reader_, &QObject::deleteLater);
  connect(compare_reader_, &app::CompareReaderWorker::snapshot, this, [this](const app::CompareSnapshot& snapshot) {
    // An answer for a selection since changed is dropped: the newer read is on its way.
    QList<qint64> ids;
    for (const auto& run : snapshot.runs) ids << run.run.id;
    if (snapshot.error.isEmpty() && ids != compared_) return;
    compare_->set_snapshot(snapshot);
  });
  connect(loader_, &app::SeriesLoader::loaded, dashboard_, &Dashboard::apply);
  // A zoom reads the plot's lines again for the range shown, finer (the GUI thread never reads the history).
  connect(dashboard_, &Dashboard::view_changed, this, [this](const QString& key, const app::SeriesView& view) {
    QMetaObject::invokeMethod(
        loader_, [loader = loader_, key, view] { loader->set_view(key, view); }, Qt::QueuedConnection);
    QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  });
  connect(loader_, &app::SeriesLoader::failed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  reader_thread_.start();

  // A history from an older Spur gains its summaries once, in the background, and any series a read could not
  // trust is rebuilt; the status bar shows how far it is.
  summaries_ = new app::SummaryBuilder(path_);
  summaries_->moveToThread(&summary_thread_);
  connect(&summary_thread_, &QThread::finished, summaries_, &QObject::deleteLater);
  connect(summaries_, &app::SummaryBuilder::progress, this, [this](qint64 done, qint64 total) {
    if (done < total) {
      statusBar()->showMessage(tr("Summarising the history for fast plots: %1 of %2 series").arg(done).arg(total));
    } else {
      statusBar()->showMessage(tr("History summarised: %n series", nullptr, int(total)), 5000);
    }
  });
  connect(summaries_, &app::SummaryBuilder::finished, this, [this](qint64, const QString& error) {
    if (error.isEmpty()) return;
    // Plots still draw (from the raw points); say why it is slow, and try again later (another process may have
    // held the history's write lock). A history this user may only read is said once and left.
    statusBar()->showMessage(tr("The history's plot summaries could not be built: %1").arg(error), 15000);
    if (summary_attempts_++ < 3 && !error.contains("cannot be written") && !error.contains("readonly")) {
      QTimer::singleShot(60000, this, [this] {
        QMetaObject::invokeMethod(summaries_, &app::SummaryBuilder::build, Qt::QueuedConnection);
      });
    }
  });
  connect(loader_, &app::SeriesLoader::untrusted, summaries_, &app::SummaryBuilder::rebuild);
  summary_thread_.start();
  QMetaObject::invokeMethod(summaries_, &app::SummaryBuilder::build, Qt::QueuedConnection);

  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { selection_changed(); });
  connect(table_->selectionModel(), &QItemSelectionModel::currentChanged, this, [this] { update_actions(); });
  build_actions();
  restore_settings();
  connect(timer_, &QTimer::timeout, this, [this] { refresh(); });
  timer_->start(250);
  refresh();
}

MainWindow::~MainWindow() {
  // Overviews hand their readers back to the reader thread: before it stops.
  for (auto* overview : findChildren<RunOverview*>()) delete overview;
  summaries_->stop();  // after the series it is on: every series is written whole or not at all
  summary_thread_.quit();
  summary_thread_.wait();
  reader_thread_.quit();
  reader_thread_.wait();
  // A run is written whole or not at all: the import stops before its next run folder, after the one under way.
  import_cancelled_ = true;
  if (import_thread_) import_thread_->wait();
}

QString MainWindow::import_tensorboard(const QString& path, bool again) {
  return import_folders(QStringList{path}, again);
}

QString MainWindow::import_folders(const QStringList& paths, bool again, const QStringList& only) {
  if (import_thread_) return tr("An import is already running.");
  statusBar()->showMessage(tr("Importing TensorBoard runs from %1...").arg(paths.join(", ")));
  // The worker reports through queued calls on this window, which waits for the worker before it goes.
  import_thread_.reset(QThread::create([this, paths, again, only, history = path_.toStdString()] {
    QStringList lines, skipped;
    QList<qint64> runs;
    bool failed = false;
    try {
      app::RunService service(history);
      app::TensorBoardImportOptions options;
      options.again = again;
      options.only = only;
      options.cancelled = [this] { return import_cancelled_.load(); };
      for (const auto& path : paths) {
        service.import_tensorboard(path, options, [&](const app::ImportedRun& run) {
          const QString line = app::import_summary(run, QString());
          lines << line;
          if (run.run) runs << run.run;
          if (run.run == 0 && run.earlier > 0 && run.error.isEmpty()) skipped << run.directory;
          if (!run.error.isEmpty()) failed = true;
          QMetaObject::invokeMethod(
              this, [this, line] { statusBar()->showMessage(line); }, Qt::QueuedConnection);
        });
      }
    } catch (const std::exception& e) {
      lines << QString::fromUtf8(e.what());
      failed = true;
    }
    QMetaObject::invokeMethod(
        this,
        [this, paths, lines, runs, failed, skipped] {
          import_thread_->wait();
          import_thread_.reset();
          if (!runs.isEmpty()) show_runs(runs);  // selected once the next read has them
          refresh();
          const QString summary = tr("Imported %n run(s).", nullptr, static_cast<int>(runs.size()));
          if (failed) {
            report(summary + "\n\n" + lines.join('\n'));
          } else {
            statusBar()->showMessage(summary + " " + lines.join("; "), 15000);
          }
          if (!skipped.isEmpty()) ask_import_again(paths, skipped);
          emit imported(lines, runs, failed);
        },
        Qt::QueuedConnection);
  }));
  import_thread_->start();
  return {};
}

void MainWindow::ask_import_again(const QStringList& paths, const QStringList& folders) {
  // Window-modal (open(), not exec()): the dashboard keeps updating behind it. Nothing is imported twice unless
  // asked here; asked, the folders are imported from the same paths, so they keep their names and project.
  auto* box = new QMessageBox(QMessageBox::Question, tr("Import TensorBoard runs"),
                              tr("%n run folder(s) were imported before (or changed since: a run still being "
                                 "written?), and were left as they are. Import them again, as new runs?",
                                 nullptr, static_cast<int>(folders.size())),
                              QMessageBox::NoButton, this);
  box->setObjectName("import_again");
  box->setDetailedText(folders.join('\n'));
  auto* again = box->addButton(tr("Import again"), QMessageBox::AcceptRole);
  again->setObjectName("import_again_button");
  box->addButton(tr("Leave them"), QMessageBox::RejectRole);
  box->setAttribute(Qt::WA_DeleteOnClose);
  connect(box, &QMessageBox::buttonClicked, this, [this, again, paths, folders](QAbstractButton* clicked) {
    if (clicked == again) report(import_folders(paths, true, folders));
  });
  box->open();
}

QString MainWindow::data_directory() { return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation); }

void MainWindow::restore_settings() {
  QSettings settings;
  if (settings.contains("window/geometry")) restoreGeometry(settings.value("window/geometry").toByteArray());
  if (settings.contains("window/splitter")) splitter_->restoreState(settings.value("window/splitter").toByteArray());
  dashboard_->restore_settings(settings);
  runs_->set_metric_columns(settings.value("runs/metric_columns").toStringList());
  const auto widths = settings.value("runs/column_widths").toMap();
  for (auto width = widths.begin(); width != widths.end(); ++width) {
    if (width.value().toInt() > 0) manual_widths_[width.key()] = width.value().toInt();
  }
  if (settings.contains("runs/hidden_columns")) {
    const QStringList hidden = settings.value("runs/hidden_columns").toStringList();
    for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
      table_->setColumnHidden(column, column != app::RunsModel::Name && hidden.contains(QString::number(column)));
    }
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/splitter", splitter_->saveState());
  dashboard_->save_settings(settings);
  settings.setValue("runs/metric_columns", runs_->metric_columns());
  QStringList hidden;
  for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
    if (table_->isColumnHidden(column)) hidden << QString::number(column);
  }
  settings.setValue("runs/hidden_columns", hidden);
  QVariantMap widths;
  for (auto width = manual_widths_.begin(); width != manual_widths_.end(); ++width) widths[width.key()] = *width;
  settings.setValue("runs/column_widths", widths);
  QMainWindow::closeEvent(event);  // running runs go on: their launchers are detached
}

void MainWindow::show_runs(const QList<qint64>& ids) {
  wanted_ = ids;
  selected_once_ = false;
  if (ids.isEmpty()) return;
  const qint64 oldest = *std::min_element(ids.begin(), ids.end());
  QMetaObject::invokeMethod(
      runs_reader_, [reader = runs_reader_, oldest] { reader->include(oldest); }, Qt::QueuedConnection);
  refresh();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if (watched == table_->viewport() && event->type() == QEvent::Resize) fit_columns();
  if (watched == table_->horizontalHeader()->viewport()) {
    // A left-button drag or double-click on a divider; a right-click opens the menu (which takes the release).
    const auto type = event->type();
    if (type == QEvent::MouseButtonPress || type == QEvent::MouseButtonDblClick || type == QEvent::MouseButtonRelease) {
      const auto* mouse = static_cast<QMouseEvent*>(event);
      user_resizing_ = type != QEvent::MouseButtonRelease && mouse->button() == Qt::LeftButton;
    } else if (type == QEvent::ContextMenu || type == QEvent::Hide) {
      user_resizing_ = false;
    }
  }
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::fit_columns() {
  // Measured without the last column's stretch (it is given what is left, not what it needs).
  const QScopedValueRollback fitting(fitting_, true);  // its resizes are not the user's
  auto* header = table_->horizontalHeader();
  header->setStretchLastSection(false);
  table_->resizeColumnsToContents();
  const QScopeGuard stretch([header] { header->setStretchLastSection(true); });
  // The widths the user set stay.
  for (int column = 0; column < table_->model()->columnCount(); ++column) {
    const auto manual = manual_widths_.find(table_->model()->headerData(column, Qt::Horizontal).toString());
    if (manual != manual_widths_.end()) table_->setColumnWidth(column, *manual);
  }
  // Long names give way first (elided in the middle; the tooltip and the overview have them whole), so the other
  // columns stay in view without a scrollbar.
  const int name = app::RunsModel::Name;
  int others = 0;
  for (int column = 0; column < table_->model()->columnCount(); ++column) {
    if (column != name && !table_->isColumnHidden(column)) others += table_->columnWidth(column);
  }
  const int room = table_->viewport()->width() - others;
  if (room < table_->columnWidth(name) &&
      !manual_widths_.contains(runs_->headerData(name, Qt::Horizontal).toString())) {
    table_->setColumnWidth(name, std::max(table_->fontMetrics().horizontalAdvance("run-00..."), room));
  }
}

void MainWindow::refresh() {
  // One read at a time: a slow read (a busy disk) is not queued behind itself every 250 ms.
  if (read_pending_) {
    read_again_ = true;
    return;
  }
  read_pending_ = true;
  QMetaObject::invokeMethod(runs_reader_, &app::RunsReaderWorker::read, Qt::QueuedConnection);
}

void MainWindow::apply_snapshot(const app::RunsSnapshot& snapshot) {
  read_pending_ = false;
  if (snapshot.error.isEmpty() && snapshot.read_only != read_only_) {
    // A history this user can only read (read-only storage, a colleague's): shown, not changed.
    read_only_ = snapshot.read_only;
    setWindowTitle(read_only_ ? tr("Spur Studio (read-only history)") : tr("Spur Studio"));
    if (read_only_) {
      statusBar()->showMessage(
          tr("The history %1 is read-only here: runs can be watched and compared, not renamed, tagged, deleted or "
             "imported into")
              .arg(path_));
    }
    for (auto* action : editing_) action->setEnabled(!read_only_);
  }
  const int before = runs_->rowCount();
  if (!runs_->apply(snapshot)) statusBar()->showMessage(runs_->error());
  std::vector<RunState> states;
  states.reserve(static_cast<std::size_t>(runs_->rowCount()));
  for (int row = 0; row < runs_->rowCount(); ++row) {
    const auto& run = runs_->run(row);
    states.push_back({run.id, QString::fromStdString(run.name), runs_->status(row), run.exit_code});
  }
  notifier_->update(states, isActiveWindow());
  if (runs_->rowCount() != before) fit_columns();
  // A selected run renamed (here or by `spur runs`): its legends follow.
  if (const auto names = selected_runs(); !names.isEmpty()) dashboard_->set_runs(names);
  settle_launches();
  // The newest run is shown at first, so there is something to watch straight away.
  // Runs asked for (--runs, an import's) are selected once a read has one of them; else the newest.
  const bool wanted_here =
      std::any_of(wanted_.begin(), wanted_.end(), [this](qint64 id) { return runs_->row_of(id) >= 0; });
  if (!selected_once_ && runs_->rowCount() > 0 && (wanted_.isEmpty() || wanted_here)) {
    selected_once_ = true;
    if (wanted_.isEmpty()) {
      select_run(runs_->run(runs_->rowCount() - 1).id);
    } else {
      QItemSelection selection;
      for (const qint64 id : wanted_) {
        const int row = runs_->row_of(id);
        if (row >= 0) {
          selection.select(shown_->mapFromSource(colours_->mapFromSource(runs_->index(row, 0))),
                           shown_->mapFromSource(colours_->mapFromSource(runs_->index(row, runs_->columnCount() - 1))));
        }
      }
      table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
    }
  }
  QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  console_->refresh();
  update_actions();
  // While the Compare tab shows a running run, its values follow (once a second: a compare read scans series).
  if (tabs_->currentWidget() == compare_ && QDateTime::currentMSecsSinceEpoch() - compare_asked_ms_ >= 1000) {
    bool running = false;
    for (const qint64 id : compared_) {
      const int row = runs_->row_of(id);
      running = running || (row >= 0 && runs_->status(row) == "running");
    }
    if (running) ask_compare();
  }
  emit refreshed();
  if (read_again_) {  // asked for while this read was under way (after a rename, say): read once more
    read_again_ = false;
    refresh();
  }
}

void MainWindow::select_run(qint64 run) {
  const int row = runs_->row_of(run);
  if (row < 0) return;
  const QModelIndex index = shown_->mapFromSource(colours_->mapFromSource(runs_->index(row, 0)));
  table_->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(index);
}

QMap<qint64, QString> MainWindow::selected_runs() const {
  QMap<qint64, QString> runs;
  // Rows with any cell selected (the table selects whole rows): selectedRows() wants every column, and a metric
  // column added since the selection was made is not (the Compare tab then saw no runs).
  for (const auto& index : table_->selectionModel()->selectedIndexes()) {
    const auto& run = runs_->run(shown_->mapToSource(index).row());
    runs.insert(run.id, QString::fromStdString(run.name));
  }
  return runs;
}

void MainWindow::selection_changed() {
  const auto shown = selected_runs();
  const QList<qint64> ids = shown.keys();  // ascending
  dashboard_->set_runs(shown);
  // The console follows the newest selected run.
  console_->set_run(ids.isEmpty() ? 0 : *std::max_element(ids.begin(), ids.end()));
  QMetaObject::invokeMethod(
      loader_, [loader = loader_, ids] { loader->set_runs(ids); }, Qt::QueuedConnection);
  QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  if (tabs_->currentWidget() == compare_) ask_compare();  // else when the tab is shown: a compare read scans series
  update_actions();
}

void MainWindow::ask_compare() {
  const QList<qint64> ids = selected_runs().keys();  // ascending
  compared_ = ids;
  compare_asked_ms_ = QDateTime::currentMSecsSinceEpoch();
  QMetaObject::invokeMethod(
      compare_reader_, [reader = compare_reader_, ids] { reader->read(ids); }, Qt::QueuedConnection);
}

void MainWindow::show_compare() { tabs_->setCurrentWidget(compare_); }

void MainWindow::filter_runs(const QString& text) {
  shown_->setFilterFixedString(text);
  if (search_->text() != text) search_->setText(text);
}

RunOverview* MainWindow::show_overview(qint64 run) {
  if (runs_->row_of(run) < 0) return nullptr;
  for (auto* open : findChildren<RunOverview*>()) {
    if (open->run() == run) {
      open->refresh();
      open->raise();
      open->activateWindow();
      return open;
    }
  }
  auto* overview = new RunOverview(run, path_, &reader_thread_, this);
  overview->setWindowFlag(Qt::Window);
  overview->show();
  return overview;
}

qint64 MainWindow::current_run() const {
  const auto index = table_->currentIndex();
  return index.isValid() ? runs_->run(shown_->mapToSource(index).row()).id : 0;
}

void MainWindow::report(const QString& error) {
  if (error.isEmpty()) return;
  last_error_ = error;
  statusBar()->showMessage(error, 15000);
  // Window-modal (open(), not exec()): the dashboard keeps updating behind it.
  auto* box = new QMessageBox(QMessageBox::Warning, tr("Spur Studio"), error, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::update_actions() {
  if (!stop_) return;
  const qint64 run = current_run();
  const int row = run ? runs_->row_of(run) : -1;
  const QString status = row >= 0 ? runs_->status(row) : QString();
  stop_->setEnabled(status == "running" || status == "queued");
  relaunch_->setEnabled(row >= 0 && !runs_->run(row).config.empty() && !runs_->run(row).command.empty());
}

void MainWindow::when_done(const QFuture<QString>& done, std::function<void(const QString& error)> then) {
  // A watcher, not a continuation: the caller may wait on the future itself (its result comes from the actions
  // thread), and several may watch it.
  auto* watcher = new QFutureWatcher<QString>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [watcher, then = std::move(then)] {
    then(watcher->result());
    watcher->deleteLater();
  });
  watcher->setFuture(done);
}

QFuture<QString> MainWindow::acted(QFuture<QString> done) {
  when_done(done, [this](const QString&) { refresh(); });  // the table and legends follow with the next read
  return done;
}

void MainWindow::report_when_done(const QFuture<QString>& done) {
  when_done(done, [this](const QString& error) { report(error); });
}

QFuture<QString> MainWindow::rename_run(qint64 run, const QString& name) { return acted(actions_->rename(run, name)); }

QFuture<QString> MainWindow::tag_run(qint64 run, const QString& tag) { return acted(actions_->tag(run, tag)); }

QFuture<QString> MainWindow::set_notes(qint64 run, const QString& notes) {
  return acted(actions_->set_notes(run, notes));
}

QFuture<QString> MainWindow::delete_run(qint64 run) { return acted(actions_->remove(run)); }

QFuture<QString> MainWindow::export_config(qint64 run, const QString& file) {
  return acted(actions_->export_config(run, file));
}

QFuture<QString> MainWindow::export_metrics(qint64 run, const QString& file) {
  return acted(actions_->export_metrics(run, file));
}

qint64 MainWindow::newest_run() const {
  qint64 newest = 0;
  for (const auto& run : runs_->records()) newest = std::max<qint64>(newest, run.id);
  return newest;
}

QString MainWindow::launch(const app::LaunchRequest& request) {
  if (QString error = pending_.launch(request, newest_run()); !error.isEmpty()) return error;
  statusBar()->showMessage(tr("Launched: %1").arg(request.command_line()), 10000);
  QSettings().setValue("launch/last_command", request.command_line());
  return {};
}

void MainWindow::settle_launches() {
  if (pending_.empty()) return;
  for (const auto& outcome : pending_.settle(runs_->records())) {
    if (outcome.run > 0) {
      select_run(outcome.run);
      emit launched(outcome.run);
    } else {
      report(tr("The launch did not start a run.\n\n%1")
                 .arg(outcome.output.isEmpty() ? tr("(no output)") : outcome.output));
    }
  }
}

QString MainWindow::stop_run(qint64 run) {
  const int row = runs_->row_of(run);
  if (row < 0) return tr("No run %1.").arg(run);
  return app::stop_run(runs_->run(row));
}

QSet<QString> MainWindow::run_names() const {
  QSet<QString> names;
  for (int row = 0; row < runs_->rowCount(); ++row) names.insert(QString::fromStdString(runs_->run(row).name));
  return names;
}

QFuture<QString> MainWindow::relaunch(qint64 run, const QString& name) {
  app::LaunchRequest request;
  if (QString error = relaunch_request(run, name, request); !error.isEmpty()) {
    return QtFuture::makeReadyFuture(error);
  }
  return start_relaunch(run, request);
}

QString MainWindow::relaunch_request(qint64 run, const QString& name, app::LaunchRequest& request) const {
  const int row = runs_->row_of(run);
  if (row < 0) return tr("No run %1.").arg(run);
  const auto& record = runs_->run(row);
  try {
    request = app::RunService::relaunch_request(
        record, relaunch_config_file(run),
        name.isEmpty() ? app::RunService::next_name(QString::fromStdString(record.name), run_names()) : name);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

QString MainWindow::relaunch_config_file(qint64 run) {
  return QDir(data_directory()).filePath(QString("configs/run-%1.yaml").arg(run));
}

QFuture<QString> MainWindow::start_relaunch(qint64 run, const app::LaunchRequest& request) {
  // Its configuration as it ran (file keys and flags), saved with the run (the original file may have changed),
  // its owner's only as every configuration Spur writes; saved on the actions thread, then launched here.
  auto promise = std::make_shared<QPromise<QString>>();
  promise->start();
  when_done(actions_->export_config(run, request.config_file), [this, promise, request](const QString& saved) {
    promise->addResult(saved.isEmpty() ? launch(request) : saved);
    promise->finish();
  });
  return promise->future();
}

void MainWindow::confirm_relaunch(qint64 run) {
  app::LaunchRequest request;  // built once: the dialog shows it, and it is what starts
  if (QString error = relaunch_request(run, QString(), request); !error.isEmpty()) {
    report(error);
    return;
  }
  const auto& record = runs_->run(runs_->row_of(run));
  const auto name_at = request.flags.indexOf("--run_name") + 1;  // 0: not named (relaunch_request always names it)
  QDialog dialog(this);
  dialog.setObjectName("relaunch_dialog");
  dialog.setWindowTitle(tr("Relaunch run %1").arg(run));
  auto* layout = new QVBoxLayout(&dialog);
  auto* what = new QLabel(tr("Launch run %1 (%2) again, with the configuration it ran with. Its tags and notes are "
                             "copied, and the new run records run %1 as the one it came from.")
                              .arg(run)
                              .arg(QString::fromStdString(record.name)),
                          &dialog);
  what->setWordWrap(true);
  what->setTextFormat(Qt::PlainText);  // a run's name is not markup
  layout->addWidget(what);
  auto* where = new QLabel(tr("Program, in %1:").arg(request.working_directory), &dialog);
  where->setTextFormat(Qt::PlainText);
  where->setWordWrap(true);
  layout->addWidget(where);
  auto* command = new QLineEdit(app::shell_quote(QStringList{request.program} + request.arguments), &dialog);
  command->setObjectName("relaunch_command");
  command->setReadOnly(true);
  command->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  command->setCursorPosition(0);
  layout->addWidget(command);
  layout->addWidget(new QLabel(tr("Name of the new run:"), &dialog));
  auto* name_edit = new QLineEdit(name_at > 0 ? request.flags.value(name_at) : QString(), &dialog);
  name_edit->setObjectName("relaunch_name");
  name_edit->selectAll();
  layout->addWidget(name_edit);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, &dialog);
  buttons->addButton(tr("Relaunch"), QDialogButtonBox::AcceptRole)->setDefault(true);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  layout->addWidget(buttons);
  dialog.resize(std::min(640, screen() ? screen()->availableSize().width() - 80 : 640), dialog.sizeHint().height());
  name_edit->setFocus();
  const bool ok = dialog.exec() == QDialog::Accepted;
  const QString name = name_edit->text();
  if (!ok) return;
  if (!name.trimmed().isEmpty()) {
    if (name_at > 0) {
      request.flags[name_at] = name.trimmed();
    } else {
      request.flags << "--run_name" << name.trimmed();
    }
  }
  report_when_done(start_relaunch(run, request));
}

SetupWizard* MainWindow::make_wizard(const QString& open_file) {
  QSettings settings;
  auto answers = app::SetupAnswers::defaults(app::DetectedHardware::detect());
  // What to run, as last launched (program, arguments, directory, hosts, environment).
  try {
    answers.take_launch(app::LaunchRequest::parse(settings.value("launch/last_command").toString()));
  } catch (const std::exception&) {
  }
  QString file = open_file.isEmpty() ? settings.value("launch/last_config").toString() : open_file;
  // The default file, when it exists, is read too: saving must not replace what it holds unseen.
  if (file.isEmpty() || !QFileInfo::exists(file)) file = QString::fromStdString(app::default_config_path());
  std::optional<app::RunConfig> base;
  if (!file.isEmpty() && QFileInfo::exists(file)) {
    try {
      base = app::RunConfig::load(file.toStdString());
      answers = app::SetupAnswers::from_config(*base, answers);
    } catch (const std::exception& e) {
      if (!open_file.isEmpty()) {
        report(QString::fromUtf8(e.what()));
        return nullptr;
      }
      // A last-used file that broke since: say so, and start from the questions' defaults.
      statusBar()->showMessage(QString::fromUtf8(e.what()), 15000);
    }
  }
  return new SetupWizard(answers, file, base, this);
}

void MainWindow::run_wizard(SetupWizard* wizard) {
  if (!wizard) return;
  wizard->setAttribute(Qt::WA_DeleteOnClose);
  connect(wizard, &QWizard::accepted, this, [this, wizard] {
    QSettings().setValue("launch/last_config", wizard->config_path());
    statusBar()->showMessage(tr("Saved %1").arg(wizard->config_path()), 10000);
    if (wizard->launch_now()) report(launch(wizard->launch_request()));
  });
  wizard->open();
}

void MainWindow::choose_metric_columns(const QPoint& at) {
  QMenu menu(this);
  // The runs' own columns (the name always shows), then each metric's final value.
  for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
    if (column == app::RunsModel::Name) continue;
    auto* action = menu.addAction(runs_->headerData(column, Qt::Horizontal).toString());
    action->setCheckable(true);
    action->setChecked(!table_->isColumnHidden(column));
    connect(action, &QAction::toggled, this, [this, column](bool on) {
      const QScopedValueRollback fitting(fitting_, true);
      table_->setColumnHidden(column, !on);
      if (on) fit_columns();
    });
  }
  menu.addSection(tr("Final values"));
  const QStringList shown = runs_->metric_columns();
  const QStringList keys = runs_->metric_keys();
  if (keys.isEmpty()) menu.addAction(tr("No metrics logged yet"))->setEnabled(false);
  for (const auto& key : keys) {
    auto* action = menu.addAction(key);
    action->setCheckable(true);
    action->setChecked(shown.contains(key));
    connect(action, &QAction::toggled, this, [this, key](bool on) {
      QStringList columns = runs_->metric_columns();
      if (on) columns << key;
      else columns.removeAll(key);
      runs_->set_metric_columns(columns);
      fit_columns();
    });
  }
  menu.addSeparator();
  auto* fit = menu.addAction(tr("Fit columns to their contents"));
  fit->setObjectName("fit_columns");
  fit->setEnabled(!manual_widths_.isEmpty());
  connect(fit, &QAction::triggered, this, [this] {
    manual_widths_.clear();
    fit_columns();
  });
  menu.exec(table_->horizontalHeader()->mapToGlobal(at));
}

void MainWindow::build_actions() {
  auto* style = QApplication::style();
  auto* toolbar = addToolBar(tr("Main"));
  toolbar->setObjectName("toolbar");
  toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  auto make = [this](QMenu* menu, const QString& text, const QKeySequence& keys, auto slot, bool on_table = false) {
    auto* action = new QAction(text, this);
    action->setShortcut(keys);
    connect(action, &QAction::triggered, this, slot);
    menu->addAction(action);
    if (on_table) table_->addAction(action);
    return action;
  };

  auto* file = menuBar()->addMenu(tr("&File"));
  auto* create = make(file, tr("&New run configuration..."), QKeySequence::New, [this] {
    auto* wizard = make_wizard();
    if (wizard) wizard->restart();
    run_wizard(wizard);
  });
  create->setIcon(style->standardIcon(QStyle::SP_FileIcon));
  auto* open = make(file, tr("&Open run configuration..."), QKeySequence::Open, [this] {
    const QString chosen = QFileDialog::getOpenFileName(this, tr("Open a run configuration (Spur's or Accelerate's)"),
                                                        QString::fromStdString(app::default_config_path()),
                                                        tr("Configurations (*.yaml *.yml *.json);;All files (*)"));
    if (!chosen.isEmpty()) run_wizard(make_wizard(chosen));
  });
  open->setIcon(style->standardIcon(QStyle::SP_DialogOpenButton));
  file->addSeparator();
  editing_ << make(file, tr("&Import TensorBoard runs..."), QKeySequence(Qt::CTRL | Qt::Key_I), [this] {
    const QString chosen = QFileDialog::getExistingDirectory(
        this, tr("Import TensorBoard runs: a log folder (every folder below it with event files is a run)"));
    if (!chosen.isEmpty()) report(import_tensorboard(chosen));
  });
  file->addSeparator();
  make(file, tr("&Quit"), QKeySequence::Quit, [this] { close(); });

  auto* run_menu = menuBar()->addMenu(tr("&Run"));
  auto* start = make(run_menu, tr("&Launch..."), QKeySequence(Qt::CTRL | Qt::Key_L), [this] {
    auto* wizard = make_wizard();
    if (!wizard) return;
    wizard->set_launch_now(true);
    run_wizard(wizard);
  });
  start->setIcon(run_icon(RunIcon::launch));
  stop_ = make(
      run_menu, tr("&Stop"), QKeySequence(Qt::CTRL | Qt::Key_Period),
      [this] {
        const qint64 run = current_run();
        if (run && QMessageBox::question(this, tr("Stop run"), tr("Stop run %1? Every rank is stopped.").arg(run)) ==
                       QMessageBox::Yes) {
          report(stop_run(run));
        }
      },
      true);
  stop_->setIcon(run_icon(RunIcon::stop));
  relaunch_ = make(
      run_menu, tr("&Relaunch"), QKeySequence(Qt::CTRL | Qt::Key_R),
      [this] {
        if (const qint64 run = current_run()) confirm_relaunch(run);
      },
      true);
  relaunch_->setIcon(run_icon(RunIcon::relaunch));
  relaunch_->setObjectName("relaunch");
  run_menu->addSeparator();
  editing_ << make(
      run_menu, tr("Re&name..."), QKeySequence(Qt::Key_F2),
      [this] {
        const qint64 run = current_run();
        if (!run) return;
        bool ok = false;
        const QString name = QInputDialog::getText(this, tr("Rename run"), tr("Name:"), QLineEdit::Normal,
                                                   QString::fromStdString(runs_->run(runs_->row_of(run)).name), &ok);
        if (ok) report_when_done(rename_run(run, name));
      },
      true);
  editing_ << make(
      run_menu, tr("&Tag..."), QKeySequence(Qt::CTRL | Qt::Key_T),
      [this] {
        const qint64 run = current_run();
        bool ok = false;
        const QString tag =
            run ? QInputDialog::getText(this, tr("Tag run"), tr("Tag:"), QLineEdit::Normal, {}, &ok) : QString();
        if (ok) report_when_done(tag_run(run, tag));
      },
      true);
  editing_ << make(
      run_menu, tr("N&otes..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
      [this] {
        const qint64 run = current_run();
        bool ok = false;
        const QString notes =
            run ? QInputDialog::getMultiLineText(this, tr("Run notes"), tr("Notes:"),
                                                 QString::fromStdString(runs_->run(runs_->row_of(run)).notes), &ok)
                : QString();
        if (ok) report_when_done(set_notes(run, notes));
      },
      true);
  make(
      run_menu, tr("&Export config..."), QKeySequence(Qt::CTRL | Qt::Key_E),
      [this] {
        const qint64 run = current_run();
        if (!run) return;
        const QString file = QFileDialog::getSaveFileName(this, tr("Export the run's configuration"),
                                                          QString("run-%1.yaml").arg(run), tr("YAML (*.yaml *.yml)"));
        if (!file.isEmpty()) report_when_done(export_config(run, file));
      },
      true);
  make(
      run_menu, tr("Export &metrics..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E),
      [this] {
        const qint64 run = current_run();
        if (!run) return;
        const QString file = QFileDialog::getSaveFileName(this, tr("Export the run's metrics"),
                                                          QString("run-%1-metrics.csv").arg(run), tr("CSV (*.csv)"));
        if (!file.isEmpty()) report_when_done(export_metrics(run, file));
      },
      true);
  run_menu->addSeparator();
  editing_ << make(
      run_menu, tr("&Delete"), QKeySequence(QKeySequence::Delete),
      [this] {
        const qint64 run = current_run();
        if (!run) return;
        if (QMessageBox::question(
                this, tr("Delete run"),
                tr("Delete run %1 and everything recorded for it? This cannot be undone.").arg(run)) ==
            QMessageBox::Yes) {
          report_when_done(delete_run(run));
        }
      },
      true);
  table_->setContextMenuPolicy(Qt::ActionsContextMenu);

  auto* view = menuBar()->addMenu(tr("&View"));
  make(view, tr("&Filter runs"), QKeySequence::Find, [this] {
    search_->setFocus();
    search_->selectAll();
  });
  make(view, tr("&Refresh"), QKeySequence::Refresh, [this] { refresh(); });
  make(view, tr("Metric &columns..."), QKeySequence(),
       [this] { choose_metric_columns(table_->horizontalHeader()->rect().center()); });
  auto* notify = view->addAction(tr("&Notify when runs end"));
  notify->setObjectName("notify_action");
  notify->setCheckable(true);
  notify->setToolTip(tr("A desktop notification when a run fails or finishes while this window is not focused"));
  notify->setChecked(QSettings().value("notifications/enabled", true).toBool());
  notifier_->set_enabled(notify->isChecked());
  connect(notify, &QAction::toggled, this, [this](bool on) {
    QSettings().setValue("notifications/enabled", on);
    notifier_->set_enabled(on);
  });
  auto* theme_menu = view->addMenu(tr("&Theme"));
  auto* themes = new QActionGroup(this);
  const Theme current = theme_from_name(QSettings().value("view/theme", "system").toString());
  for (const auto& [theme, label] : {std::pair{Theme::system, tr("Follow the &system")},
                                     std::pair{Theme::light, tr("&Light")}, std::pair{Theme::dark, tr("&Dark")}}) {
    auto* action = theme_menu->addAction(label);
    action->setCheckable(true);
    action->setChecked(theme == current);
    themes->addAction(action);
    connect(action, &QAction::triggered, this, [theme = theme] {
      QSettings().setValue("view/theme", theme_name(theme));
      apply_theme(theme);
    });
  }

  auto* help = menuBar()->addMenu(tr("&Help"));
  make(help, tr("&About Spur Studio"), QKeySequence::HelpContents, [this] {
    QMessageBox::about(this, tr("About Spur Studio"),
                       tr("<h3>Spur Studio %1</h3><p>Set up, launch and watch LibTorch training runs.</p>"
                          "<p>History: %2</p>")
                           .arg(SPUR_VERSION_STRING, path_.toHtmlEscaped()));
  });

  toolbar->addAction(create);
  toolbar->addAction(open);
  toolbar->addSeparator();
  toolbar->addAction(start);
  toolbar->addAction(stop_);
  toolbar->addAction(relaunch_);
}

}  // namespace spur::studio
