// SPDX-License-Identifier: GPL-3.0-or-later
// The main window's menus and toolbar; see main_menus.h. The GUI thread only: the actions ask (dialogs) and hand
// the work to the window, whose changes run on its actions thread.
#include "main/main_menus.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QInputDialog>
#include <QKeySequence>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTimer>
#include <QTreeView>
#include <QToolBar>

#include <exception>
#include <optional>
#include <utility>

#include "config/run_config.h"
#include "launch/launch_request.h"
#include "runs/mlflow_import.h"
#include "main/main_window.h"
#include "main/open_history_dialog.h"
#include "main/run_notifier.h"
#include "main/runs_columns.h"
#include "main/theme.h"
#include "runs/remote_history.h"
#include "setup/setup_answers.h"
#include "studio/runs_model.h"
#include "wizard/setup_wizard.h"

namespace spur::studio {

MainMenus::MainMenus(MainWindow* window, QTreeView* table, QLineEdit* search, RunsColumns* columns,
                     QString history_path, std::function<qint64()> current_run)
    : QObject(window),
      window_(window),
      table_(table),
      search_(search),
      columns_(columns),
      path_(std::move(history_path)),
      remote_(app::HistoryAddress::is_address(path_)),
      current_run_(std::move(current_run)) {
  auto* toolbar = window_->addToolBar(tr("Main"));
  toolbar->setObjectName("toolbar");
  toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  build_file_menu();
  build_run_menu();
  table_->setContextMenuPolicy(Qt::ActionsContextMenu);
  build_view_menu();
  build_help_menu();
  toolbar->addAction(create_);
  toolbar->addAction(open_);
  toolbar->addSeparator();
  toolbar->addAction(launch_);
  toolbar->addAction(stop_);
  toolbar->addAction(relaunch_);
  if (remote_) {
    // A run starts on the machine whose history records it: there, with spur launch (or a Studio opened there). A
    // run of it is relaunched there from here (spur launch --on).
    const QString why = tr("This history is on another machine: launch there (spur launch --on), and watch it here");
    for (auto* action : {launch_, import_, import_mlflow_}) {
      action->setEnabled(false);
      action->setToolTip(why);
    }
  }
}

QAction* MainMenus::add(QMenu* menu, const QString& text, const QKeySequence& keys, std::function<void()> slot,
                        bool on_table) {
  auto* action = new QAction(text, window_);
  action->setShortcut(keys);
  connect(action, &QAction::triggered, this, std::move(slot));
  menu->addAction(action);
  if (on_table) table_->addAction(action);
  return action;
}

void MainMenus::report(const QString& error) {
  if (!error.isEmpty()) emit failed(error);
}

void MainMenus::build_file_menu() {
  auto* style = QApplication::style();
  auto* file = window_->menuBar()->addMenu(tr("&File"));
  create_ = add(file, tr("&New run configuration..."), QKeySequence::New, [this] {
    when_hardware_known([this] {
      auto* wizard = make_wizard();
      if (wizard) {
        wizard->restart();
        // A new configuration is saved beside the last one, not over it.
        wizard->set_config_path(app::unused_file_name(wizard->config_path()));
      }
      run_wizard(wizard);
    });
  });
  create_->setObjectName("new_config");
  create_->setIcon(style->standardIcon(QStyle::SP_FileIcon));
  open_ = add(file, tr("&Open run configuration..."), QKeySequence::Open, [this] {
    const QString chosen = QFileDialog::getOpenFileName(
        window_, tr("Open a run configuration (Spur's or Accelerate's)"),
        QString::fromStdString(app::default_config_path()), tr("Configurations (*.yaml *.yml *.json);;All files (*)"));
    if (!chosen.isEmpty()) when_hardware_known([this, chosen] { run_wizard(make_wizard(chosen)); });
  });
  open_->setIcon(style->standardIcon(QStyle::SP_DialogOpenButton));
  auto* open_history = add(file, tr("Open &history..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), [this] {
    QSettings settings;
    auto* dialog = new OpenHistoryDialog(recent_histories(settings), window_);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [dialog] {
      QSettings settings;
      remember_history(settings, dialog->location());
      // A window of its own: this one keeps watching its history (a local one and a cluster's side by side).
      auto* other = new MainWindow(dialog->location());
      other->setAttribute(Qt::WA_DeleteOnClose);
      other->show();
    });
    dialog->open();
  });
  open_history->setObjectName("open_history");
  file->addSeparator();
  editing_ << (import_ = add(file, tr("&Import TensorBoard runs..."), QKeySequence(Qt::CTRL | Qt::Key_I), [this] {
                 const QString chosen = QFileDialog::getExistingDirectory(
                     window_,
                     tr("Import TensorBoard runs: a log folder (every folder below it with event files is a run)"));
                 if (!chosen.isEmpty()) report(window_->import_runs(chosen));
               }));
  editing_ << (import_mlflow_ = add(file, tr("Import from &MLflow..."), QKeySequence(), [this] {
                 // The address asked for, as `spur runs import` takes it; the last one offered again.
                 QSettings settings;
                 bool ok = false;
                 const QString address =
                     QInputDialog::getText(window_, tr("Import from MLflow"),
                                           tr("A tracking server's runs: mlflow://HOST:PORT for every experiment, "
                                              "mlflow://HOST:PORT/EXPERIMENT for one (mlflow+https:// for https).\n"
                                              "Credentials come from MLFLOW_TRACKING_TOKEN, or "
                                              "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD."),
                                           QLineEdit::Normal,
                                           settings.value("import/mlflow", "mlflow://127.0.0.1:5000").toString(), &ok)
                         .trimmed();
                 if (!ok || address.isEmpty()) return;
                 if (!app::is_mlflow_address(address)) {
                   report(tr("%1: not an MLflow address (mlflow://HOST:PORT[/EXPERIMENT])").arg(address));
                   return;
                 }
                 settings.setValue("import/mlflow", address);
                 report(window_->import_runs(address));
               }));
  import_mlflow_->setObjectName("import_mlflow");
  file->addSeparator();
  add(file, tr("&Quit"), QKeySequence::Quit, [this] { window_->close(); });
}

