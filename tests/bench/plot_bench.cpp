// SPDX-License-Identifier: GPL-3.0-or-later
// Plot redraw time in Spur Studio's MetricPlot (QCustomPlot, adaptive sampling), offscreen at 800x500: one run
// of `points` points (raw and smoothed lines), median of 20 replots, as one JSON line. Target: < 16 ms at 1M.
#include <QApplication>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "dashboard/metric_plot.h"

#undef QT_NO_FOREACH
#include <qcustomplot.h>

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const int points = argc > 1 ? std::atoi(argv[1]) : 1000000;
  spur::studio::MetricPlot plot("loss");
  plot.resize(800, 500);
  plot.show();
  QVector<double> steps(points), values(points);
  for (int i = 0; i < points; ++i) {
    steps[i] = i;
    values[i] = std::exp(-i / 2e5) + 0.05 * std::sin(i * 0.01) + (i % 9973 == 0 ? 0.5 : 0.0);
  }
  plot.append(1, "run", steps, values);
  plot.reset_view();
  std::vector<double> times;
  for (int i = 0; i < 21; ++i) {
    plot.plot()->replot(QCustomPlot::rpImmediateRefresh);
    if (i > 0) times.push_back(plot.plot()->replotTime());
  }
  std::sort(times.begin(), times.end());
  std::printf("{\"points\": %d, \"replot_ms\": %.2f}\n", points, times[times.size() / 2]);
  return 0;
}
