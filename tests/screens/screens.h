// SPDX-License-Identifier: GPL-3.0-or-later
// What the screenshot programs (studio_screens, sweep_screens) share: the folder the pictures go to, taking one of
// the whole virtual display with ImageMagick's `import -window root`, and the application's names with Qt's test
// mode for its settings (they never touch the user's).
#pragma once

#include <QApplication>
#include <QDir>
#include <QProcess>
#include <QStandardPaths>
#include <QTest>

#include <cstdio>

namespace spur::screens {

inline QString out_dir;

inline void name_application() {
  QApplication::setOrganizationName("Spur");
  QApplication::setApplicationName("Spur Studio Screens");
  QStandardPaths::setTestModeEnabled(true);
}

inline void shoot(const QString& name, int wait_ms = 600) {
  QTest::qWait(wait_ms);  // let the window paint
  const QString file = QDir(out_dir).filePath(name);
  if (QProcess::execute("import", {"-window", "root", file}) != 0) {
    std::fprintf(stderr, "import failed: %s\n", qPrintable(file));
  }
  std::fprintf(stderr, "wrote %s\n", qPrintable(file));
}

}  // namespace spur::screens
