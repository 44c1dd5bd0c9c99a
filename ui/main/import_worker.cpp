// SPDX-License-Identifier: GPL-3.0-or-later
// TensorBoard and MLflow imports for the Studio; see import_worker.h. The import runs on the worker's own thread and
// touches no widget: each line and the outcome reach the GUI thread as queued calls on the worker.
#include "main/import_worker.h"

#include <QAbstractButton>
#include <QMessageBox>
#include <QPushButton>
#include <QWidget>

#include <exception>
#include <utility>

#include "runs/run_service.h"
#include "runs/mlflow_import.h"
#include "runs/tensorboard_import.h"

namespace spur::studio {

ImportWorker::ImportWorker(const QString& history_path, QObject* parent)
    : QObject(parent), history_(history_path.toStdString()) {}

ImportWorker::~ImportWorker() { stop(); }

bool ImportWorker::start(const QStringList& paths, bool again, const QStringList& only) {
  if (thread_) return false;
  cancelled_ = false;
  // The thread reports through hand_over() (under a std::mutex: studio/handoff.h says why) and a queued call of
  // deliver() on this object, which waits for the thread before it goes.
  thread_.reset(QThread::create([this, paths, again, only, history = history_] {
    ImportOutcome outcome;
    outcome.paths = paths;
    try {
      app::RunService service(history);
      app::TensorBoardImportOptions options;
      options.again = again;
      options.only = only;
      options.cancelled = [this] { return cancelled_.load(); };
      const auto report = [&](const app::ImportedRun& run) {
        const QString line = app::import_summary(run, QString());
        outcome.lines << line;
        if (run.run) outcome.runs << run.run;
        if (run.run == 0 && run.earlier > 0 && run.error.isEmpty()) outcome.skipped << run.directory;
        if (!run.error.isEmpty()) outcome.failed = true;
        hand_over(line, std::nullopt);
      };
      for (const auto& path : paths) {
        if (app::is_mlflow_address(path)) {
          app::MlflowImportOptions mlflow;
          mlflow.again = again;
          for (const auto& run : only) {
            if (run.startsWith(path)) mlflow.run_ids << app::mlflow_run_id(run);
          }
          if (!only.isEmpty() && mlflow.run_ids.isEmpty()) continue;
          mlflow.cancelled = options.cancelled;
          const auto runs = service.import_mlflow(path, mlflow, report);
          if (runs.empty()) outcome.lines << tr("%1: no active runs").arg(path);
        } else {
          service.import_tensorboard(path, options, report);
        }
      }
    } catch (const std::exception& e) {
      outcome.lines << QString::fromUtf8(e.what());
      outcome.failed = true;
    }
    hand_over({}, std::move(outcome));
  }));
  thread_->start();
  return true;
}

void ImportWorker::hand_over(const QString& line, std::optional<ImportOutcome> outcome) {
  const std::lock_guard lock(handed_mutex_);
  if (!line.isNull()) handed_lines_ << line;
  if (outcome) handed_outcome_ = std::move(outcome);
  QMetaObject::invokeMethod(this, "deliver", Qt::QueuedConnection);
}

void ImportWorker::deliver() {
  QStringList lines;
  std::optional<ImportOutcome> outcome;
  {
    const std::lock_guard lock(handed_mutex_);
    lines.swap(handed_lines_);
    outcome.swap(handed_outcome_);
  }
  for (const auto& line : lines) emit progress(line);
  if (outcome && thread_) {
    thread_->wait();
    thread_.reset();
    emit finished(*outcome);
  }
}

void ImportWorker::stop() {
  cancelled_ = true;
  if (thread_) thread_->wait();
}

void ask_import_again(QWidget* parent, const QStringList& folders, std::function<void()> again) {
  // Window-modal (open(), not exec()): the dashboard keeps updating behind it. Nothing is imported twice unless
  // asked here; asked, the folders are imported from the same paths, so they keep their names and project.
  auto* box = new QMessageBox(
      QMessageBox::Question, ImportWorker::tr("Import runs"),
      ImportWorker::tr("%n run(s) were imported before (or changed since: a run still being written?), and "
                       "were left as they are. Import them again, as new runs?",
                       nullptr, static_cast<int>(folders.size())),
      QMessageBox::NoButton, parent);
  box->setObjectName("import_again");
  box->setDetailedText(folders.join('\n'));
  auto* again_button = box->addButton(ImportWorker::tr("Import again"), QMessageBox::AcceptRole);
  again_button->setObjectName("import_again_button");
  box->addButton(ImportWorker::tr("Leave them"), QMessageBox::RejectRole);
  box->setAttribute(Qt::WA_DeleteOnClose);
  QObject::connect(box, &QMessageBox::buttonClicked, box,
                   [again_button, again = std::move(again)](QAbstractButton* clicked) {
                     if (clicked == again_button) again();
                   });
  box->open();
}

}  // namespace spur::studio
