// SPDX-License-Identifier: Apache-2.0
// Where the history lives, and the run statuses; see records.h.
#include "spur/history/records.h"

#include <chrono>
#include <cstdlib>

namespace spur::history {

bool valid_status(const std::string& status) {
  return status == "queued" || status == "running" || status == "finished" || status == "failed" || status == "stopped";
}

std::string default_history_path() {
  if (const char* chosen = std::getenv("SPUR_HISTORY"); chosen && *chosen) return chosen;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return std::string(data) + "/spur/history.db";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/spur/history.db";
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace spur::history
