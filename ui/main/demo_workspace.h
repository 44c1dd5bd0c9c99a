// SPDX-License-Identifier: GPL-3.0-or-later
// The demo workspace behind `spur-studio --demo`: the bundled example program, a configuration for two CPU
// processes, and a history for its runs; the first time, a short first run to launch as soon as the window shows, so
// a new user watches it train (its progress and curves live) without waiting for a window.
#pragma once

#include <QString>

#include <optional>

#include "launch/launch_request.h"

namespace spur::studio {

struct DemoWorkspace {
  QString directory;
  QString history;  // directory/history.db
  QString config;   // directory/spur_config.yaml
  QString program;  // the bundled example
  QString error;    // why it could not be prepared; empty when it was
  /// A short run of the example (150 steps and a test accuracy), while the history has none yet: the Studio
  /// launches it once its window shows (MainWindow::launch).
  std::optional<app::LaunchRequest> first_run;
};

/// The example program shipped with Spur: in a build tree next to app/, installed under libexec/spur/examples.
QString bundled_example();
/// Creates what is missing in `directory` (at once: nothing runs here) and makes the set-up wizard start from the
/// example's configuration and command.
DemoWorkspace prepare_demo(const QString& directory);

}  // namespace spur::studio
