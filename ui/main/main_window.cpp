// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's main window; see main_window.h. The GUI thread only paints: the runs table is read by a
// RunsReaderWorker and metric points by a SeriesLoader (both app/studio), on a thread of their own; changes to runs
// and exports are app::RunActions', on the actions thread; TensorBoard imports are an ImportWorker's, on a thread of
// their own; launching and stopping go through app/ (a detached `spur launch`, followed by app::PendingLaunches
// until its run shows); the plot summaries are built by HistorySummaries, on a thread of their own. The table's
// columns (RunsColumns), the menus and the set-up wizard (MainMenus) and the Relaunch question (RelaunchDialog) are
// in files of their own.
#include "main/main_window.h"

#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPromise>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QComboBox>
#include <QHBoxLayout>
#include <QTreeView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <memory>

#include "compare/compare_view.h"
#include "hparams/hparams_view.h"
#include "console/console_view.h"
#include "dashboard/dashboard.h"
#include "launch/detached_launch.h"
#include "main/history_summaries.h"
#include "main/import_worker.h"
#include "main/main_menus.h"
#include "main/open_history_dialog.h"
#include "studio/handoff.h"
#include "main/relaunch_dialog.h"
#include "main/run_notifier.h"
#include "main/run_overview.h"
#include "main/runs_colours.h"
#include "main/runs_columns.h"
#include "runs/remote_history.h"
#include "runs/run_status.h"
#include "studio/compare_model.h"
#include "studio/pending_launches.h"
#include "studio/run_files_model.h"
#include "studio/run_actions.h"
#include "studio/runs_groups.h"
#include "studio/runs_model.h"
#include "studio/series_loader.h"

namespace spur::studio {

namespace {

// The window's title: the history's name ("~/runs/history.db", "gpu1:/data/history.db"), then the application's.
QString history_title(const QString& path, bool read_only) {
  QString name = path;
  if (const auto address = app::HistoryAddress::parse(path)) {
    name = address->destination() + ":" + (address->path.isEmpty() ? QObject::tr("default history") : address->path);
  } else if (const QString home = QDir::homePath(); path.startsWith(home + "/")) {
    name = "~" + path.mid(home.size());
  }
  return read_only ? QObject::tr("%1 (read-only) - Spur Studio").arg(name) : QObject::tr("%1 - Spur Studio").arg(name);
}

}  // namespace

MainWindow::MainWindow(const QString& history_path, QWidget* parent)
    : QMainWindow(parent),
      // A history on another machine (ssh://...) is named as given; a file by its whole path.
      path_(app::HistoryAddress::is_address(history_path) ? history_path : QFileInfo(history_path).absoluteFilePath()),
      runs_(new app::RunsModel(path_, this)),
      notifier_(new RunNotifier(this)),
      colours_(new RunsColours(this)),
      groups_(new app::RunsGroupModel(runs_, this)),
      shown_(new QSortFilterProxyModel(this)),
      search_(new QLineEdit(this)),
      group_by_(new QComboBox(this)),
      table_(new QTreeView(this)),
      dashboard_(new Dashboard(this)),
      console_(new ConsoleView(path_, this)),
      compare_(new CompareView(this)),
      hparams_(new HParamsView(this)),
      timer_(new QTimer(this)),
      loader_(new app::SeriesLoader(path_)),
      runs_reader_(new app::RunsReaderWorker(path_)),
      compare_reader_(new app::CompareReaderWorker(path_)),
      actions_(new app::RunActions(path_, this)),
      pending_(path_, QDir(data_directory()).filePath("launches")) {
  setWindowTitle(history_title(path_, false));
  setObjectName("main_window");
  build_table();
  build_panes();
  resize(1280, 800);
  start_readers();
  start_summaries();
  start_imports();
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    selection_changed();
    update_actions();
  });
  connect(table_->selectionModel(), &QItemSelectionModel::currentChanged, this, [this] { update_actions(); });
  build_actions();
  restore_settings();
  connect(timer_, &QTimer::timeout, this, [this] { refresh(); });
  timer_->start(250);
  // Running rows' durations, etas and "last logged" move with the clock, committed or not.
  auto* clock = new QTimer(this);
  connect(clock, &QTimer::timeout, runs_, &app::RunsModel::tick);
  clock->start(1000);
  refresh();
}

