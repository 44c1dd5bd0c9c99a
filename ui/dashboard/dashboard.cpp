// SPDX-License-Identifier: GPL-3.0-or-later
// The metric plots in their sections; see dashboard.h.
#include "dashboard/dashboard.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "dashboard/metric_plot.h"

namespace spur::studio {

namespace {

const QString kPinned = QStringLiteral("pinned");
const QString kSystem = QStringLiteral("system");
/// The order kept between sessions: the newest keys past this many are dropped.
constexpr int kKeptOrder = 2000;

}  // namespace

Dashboard::Dashboard(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  smoothing_label_ = new QLabel(this);
  smoothing_ = new QSlider(Qt::Horizontal, this);
  smoothing_->setObjectName("smoothing");
  smoothing_->setRange(0, 999);
  smoothing_->setValue(600);  // TensorBoard's default
  smoothing_->setMaximumWidth(200);
  bar->addWidget(new QLabel(tr("Smoothing"), this));
  bar->addWidget(smoothing_);
  bar->addWidget(smoothing_label_);
  x_axis_ = new QComboBox(this);
  x_axis_->setObjectName("x_axis");
  x_axis_->addItems({tr("Step"), tr("Relative time"), tr("Wall time")});
  x_axis_->setToolTip(tr("Relative time counts from each run's start"));
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("X axis"), this));
  bar->addWidget(x_axis_);
  connect(x_axis_, &QComboBox::currentIndexChanged, this, [this](int index) {
    for (auto* plot : plots_) plot->set_x_axis(static_cast<XAxis>(index));
  });
  columns_ = new QSpinBox(this);
  columns_->setObjectName("columns");
  columns_->setRange(1, 4);
  columns_->setValue(2);
  columns_->setToolTip(tr("Plots side by side (a plot's context menu makes it full width)"));
  height_ = new QSpinBox(this);
  height_->setObjectName("plot_height");
  height_->setRange(160, 900);
  height_->setSingleStep(40);
  height_->setValue(260);
  height_->setSuffix(tr(" px"));
  height_->setToolTip(tr("Each plot's height"));
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("Columns"), this));
  bar->addWidget(columns_);
  bar->addWidget(new QLabel(tr("Height"), this));
  bar->addWidget(height_);
  connect(columns_, &QSpinBox::valueChanged, this, [this] { relayout(); });
  connect(height_, &QSpinBox::valueChanged, this, [this](int pixels) {
    for (auto* plot : plots_) plot->setFixedHeight(pixels);
  });
  auto* fit = new QPushButton(tr("Fit all"), this);
  fit->setObjectName("fit_all");
  fit->setToolTip(
      tr("Show every plot's whole data again (double-click a plot to fit only that one; Ctrl+drag "
         "a box to zoom into)"));
  connect(fit, &QPushButton::clicked, this, [this] {
    for (auto* plot : plots_) plot->reset_view();
  });
  bar->addSpacing(12);
  bar->addWidget(fit);
  bar->addStretch();
  layout->addLayout(bar);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  area_ = new QWidget(scroll);
  sections_layout_ = new QVBoxLayout(area_);
  empty_ = new QLabel(tr("Select runs on the left: their metrics appear here as they are logged."), area_);
  empty_->setAlignment(Qt::AlignCenter);
  empty_->setWordWrap(true);
  sections_layout_->addWidget(empty_);
  sections_layout_->addStretch(1);
  system_label_ = new QLabel(tr("Each rank's CPU (100% is one core) and memory, each GPU's utilisation, memory and "
                                "power, sampled by the launcher every second; x is seconds since the start"),
                             area_);
  system_label_->setObjectName("system_section");
  system_label_->setWordWrap(true);
  system_label_->hide();
  scroll->setWidget(area_);
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
  settings.setValue("dashboard/columns", columns_->value());
  settings.setValue("dashboard/plot_height", height_->value());
  const auto sorted = [](const QSet<QString>& set) {
    QStringList list(set.begin(), set.end());
    list.sort();
    return list;
  };
  settings.setValue("dashboard/collapsed", sorted(collapsed_));
  settings.setValue("dashboard/pinned", sorted(pinned_));
  settings.setValue("dashboard/wide", sorted(wide_));
  settings.setValue("dashboard/order", order_.mid(0, kKeptOrder));
}

