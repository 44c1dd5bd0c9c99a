// SPDX-License-Identifier: Apache-2.0
// Companion programs; see companion.h.
#include "launch/companion.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace spur::app {

QString find_companion(const char* variable, const QStringList& beside, const QString& on_path) {
  if (variable) {
    if (QString chosen = qEnvironmentVariable(variable); !chosen.isEmpty()) return chosen;
  }
  const QDir here(QCoreApplication::applicationDirPath());
  for (const auto& relative : beside) {
    const QFileInfo file(here.filePath(relative));
    if (file.isFile() && file.isExecutable()) return file.canonicalFilePath();
  }
  return on_path.isEmpty() ? QString() : QStandardPaths::findExecutable(on_path);
}

}  // namespace spur::app