void MainWindow::build_table() {
  colours_->setSourceModel(runs_);
  groups_->setSourceModel(colours_);
  shown_->setSourceModel(groups_);
  shown_->setSortRole(app::RunsModel::SortRole);
  shown_->setFilterKeyColumn(-1);  // any column
  shown_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  shown_->setRecursiveFilteringEnabled(true);  // a group shows while one of its runs does
  table_->setModel(shown_);
  table_->setObjectName("runs_table");
  table_->setRootIsDecorated(false);  // ungrouped: a table
  table_->setUniformRowHeights(true);
  table_->setItemsExpandable(true);
  table_->setAllColumnsShowFocus(true);
  // A group's row: its name across the row, bold; new groups open.
  const auto show_groups = [this] {
    for (int row = 0; row < shown_->rowCount(); ++row) {
      const QModelIndex at = shown_->index(row, 0);
      if (at.data(app::RunsGroupModel::GroupRole).toString().isEmpty()) continue;
      table_->setFirstColumnSpanned(row, {}, true);
    }
  };
  connect(shown_, &QAbstractItemModel::layoutChanged, this, show_groups);
  connect(shown_, &QAbstractItemModel::modelReset, this, [this, show_groups] {
    show_groups();
    table_->expandAll();
  });
  connect(shown_, &QAbstractItemModel::rowsInserted, this,
          [this, show_groups](const QModelIndex& parent, int first, int last) {
            if (parent.isValid()) return;
            show_groups();
            for (int row = first; row <= last; ++row) {
              const QModelIndex at = shown_->index(row, 0);
              if (!at.data(app::RunsGroupModel::GroupRole).toString().isEmpty()) table_->expand(at);
            }
          });
  group_by_->setObjectName("group_by");
  group_by_->setToolTip(tr("Group the runs: by sweep, project, status or a parameter's value"));
  group_by_->addItem(tr("No groups"), QString());
  group_by_->addItem(tr("Group: sweep"), "sweep");
  group_by_->addItem(tr("Group: project"), "project");
  group_by_->addItem(tr("Group: status"), "status");
  connect(group_by_, &QComboBox::activated, this,
          [this](int index) { group_runs(group_by_->itemData(index).toString()); });
  // Each parameter a run recorded is offered too, as runs come.
  connect(runs_, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex&, int first, int last) {
    for (const auto& key : groups_->group_keys(first, last)) {
      if (key.startsWith("param:") && group_by_->findData(key) < 0) {
        group_by_->addItem(tr("Group: %1").arg(key.mid(6)), key);
      }
    }
  });
  table_->setSortingEnabled(true);
  table_->sortByColumn(app::RunsModel::Id, Qt::DescendingOrder);  // newest first; older pages below
  search_->setObjectName("run_search");
  search_->setPlaceholderText(tr("Filter runs (name, project, status, tags)  Ctrl+F"));
  search_->setClearButtonEnabled(true);
  connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) { filter_runs(text); });
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  // One line per run, numbers whole ("0.4123" wrapped mid-number in a narrow pane); the name may be elided in the
  // middle (its tooltip and the overview have it whole).
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideMiddle);
  // Which columns show and how wide: the header's menu, fitted to the pane, the widths the user set kept.
  columns_ = new RunsColumns(table_, runs_);
  connect(table_, &QAbstractItemView::doubleClicked, this, [this](const QModelIndex& index) {
    if (const int row = runs_row(index); row >= 0) show_overview(runs_->run(row).id);
  });
}

void MainWindow::build_panes() {
  auto* splitter = splitter_ = new QSplitter(this);
  splitter->setObjectName("splitter");
  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  auto* search_row = new QHBoxLayout;
  search_row->addWidget(search_, 1);
  search_row->addWidget(group_by_);
  left_layout->addLayout(search_row);
  left_layout->addWidget(table_);
  splitter->addWidget(left);
  auto* tabs = tabs_ = new QTabWidget(this);
  tabs->setObjectName("tabs");
  tabs->addTab(dashboard_, tr("&Metrics"));
  tabs->addTab(console_, tr("&Console"));
  tabs->addTab(compare_, tr("Com&pare"));
  tabs->addTab(hparams_, tr("&Hyperparameters"));
  connect(compare_->model(), &QAbstractItemModel::headerDataChanged, this, [this] { follow_baseline(); });
  connect(compare_->model(), &QAbstractItemModel::modelReset, this, [this] { follow_baseline(); });
  connect(tabs, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == compare_ || tabs_->currentWidget() == hparams_) ask_compare();
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
}

