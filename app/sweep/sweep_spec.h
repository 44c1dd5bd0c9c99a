// SPDX-License-Identifier: Apache-2.0
// A sweep file in Weights & Biases' format (docs/sweeps.md): read, checked with the file and line of every fault,
// and expanded into the runs it describes, as W&B's own controller (the `sweeps` library) expands it:
//   grid    every combination of the discrete parameters, names in sorted order, the last name varying fastest;
//           int_uniform as min..max, q_uniform as numpy.arange(min, max, q)
//   random  each run's values drawn from the parameters' distributions, reproducibly from a seed
// and the command each run is launched with (`command:` with ${program}, ${args}, ...).
//
// Threads: plain values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <spur/json.h>

namespace spur::app {

/// A sweep file that cannot run: what() is "FILE:LINE: what is wrong".
class SweepError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One entry of `parameters:`, its distribution named as W&B names it ("constant", "categorical", "int_uniform",
/// "uniform", "q_uniform", "log_uniform", "log_uniform_values", "q_log_uniform", "q_log_uniform_values",
/// "inv_log_uniform", "inv_log_uniform_values", "normal", "q_normal", "log_normal", "q_log_normal", "beta",
/// "q_beta"); inferred as W&B infers it when the file does not say (value: constant, values: categorical,
/// integer min and max: int_uniform, else uniform).
struct SweepParameter {
  std::string name;
  std::string distribution;
  json::Value value;                  // constant
  std::vector<json::Value> values;    // categorical
  std::vector<double> probabilities;  // categorical, optional (random only)
  double min = 0, max = 0, q = 1;
  double mu = 0, sigma = 1;     // normal and log_normal. Default: 0 and 1, as W&B's
  double a = 1, b = 1;          // beta. Default: 1 and 1
  bool integer_q = false;       // q given as an integer: the drawn values are integers
  bool integer_bounds = false;  // int_uniform's min and max
  int line = 0;                 // where it is in the file (1-based)

  /// The values a grid takes (constant, categorical, int_uniform, q_uniform), each once (a value given twice is
  /// one point, as W&B counts them: 1.0 and 1 too); SweepError for the others.
  std::vector<json::Value> grid_values(const std::string& file) const;
};

/// `early_terminate: {type: hyperband, ...}`: W&B's keys and defaults (eta 3, strict true).
struct Hyperband {
  std::optional<int64_t> min_iter, max_iter;
  double s = 0;
  double eta = 3;
  bool strict = true;
};

/// One run of a sweep: its parameters' values, by name in sorted order.
using SweepPoint = std::vector<std::pair<std::string, json::Value>>;

struct SweepSpec {
  std::string file;  // as given (messages name it)
  std::string text;  // the file's text, kept with the sweep
  std::string name;  // `name:`; default: the file's base name
  std::string description;
  std::string project;
  std::string program;
  std::vector<std::string> command;  // `command:`. Default: ${env} ${interpreter} ${program} ${args}, W&B's
  std::string method;                // grid or random (bayes is refused until Spur has it)
  std::string metric_name;           // empty: no metric
  std::string metric_goal = "minimize";
  std::optional<int64_t> run_cap;
  std::optional<Hyperband> early_terminate;
  std::vector<SweepParameter> parameters;  // sorted by name

  /// Reads and checks a sweep file. SweepError ("FILE:LINE: ...") for a key W&B does not have or Spur does not
  /// run, a parameter both fixed and swept, an empty list of values, min above max, a log distribution over values
  /// that are not positive, a grid over a continuous distribution, a command naming no program.
  static SweepSpec read(const std::string& path);
  static SweepSpec parse(const std::string& text, const std::string& file);

  /// Every point of the grid, in W&B's order; `run_cap` (when set) keeps the first ones.
  std::vector<SweepPoint> grid() const;
  /// `count` points drawn with `seed` (the same seed, the same points).
  std::vector<SweepPoint> random(int64_t count, uint64_t seed) const;
  /// What `spur sweep run` launches: grid's points, or random's `count` (Default: run_cap; SweepError without).
  std::vector<SweepPoint> points(std::optional<int64_t> count, uint64_t seed) const;

  /// The command of one run, ${...} replaced as W&B's agent replaces them: ${program}; ${args} as
  /// --name=value each; ${args_no_hyphens} as name=value; ${args_no_boolean_flags} (true: --name, false: left
  /// out); ${args_json} as one JSON object; ${env} dropped (Spur sets the environment itself); ${interpreter} as
  /// python3 for a ".py" program, else dropped. Values as Python's str() writes them (0.001, 1e-05, True).
  std::vector<std::string> command_for(const SweepPoint& point) const;
};

/// A value as W&B's agent puts it on a command line: Python's str() (strings as they are, True/False, None,
/// integers, floats in their shortest round-trip form, lists and dicts as Python writes them: [1, 'a']).
std::string sweep_value_text(const json::Value& value);

}  // namespace spur::app
