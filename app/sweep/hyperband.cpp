// SPDX-License-Identifier: Apache-2.0
// Hyperband early termination (hyperband.h), W&B's rule step for step.
#include "sweep/hyperband.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spur::app {

std::vector<int64_t> hyperband_bands(const Hyperband& config) {
  std::vector<int64_t> bands;
  if (config.max_iter) {
    auto band = static_cast<double>(*config.max_iter);
    for (int i = 0; i < static_cast<int>(config.s); ++i) {
      band /= config.eta;
      if (band < 1) break;
      bands.push_back(static_cast<int64_t>(band));
    }
    std::sort(bands.begin(), bands.end());
  } else if (config.min_iter) {
    auto band = static_cast<double>(*config.min_iter);
    // W&B lists 100 bands; those past any run's length never apply.
    for (int i = 0; i < 100 && band < 1e15; ++i) {
      bands.push_back(static_cast<int64_t>(band));
      band *= config.eta;
    }
  }
  if (bands.empty()) {
    throw SweepError("early_terminate: no band (max_iter / eta is below 1): raise max_iter, or lower s or eta");
  }
  return bands;
}

std::vector<size_t> hyperband_stop(const std::vector<HyperbandRun>& runs, const Hyperband& config, bool maximize) {
  const auto bands = hyperband_bands(config);
  const double r = 1.0 / config.eta;
  auto oriented = [&](const HyperbandRun& run) {
    std::vector<double> h = run.history;
    if (maximize) {
      for (double& v : h) v = -v;
    }
    return h;
  };
  std::vector<std::vector<double>> histories;
  histories.reserve(runs.size());
  for (const auto& run : runs) histories.push_back(oriented(run));
  std::vector<double> thresholds;
  for (const int64_t band : bands) {
    std::vector<double> values;
    for (const auto& h : histories) {
      if (static_cast<int64_t>(h.size()) >= band) values.push_back(h[static_cast<size_t>(band - 1)]);
    }
    if (values.empty()) {
      thresholds.push_back(std::numeric_limits<double>::infinity());
    } else {
      std::sort(values.begin(), values.end());
      thresholds.push_back(values[static_cast<size_t>(r * static_cast<double>(values.size()))]);
    }
  }
  std::vector<size_t> stop;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].running) continue;
    const auto& h = histories[i];
    int64_t closest = -1;
    double threshold = 0;
    for (size_t b = 0; b < bands.size(); ++b) {
      if (bands[b] > static_cast<int64_t>(h.size())) break;
      closest = bands[b];
      threshold = thresholds[b];
    }
    if (closest < 0) continue;
    const double value = config.strict ? h[static_cast<size_t>(closest - 1)] : *std::min_element(h.begin(), h.end());
    if (value > threshold) stop.push_back(i);
  }
  return stop;
}

}  // namespace spur::app
