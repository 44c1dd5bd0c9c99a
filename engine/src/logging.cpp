// SPDX-License-Identifier: Apache-2.0
// spur::get_logger and Logger::log; see spur/logging.h. The process's rank comes from the launcher's environment
// (read once); in_order's barriers from the process group an Accelerator joined.
#include <spur/logging.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

#include <spur/error.h>
#include <spur/state.h>

#include "distributed/communicator.h"

namespace spur {
namespace {

std::mutex registry_mutex;
std::mutex write_mutex;

const ProcessState& process() {
  static const ProcessState state = [] {
    try {
      return ProcessState::from_environment();
    } catch (const std::exception&) {
      return ProcessState{};  // the Accelerator reports a bad environment; the logger still writes
    }
  }();
  return state;
}

LogLevel level_from_environment() {
  for (const char* name : {"SPUR_LOG_LEVEL", "ACCELERATE_LOG_LEVEL"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    if (auto level = parse_log_level(value)) return *level;
    throw Error(std::string(name) + "=" + value + " is not a log level: debug, info, warning, error or critical");
  }
  return LogLevel::info;
}

void emit(LogLevel level, const std::string& name, std::string_view message, bool with_rank, int64_t rank) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&seconds, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  std::string line = std::string(stamp) + " " + std::string(to_string(level)) + " ";
  if (with_rank) line += "[rank " + std::to_string(rank) + "] ";
  line += name + ": ";
  line.append(message);
  line += '\n';
  std::lock_guard<std::mutex> lock(write_mutex);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "DEBUG";
    case LogLevel::info:
      return "INFO";
    case LogLevel::warning:
      return "WARNING";
    case LogLevel::error:
      return "ERROR";
    case LogLevel::critical:
      return "CRITICAL";
  }
  return "INFO";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::map<std::string, LogLevel> names{
      {"debug", LogLevel::debug},       {"10", LogLevel::debug},        {"info", LogLevel::info},
      {"20", LogLevel::info},           {"warning", LogLevel::warning}, {"warn", LogLevel::warning},
      {"30", LogLevel::warning},        {"error", LogLevel::error},     {"40", LogLevel::error},
      {"critical", LogLevel::critical}, {"fatal", LogLevel::critical},  {"50", LogLevel::critical}};
  const auto found = names.find(lower);
  if (found == names.end()) return std::nullopt;
  return found->second;
}

void Logger::log(LogLevel level, std::string_view message, LogCall call) const {
  const auto& state = process();
  if (call.in_order && state.world_size > 1) {
    // The barriers run on every rank even where the level hides the line: ranks may differ in level.
    const auto comm = detail::Communicator::current();
    if (!comm) {
      throw Error("logger '" + name_ + "': in_order needs the run's process group: make the Accelerator first");
    }
    const bool shown = is_enabled_for(level);
    for (int64_t r = 0; r < state.world_size; ++r) {
      if (r == state.rank && shown) emit(level, name_, message, true, state.rank);
      comm->barrier();
    }
    return;
  }
  if (!is_enabled_for(level)) return;
  if (call.main_process_only && !call.in_order) {
    if (state.is_main_process()) emit(level, name_, message, false, state.rank);
    return;
  }
  emit(level, name_, message, state.world_size > 1, state.rank);
}

Logger& get_logger(const std::string& name, std::optional<LogLevel> level) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  // Never destroyed: loggers may be used from static destructors and threads that outlive main.
  static auto* loggers = new std::map<std::string, std::unique_ptr<Logger>>();
  auto& slot = (*loggers)[name];
  if (!slot) {
    slot = std::make_unique<Logger>(name, level ? *level : level_from_environment());
  } else if (level) {
    slot->set_level(*level);
  }
  return *slot;
}

}  // namespace spur
