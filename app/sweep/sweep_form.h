// SPDX-License-Identifier: Apache-2.0
// SweepForm: the Studio's sweep questions (the set-up wizard's Sweep page) as plain values, and what they make: the
// W&B sweep file (to_yaml), checked by the one reader of sweep files (SweepSpec::parse, whose faults are named here
// by the parameter's line in the form), and the `spur sweep run` that launches it with the run configuration
// (SweepLaunch). The page lays out fields; the rules are here, tested without a window.
//
// The parameters are typed one per line:
//   lr: 0.001, 0.003, 0.01      values (W&B's `values:`)
//   dropout: 0.1 .. 0.5         a range (`min:`, `max:`: integers make int_uniform, else uniform)
//   lr: 1e-5 .. 1e-2 log        a log range (`distribution: log_uniform_values`)
//   epochs: 3                   a constant (`value:`)
//
// Threads: plain values; no shared state.
#pragma once

#include <QString>
#include <QStringList>

#include <cstdint>
#include <optional>
#include <vector>

#include "launch/detached_launch.h"
#include "launch/launch_request.h"

namespace spur::app {

/// `spur sweep run ...` as the Studio starts it (detached) and shows it (the headless command).
struct SweepLaunch {
  QString working_directory;  // where the runs start (the run configuration's working directory)
  QStringList arguments;      // spur's: {"sweep", "run", FILE, "--parallel", N, ..., "--", launch flags...}
  QString history;            // empty: the default history; else given as SPUR_HISTORY (runs and the sweep's record)
  QString name;               // the sweep's name (its runs are NAME-1, NAME-2...)
  /// "cd DIR && [SPUR_HISTORY=H ]spur sweep run FILE ... -- --config_file F ...", quoted for a shell.
  QString command_line(const QString& spur = "spur") const;
  /// The same launch as it may be shown (a status line, a failure's message): a secret's `--env NAME=VALUE` among
  /// the launch flags as `--env NAME` (launch/secrets.h's redact_secrets).
  SweepLaunch shown() const;
};

/// Starts `sweep` detached (launch/detached_launch.h's start_detached): its runs and its record go to its history
/// (SPUR_HISTORY in its environment), and what its controller says, on stdout and stderr, is appended to `log_file`.
DetachedLaunch sweep_detached(const SweepLaunch& sweep, const QString& log_file,
                              QProcessEnvironment environment = QProcessEnvironment::systemEnvironment(),
                              const QString& spur = spur_program());

struct SweepForm {
  struct Parameter {
    enum class Kind { Values, Range, LogRange, Constant };
    QString name;
    Kind kind = Kind::Values;
    QStringList values;  // Values: each as typed; Constant: one
    QString min, max;    // Range, LogRange
    int line = 0;        // 1-based, in the text it was read from
  };

  QString name;               // `name:`. Default (empty): the program's name and "-sweep"
  QString method = "grid";    // grid or random
  QString metric;             // `metric.name`; empty: none (then no Hyperband, no best run)
  QString goal = "minimize";  // or maximize
  int64_t count = 0;          // `run_cap:`: a random sweep's runs (needed), or a grid's first N; 0: none
  int parallel = 1;           // runs at a time (spur sweep run --parallel)
  uint64_t seed = 0;          // a random sweep's draws (spur sweep run --seed)
  bool hyperband = false;     // `early_terminate: {type: hyperband, min_iter}` on `metric`
  int64_t min_iter = 3;       // Hyperband's first band, in values logged
  std::vector<Parameter> parameters;

  /// Reads the parameters' text (the form above; blank lines and lines starting with # are skipped).
  /// std::invalid_argument "line N: what is wrong" for a line that is none of the forms.
  static std::vector<Parameter> parse_parameters(const QString& text);
  /// The parameters as parse_parameters reads them.
  static QString parameters_text(const std::vector<Parameter>& parameters);

  /// `name`, or its default for `program` ("train-sweep" for ./build/train).
  QString sweep_name(const QString& program) const;
  /// The sweep file for `program` run with `arguments` (kept in every run, before the swept ones).
  QString to_yaml(const QString& program, const QStringList& arguments) const;
  /// What is wrong with the sweep these answers make, empty when nothing: SweepSpec's own checks on to_yaml's text,
  /// the fault named by its parameter ("lr: min is above max") rather than the file's line.
  QString problem(const QString& program, const QStringList& arguments) const;
  /// The runs it makes (the grid's points, or count), 0 when problem() is not empty.
  int64_t run_count(const QString& program, const QStringList& arguments) const;
  /// The launch of the sweep file at `sweep_file` with the run configuration of `request` (its configuration file,
  /// flags and working directory; a --run_name is left out: the sweep names its runs).
  SweepLaunch launch(const QString& sweep_file, const LaunchRequest& request) const;
};

}  // namespace spur::app
