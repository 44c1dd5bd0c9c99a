// SPDX-License-Identifier: GPL-3.0-or-later
// A run's overview window; see run_overview.h.
#include "main/run_overview.h"

#include <QDialogButtonBox>
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
#include "studio/compare_model.h"

namespace spur::studio {

RunOverview::RunOverview(qint64 run, const QString& history_path, QThread* reader_thread, QWidget* parent)
    : QDialog(parent),
      run_(run),
      view_(new CompareView(this)),
      command_(new QLineEdit(this)),
      reader_(new app::CompareReaderWorker(history_path)) {
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
  layout->addWidget(new QLabel(tr("Command:"), this));
  layout->addWidget(command_);
  layout->addWidget(buttons);
  resize(640, 720);
  reader_->moveToThread(reader_thread);
  connect(reader_, &app::CompareReaderWorker::snapshot, this,
          [this](const app::CompareSnapshot& snapshot) { show_read(snapshot); });
  refresh();
}

RunOverview::~RunOverview() { reader_->deleteLater(); }  // on the reader thread, after a read under way

void RunOverview::refresh() {
  QMetaObject::invokeMethod(
      reader_, [reader = reader_, run = run_] { reader->read({run}); }, Qt::QueuedConnection);
}

void RunOverview::show_read(const app::CompareSnapshot& snapshot) {
  view_->set_snapshot(snapshot);
  if (!snapshot.runs.empty()) {
    const auto& record = snapshot.runs.front().run;
    setWindowTitle(tr("Run %1: %2").arg(run_).arg(QString::fromStdString(record.name)));
    command_->setText(QString::fromStdString(record.command));
    command_->setCursorPosition(0);
    if (!sized_) {
      // As wide as its names and values (no empty band beside them), within reason; a width the user sets stays.
      sized_ = true;
      auto* table = view_->table();
      const int content = table->verticalHeader()->width() + table->horizontalHeader()->length() +
                          2 * table->frameWidth() + table->verticalScrollBar()->sizeHint().width();
      const auto margins = layout()->contentsMargins();
      resize(std::clamp(content + margins.left() + margins.right(), 480, 960), height());
    }
  }
  emit shown_read();
}

}  // namespace spur::studio
