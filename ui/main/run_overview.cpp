// SPDX-License-Identifier: GPL-3.0-or-later
// A run's overview window; see run_overview.h.
#include "main/run_overview.h"

#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QUrl>
#include <QFontDatabase>
#include <QLabel>
#include <QTableView>
#include <QScrollBar>
#include <QHeaderView>
#include <QLineEdit>
#include <QPushButton>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>

#include "compare/compare_view.h"
#include "studio/handoff.h"
#include "studio/compare_model.h"
#include "studio/run_files_model.h"

namespace spur::studio {

RunOverview::RunOverview(qint64 run, const QString& history_path, QThread* reader_thread, QWidget* parent)
    : QDialog(parent),
      run_(run),
      view_(new CompareView(this)),
      command_(new QLineEdit(this)),
      reader_(new app::CompareReaderWorker(history_path)) {
  files_model_ = new app::RunFilesModel(this);
  files_ = new QTableView(this);
  files_->setObjectName("run_files");
  files_->setModel(files_model_);
  files_->setSelectionBehavior(QAbstractItemView::SelectRows);
  files_->setSelectionMode(QAbstractItemView::SingleSelection);
  files_->setWordWrap(false);
  files_->verticalHeader()->hide();
  files_->horizontalHeader()->setStretchLastSection(true);
  files_->setMaximumHeight(160);
  open_folder_ = new QPushButton(tr("&Open folder"), this);
  open_folder_->setObjectName("open_folder");
  open_folder_->setToolTip(tr("The selected file's folder, in the file manager"));
  resume_ = new QPushButton(tr("Relaunch from &checkpoint..."), this);
  resume_->setObjectName("relaunch_from_checkpoint");
  resume_->setToolTip(
      tr("Launch the run again with --resume_from_checkpoint and the selected checkpoint (asked "
         "first)"));
  connect(files_->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] { update_file_actions(); });
  connect(files_model_, &QAbstractItemModel::modelReset, this, [this] {
    files_->resizeColumnsToContents();
    if (files_model_->rowCount() > 0) files_->selectRow(0);  // the newest
    update_file_actions();
  });
  connect(open_folder_, &QPushButton::clicked, this,
          [this] { QDesktopServices::openUrl(QUrl::fromLocalFile(selected_folder())); });
  connect(resume_, &QPushButton::clicked, this, [this] {
    const auto rows = files_->selectionModel()->selectedRows();
    if (!rows.isEmpty()) emit relaunch_from(run_, rows.front().data(app::RunFilesModel::PathRole).toString());
  });
  connect(files_, &QAbstractItemView::doubleClicked, this, [this] {
    if (open_folder_->isEnabled()) open_folder_->click();
  });
  setObjectName("run_overview");
  setAttribute(Qt::WA_DeleteOnClose);
  setWindowTitle(tr("Run %1").arg(run));
  view_->set_single_run(true);
  command_->setObjectName("overview_command");
  command_->setReadOnly(true);
  command_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  auto* again = buttons->addButton(tr("&Refresh"), QDialogButtonBox::ActionRole);
  connect(again, &QPushButton::clicked, this, &RunOverview::refresh);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(view_, 1);
  auto* files_label = new QLabel(tr("Files (checkpoints, exported models, the configuration):"), this);
  layout->addWidget(files_label);
  layout->addWidget(files_);
  auto* file_actions = new QHBoxLayout;
  file_actions->addWidget(open_folder_);
  file_actions->addWidget(resume_);
  file_actions->addStretch(1);
  layout->addLayout(file_actions);
  layout->addWidget(new QLabel(tr("Command:"), this));
  layout->addWidget(command_);
  layout->addWidget(buttons);
  resize(640, 720);
  reader_->moveToThread(reader_thread);
  app::connect_handoff(reader_, &app::CompareReaderWorker::snapshot, this,
                       [this](const app::CompareSnapshot& snapshot) { show_read(snapshot); });
  refresh();
}

RunOverview::~RunOverview() { reader_->deleteLater(); }  // on the reader thread, after a read under way

void RunOverview::refresh() {
  QMetaObject::invokeMethod(
      reader_, [reader = reader_, run = run_] { reader->read({run}); }, Qt::QueuedConnection);
}

QString RunOverview::selected_folder() const {
  const auto rows = files_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return {};
  const QString path = rows.front().data(app::RunFilesModel::PathRole).toString();
  return rows.front().data(app::RunFilesModel::KindRole).toString() == "config" ? QFileInfo(path).absolutePath() : path;
}

void RunOverview::update_file_actions() {
  const auto rows = files_->selectionModel()->selectedRows();
  const bool present = !rows.isEmpty() && rows.front().data(app::RunFilesModel::PresentRole).toBool();
  open_folder_->setEnabled(present);
  resume_->setEnabled(present && rows.front().data(app::RunFilesModel::KindRole).toString() == "checkpoint");
}

void RunOverview::show_read(const app::CompareSnapshot& snapshot) {
  view_->set_snapshot(snapshot);
  files_model_->set_files(snapshot.runs.empty() ? std::vector<app::ComparedFile>() : snapshot.runs.front().files);
  files_->setTextElideMode(Qt::ElideMiddle);  // a long path keeps its folder's start and its name
  if (!snapshot.runs.empty()) {
    const auto& record = snapshot.runs.front().run;
    setWindowTitle(tr("Run %1: %2").arg(run_).arg(QString::fromStdString(record.name)));
    command_->setText(QString::fromStdString(record.command));
    command_->setCursorPosition(0);
    if (!sized_) {
      // As wide as its names and values (no empty band beside them), within reason; a width the user sets stays.
      sized_ = true;
      auto* table = view_->table();
      const int content = std::max(table->verticalHeader()->width() + table->horizontalHeader()->length() +
                                       2 * table->frameWidth() + table->verticalScrollBar()->sizeHint().width(),
                                   files_->horizontalHeader()->length() + 2 * files_->frameWidth());
      const auto margins = layout()->contentsMargins();
      resize(std::clamp(content + margins.left() + margins.right(), 480, 960), height());
    }
  }
  emit shown_read();
}

}  // namespace spur::studio
