// SPDX-License-Identifier: Apache-2.0
// What a metric plot does to a series before drawing it: TensorBoard's debiased exponential smoothing, and
// min/max bucketing that keeps every spike while drawing a million points as a few thousand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spur::app {

/// TensorBoard's smoothing, the one implementation (the live plot extends it point by point, smooth() runs it
/// over a whole series): last = last*w + (1-w)*y; n += 1; shown = last / (1 - w^n), over finite values only (NaN
/// and infinities pass through and do not count). While every finite value so far equals the first, values are
/// shown as they are (TensorBoard returns a constant series unchanged). w in [0, 1); w <= 0 shows values as they are.
class Smoother {
 public:
  explicit Smoother(double weight = 0.6) : weight_(weight) {}
  /// The next value's smoothed form.
  double push(double value);
  /// The next `count` values at once, given as their mean (a summarised bucket): exact when they are equal.
  double push(double mean, int64_t count);

 private:
  double weight_;
  double last_ = 0;
  int64_t count_ = 0;
  bool constant_ = true;
  double first_ = 0;
};

/// Smoother over a whole series.
std::vector<double> smooth(const std::vector<double>& values, double weight);

/// Indices of the points to draw for x in [x_begin, x_end] split into `buckets` equal spans: per span the first,
/// lowest, highest and last point, in order; plus the nearest point on each side, so lines reach the edges.
/// `xs` must ascend. Series with at most 4 points per bucket are returned whole.
std::vector<std::size_t> downsample(const std::vector<double>& xs, const std::vector<double>& ys, double x_begin,
                                    double x_end, std::size_t buckets);

}  // namespace spur::app