void MainMenus::build_run_menu() {
  auto* runs = window_->runs();
  auto* run_menu = window_->menuBar()->addMenu(tr("&Run"));
  launch_ = add(run_menu, tr("&Launch..."), QKeySequence(Qt::CTRL | Qt::Key_L), [this] {
    when_hardware_known([this] {
      auto* wizard = make_wizard();
      if (!wizard) return;
      wizard->set_launch_now(true);
      run_wizard(wizard);
    });
  });
  launch_->setIcon(run_icon(RunIcon::launch));
  stop_ = add(
      run_menu, tr("&Stop"), QKeySequence(Qt::CTRL | Qt::Key_Period),
      [this] {
        const qint64 run = current_run_();
        if (run && QMessageBox::question(window_, tr("Stop run"), tr("Stop run %1? Every rank is stopped.").arg(run)) ==
                       QMessageBox::Yes) {
          report(window_->stop_run(run));
        }
      },
      true);
  stop_->setIcon(run_icon(RunIcon::stop));
  stop_->setEnabled(false);  // until a running run is selected (update())
  relaunch_ = add(
      run_menu, tr("&Relaunch"), QKeySequence(Qt::CTRL | Qt::Key_R),
      [this] {
        if (const qint64 run = current_run_()) emit relaunch_asked(run);
      },
      true);
  relaunch_->setIcon(run_icon(RunIcon::relaunch));
  relaunch_->setObjectName("relaunch");
  relaunch_->setEnabled(false);  // until a run that can be is selected (update())
  run_menu->addSeparator();
  editing_ << add(
      run_menu, tr("Re&name..."), QKeySequence(Qt::Key_F2),
      [this, runs] {
        const qint64 run = current_run_();
        if (!run) return;
        bool ok = false;
        const QString name = QInputDialog::getText(window_, tr("Rename run"), tr("Name:"), QLineEdit::Normal,
                                                   QString::fromStdString(runs->run(runs->row_of(run)).name), &ok);
        if (ok) emit acting(window_->rename_run(run, name));
      },
      true);
  editing_ << add(
      run_menu, tr("&Tag..."), QKeySequence(Qt::CTRL | Qt::Key_T),
      [this] {
        const qint64 run = current_run_();
        bool ok = false;
        const QString tag =
            run ? QInputDialog::getText(window_, tr("Tag run"), tr("Tag:"), QLineEdit::Normal, {}, &ok) : QString();
        if (ok) emit acting(window_->tag_run(run, tag));
      },
      true);
  editing_ << add(
      run_menu, tr("N&otes..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
      [this, runs] {
        const qint64 run = current_run_();
        bool ok = false;
        const QString notes =
            run ? QInputDialog::getMultiLineText(window_, tr("Run notes"), tr("Notes:"),
                                                 QString::fromStdString(runs->run(runs->row_of(run)).notes), &ok)
                : QString();
        if (ok) emit acting(window_->set_notes(run, notes));
      },
      true);
  add(
      run_menu, tr("&Export config..."), QKeySequence(Qt::CTRL | Qt::Key_E),
      [this] {
        const qint64 run = current_run_();
        if (!run) return;
        const QString file = QFileDialog::getSaveFileName(window_, tr("Export the run's configuration"),
                                                          QString("run-%1.yaml").arg(run), tr("YAML (*.yaml *.yml)"));
        if (!file.isEmpty()) emit acting(window_->export_config(run, file));
      },
      true);
  add(
      run_menu, tr("Export &metrics..."), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E),
      [this] {
        const qint64 run = current_run_();
        if (!run) return;
        const QString file = QFileDialog::getSaveFileName(window_, tr("Export the run's metrics"),
                                                          QString("run-%1-metrics.csv").arg(run), tr("CSV (*.csv)"));
        if (!file.isEmpty()) emit acting(window_->export_metrics(run, file));
      },
      true);
  run_menu->addSeparator();
  editing_ << add(
      run_menu, tr("&Delete"), QKeySequence(QKeySequence::Delete),
      [this] {
        const qint64 run = current_run_();
        if (!run) return;
        if (QMessageBox::question(
                window_, tr("Delete run"),
                tr("Delete run %1 and everything recorded for it? This cannot be undone.").arg(run)) ==
            QMessageBox::Yes) {
          emit acting(window_->delete_run(run));
        }
      },
      true);
}

