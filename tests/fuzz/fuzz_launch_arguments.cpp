// SPDX-License-Identifier: Apache-2.0
// Fuzz target: `spur launch`'s command line, as flags (words separated by NUL bytes) and as the shell line the
// history records and the Studio relaunches (LaunchRequest::parse). Bad input is a UsageError or
// std::invalid_argument; what parses writes back to a line that parses the same. Words are decoded as `spur`
// decodes argv (launch/byte_text.h), which must give back every byte.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "cli/arguments.h"
#include "launch/byte_text.h"
#include "launch/launch_plan.h"
#include "launch/launch_request.h"
#include "launch/secrets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const QByteArray bytes(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  QStringList words;
  for (const auto& word : bytes.split('\0')) {
    words << spur::app::text_from_bytes(word);
    if (spur::app::bytes_from_text(words.back()) != word) __builtin_trap();  // bytes pass through unchanged
    // Escapes exactly where the word is not UTF-8 (Qt's decoder judges).
    if (spur::app::holds_escaped_bytes(words.back()) != (QString::fromUtf8(word).toUtf8() != word)) __builtin_trap();
  }
  try {
    const spur::cli::Arguments args(words, {"num_processes", "env", "hosts", "config_file", "main_process_port"},
                                    {"cpu", "dry_run", "interactive"}, true);
    (void)args.integer("num_processes", 1, 100000);
    for (const auto& assignment : args.values("env")) {
      try {
        (void)spur::app::parse_environment_assignment(assignment);
      } catch (const spur::app::LaunchError&) {
      }
    }
    (void)spur::app::redact_secrets(words);
  } catch (const spur::cli::UsageError&) {
  }
  try {
    const auto request = spur::app::LaunchRequest::parse(QString::fromUtf8(bytes));
    const QString line = request.command_line();
    const auto again = spur::app::LaunchRequest::parse(line);
    if (again.command_line() != line) __builtin_trap();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