void Dashboard::restore_settings(const QSettings& settings) {
  smoothing_->setValue(settings.value("dashboard/smoothing", smoothing_->value()).toInt());
  x_axis_->setCurrentIndex(settings.value("dashboard/x_axis", x_axis_->currentIndex()).toInt());
  columns_->setValue(settings.value("dashboard/columns", columns_->value()).toInt());
  height_->setValue(settings.value("dashboard/plot_height", height_->value()).toInt());
  const auto set = [&](const char* key) {
    const QStringList list = settings.value(key).toStringList();
    return QSet<QString>(list.begin(), list.end());
  };
  collapsed_ = set("dashboard/collapsed");
  pinned_ = set("dashboard/pinned");
  wide_ = set("dashboard/wide");
  // The keys seen before come first, in their order; those seen since, after them.
  QStringList order = settings.value("dashboard/order").toStringList();
  for (const auto& key : order_) {
    if (!order.contains(key)) order << key;
  }
  order_ = order;
  for (auto it = plots_.begin(); it != plots_.end(); ++it) {
    it.value()->set_pinned(pinned_.contains(it.key()));
    it.value()->set_wide(wide_.contains(it.key()));
  }
  for (auto& [id, section] : sections_) section.header->setChecked(!collapsed_.contains(id));
  relayout();
}

void Dashboard::set_runs(const QMap<qint64, QString>& runs) {
  if (runs == runs_) return;
  for (auto it = runs_.begin(); it != runs_.end(); ++it) {
    const auto now = runs.find(it.key());
    for (auto* plot : plots_) {
      if (now == runs.end()) plot->remove_run(it.key());
      else if (now.value() != it.value()) plot->rename_run(it.key(), now.value());
    }
  }
  // A plot none of the selected runs has a line in is hidden (it showed its old axes and an empty legend); it keeps
  // its settings (log scale, legend) and its place for when a selected run logs that metric again.
  relayout();
  const bool other_runs = runs.keys() != runs_.keys();
  runs_ = runs;
  update_empty_text();
  // Another selection is fitted again, even where the user had zoomed (the new runs' lines may lie outside it).
  if (other_runs) {
    for (auto* plot : plots_) plot->selection_changed();
  }
}

void Dashboard::set_run_statuses(const QMap<qint64, QString>& statuses) {
  statuses_ = statuses;
  update_empty_text();
}

void Dashboard::update_empty_text() {
  // The empty state says which: nothing selected; selected runs that ended (or failed) without a metric; or runs
  // that may still log one.
  static const QStringList live{"running", "queued", "starting", ""};
  int ended = 0, failed = 0;
  for (auto it = runs_.begin(); it != runs_.end(); ++it) {
    const QString status = statuses_.value(it.key());
    ended += !live.contains(status);
    failed += status == "failed";
  }
  if (runs_.isEmpty()) {
    empty_->setText(tr("Select runs on the left: their metrics appear here as they are logged."));
  } else if (ended == runs_.size() && failed > 0) {
    empty_->setText(runs_.size() == 1
                        ? tr("No metrics: the run failed before logging one. Its console (below) says why.")
                        : tr("No metrics: the selected runs ended before logging one (%1 failed: their "
                             "consoles say why).")
                              .arg(failed));
  } else if (ended == runs_.size()) {
    empty_->setText(runs_.size() == 1 ? tr("No metrics: the run ended without logging one.")
                                      : tr("No metrics: the selected runs ended without logging one."));
  } else {
    empty_->setText(tr("No data yet: the selected runs have logged no metrics so far."));
  }
}

void Dashboard::set_run_starts(const QMap<qint64, double>& starts) {
  for (auto it = starts.begin(); it != starts.end(); ++it) {
    if (starts_.value(it.key(), -1) == it.value()) continue;
    for (auto* plot : plots_) plot->set_run_start(it.key(), it.value());
  }
  starts_ = starts;
}