void MainMenus::build_view_menu() {
  auto* view = window_->menuBar()->addMenu(tr("&View"));
  add(view, tr("&Filter runs"), QKeySequence::Find, [this] {
    search_->setFocus();
    search_->selectAll();
  });
  add(view, tr("&Refresh"), QKeySequence::Refresh, [this] { emit refresh_asked(); });
  add(view, tr("Metric &columns..."), QKeySequence(), [this] { columns_->choose(table_->header()->rect().center()); });
  auto* notify = view->addAction(tr("&Notify when runs end"));
  notify->setObjectName("notify_action");
  notify->setCheckable(true);
  notify->setToolTip(tr("A desktop notification when a run fails or finishes while this window is not focused"));
  notify->setChecked(QSettings().value("notifications/enabled", true).toBool());
  window_->notifier()->set_enabled(notify->isChecked());
  connect(notify, &QAction::toggled, this, [this](bool on) {
    QSettings().setValue("notifications/enabled", on);
    window_->notifier()->set_enabled(on);
  });
  auto* theme_menu = view->addMenu(tr("&Theme"));
  auto* themes = new QActionGroup(window_);
  const Theme current = saved_theme();
  for (const auto& [theme, label] : {std::pair{Theme::system, tr("Follow the &system")},
                                     std::pair{Theme::light, tr("&Light")}, std::pair{Theme::dark, tr("&Dark")}}) {
    auto* action = theme_menu->addAction(label);
    action->setCheckable(true);
    action->setChecked(theme == current);
    themes->addAction(action);
    connect(action, &QAction::triggered, this, [theme = theme] { choose_theme(theme); });
  }
}

