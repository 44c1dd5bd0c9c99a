// SPDX-License-Identifier: Apache-2.0
// The raw float32 files the test worker writes (a model's parameters, tests/rigs/test_worker.cpp write_flat), and
// the largest difference between two of them (header-only; Qt Core).
#pragma once

#include <QFile>
#include <QString>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace spur::test {

/// The file's floats; empty when it cannot be read.
inline std::vector<float> read_floats(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  const QByteArray bytes = file.readAll();
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.constData(), values.size() * sizeof(float));
  return values;
}

/// max |a[i] - b[i]|; infinity when the sizes differ.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

}  // namespace spur::test
