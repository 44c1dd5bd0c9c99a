// SPDX-License-Identifier: Apache-2.0
// A signal's name (signal_name.h).
#include "launch/signal_name.h"

#include <string.h>

namespace spur::app {

QString signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? QString("SIG") + name : QString::number(signal);
}

}  // namespace spur::app