void MainWindow::follow_baseline() {
  auto* model = compare_->model();
  auto direction = [model](const QString& key) { return model->direction(key); };
  runs_->set_baseline(model->baseline(), direction);
  dashboard_->set_baseline(model->baseline(), direction);
  columns_->fit();  // the metric columns' texts grew or shrank by their deltas
}

void MainWindow::start_readers() {
  loader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, loader_, &QObject::deleteLater);
  runs_reader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, runs_reader_, &QObject::deleteLater);
  // The readers' results come to this thread through connect_handoff (studio/handoff.h says why).
  app::connect_handoff(runs_reader_, &app::RunsReaderWorker::snapshot, this,
                       [this](const app::RunsSnapshot& snapshot) { apply_snapshot(snapshot); });
  // A remote history's connection dropping and coming back (its reads resume from where they were).
  connect(runs_reader_, &app::RunsReaderWorker::notice, this,
          [this](const QString& text) { statusBar()->showMessage(text, 20000); });
  // Scrolling to the end of the table fetches the next page of older runs (10,000 runs open as fast as 500).
  connect(runs_, &app::RunsModel::more_wanted, this, [this] {
    QMetaObject::invokeMethod(runs_reader_, &app::RunsReaderWorker::fetch_more, Qt::QueuedConnection);
  });
  compare_reader_->moveToThread(&reader_thread_);
  connect(&reader_thread_, &QThread::finished, compare_reader_, &QObject::deleteLater);
  app::connect_handoff(compare_reader_, &app::CompareReaderWorker::snapshot, this,
                       [this](const app::CompareSnapshot& snapshot) {
                         // An answer for a selection since changed is dropped: the newer read is on its way.
                         QList<qint64> ids;
                         for (const auto& run : snapshot.runs) ids << run.run.id;
                         if (snapshot.error.isEmpty() && ids != compared_) return;
                         compare_->set_snapshot(snapshot);
                         hparams_->set_snapshot(snapshot);
                       });
  app::connect_handoff(loader_, &app::SeriesLoader::loaded, dashboard_,
                       [dashboard = dashboard_](const QVector<app::SeriesDelta>& deltas) { dashboard->apply(deltas); });
  // A zoom reads the plot's lines again for the range shown, finer (the GUI thread never reads the history).
  connect(dashboard_, &Dashboard::exported, this,
          [this](const QString& file) { statusBar()->showMessage(tr("Exported %1").arg(file), 10000); });
  connect(dashboard_, &Dashboard::view_changed, this, [this](const QString& key, const app::SeriesView& view) {
    QMetaObject::invokeMethod(
        loader_, [loader = loader_, key, view] { loader->set_view(key, view); }, Qt::QueuedConnection);
    QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  });
  connect(loader_, &app::SeriesLoader::failed, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  reader_thread_.start();
}

void MainWindow::start_summaries() {
  // A history from an older Spur gains its summaries once, in the background, and any series a read could not
  // trust is rebuilt; the status bar shows how far it is.
  summaries_ = new HistorySummaries(path_, this);
  connect(summaries_, &HistorySummaries::message, this,
          [this](const QString& text, int timeout_ms) { statusBar()->showMessage(text, timeout_ms); });
  summaries_->rebuild_untrusted(loader_);
  summaries_->start();
}

void MainWindow::start_imports() {
  importer_ = new ImportWorker(path_, this);
  connect(importer_, &ImportWorker::progress, this, [this](const QString& line) { statusBar()->showMessage(line); });
  connect(importer_, &ImportWorker::finished, this, &MainWindow::import_done);
}

void MainWindow::build_actions() {
  menus_ = new MainMenus(this, table_, search_, columns_, path_, [this] { return current_run(); });
  connect(menus_, &MainMenus::failed, this, &MainWindow::report);
  connect(menus_, &MainMenus::acting, this, &MainWindow::report_when_done);
  connect(menus_, &MainMenus::relaunch_asked, this, [this](qint64 run) { confirm_relaunch(run); });
  connect(menus_, &MainMenus::refresh_asked, this, &MainWindow::refresh);
}