MetricPlot* Dashboard::make_plot(const QString& key) {
  auto* plot = new MetricPlot(key, this);
  if (key.startsWith("system/")) plot->set_steps_are_seconds(true);
  plot->setFixedHeight(height_->value());
  plot->set_smoothing(smoothing_->value() / 1000.0);
  plot->set_x_axis(static_cast<XAxis>(x_axis_->currentIndex()));
  plot->set_pinned(pinned_.contains(key));
  plot->set_wide(wide_.contains(key));
  for (auto it = starts_.begin(); it != starts_.end(); ++it) plot->set_run_start(it.key(), it.value());
  if (baseline_) plot->set_baseline(baseline_, direction_of(key));
  connect(plot, &MetricPlot::view_changed, this,
          [this, key](const app::SeriesView& view) { emit view_changed(key, view); });
  connect(plot, &MetricPlot::hovered, this, [this, plot](double x) { hover(plot, x); });
  connect(plot, &MetricPlot::pin_toggled, this, [this, key](bool on) { set_pinned(key, on); });
  connect(plot, &MetricPlot::wide_toggled, this, [this, key](bool on) { set_wide(key, on); });
  connect(plot, &MetricPlot::exported, this, &Dashboard::exported);
  plot->hide();
  return plot;
}

void Dashboard::apply(const QVector<app::SeriesDelta>& deltas) {
  bool added = false;
  QStringList new_keys;
  for (const auto& delta : deltas) {
    if (!runs_.contains(delta.run)) continue;  // deselected while the read was under way
    auto* plot = plots_.value(delta.key, nullptr);
    if (!plot) {
      plot = make_plot(delta.key);
      plots_.insert(delta.key, plot);
      if (!order_.contains(delta.key)) new_keys << delta.key;
      added = true;
    }
    if (plot->empty()) added = true;  // shown again
    plot->load(delta, runs_.value(delta.run));
  }
  // Keys first seen together take the end of the order alphabetically; keys seen later go after them.
  new_keys.sort();
  order_ += new_keys;
  if (added) relayout();
}

void Dashboard::set_baseline(qint64 run, std::function<app::MetricDirection(const QString& key)> direction) {
  baseline_ = run;
  direction_ = std::move(direction);
  for (auto it = plots_.begin(); it != plots_.end(); ++it) it.value()->set_baseline(run, direction_of(it.key()));
}

app::MetricDirection Dashboard::direction_of(const QString& key) const {
  return direction_ ? direction_(key) : app::guess_direction(key);
}

QString Dashboard::empty_text() const {
  const bool none = std::all_of(plots_.begin(), plots_.end(), [](const MetricPlot* plot) { return plot->empty(); });
  return none ? empty_->text() : QString();
}

QString Dashboard::section_of(const QString& key, bool pinned) {
  if (pinned) return kPinned;
  if (key.startsWith("system/")) return kSystem;
  const auto slash = key.indexOf('/');
  return slash > 0 ? key.left(slash) : QString();
}

Dashboard::Section& Dashboard::section(const QString& id) {
  auto [it, made] = sections_.try_emplace(id);
  Section& s = it->second;
  if (!made) return s;
  s.box = new QWidget(area_);
  auto* box = new QVBoxLayout(s.box);
  box->setContentsMargins(0, 0, 0, 0);
  box->setSpacing(2);
  s.header = new QToolButton(s.box);
  s.header->setObjectName("section:" + id);
  s.header->setCheckable(true);
  s.header->setChecked(!collapsed_.contains(id));
  s.header->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  s.header->setAutoRaise(true);
  s.header->setArrowType(s.header->isChecked() ? Qt::DownArrow : Qt::RightArrow);
  QFont bold = s.header->font();
  bold.setBold(true);
  s.header->setFont(bold);
  s.body = new QWidget(s.box);
  auto* body = new QVBoxLayout(s.body);
  body->setContentsMargins(0, 0, 0, 0);
  if (id == kSystem) body->addWidget(system_label_);
  s.grid = new QGridLayout;
  body->addLayout(s.grid);
  box->addWidget(s.header);
  box->addWidget(s.body);
  s.body->setVisible(s.header->isChecked());
  connect(s.header, &QToolButton::toggled, this, [this, id](bool expanded) { set_collapsed(id, !expanded); });
  return s;
}

void Dashboard::set_collapsed(const QString& id, bool on) {
  if (on) collapsed_.insert(id);
  else collapsed_.remove(id);
  const auto it = sections_.find(id);
  if (it == sections_.end()) return;
  const QSignalBlocker quiet(it->second.header);
  it->second.header->setChecked(!on);
  it->second.header->setArrowType(on ? Qt::RightArrow : Qt::DownArrow);
  it->second.body->setVisible(!on);
}

