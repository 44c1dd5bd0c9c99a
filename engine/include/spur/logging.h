// SPDX-License-Identifier: Apache-2.0
// spur::get_logger: a logger for training programs that knows the run's processes, as Accelerate's get_logger.
// By default a line is written by the main process only; main_process_only = false writes it on every rank with
// the rank in the line, and in_order writes rank by rank (a collective: every rank must make the call). Lines go
// to stderr, one write each: "2026-12-01 09:30:00 INFO train: message" or "... INFO [rank 1] train: message".
// Thread-safe.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

namespace spur {

/// Python logging's levels and numbers.
enum class LogLevel { debug = 10, info = 20, warning = 30, error = 40, critical = 50 };

std::string_view to_string(LogLevel level);
/// "debug", "INFO", "warning", "warn", "error", "critical" (any case) or Python's numbers ("20"); else nullopt.
std::optional<LogLevel> parse_log_level(std::string_view text);

/// How one call is written, as Accelerate's logging keywords.
struct LogCall {
  /// Write on the main process only. Default: true.
  bool main_process_only = true;
  /// Write on every rank, rank 0 first, each waiting for the one before (needs the Accelerator made first).
  /// Default: false.
  bool in_order = false;
};

class Logger {
 public:
  Logger(std::string name, LogLevel level) : name_(std::move(name)), level_(level) {}
  const std::string& name() const { return name_; }
  LogLevel level() const { return level_.load(); }
  void set_level(LogLevel level) { level_.store(level); }
  bool is_enabled_for(LogLevel level) const { return static_cast<int>(level) >= static_cast<int>(level_.load()); }

  void log(LogLevel level, std::string_view message, LogCall call = {}) const;
  void debug(std::string_view message, LogCall call = {}) const { log(LogLevel::debug, message, call); }
  void info(std::string_view message, LogCall call = {}) const { log(LogLevel::info, message, call); }
  void warning(std::string_view message, LogCall call = {}) const { log(LogLevel::warning, message, call); }
  void error(std::string_view message, LogCall call = {}) const { log(LogLevel::error, message, call); }
  void critical(std::string_view message, LogCall call = {}) const { log(LogLevel::critical, message, call); }

 private:
  std::string name_;
  std::atomic<LogLevel> level_;
};

/// The logger called `name`, made on first use and kept for the process. Its level: `level` when given (it also
/// changes an existing logger's), else SPUR_LOG_LEVEL, else ACCELERATE_LOG_LEVEL, else info. An unreadable level
/// in those variables is a spur::Error naming the variable and its value.
Logger& get_logger(const std::string& name, std::optional<LogLevel> level = std::nullopt);

}  // namespace spur
