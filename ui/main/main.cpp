// SPDX-License-Identifier: GPL-3.0-or-later
// spur-studio: watch the runs of the history live. `spur-studio [--history FILE]`.
#include <QApplication>
#include <QCommandLineParser>

#include <spur/history/records.h>

#include "main/main_window.h"

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  // Answered without a display, as a command-line tool should.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      std::printf("spur-studio %s\n", SPUR_VERSION_STRING);
      return 0;
    }
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("Spur Studio");
  QApplication::setOrganizationName("Spur");
  QApplication::setApplicationVersion(SPUR_VERSION_STRING);
  QCommandLineParser parser;
  parser.setApplicationDescription("Spur Studio: live metrics and the history of training runs");
  parser.addHelpOption();
  QCommandLineOption history("history", "The run history database (default: $SPUR_HISTORY, else "
                                        "$XDG_DATA_HOME/spur/history.db).", "file");
  parser.addOption(history);
  QCommandLineOption runs("runs", "Runs to show first, by ID (default: the newest).", "1,2,...");
  parser.addOption(runs);
  parser.process(app);
  const QString path = parser.isSet(history) ? parser.value(history)
                                             : QString::fromStdString(spur::history::default_history_path());
  spur::studio::MainWindow window(path);
  QList<qint64> ids;
  for (const auto& id : parser.value(runs).split(',', Qt::SkipEmptyParts)) ids << id.toLongLong();
  if (!ids.isEmpty()) window.show_runs(ids);
  window.show();
  return app.exec();
}
