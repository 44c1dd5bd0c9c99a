// SPDX-License-Identifier: Apache-2.0
// Smoothing and downsampling for plots; see series_math.h.
#include "studio/series_math.h"

#include <algorithm>
#include <cmath>

namespace spur::app {

double Smoother::push(double value) { return push(value, 1); }

double Smoother::push(double mean, int64_t count) {
  if (!std::isfinite(mean) || weight_ <= 0) return mean;
  if (count_ == 0) first_ = mean;
  constant_ = constant_ && mean == first_;
  // count steps of last = last * w + (1 - w) * v with v = mean: last * w^count + (1 - w^count) * mean.
  const double decay = count == 1 ? weight_ : std::pow(weight_, static_cast<double>(count));
  last_ = last_ * decay + (1 - decay) * mean;
  count_ += std::max<int64_t>(1, count);
  return constant_ ? mean : last_ / (1 - std::pow(weight_, static_cast<double>(count_)));
}

std::vector<double> smooth(const std::vector<double>& values, double weight) {
  // A constant prefix is shown as it is: TensorBoard's EMA of it, debiased, is the same value (to rounding).
  Smoother smoother(weight);
  std::vector<double> out;
  out.reserve(values.size());
  for (const double v : values) out.push_back(smoother.push(v));
  return out;
}

std::vector<std::size_t> downsample(const std::vector<double>& xs, const std::vector<double>& ys, double x_begin,
                                    double x_end, std::size_t buckets) {
  const std::size_t n = std::min(xs.size(), ys.size());
  const auto first = static_cast<std::size_t>(
      std::lower_bound(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n), x_begin) - xs.begin());
  const auto last = static_cast<std::size_t>(
      std::upper_bound(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n), x_end) - xs.begin());
  std::vector<std::size_t> keep;
  if (first > 0) keep.push_back(first - 1);
  if (buckets == 0 || last - first <= 4 * buckets || !(x_end > x_begin)) {
    for (std::size_t i = first; i < last; ++i) keep.push_back(i);
  } else {
    const double width = (x_end - x_begin) / static_cast<double>(buckets);
    std::size_t i = first;
    while (i < last) {
      const auto bucket = std::min(buckets - 1, static_cast<std::size_t>((xs[i] - x_begin) / width));
      const double end = x_begin + width * static_cast<double>(bucket + 1);
      std::size_t low = i, high = i, j = i + 1;  // at least one point per step, whatever rounding says
      for (; j < last && (xs[j] < end || bucket == buckets - 1); ++j) {
        if (ys[j] < ys[low]) low = j;
        if (ys[j] > ys[high]) high = j;
      }
      const std::size_t picks[4] = {i, std::min(low, high), std::max(low, high), j - 1};
      for (const std::size_t p : picks) {
        if (keep.empty() || keep.back() < p) keep.push_back(p);
      }
      i = j;
    }
  }
  if (last < n) keep.push_back(last);
  return keep;
}

}  // namespace spur::app
