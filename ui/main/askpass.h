// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio as SSH's askpass. ssh runs `$SSH_ASKPASS PROMPT` when it needs a key's passphrase, a password or a
// yes/no (an unknown host key) and may not use a terminal (the Studio's histories over SSH force this: nobody
// watches the terminal a window was started from). When the user has no SSH_ASKPASS of their own, the Studio
// offers itself (SPUR_STUDIO_ASKPASS=1 marks the call), so the question comes up as a dialog instead of the history
// failing with "Permission denied". GUI thread only.
#pragma once

#include <QString>

#include <optional>

class QWidget;

namespace spur::studio {

/// Whether this process was started by ssh as its askpass: SPUR_STUDIO_ASKPASS=1 and one argument, the prompt.
bool started_as_askpass(int argc, char** argv);
/// The prompt in a dialog; what was typed, or nothing when cancelled. Typed hidden, unless ssh asks yes/no.
std::optional<QString> ask(const QString& prompt, QWidget* parent = nullptr);
/// `spur-studio` started as askpass: asks, prints the answer for ssh, exit code 0 (1 when cancelled).
int askpass_main(int argc, char** argv);
/// Makes `program` (this Studio) the askpass of what the Studio starts, unless SSH_ASKPASS is set already.
void offer_askpass(const QString& program);

}  // namespace spur::studio