MainWindow::~MainWindow() {
  // Overviews hand their readers back to the reader thread: before it stops.
  for (auto* overview : findChildren<RunOverview*>()) delete overview;
  summaries_->stop();  // after the series it is on: every series is written whole or not at all
  reader_thread_.quit();
  reader_thread_.wait();
  // A run is written whole or not at all: the import stops before its next run folder, after the one under way.
  importer_->stop();
}

QString MainWindow::import_runs(const QString& source, bool again) {
  return import_folders(QStringList{source}, again);
}

bool MainWindow::importing() const { return importer_->running(); }

QString MainWindow::import_folders(const QStringList& paths, bool again, const QStringList& only) {
  if (importer_->running()) return tr("An import is already running.");
  statusBar()->showMessage(tr("Importing runs from %1...").arg(paths.join(", ")));
  importer_->start(paths, again, only);
  return {};
}

void MainWindow::import_done(const ImportOutcome& outcome) {
  if (!outcome.runs.isEmpty()) show_runs(outcome.runs);  // selected once the next read has them
  refresh();
  const QString summary = tr("Imported %n run(s).", nullptr, static_cast<int>(outcome.runs.size()));
  if (outcome.failed) {
    report(summary + "\n\n" + outcome.lines.join('\n'));
  } else {
    statusBar()->showMessage(summary + " " + outcome.lines.join("; "), 15000);
  }
  // Asked, the folders skipped are imported from the same paths, so they keep their names and project.
  if (!outcome.skipped.isEmpty()) {
    ask_import_again(this, outcome.skipped, [this, paths = outcome.paths, folders = outcome.skipped] {
      report(import_folders(paths, true, folders));
    });
  }
  emit imported(outcome.lines, outcome.runs, outcome.failed);
}

QString MainWindow::data_directory() { return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation); }

