// SPDX-License-Identifier: Apache-2.0
// Hyperband early termination as W&B's sweeps stop runs (`early_terminate: {type: hyperband}`; the `sweeps`
// library's hyperband_stopping.py): bands of iterations, where an iteration is the n-th value a run has logged of
// the sweep's metric; at each band the threshold is the value that keeps the best 1/eta of every run that got there
// (finished or not); a running run past a band whose value there (strict, W&B's default) or whose best so far
// (strict: false) is worse than the band's threshold is stopped.
//
// Threads: plain functions.
#pragma once

#include <cstdint>
#include <vector>

#include "sweep/sweep_spec.h"

namespace spur::app {

struct HyperbandRun {
  std::vector<double> history;  // the metric's values in the order logged (non-finite ones left out)
  bool running = false;
};

/// The bands, as W&B computes them: from max_iter, max_iter / eta^k for k = 1..s (whole, at least 1), ascending;
/// from min_iter, min_iter * eta^k for k = 0, 1, ... SweepError when there is none.
std::vector<int64_t> hyperband_bands(const Hyperband& config);

/// Indices into `runs` of the running runs to stop now. `maximize`: larger values are better (metric.goal).
std::vector<size_t> hyperband_stop(const std::vector<HyperbandRun>& runs, const Hyperband& config, bool maximize);

}  // namespace spur::app
