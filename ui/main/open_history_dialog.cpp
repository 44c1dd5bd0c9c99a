// SPDX-License-Identifier: GPL-3.0-or-later
// File > Open history; see open_history_dialog.h. The GUI thread only.
#include "main/open_history_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

#include "runs/remote_history.h"
#include "runs/run_service.h"

namespace spur::studio {

QStringList recent_histories(const QSettings& settings) { return settings.value("history/recent").toStringList(); }

void remember_history(QSettings& settings, const QString& path) {
  QStringList recent = recent_histories(settings);
  recent.removeAll(path);
  recent.prepend(path);
  settings.setValue("history/recent", recent.mid(0, 10));
}

OpenHistoryDialog::OpenHistoryDialog(const QStringList& recent, QWidget* parent)
    : QDialog(parent), location_(new QComboBox(this)), problem_(new QLabel(this)) {
  setObjectName("open_history_dialog");
  setWindowTitle(tr("Open a run history"));
  auto* layout = new QVBoxLayout(this);
  auto* label = new QLabel(tr("A history file on this machine, or one on another machine over SSH: "
                              "<tt>ssh://[user@]host[:port]/path</tt> (no path: that machine's default history). "
                              "It opens in a window of its own."),
                           this);
  label->setWordWrap(true);
  layout->addWidget(label);
  auto* row = new QHBoxLayout;
  location_->setObjectName("history_location");
  location_->setEditable(true);
  location_->addItems(recent);
  location_->setInsertPolicy(QComboBox::NoInsert);
  location_->setMinimumContentsLength(48);
  location_->lineEdit()->setPlaceholderText(tr("~/.local/share/spur/history.db or ssh://gpu1/~/runs/history.db"));
  row->addWidget(location_, 1);
  auto* browse = new QPushButton(tr("&Browse..."), this);
  browse->setObjectName("history_browse");
  row->addWidget(browse);
  layout->addLayout(row);
  problem_->setObjectName("history_problem");
  problem_->setWordWrap(true);
  // Room for the message kept, so that the fields do not move as it comes and goes.
  problem_->setMinimumHeight(problem_->fontMetrics().lineSpacing() * 2);
  layout->addWidget(problem_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel, this);
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString start = QFileInfo(app::RunService::default_history_path()).absolutePath();
    const QString chosen = QFileDialog::getOpenFileName(this, tr("Open a run history"), start,
                                                        tr("Run histories (*.db *.sqlite);;All files (*)"));
    if (!chosen.isEmpty()) location_->setEditText(chosen);
  });
  connect(location_, &QComboBox::editTextChanged, this, [this, buttons] {
    check();
    buttons->button(QDialogButtonBox::Open)->setEnabled(problem_->text().isEmpty() && !location().isEmpty());
  });
  location_->setEditText(recent.value(0));
  check();
  buttons->button(QDialogButtonBox::Open)->setEnabled(problem_->text().isEmpty() && !location().isEmpty());
}

QString OpenHistoryDialog::location() const {
  QString text = location_->currentText().trimmed();
  if (text.isEmpty() || app::HistoryAddress::is_address(text)) return text;
  QString path = text;
  if (path == "~" || path.startsWith("~/")) path = QDir::homePath() + path.mid(1);
  return QFileInfo(path).absoluteFilePath();
}

QString OpenHistoryDialog::problem(const QString& text) {
  const QString trimmed = text.trimmed();
  if (trimmed.isEmpty()) return {};  // nothing typed yet: nothing to say
  if (app::HistoryAddress::is_address(trimmed)) {
    try {
      app::HistoryAddress::parse(trimmed);
    } catch (const std::exception& e) {
      return QString::fromUtf8(e.what());
    }
    return {};
  }
  const QFileInfo file(trimmed.startsWith("~/") ? QDir::homePath() + trimmed.mid(1) : trimmed);
  if (file.isDir()) return tr("%1 is a folder: name the history file in it (history.db)").arg(trimmed);
  if (!file.exists() && !file.absoluteDir().exists()) {
    return tr("there is no folder %1").arg(file.absolutePath());
  }
  return {};
}

void OpenHistoryDialog::check() { problem_->setText(problem(location_->currentText())); }

}  // namespace spur::studio
