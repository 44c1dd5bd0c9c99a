// SPDX-License-Identifier: GPL-3.0-or-later
// One metric's plot; see metric_plot.h. QCustomPlot's adaptive sampling keeps first/min/max/last per pixel
// column, so a million points draw in milliseconds and spikes survive.
#include "dashboard/metric_plot.h"

#include <QVBoxLayout>

#include <cmath>

#include "metrics/series_math.h"

#undef QT_NO_FOREACH
#include <qcustomplot.h>

namespace spur::studio {

QColor run_colour(qint64 run) {
  // Tableau 10: distinct, and readable on light and dark backgrounds.
  static const QColor colours[] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(44, 160, 44), QColor(214, 39, 40),
                                   QColor(148, 103, 189), QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127),
                                   QColor(188, 189, 34),  QColor(23, 190, 207)};
  return colours[static_cast<size_t>(run) % 10];
}

MetricPlot::MetricPlot(QString key, QWidget* parent) : QWidget(parent), key_(std::move(key)), plot_(new QCustomPlot(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setMinimumHeight(220);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, new QCPTextElement(plot_, key_, QFont(font().family(), 10, QFont::Bold)));
  plot_->xAxis->setLabel("step");
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this] { reset_view(); });
  connect(plot_, &QCustomPlot::mouseWheel, this, [this] { user_moved_ = true; });
  connect(plot_, &QCustomPlot::mousePress, this, [this] { user_moved_ = true; });
}

void MetricPlot::append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values) {
  auto& line = lines_[run];
  if (!line.raw) {
    const QColor colour = run_colour(run);
    QColor faint = colour;
    faint.setAlpha(60);
    line.raw = plot_->addGraph();
    line.raw->setPen(QPen(faint));
    line.raw->removeFromLegend();
    line.smooth = plot_->addGraph();
    line.smooth->setPen(QPen(colour, 1.0));  // a 1.6 px pen made a 1M-point replot 8x slower (65 ms)
    line.smooth->setName(name);
  }
  line.raw->addData(steps, values, /*alreadySorted=*/true);
  line.steps.insert(line.steps.end(), steps.begin(), steps.end());
  line.values.insert(line.values.end(), values.begin(), values.end());
  // Extend the smoothed line from its running state: no need to redo the past.
  QVector<double> smoothed;
  smoothed.reserve(values.size());
  for (const double v : values) {
    if (!std::isfinite(v) || weight_ <= 0) {
      smoothed.push_back(v);
      continue;
    }
    line.ema = line.ema * weight_ + (1 - weight_) * v;
    ++line.accumulated;
    smoothed.push_back(line.ema / (1 - std::pow(weight_, line.accumulated)));
  }
  line.smooth->addData(steps, smoothed, /*alreadySorted=*/true);
  if (!user_moved_) plot_->rescaleAxes();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::remove_run(qint64 run) {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return;
  plot_->removeGraph(it->second.raw);
  plot_->removeGraph(it->second.smooth);
  lines_.erase(it);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::resmooth(Line& line) {
  const auto smoothed = app::smooth(line.values, weight_);
  line.smooth->setData(QVector<double>(line.steps.begin(), line.steps.end()),
                       QVector<double>(smoothed.begin(), smoothed.end()), /*alreadySorted=*/true);
  line.ema = 0;
  line.accumulated = 0;
  for (const double v : line.values) {
    if (!std::isfinite(v)) continue;
    line.ema = line.ema * weight_ + (1 - weight_) * v;
    ++line.accumulated;
  }
}

void MetricPlot::set_smoothing(double weight) {
  weight_ = std::clamp(weight, 0.0, 0.999);
  for (auto& [run, line] : lines_) resmooth(line);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

int MetricPlot::point_count(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? 0 : it->second.raw->dataCount();
}

void MetricPlot::reset_view() {
  user_moved_ = false;
  plot_->rescaleAxes();
  plot_->replot();
}

}  // namespace spur::studio
