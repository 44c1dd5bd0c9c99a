// SPDX-License-Identifier: Apache-2.0
// Where the history lives, and the run statuses; see records.h.
#include "spur/history/records.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace spur::history {

bool valid_status(const std::string& status) {
  return status == "queued" || status == "running" || status == "finished" || status == "failed" || status == "stopped";
}

std::string default_history_path() {
  if (const char* chosen = std::getenv("SPUR_HISTORY"); chosen && *chosen) return chosen;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return std::string(data) + "/spur/history.db";
  return home_directory() + "/.local/share/spur/history.db";
}

std::string home_directory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  const long suggested = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(suggested > 0 ? static_cast<std::size_t>(suggested) : 16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] == '/' && std::string(found->pw_dir) != "/") {
    return found->pw_dir;
  }
  throw std::runtime_error("no home folder: HOME is not set and user " + std::to_string(::getuid()) +
                           " has none in the password database; set HOME (or SPUR_HISTORY for the run history, "
                           "XDG_CONFIG_HOME for Spur's settings)");
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace spur::history
