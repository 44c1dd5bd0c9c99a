// SPDX-License-Identifier: GPL-3.0-or-later
// The Relaunch action's question and request; see relaunch_dialog.h. The GUI thread only.
#include "main/relaunch_dialog.h"

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScreen>
#include <QSet>
#include <QStringList>
#include <QVBoxLayout>

#include <algorithm>
#include <exception>
#include <utility>

#include "runs/run_service.h"
#include "studio/runs_model.h"

namespace spur::studio {

QString relaunch_request(const app::RunsModel& runs, qint64 run, const QString& name, const QString& config_file,
                         app::LaunchRequest& request) {
  const int row = runs.row_of(run);
  if (row < 0) return RelaunchDialog::tr("No run %1.").arg(run);
  const auto& record = runs.run(row);
  try {
    QString new_name = name;
    if (new_name.isEmpty()) {
      QSet<QString> taken;  // a relaunch's " (N)" skips the names of the runs in the table
      for (int other = 0; other < runs.rowCount(); ++other) taken.insert(QString::fromStdString(runs.run(other).name));
      new_name = app::RunService::next_name(QString::fromStdString(record.name), taken);
    }
    request = app::RunService::relaunch_request(record, config_file, new_name);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  return {};
}

RelaunchDialog::RelaunchDialog(qint64 run, const QString& run_name, app::LaunchRequest request, QWidget* parent)
    : QDialog(parent),
      request_(std::move(request)),
      name_at_(request_.flags.indexOf("--run_name") + 1) {  // 0: not named (relaunch_request always names it)
  setObjectName("relaunch_dialog");
  setWindowTitle(tr("Relaunch run %1").arg(run));
  auto* layout = new QVBoxLayout(this);
  auto* what = new QLabel(tr("Launch run %1 (%2) again, with the configuration it ran with. Its tags and notes are "
                             "copied, and the new run records run %1 as the one it came from.")
                              .arg(run)
                              .arg(run_name),
                          this);
  what->setWordWrap(true);
  what->setTextFormat(Qt::PlainText);  // a run's name is not markup
  layout->addWidget(what);
  auto* where = new QLabel(tr("Program, in %1:").arg(request_.working_directory), this);
  where->setTextFormat(Qt::PlainText);
  where->setWordWrap(true);
  layout->addWidget(where);
  auto* command = new QLineEdit(app::shell_quote(QStringList{request_.program} + request_.arguments), this);
  command->setObjectName("relaunch_command");
  command->setReadOnly(true);
  command->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  command->setCursorPosition(0);
  layout->addWidget(command);
  layout->addWidget(new QLabel(tr("Name of the new run:"), this));
  name_ = new QLineEdit(name_at_ > 0 ? request_.flags.value(name_at_) : QString(), this);
  name_->setObjectName("relaunch_name");
  name_->selectAll();
  layout->addWidget(name_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Cancel, this);
  buttons->addButton(tr("Relaunch"), QDialogButtonBox::AcceptRole)->setDefault(true);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  layout->addWidget(buttons);
  // As wide as the window's screen allows (the command is long), up to 640 px.
  const QScreen* shown_on = parent ? parent->screen() : screen();
  resize(std::min(640, shown_on ? shown_on->availableSize().width() - 80 : 640), sizeHint().height());
  name_->setFocus();
}

app::LaunchRequest RelaunchDialog::request() const {
  app::LaunchRequest request = request_;
  const QString name = name_->text().trimmed();
  if (!name.isEmpty()) {
    if (name_at_ > 0) {
      request.flags[name_at_] = name;
    } else {
      request.flags << "--run_name" << name;
    }
  }
  return request;
}

}  // namespace spur::studio