void MainMenus::build_help_menu() {
  auto* help = window_->menuBar()->addMenu(tr("&Help"));
  add(help, tr("&About Spur Studio"), QKeySequence::HelpContents, [this] {
    QMessageBox::about(window_, tr("About Spur Studio"),
                       tr("<h3>Spur Studio %1</h3><p>Set up, launch and watch LibTorch training runs.</p>"
                          "<p>History: %2</p>")
                           .arg(SPUR_VERSION_STRING, path_.toHtmlEscaped()));
  });
}

void MainMenus::when_hardware_known(std::function<void()> then) {
  if (app::DetectedHardware::ready()) {
    then();
    return;
  }
  // The probe the Studio started at start-up is still running (nvidia-smi can take seconds): the GUI thread does
  // not wait for it; the wizard opens when it is done.
  // A second click while it runs replaces the first one's wish: one wizard opens, the last asked for.
  app::DetectedHardware::start();
  window_->statusBar()->showMessage(tr("Looking for this machine's GPUs..."));
  const bool waiting = static_cast<bool>(after_hardware_);
  after_hardware_ = std::move(then);
  if (waiting) return;
  auto* timer = new QTimer(this);
  connect(timer, &QTimer::timeout, this, [this, timer] {
    if (!app::DetectedHardware::ready()) return;
    timer->stop();
    timer->deleteLater();
    window_->statusBar()->clearMessage();
    const auto then = std::exchange(after_hardware_, nullptr);
    then();
  });
  timer->start(50);
}

SetupWizard* MainMenus::make_wizard(const QString& open_file) {
  QSettings settings;
  // The menus open it once the probe is done (when_hardware_known); a direct call waits for it.
  const auto found = app::DetectedHardware::ready();
  auto answers = app::SetupAnswers::defaults(found ? *found : app::DetectedHardware::detect());
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
      // Its target file (hosts, Slurm settings, environment...) when it has one; a file without one keeps the
      // target of the last launch.
      const auto target = app::LaunchTarget::load_for(file);
      answers = app::SetupAnswers::from_config(*base, answers, target ? &*target : nullptr);
    } catch (const std::exception& e) {
      if (!open_file.isEmpty()) {
        report(QString::fromUtf8(e.what()));
        return nullptr;
      }
      // A last-used file that broke since: say so, and start from the questions' defaults.
      window_->statusBar()->showMessage(QString::fromUtf8(e.what()), 15000);
    }
  }
  auto* wizard = new SetupWizard(answers, file, base, window_);
  wizard->set_history(path_);
  return wizard;
}

void MainMenus::run_wizard(SetupWizard* wizard) {
  if (!wizard) return;
  wizard->setAttribute(Qt::WA_DeleteOnClose);
  connect(wizard, &QWizard::accepted, this, [this, wizard] {
    QSettings().setValue("launch/last_config", wizard->config_path());
    window_->statusBar()->showMessage(tr("Saved %1").arg(wizard->config_path()), 10000);
    if (!wizard->launch_now()) return;
    report(wizard->sweep() ? window_->launch_sweep(wizard->sweep_launch()) : window_->launch(wizard->launch_request()));
  });
  wizard->open();
}

void MainMenus::update(qint64 run) {
  const auto* runs = window_->runs();
  const int row = run ? runs->row_of(run) : -1;
  const QString status = row >= 0 ? runs->status(row) : QString();
  stop_->setEnabled(status == "running" || status == "queued");
  relaunch_->setEnabled(row >= 0 && !runs->run(row).config.empty() && !runs->run(row).command.empty());
}

void MainMenus::set_editable(bool editable) {
  for (auto* action : editing_) {
    action->setEnabled(editable && !(remote_ && (action == import_ || action == import_mlflow_)));
  }
}

}  // namespace spur::studio