void MainWindow::restore_settings() {
  QSettings settings;
  if (settings.contains("window/geometry")) restoreGeometry(settings.value("window/geometry").toByteArray());
  if (settings.contains("window/splitter")) splitter_->restoreState(settings.value("window/splitter").toByteArray());
  dashboard_->restore_settings(settings);
  columns_->restore(settings);
  try {
    group_runs(settings.value("runs/group_by").toString());
  } catch (const std::invalid_argument&) {
    group_runs({});  // a setting written by hand
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/splitter", splitter_->saveState());
  dashboard_->save_settings(settings);
  columns_->save(settings);
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
    setWindowTitle(history_title(path_, read_only_));
    if (read_only_) {
      statusBar()->showMessage(
          tr("The history %1 is read-only here: runs can be watched and compared, not renamed, tagged, deleted or "
             "imported into")
              .arg(path_));
    }
    if (menus_) menus_->set_editable(!read_only_);
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
  // A run that started or ended: its Progress grew or became short again ("938/938 100%", without its eta), and a
  // name that gave way for it gets the room back.
  const int running = static_cast<int>(
      std::count_if(states.begin(), states.end(), [](const RunState& state) { return state.status == "running"; }));
  if (runs_->rowCount() != before || running != running_) columns_->fit();
  running_ = running;
  // A selected run renamed (here or by `spur runs`): its legends follow.
  if (const auto names = selected_runs(); !names.isEmpty()) {
    dashboard_->set_runs(names);
    // A run that was queued has started since; one that ran may have failed.
    dashboard_->set_run_starts(run_starts(names.keys()));
    dashboard_->set_run_statuses(run_statuses(names.keys()));
  }
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
          const QModelIndex first = view_index(row);
          selection.select(first, first.siblingAtColumn(shown_->columnCount() - 1));
        }
      }
      table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
    }
  }
  QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  console_->refresh();
  update_actions();
  // While the Compare tab shows a running run, its values follow (once a second: a compare read scans series).
  if ((tabs_->currentWidget() == compare_ || tabs_->currentWidget() == hparams_) &&
      QDateTime::currentMSecsSinceEpoch() - compare_asked_ms_ >= 1000) {
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

QModelIndex MainWindow::view_index(int runs_row) const {
  return shown_->mapFromSource(groups_->mapFromSource(colours_->mapFromSource(runs_->index(runs_row, 0))));
}

int MainWindow::runs_row(const QModelIndex& view_index) const {
  if (!view_index.isValid()) return -1;
  const QModelIndex at = colours_->mapToSource(groups_->mapToSource(shown_->mapToSource(view_index)));
  return at.isValid() ? at.row() : -1;
}

void MainWindow::group_runs(const QString& key) {
  const auto selected = selected_runs().keys();
  groups_->set_group_by(key);
  table_->setRootIsDecorated(!key.isEmpty());
  if (group_by_->findData(key) < 0) group_by_->addItem(tr("Group: %1").arg(key.mid(6)), key);
  group_by_->setCurrentIndex(group_by_->findData(key));
  QSettings().setValue("runs/group_by", key);
  // The rows were made again: the runs selected before are selected again.
  QItemSelection selection;
  for (const qint64 id : selected) {
    if (const int row = runs_->row_of(id); row >= 0) {
      const QModelIndex first = view_index(row);
      selection.select(first, first.siblingAtColumn(shown_->columnCount() - 1));
    }
  }
  table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

void MainWindow::select_run(qint64 run) {
  const int row = runs_->row_of(run);
  if (row < 0) return;
  const QModelIndex index = view_index(row);
  table_->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(index);
}

QMap<qint64, double> MainWindow::run_starts(const QList<qint64>& ids) const {
  QMap<qint64, double> starts;
  for (const qint64 id : ids) {
    if (const int row = runs_->row_of(id); row >= 0) {
      const auto& run = runs_->run(row);
      starts.insert(id, run.started > 0 ? run.started : run.created);
    }
  }
  return starts;
}

QMap<qint64, QString> MainWindow::run_statuses(const QList<qint64>& ids) const {
  QMap<qint64, QString> statuses;
  for (const qint64 id : ids) {
    if (const int row = runs_->row_of(id); row >= 0) statuses.insert(id, runs_->status(row));
  }
  return statuses;
}

QMap<qint64, QString> MainWindow::selected_runs() const {
  QMap<qint64, QString> runs;
  // Rows with any cell selected (the table selects whole rows): selectedRows() wants every column, and a metric
  // column added since the selection was made is not (the Compare tab then saw no runs).
  // A group's row stands for its runs (those the search shows).
  for (const auto& index : table_->selectionModel()->selectedIndexes()) {
    if (const int row = runs_row(index); row >= 0) {
      const auto& run = runs_->run(row);
      runs.insert(run.id, QString::fromStdString(run.name));
    } else if (index.column() == 0) {
      for (int child = 0; child < shown_->rowCount(index); ++child) {
        if (const int row = runs_row(shown_->index(child, 0, index)); row >= 0) {
          const auto& run = runs_->run(row);
          runs.insert(run.id, QString::fromStdString(run.name));
        }
      }
    }
  }
  return runs;
}

void MainWindow::selection_changed() {
  const auto shown = selected_runs();
  const QList<qint64> ids = shown.keys();  // ascending
  dashboard_->set_runs(shown);
  dashboard_->set_run_starts(run_starts(ids));
  dashboard_->set_run_statuses(run_statuses(ids));
  // The console follows the newest selected run.
  console_->set_run(ids.isEmpty() ? 0 : *std::max_element(ids.begin(), ids.end()));
  QMetaObject::invokeMethod(
      loader_, [loader = loader_, ids] { loader->set_runs(ids); }, Qt::QueuedConnection);
  QMetaObject::invokeMethod(loader_, &app::SeriesLoader::poll, Qt::QueuedConnection);
  if (tabs_->currentWidget() == compare_ || tabs_->currentWidget() == hparams_)
    ask_compare();  // else when the tab is shown: a compare read scans series
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

void MainWindow::show_hparams() { tabs_->setCurrentWidget(hparams_); }

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
  connect(overview, &RunOverview::relaunch_from, this,
          [this](qint64 from, const QString& checkpoint) { confirm_relaunch(from, checkpoint); });
  overview->show();
  return overview;
}

qint64 MainWindow::current_run() const {
  // The run under the cursor; else the first selected (runs selected by --runs or show_runs have no cursor yet).
  auto index = table_->currentIndex();
  if (!index.isValid() && table_->selectionModel()->hasSelection())
    index = table_->selectionModel()->selectedRows().value(0);
  const int row = runs_row(index);
  return row >= 0 ? runs_->run(row).id : 0;
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
  if (menus_) menus_->update(current_run());
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
  statusBar()->showMessage(tr("Launched: %1").arg(request.command_line(app::spur_command())), 10000);
  QSettings().setValue("launch/last_command", request.command_line());
  return {};
}

QString MainWindow::launch_sweep(const app::SweepLaunch& sweep) {
  if (QString error = pending_.launch_sweep(sweep, newest_run()); !error.isEmpty()) return error;
  // A secret's --env value is not put on screen.
  statusBar()->showMessage(tr("Sweep %1 started: %2").arg(sweep.name, sweep.shown().command_line(app::spur_command())),
                           15000);
  return {};
}

void MainWindow::settle_launches() {
  if (pending_.empty()) return;
  for (const auto& outcome : pending_.settle(runs_->records())) {
    if (!outcome.there.isEmpty()) {
      // Its configuration launches it from another machine (a login node): the run is in that machine's history,
      // watched in a window of its own, as File > Open history would open it.
      QSettings settings;
      remember_history(settings, outcome.there);
      auto* other = new MainWindow(outcome.there);
      other->setAttribute(Qt::WA_DeleteOnClose);
      other->show_runs({outcome.run});
      other->show();
      statusBar()->showMessage(
          tr("Run %1 started from another machine: watched in the window of %2").arg(outcome.run).arg(outcome.there),
          15000);
      continue;
    }
    if (outcome.run > 0 && !outcome.sweep.isEmpty()) {
      // The sweep's runs, as they come: its tag in the search box.
      search_->setText("sweep:" + outcome.sweep);
      select_run(outcome.run);
      statusBar()->showMessage(
          tr("Sweep %1: its runs are tagged sweep:%1 (spur sweep show %1 lists them)").arg(outcome.sweep), 15000);
      emit launched(outcome.run);
    } else if (outcome.run > 0) {
      select_run(outcome.run);
      emit launched(outcome.run);
    } else {
      report(
          (outcome.is_sweep ? tr("The sweep did not start a run.\n\n%1") : tr("The launch did not start a run.\n\n%1"))
              .arg(outcome.output.isEmpty() ? tr("(no output)") : outcome.output));
    }
  }
}

QString MainWindow::stop_run(qint64 run) {
  const int row = runs_->row_of(run);
  if (row < 0) return tr("No run %1.").arg(run);
  if (app::HistoryAddress::is_address(path_)) {
    // Its launcher is on that machine: the serve there signals it (the answer comes later, as the actions' do).
    report_when_done(acted(actions_->stop(run)));
    return {};
  }
  return app::stop_run(runs_->run(row));
}

QFuture<QString> MainWindow::relaunch(qint64 run, const QString& name) {
  app::LaunchRequest request;
  if (QString error = relaunch_request(*runs_, run, name, relaunch_config_file(run), request); !error.isEmpty()) {
    return QtFuture::makeReadyFuture(error);
  }
  return start_relaunch(run, request);
}

QString MainWindow::relaunch_config_file(qint64 run) {
  return QDir(data_directory()).filePath(QString("configs/run-%1.yaml").arg(run));
}

QFuture<QString> MainWindow::start_relaunch(qint64 run, const app::LaunchRequest& request) {
  // Its configuration as it ran (file keys and flags), saved with the run (the original file may have changed),
  // its owner's only as every configuration Spur writes; saved on the actions thread, then launched here.
  auto promise = std::make_shared<QPromise<QString>>();
  promise->start();
  // A run in a history on another machine is launched there again: through `spur launch --on` from here.
  app::LaunchRequest started = request;
  if (const auto address = app::HistoryAddress::parse(path_)) {
    started = app::launched_from_here(request, *address, app::RemoteOptions::from_environment(false));
  }
  when_done(actions_->export_config(run, request.config_file), [this, promise, started](const QString& saved) {
    promise->addResult(saved.isEmpty() ? launch(started) : saved);
    promise->finish();
  });
  return promise->future();
}

void MainWindow::confirm_relaunch(qint64 run, const QString& checkpoint) {
  app::LaunchRequest request;  // built once: the dialog shows it, and it is what starts
  if (QString error = relaunch_request(*runs_, run, QString(), relaunch_config_file(run), request); !error.isEmpty()) {
    report(error);
    return;
  }
  if (!checkpoint.isEmpty()) request.arguments = app::resume_arguments(request.arguments, checkpoint);
  RelaunchDialog dialog(run, QString::fromStdString(runs_->run(runs_->row_of(run)).name), request, this);
  if (dialog.exec() != QDialog::Accepted) return;
  report_when_done(start_relaunch(run, dialog.request()));
}

SetupWizard* MainWindow::make_wizard(const QString& open_file) { return menus_->make_wizard(open_file); }

}  // namespace spur::studio
