// SPDX-License-Identifier: Apache-2.0
// Finding the programs Spur ships beside each other (spur, spur-check, the example): in a build tree they sit
// next to each other, installed they are under bin/ and libexec/spur/. One rule for every such look-up.
#pragma once

#include <QString>
#include <QStringList>

namespace spur::app {

/// $`variable` when set (tests and unusual installs), else the first executable of `beside` (paths relative to
/// the running program's directory, canonical when found), else `on_path` looked up on PATH; empty when none.
QString find_companion(const char* variable, const QStringList& beside, const QString& on_path = {});

}  // namespace spur::app