namespace {

// Puts `key` in `set` or takes it out; whether that changed the set.
bool set_member(QSet<QString>& set, const QString& key, bool on) {
  if (on == set.contains(key)) return false;
  if (on) set.insert(key);
  else set.remove(key);
  return true;
}

}  // namespace

void Dashboard::set_pinned(const QString& key, bool on) {
  if (!set_member(pinned_, key, on)) return;
  if (auto* plot = plots_.value(key)) plot->set_pinned(on);
  relayout();
}

void Dashboard::set_wide(const QString& key, bool on) {
  if (!set_member(wide_, key, on)) return;
  if (auto* plot = plots_.value(key)) plot->set_wide(on);
  relayout();
}

void Dashboard::set_columns(int columns) { columns_->setValue(columns); }
int Dashboard::columns() const { return columns_->value(); }
void Dashboard::set_plot_height(int pixels) { height_->setValue(pixels); }
int Dashboard::plot_height() const { return height_->value(); }

QStringList Dashboard::section_order() const {
  QStringList ids;
  for (const auto& key : order_) {
    if (!plots_.contains(key)) continue;
    const QString id = section_of(key, pinned_.contains(key));
    if (id != kPinned && id != kSystem && !ids.contains(id)) ids << id;
  }
  ids.prepend(kPinned);
  ids << kSystem;
  return ids;
}

QStringList Dashboard::sections() const {
  QStringList shown;
  for (const auto& id : section_order()) {
    if (const auto it = sections_.find(id); it != sections_.end() && it->second.box->isVisibleTo(this)) shown << id;
  }
  return shown;
}

QStringList Dashboard::plots_in(const QString& id) const {
  QStringList keys;
  for (const auto& key : order_) {
    auto* plot = plots_.value(key);
    if (plot && !plot->empty() && section_of(key, pinned_.contains(key)) == id) keys << key;
  }
  return keys;
}

QAbstractButton* Dashboard::section_header(const QString& id) const {
  const auto it = sections_.find(id);
  return it == sections_.end() ? nullptr : it->second.header;
}

void Dashboard::relayout() {
  // Every plot out of its grid, then back in order: sections top to bottom, each one's plots as first seen, a
  // full-width plot on a row of its own. Plots without a line stay out (hidden) until a selected run logs them.
  for (auto& [id, s] : sections_) {
    while (s.grid->count() > 0) delete s.grid->takeAt(0);
    sections_layout_->removeWidget(s.box);
  }
  bool any = false;
  const int columns = columns_->value();
  int index = 0;
  for (auto* plot : plots_) {
    if (plot->empty()) plot->hide();
  }
  for (const auto& id : section_order()) {
    const QStringList keys = plots_in(id);
    if (keys.isEmpty()) {
      if (const auto it = sections_.find(id); it != sections_.end()) it->second.box->hide();
      continue;
    }
    any = true;
    Section& s = section(id);
    const QString title = id == kPinned   ? tr("Pinned")
                          : id == kSystem ? tr("System")
                          : id.isEmpty()  ? tr("Metrics")
                                          : id;
    s.header->setText(tr("%1  (%2)").arg(title).arg(keys.size()));
    int row = 0, column = 0;
    for (const auto& key : keys) {
      auto* plot = plots_.value(key);
      if (wide_.contains(key)) {
        if (column != 0) column = 0, ++row;
        s.grid->addWidget(plot, row++, 0, 1, columns);
      } else {
        s.grid->addWidget(plot, row, column);
        if (++column == columns) column = 0, ++row;
      }
      plot->show();
    }
    for (int c = 0; c < 4; ++c) s.grid->setColumnStretch(c, c < columns ? 1 : 0);
    sections_layout_->insertWidget(index++, s.box);
    s.box->show();
  }
  system_label_->setVisible(sections_.contains(kSystem) && sections_.at(kSystem).box->isVisibleTo(this));
  empty_->setVisible(!any);
}

void Dashboard::hover(const MetricPlot* from, double x) {
  // The same x on every plot with the same x axis (a step is the same step everywhere; the system samples count
  // seconds).
  const QString label = from->plot_data().x_label();
  for (auto* plot : plots_) {
    if (plot->isVisible() && plot->plot_data().x_label() == label) plot->show_cursor(x);
  }
}

}  // namespace spur::studio
