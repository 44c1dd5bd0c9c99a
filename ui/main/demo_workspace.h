// SPDX-License-Identifier: GPL-3.0-or-later
// The demo workspace behind `spur-studio --demo`: the bundled example program, a configuration for two CPU
// processes, and a history holding one finished run of it, so a new user can press Launch and watch at once.
#pragma once

#include <QString>

namespace spur::studio {

struct DemoWorkspace {
  QString directory;
  QString history;  // directory/history.db
  QString config;   // directory/spur_config.yaml
  QString program;  // the bundled example
  QString error;    // why it could not be prepared; empty when it was
};

/// The example program shipped with Spur: in a build tree next to app/, installed under libexec/spur/examples.
QString bundled_example();
/// Creates what is missing in `directory` (the first run takes a few seconds) and makes the set-up wizard
/// start from the example's configuration and command.
DemoWorkspace prepare_demo(const QString& directory);

}  // namespace spur::studio
