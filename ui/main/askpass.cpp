// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio as SSH's askpass; see askpass.h.
#include "main/askpass.h"

#include <QApplication>
#include <QIcon>
#include <QInputDialog>
#include <QLineEdit>

#include <cstdio>

namespace spur::studio {

bool started_as_askpass(int argc, char** argv) {
  (void)argv;
  return argc == 2 && qEnvironmentVariable("SPUR_STUDIO_ASKPASS") == "1";
}

std::optional<QString> ask(const QString& prompt, QWidget* parent) {
  QInputDialog dialog(parent);
  dialog.setObjectName("askpass");
  dialog.setWindowTitle(QObject::tr("SSH - Spur Studio"));
  dialog.setLabelText(prompt.trimmed());
  // A host key's "(yes/no/[fingerprint])?" is answered in the clear; a passphrase or password is not shown.
  dialog.setTextEchoMode(prompt.contains("yes/no") ? QLineEdit::Normal : QLineEdit::Password);
  dialog.resize(std::max(dialog.sizeHint().width(), 420), dialog.sizeHint().height());
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  return dialog.textValue();
}

int askpass_main(int argc, char** argv) {
  // What this process prints on stderr is ssh's: Qt's warnings would end up in the Studio's error messages.
  qInstallMessageHandler([](QtMsgType type, const QMessageLogContext&, const QString& message) {
    if (type == QtFatalMsg) std::fputs((message.toLocal8Bit() + "\n").constData(), stderr);
  });
  QApplication app(argc, argv);
  QApplication::setApplicationName("Spur Studio");
  QApplication::setWindowIcon(QIcon::fromTheme("dev.spur.Studio", QIcon(":/icons/dev.spur.Studio.svg")));
  const auto answer = ask(QString::fromLocal8Bit(argv[1]));
  if (!answer) return 1;
  std::fputs((answer->toLocal8Bit() + "\n").constData(), stdout);
  return 0;
}

void offer_askpass(const QString& program) {
  if (!qEnvironmentVariableIsEmpty("SSH_ASKPASS") || program.isEmpty()) return;
  qputenv("SSH_ASKPASS", program.toLocal8Bit());
  qputenv("SPUR_STUDIO_ASKPASS", "1");
}

}  // namespace spur::studio
