// SPDX-License-Identifier: Apache-2.0
// Runs the registered Qt Test classes (all, or the one named first on the command line).
#include "test_main.h"

#include <QCoreApplication>
#include <QTemporaryDir>
#ifdef SPUR_TEST_GUI
#include <QApplication>  // widget tests: compiled into their binary with SPUR_TEST_GUI
#endif
#include <QStandardPaths>
#include <QTest>

#include <cstring>
#include <iostream>

namespace spur::test {

std::vector<TestClass>& registry() {
  static std::vector<TestClass> classes;
  return classes;
}

}  // namespace spur::test

int main(int argc, char** argv) {
#ifdef SPUR_TEST_GUI
  QApplication app(argc, argv);
  // The Studio's settings and files (QSettings, QStandardPaths) go to ~/.qttest, never the user's.
  QStandardPaths::setTestModeEnabled(true);
  QApplication::setOrganizationName("Spur");
  QApplication::setApplicationName("Spur Studio Test");
#else
  QCoreApplication app(argc, argv);
#endif
  // Every program the tests start records its runs in a throw-away history, never the user's.
  QTemporaryDir history;
  qputenv("SPUR_HISTORY", (history.path() + "/history.db").toUtf8());
  const auto& classes = spur::test::registry();
  const char* selected = argc > 1 && argv[1][0] != '-' ? argv[1] : nullptr;

  // Arguments after the class name go to QTest (test function names, -v2, ...).
  std::vector<char*> qtest_args{argv[0]};
  for (int i = selected ? 2 : 1; i < argc; ++i) qtest_args.push_back(argv[i]);

  int failures = 0;
  bool found = false;
  for (const auto& entry : classes) {
    if (selected && std::strcmp(selected, entry.name) != 0) continue;
    found = true;
    auto object = entry.make();
    failures += QTest::qExec(object.get(), static_cast<int>(qtest_args.size()), qtest_args.data());
  }
  if (selected && !found) {
    std::cerr << "no test class named " << selected << "; known:";
    for (const auto& entry : classes) std::cerr << " " << entry.name;
    std::cerr << "\n";
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
