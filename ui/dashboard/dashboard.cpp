// SPDX-License-Identifier: GPL-3.0-or-later
// The grid of metric plots; see dashboard.h.
#include "dashboard/dashboard.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QScrollArea>
#include <QSlider>
#include <QVBoxLayout>

#include <algorithm>

#include "dashboard/metric_plot.h"

namespace spur::studio {

Dashboard::Dashboard(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  smoothing_label_ = new QLabel(this);
  smoothing_ = new QSlider(Qt::Horizontal, this);
  smoothing_->setObjectName("smoothing");
  smoothing_->setRange(0, 999);
  smoothing_->setValue(600);  // TensorBoard's default
  smoothing_->setMaximumWidth(240);
  bar->addWidget(new QLabel(tr("Smoothing"), this));
  bar->addWidget(smoothing_);
  bar->addWidget(smoothing_label_);
  x_axis_ = new QComboBox(this);
  x_axis_->setObjectName("x_axis");
  x_axis_->addItems({tr("Step"), tr("Relative time"), tr("Wall time")});
  bar->addSpacing(16);
  bar->addWidget(new QLabel(tr("X axis"), this));
  bar->addWidget(x_axis_);
  connect(x_axis_, &QComboBox::currentIndexChanged, this, [this](int index) {
    for (auto* plot : plots_) plot->set_x_axis(static_cast<XAxis>(index));
  });
  auto* fit = new QPushButton(tr("Fit all"), this);
  fit->setObjectName("fit_all");
  fit->setToolTip(
      tr("Show every plot's whole data again (double-click a plot to fit only that one; Ctrl+drag "
         "a box to zoom into)"));
  connect(fit, &QPushButton::clicked, this, [this] {
    for (auto* plot : plots_) plot->reset_view();
  });
  bar->addSpacing(16);
  bar->addWidget(fit);
  bar->addStretch();
  layout->addLayout(bar);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  auto* area = new QWidget(scroll);
  grid_ = new QGridLayout(area);
  empty_ = new QLabel(tr("Select runs on the left: their metrics appear here as they are logged."), area);
  empty_->setAlignment(Qt::AlignCenter);
  grid_->addWidget(empty_, 0, 0);
  system_label_ = new QLabel(tr("<b>System</b>: each rank's CPU (100% is one core) and memory, each GPU's "
                                "utilisation, memory and power, sampled by the launcher every second; x is "
                                "seconds since the start"),
                             area);
  system_label_->setObjectName("system_section");
  system_label_->setWordWrap(true);
  system_label_->hide();
  scroll->setWidget(area);
  layout->addWidget(scroll, 1);
  auto show_weight = [this](int value) {
    smoothing_label_->setText(QString::number(value / 1000.0, 'f', 3));
    for (auto* plot : plots_) plot->set_smoothing(value / 1000.0);
  };
  connect(smoothing_, &QSlider::valueChanged, this, show_weight);
  show_weight(smoothing_->value());
}

void Dashboard::save_settings(QSettings& settings) const {
  settings.setValue("dashboard/smoothing", smoothing_->value());
  settings.setValue("dashboard/x_axis", x_axis_->currentIndex());
}

void Dashboard::restore_settings(const QSettings& settings) {
  smoothing_->setValue(settings.value("dashboard/smoothing", smoothing_->value()).toInt());
  x_axis_->setCurrentIndex(settings.value("dashboard/x_axis", x_axis_->currentIndex()).toInt());
}

void Dashboard::set_runs(const QMap<qint64, QString>& runs) {
  if (runs == runs_) return;
  // The empty state says which: nothing selected, or selected runs with nothing logged yet.
  empty_->setText(runs.isEmpty() ? tr("Select runs on the left: their metrics appear here as they are logged.")
                                 : tr("No data yet: the selected runs have logged no metrics so far."));
  for (auto it = runs_.begin(); it != runs_.end(); ++it) {
    const auto now = runs.find(it.key());
    for (auto* plot : plots_) {
      if (now == runs.end()) plot->remove_run(it.key());
      else if (now.value() != it.value()) plot->rename_run(it.key(), now.value());
    }
  }
  // A plot none of the selected runs has a line in is hidden (it showed its old axes and an empty legend); it keeps
  // its settings (log scale, legend) for when a selected run logs that metric again.
  relayout();
  const bool other_runs = runs.keys() != runs_.keys();
  runs_ = runs;
  // Another selection is fitted again, even where the user had zoomed (the new runs' lines may lie outside it).
  if (other_runs) {
    for (auto* plot : plots_) plot->selection_changed();
  }
}

void Dashboard::apply(const QVector<app::SeriesDelta>& deltas) {
  bool added = false;
  for (const auto& delta : deltas) {
    if (!runs_.contains(delta.run)) continue;  // deselected while the read was under way
    auto* plot = plots_.value(delta.key, nullptr);
    if (!plot) {
      plot = new MetricPlot(delta.key, this);
      if (delta.key.startsWith("system/")) plot->set_steps_are_seconds(true);
      plot->set_smoothing(smoothing_->value() / 1000.0);
      plot->set_x_axis(static_cast<XAxis>(x_axis_->currentIndex()));
      if (baseline_) plot->set_baseline(baseline_, !lower_is_better_ || lower_is_better_(delta.key));
      connect(plot, &MetricPlot::view_changed, this,
              [this, key = delta.key](const app::SeriesView& view) { emit view_changed(key, view); });
      plots_.insert(delta.key, plot);
      added = true;
    }
    if (plot->empty()) added = true;  // shown again
    plot->load(delta, runs_.value(delta.run));
  }
  if (added) relayout();
}

void Dashboard::set_baseline(qint64 run, std::function<bool(const QString& key)> lower_is_better) {
  baseline_ = run;
  lower_is_better_ = std::move(lower_is_better);
  for (auto it = plots_.begin(); it != plots_.end(); ++it) {
    it.value()->set_baseline(run, !lower_is_better_ || lower_is_better_(it.key()));
  }
}

QString Dashboard::empty_text() const {
  const bool none = std::all_of(plots_.begin(), plots_.end(), [](const MetricPlot* plot) { return plot->empty(); });
  return none ? empty_->text() : QString();
}

void Dashboard::relayout() {
  // Plots without a line are out of the grid (and hidden) until a selected run logs their metric.
  bool any = false;
  for (auto* plot : plots_) {
    if (plot->empty()) {
      grid_->removeWidget(plot);
      plot->hide();
    } else {
      any = true;
    }
  }
  empty_->setVisible(!any);
  // The program's metrics first, then what the run cost the machine (system/: CPU, memory, GPUs, sampled by the
  // launcher every second), each section alphabetical (a QMap), so plots keep their places.
  int row = 0, column = 0;
  bool system_started = false;
  for (auto it = plots_.begin(); it != plots_.end(); ++it) {
    if (it.key().startsWith("system/") || it.value()->empty()) continue;
    grid_->addWidget(it.value(), row, column);
    it.value()->show();
    if (++column == 2) column = 0, ++row;
  }
  for (auto it = plots_.begin(); it != plots_.end(); ++it) {
    if (!it.key().startsWith("system/") || it.value()->empty()) continue;
    if (!system_started) {
      if (column != 0) column = 0, ++row;
      grid_->addWidget(system_label_, row++, 0, 1, 2);
      system_started = true;
    }
    grid_->addWidget(it.value(), row, column);
    it.value()->show();
    if (++column == 2) column = 0, ++row;
  }
  system_label_->setVisible(system_started);
}

}  // namespace spur::studio
