// SPDX-License-Identifier: Apache-2.0
// A signal's name as users read it in the launchers' messages ("stopped by SIGINT", "SIGTERM: cancelling job"):
// one rule for the local, Slurm and SageMaker launchers.
#pragma once

#include <QString>

namespace spur::app {

/// "SIGTERM" for 15; the number as text for a signal glibc has no name for.
QString signal_name(int signal);

}  // namespace spur::app
