// SPDX-License-Identifier: Apache-2.0
// LaunchRequest: one `spur launch` as a person would type it (directory, configuration file, flags, program).
// The Studio starts runs from it, shows it as the headless command, and rebuilds it from a run's history.
#pragma once

#include <QSet>
#include <QString>
#include <QStringList>

#include <vector>

namespace spur::app {

/// The flags `spur launch` (and so `spur test`) accepts, without dashes: with a value, and switches.
const QSet<QString>& launch_valued_flags();
const QSet<QString>& launch_switches();

/// One `spur launch` flag as typed: its name (dashes made underscores, an "=value" taken off), its value (empty for
/// a switch) and the words it took ({"--hosts", "a,b"} or {"--hosts=a,b"}).
struct LaunchFlag {
  QString name;
  QString value;
  QStringList words;
  bool valued = false;         // one of launch_valued_flags()
  bool known = false;          // valued, or one of launch_switches()
  bool missing_value = false;  // valued, last word, no value
};
/// The flags at the start of `words`, up to the program: the first word that is not a flag, or the one after "--".
/// `end` (when given): where the program starts. The one reading of a launch's flags (LaunchRequest::parse, the
/// target file's merge).
std::vector<LaunchFlag> split_launch_flags(const QStringList& words, qsizetype* end = nullptr);

/// Words quoted for a POSIX shell only where needed ("a b" -> 'a b'): a command line for people to read and copy
/// (the history's record, the Studio's fields, dry runs' summaries).
QString shell_quote(const QStringList& words);
/// One word single-quoted for a POSIX shell, always ("x" -> 'x', "it's" -> 'it'\''s'): what a script or a remote
/// command is built from (the Slurm job's script, the ssh command line), where a uniform form is easier to check.
QString shell_word(const QString& word);
/// The inverse for what shell_quote writes (and plain '...', "..." and backslashes); throws std::invalid_argument
/// on an unterminated quote.
QStringList shell_split(const QString& line);

/// The shell line that runs `spur launch ARGUMENTS` in `directory` ("cd DIR && spur launch ...", quoted; no
/// "cd" when empty): what the history records for a run and what LaunchRequest::parse reads back. `spur`: how the
/// program is named (a full path where `spur` on PATH is not this Spur).
QString launch_command_line(const QString& directory, const QStringList& launch_arguments,
                            const QString& spur = "spur");

struct LaunchRequest {
  QString working_directory;  // empty: the caller's
  QString config_file;        // empty: the configuration in effect
  QStringList flags;          // launch flags other than --config_file, as typed ("--hosts", "a,b", ...)
  QString program;
  QStringList arguments;
  QString history;  // --history: empty, the default history ($SPUR_HISTORY, else the user's)

  /// `spur`'s arguments: {"launch", "--config_file", F, "--history", H, flags..., "--", program, arguments...}.
  QStringList spur_arguments() const;
  /// The headless command: "cd DIR && spur launch --config_file F ... PROGRAM ARGS" (quoted for a shell), with
  /// `spur` for the program's name (spur_command() in launch/detached_launch.h: what works in the user's shell).
  QString command_line(const QString& spur = "spur") const;
  /// Reads a command line as command_line() writes it (and as `spur launch` records it in the history).
  /// std::invalid_argument naming what is wrong when it is not a `spur launch` command.
  static LaunchRequest parse(const QString& command_line);
};

}  // namespace spur::app
