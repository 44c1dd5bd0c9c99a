// SPDX-License-Identifier: GPL-3.0-or-later
// One metric's plot; see metric_plot.h. QCustomPlot's adaptive sampling keeps first/min/max/last per pixel
// column, so a million points draw in milliseconds and spikes survive.
#include "dashboard/metric_plot.h"

#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QSaveFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QSpinBox>
#include <QMenu>
#include <QMessageBox>
#include <QScopeGuard>
#include <QMouseEvent>
#include <QPainter>
#include <QSvgGenerator>
#include <QToolTip>
#include <QTextStream>
#include <QTimer>
#include <QVBoxLayout>

#include <cmath>
#include <optional>

#include "metrics/baseline.h"
#include "metrics/series_math.h"
#include "metrics_csv.h"

#undef QT_NO_FOREACH
#include <qcustomplot.h>

namespace spur::studio {

ImageSizeDialog::ImageSizeDialog(QSize size, bool pixels, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Image size"));
  auto* form = new QFormLayout(this);
  width_ = new QSpinBox(this);
  width_->setObjectName("image_width");
  height_ = new QSpinBox(this);
  height_->setObjectName("image_height");
  for (auto* box : {width_, height_}) {
    box->setRange(100, 10000);
    box->setSuffix(tr(" px"));
  }
  width_->setValue(size.width());
  height_->setValue(size.height());
  scale_ = new QDoubleSpinBox(this);
  scale_->setObjectName("image_scale");
  scale_->setRange(0.25, 8);
  scale_->setSingleStep(0.5);
  scale_->setValue(2);
  scale_->setToolTip(tr("Pixels per point: 2 draws the same layout at twice the resolution (192 dpi)"));
  form->addRow(tr("Width:"), width_);
  form->addRow(tr("Height:"), height_);
  form->addRow(tr("Resolution (scale):"), scale_);
  form->setRowVisible(scale_, pixels);  // SVG and PDF are vectors
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  form->addRow(buttons);
}

QSize ImageSizeDialog::image_size() const { return {width_->value(), height_->value()}; }
double ImageSizeDialog::image_scale() const { return scale_->value(); }

QColor run_colour(qint64 run) {
  // Tableau 10: distinct, and readable on light and dark backgrounds.
  static const QColor colours[] = {
      QColor(31, 119, 180), QColor(255, 127, 14),  QColor(44, 160, 44),   QColor(214, 39, 40),  QColor(148, 103, 189),
      QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34), QColor(23, 190, 207)};
  return colours[static_cast<size_t>(run) % 10];
}

MetricPlot::MetricPlot(QString key, QWidget* parent)
    : QWidget(parent), key_(std::move(key)), plot_(new QCustomPlot(this)), view_timer_(new QTimer(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setMinimumHeight(220);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, new QCPTextElement(plot_, key_, QFont(font().family(), 10, QFont::Bold)));
  plot_->xAxis->setLabel("step");
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  // The legend sits under the axes, never over the data: a row of its own, as many entries a line as fit.
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->plotLayout()->addElement(2, 0, plot_->legend);
  plot_->plotLayout()->setRowStretchFactor(2, 0.001);
  plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot_->legend->setColumnSpacing(12);
  plot_->legend->setMargins(QMargins(4, 2, 4, 2));
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this] { reset_view(); });
  connect(plot_, &QCustomPlot::mouseWheel, this, [this] { user_moved_ = true; });
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
    user_moved_ = true;
    // Ctrl+drag draws a box to zoom into; a plain drag pans.
    plot_->setSelectionRectMode(event->modifiers() & Qt::ControlModifier ? QCP::srmZoom : QCP::srmNone);
  });
  connect(plot_, &QCustomPlot::beforeReplot, this, [this] { fit_ticks_and_legend(plot_->width()); });
  plot_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(plot_, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) { context_menu(at); });
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) { hover(event); });
  // A zoom or pan asks for the lines at the new range once the wheel or drag pauses.
  view_timer_->setSingleShot(true);
  view_timer_->setInterval(120);
  connect(view_timer_, &QTimer::timeout, this, [this] { user_view_changed(); });
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this] {
    if (user_moved_) view_timer_->start();
  });
  apply_palette();
}

app::SeriesView MetricPlot::view() const {
  app::SeriesView view;
  view.width = std::max(64, plot_->axisRect()->width());
  // Relative time differs per run: its lines are read whole (their resolution then follows the whole series).
  if (!user_moved_ || x_axis_ == XAxis::relative_time) return view;
  view.lo = plot_->xAxis->range().lower;
  view.hi = plot_->xAxis->range().upper;
  view.by_wall = x_axis_ == XAxis::wall_time;
  return view;
}

void MetricPlot::user_view_changed() {
  const auto now = view();
  if (now.whole() && !told_zoomed_) return;  // nothing finer to ask for
  told_zoomed_ = !now.whole();
  emit view_changed(now);
}

int MetricPlot::tick_label_width(const QCPAxis* axis) const {
  // The widest label the axis can show now: QCustomPlot writes numbers with 6 significant digits, dates in two
  // lines of which "yyyy-MM-dd" is the wider.
  const QFontMetrics metrics(axis->tickLabelFont());
  if (axis == plot_->xAxis && x_axis_ == XAxis::wall_time) return metrics.horizontalAdvance("0000-00-00");
  const QCPRange range = axis->range();
  int widest = 0;
  for (const double v : {range.lower, range.upper, (range.lower + range.upper) / 2, -range.size()}) {
    widest = std::max(widest, metrics.horizontalAdvance(QString::number(v, 'g', 6)));
  }
  return widest;
}

void MetricPlot::fit_ticks_and_legend(int width) {
  // Ticks far enough apart for their labels ("750 10001250" ran together on narrow plots): as many as the axis'
  // length holds at the widest label plus a gap, 2 to 8.
  const QMargins margins = plot_->axisRect()->margins();
  const int length = std::max(1, width - margins.left() - margins.right());
  const int label = tick_label_width(plot_->xAxis) + 2 * QFontMetrics(plot_->xAxis->tickLabelFont()).averageCharWidth();
  const int ticks = std::clamp(length / std::max(1, label) - 1, 2, 8);
  if (plot_->xAxis->ticker()->tickCount() != ticks) plot_->xAxis->ticker()->setTickCount(ticks);
  // The legend wraps at the plot's width.
  int widest = 1;
  for (int i = 0; i < plot_->legend->itemCount(); ++i) {
    // (A wrapped legend's grid has empty cells: no item there.)
    if (auto* item = plot_->legend->item(i)) widest = std::max(widest, item->minimumOuterSizeHint().width());
  }
  const int columns =
      std::max(1, (width - 8 + plot_->legend->columnSpacing()) / (widest + plot_->legend->columnSpacing()));
  if (plot_->legend->wrap() != columns) {
    plot_->legend->setWrap(columns);
    plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, /*rearrange=*/true);
  }
}

void MetricPlot::set_legend_visible(bool on) {
  if (on == legend_visible()) return;
  // A hidden legend gives its row back to the axes.
  if (on) {
    plot_->plotLayout()->addElement(2, 0, plot_->legend);
    plot_->plotLayout()->setRowStretchFactor(2, 0.001);
  } else {
    plot_->plotLayout()->take(plot_->legend);
    plot_->plotLayout()->simplify();
  }
  plot_->legend->setVisible(on);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

bool MetricPlot::legend_visible() const { return plot_->legend->visible(); }

void MetricPlot::selection_changed() {
  // New runs are fitted, unless the user zooms again after this.
  if (user_moved_) reset_view();
}

void MetricPlot::apply_palette() {
  const QPalette& p = palette();
  plot_->setBackground(p.color(QPalette::Base));
  const QColor text = p.color(QPalette::Text);
  QColor grid = text;
  grid.setAlpha(40);
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    axis->setBasePen(QPen(text));
    axis->setTickPen(QPen(text));
    axis->setSubTickPen(QPen(text));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
  }
  plot_->legend->setBrush(p.color(QPalette::Base));
  plot_->legend->setTextColor(text);
  plot_->legend->setBorderPen(QPen(grid));
  if (auto* title = qobject_cast<QCPTextElement*>(plot_->plotLayout()->element(0, 0))) title->setTextColor(text);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) apply_palette();
  QWidget::changeEvent(event);
}

qsizetype MetricPlot::nearest(const Line& line, double x) const {
  // Over the entries as logged (a resumed run's steps repeat, so the graph's x order is not theirs); a line holds
  // a bounded number of entries.
  if (line.values.empty() || line.smoothed.size() != line.values.size()) return -1;
  const QVector<double> xs = keys(line, 0);
  qsizetype index = 0;
  for (qsizetype i = 1; i < xs.size(); ++i) {
    if (std::abs(xs[i] - x) < std::abs(xs[index] - x)) index = i;
  }
  return index;
}

QString MetricPlot::readout(double x) const {
  QStringList rows;
  // The baseline's value at x, for the others' differences.
  std::optional<double> base;
  if (const auto it = lines_.find(baseline_); it != lines_.end()) {
    if (const auto at = nearest(it->second, x); at >= 0) base = it->second.values[static_cast<std::size_t>(at)];
  }
  for (const auto& [run, line] : lines_) {
    const qsizetype at = nearest(line, x);
    if (at < 0) continue;
    const auto index = static_cast<std::size_t>(at);
    const double smoothed = line.smoothed[index];
    const QString swatch = QString("<span style='color:%1'>&#9632;</span> ").arg(run_colour(run).name());
    QString delta;
    if (base && run != baseline_ && std::isfinite(*base) && std::isfinite(line.values[index])) {
      const double d = line.values[index] - *base;
      const int verdict = app::delta_verdict(
          d, lower_is_better_ ? app::MetricDirection::lower_is_better : app::MetricDirection::higher_is_better);
      delta = QString(" <span style='color:%1'>&Delta; %2 vs baseline</span>")
                  .arg(verdict == 0  ? QString("inherit")
                       : verdict > 0 ? QString("#1b873f")
                                     : QString("#c62828"),
                       app::delta_text(d, *base));
    }
    if (line.summarised) {
      rows << swatch +
                  QString("%1: <b>%2</b> (mean of %3 points, %4 to %5; smoothed %6) @ steps %7-%8")
                      .arg(line.name.toHtmlEscaped(), QString::number(line.values[index], 'g', 6))
                      .arg(static_cast<qint64>(line.counts[index]))
                      .arg(QString::number(line.mins[index], 'g', 6), QString::number(line.maxs[index], 'g', 6),
                           QString::number(smoothed, 'g', 6))
                      .arg(static_cast<qint64>(line.steps[index]))
                      .arg(static_cast<qint64>(line.last_steps[index])) +
                  delta;
      continue;
    }
    rows << swatch +
                QString("%1: <b>%2</b> (smoothed %3) @ step %4")
                    .arg(line.name.toHtmlEscaped(), QString::number(line.values[index], 'g', 6),
                         QString::number(smoothed, 'g', 6))
                    .arg(static_cast<qint64>(line.steps[index])) +
                delta;
  }
  return rows.join("<br>");
}

void MetricPlot::hover(QMouseEvent* event) {
  if (event->buttons() != Qt::NoButton) return;  // dragging
  const QString text = readout(plot_->xAxis->pixelToCoord(event->position().x()));
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), "<b>" + key_.toHtmlEscaped() + "</b><br>" + text, plot_);
  }
}

double MetricPlot::key_of(const Line& line, double step, double wall) const {
  switch (x_axis_) {
    case XAxis::step:
      return step;
    case XAxis::relative_time:
      return wall - line.first_wall;
    case XAxis::wall_time:
      return wall;
  }
  return step;
}

QVector<double> MetricPlot::keys(const Line& line, std::size_t from) const {
  // One key per entry: a raw point's x, or the middle of a bucket's span.
  QVector<double> keys;
  keys.reserve(static_cast<qsizetype>(line.steps.size() - from));
  for (std::size_t i = from; i < line.steps.size(); ++i) {
    const double wall = i < line.walls.size() ? line.walls[i] : 0;
    const double first = key_of(line, line.steps[i], wall);
    if (!line.summarised) {
      keys.push_back(first);
      continue;
    }
    keys.push_back((first + key_of(line, line.last_steps[i], line.last_walls[i])) / 2);
  }
  return keys;
}

void MetricPlot::rebuild(Line& line) {
  if (!line.summarised) {
    const QVector<double> x = keys(line, 0);
    line.raw->setData(x, QVector<double>(line.values.begin(), line.values.end()), /*alreadySorted=*/true);
  } else {
    // The envelope: each bucket's extremes at its first and last x, the one nearer the next bucket's mean last,
    // so the faint line sweeps every spike and the band reads as min to max.
    QVector<double> x, y;
    x.reserve(2 * static_cast<qsizetype>(line.steps.size()));
    y.reserve(2 * static_cast<qsizetype>(line.steps.size()));
    for (std::size_t i = 0; i < line.steps.size(); ++i) {
      const bool rising = i + 1 < line.values.size() ? line.values[i + 1] >= line.values[i] : true;
      x.push_back(key_of(line, line.steps[i], line.walls[i]));
      y.push_back(rising ? line.mins[i] : line.maxs[i]);
      x.push_back(key_of(line, line.last_steps[i], line.last_walls[i]));
      y.push_back(rising ? line.maxs[i] : line.mins[i]);
    }
    line.raw->setData(x, y, /*alreadySorted=*/true);
  }
  resmooth(line);
}

void MetricPlot::set_x_axis(XAxis axis) {
  x_axis_ = axis;
  if (axis == XAxis::wall_time) {
    auto ticker = QSharedPointer<QCPAxisTickerDateTime>::create();
    ticker->setDateTimeFormat("HH:mm:ss\nyyyy-MM-dd");
    plot_->xAxis->setTicker(ticker);
    plot_->xAxis->setLabel("time");
  } else {
    plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    plot_->xAxis->setLabel(axis == XAxis::step && !steps_are_seconds_ ? "step" : "seconds since the start");
  }
  for (auto& [run, line] : lines_) rebuild(line);
  reset_view();
}

void MetricPlot::set_steps_are_seconds(bool on) {
  steps_are_seconds_ = on;
  set_x_axis(x_axis_);
}

void MetricPlot::set_log_y(bool log) {
  plot_->yAxis->setScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (log) {
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  } else {
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  reset_view();
}

bool MetricPlot::save_image(const QString& file, QSize size, double scale) {
  if (size.isEmpty()) size = plot_->size();
  // Ticks and legend columns for the image's width (QCustomPlot lays an export out without a replot), and back
  // for the screen afterwards.
  fit_ticks_and_legend(size.width());
  const QScopeGuard back([this] {
    fit_ticks_and_legend(plot_->width());
    plot_->replot();
  });
  if (file.endsWith(".pdf", Qt::CaseInsensitive)) return plot_->savePdf(file, size.width(), size.height());
  if (file.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator svg;
    svg.setFileName(file);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(key_);
    QCPPainter painter;
    if (!painter.begin(&svg)) return false;
    plot_->toPainter(&painter, size.width(), size.height());
    return painter.end();
  }
  // PNG: laid out at `size`, drawn `scale` times as many pixels each way (2: a 1200x800 plot for a 2400x1600 image
  // at 192 dpi), so text and lines keep their proportions.
  scale = std::clamp(scale, 0.25, 8.0);
  return plot_->savePng(file, size.width(), size.height(), scale, -1, static_cast<int>(std::lround(96 * scale)));
}

bool MetricPlot::save_csv(const QString& file) const {
  // metrics_csv's plot layout: the metrics CSV's columns with the run in front and the smoothed value after. A
  // summarised line writes what it draws: one row per bucket (its first step and wall time, its mean); `spur runs
  // export` has every point.
  std::string text(metrics_csv::kPlotHeader);
  const std::string key = metrics_csv::field(key_.toStdString());
  for (const auto& [run, line] : lines_) {
    const auto& smoothed = line.smoothed;
    const std::string name = metrics_csv::field(line.name.toStdString());
    for (std::size_t i = 0; i < line.steps.size() && i < smoothed.size(); ++i) {
      metrics_csv::append_plot_line(text, run, name, key, static_cast<int64_t>(line.steps[i]), line.values[i],
                                    i < line.walls.size() ? line.walls[i] : 0, smoothed[i]);
    }
  }
  QSaveFile out(file);  // whole or not at all
  return out.open(QIODevice::WriteOnly) &&
         out.write(text.data(), static_cast<qint64>(text.size())) == static_cast<qint64>(text.size()) && out.commit();
}

double MetricPlot::first_x(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() || it->second.raw->dataCount() == 0 ? 0 : it->second.raw->data()->begin()->key;
}

void MetricPlot::context_menu(const QPoint& at) {
  QMenu menu(this);
  auto* log = menu.addAction(tr("Log scale"));
  log->setCheckable(true);
  log->setChecked(plot_->yAxis->scaleType() == QCPAxis::stLogarithmic);
  connect(log, &QAction::toggled, this, [this](bool on) { set_log_y(on); });
  menu.addAction(tr("Fit"), this, [this] { reset_view(); });
  auto* legend = menu.addAction(tr("Show legend"));
  legend->setCheckable(true);
  legend->setChecked(legend_visible());
  connect(legend, &QAction::toggled, this, [this](bool on) { set_legend_visible(on); });
  menu.addSeparator();
  menu.addAction(tr("Export image (PNG, SVG, PDF)..."), this, [this] {
    const QString file =
        QFileDialog::getSaveFileName(this, tr("Export plot"), key_ + ".png", tr("Images (*.png *.svg *.pdf)"));
    if (file.isEmpty()) return;
    ImageSizeDialog size(plot_->size(), file.endsWith(".png", Qt::CaseInsensitive), this);
    if (size.exec() == QDialog::Accepted && !save_image(file, size.image_size(), size.image_scale())) {
      QMessageBox::warning(this, tr("Export plot"), tr("%1 could not be written.").arg(file));
    }
  });
  menu.addAction(tr("Export data (CSV)..."), this, [this] {
    const QString file = QFileDialog::getSaveFileName(this, tr("Export data"), key_ + ".csv", tr("CSV (*.csv)"));
    if (!file.isEmpty()) save_csv(file);
  });
  menu.exec(plot_->mapToGlobal(at));
}

MetricPlot::Line& MetricPlot::line_of(qint64 run, const QString& name) {
  auto& line = lines_[run];
  line.name = name;
  if (!line.raw) {
    line.smoother = app::Smoother(weight_);
    const QColor colour = run_colour(run);
    QColor faint = colour;
    faint.setAlpha(60);
    line.raw = plot_->addGraph();
    line.raw->setPen(QPen(faint));
    line.raw->removeFromLegend();
    line.smooth = plot_->addGraph();
    line.smooth->setPen(QPen(colour, 1.0));  // a 1.6 px pen made a 1M-point replot 8x slower (65 ms)
    line.smooth->setName(legend_name(run, line));
    update_legend();
  }
  return line;
}

void MetricPlot::load(const app::SeriesDelta& delta, const QString& name) {
  if (!delta.replace) {
    append(delta.run, name, delta.steps, delta.values, delta.walls);
    return;
  }
  auto& line = line_of(delta.run, name);
  line.summarised = delta.points_per_bucket > 1;
  line.steps.assign(delta.steps.begin(), delta.steps.end());
  line.values.assign(delta.values.begin(), delta.values.end());
  line.walls.assign(delta.walls.begin(), delta.walls.end());
  line.last_steps.assign(delta.last_steps.begin(), delta.last_steps.end());
  line.last_walls.assign(delta.last_walls.begin(), delta.last_walls.end());
  line.mins.assign(delta.mins.begin(), delta.mins.end());
  line.maxs.assign(delta.maxs.begin(), delta.maxs.end());
  line.counts.assign(delta.counts.begin(), delta.counts.end());
  if (delta.first_wall != 0) line.first_wall = delta.first_wall;
  else if (!line.walls.empty()) line.first_wall = line.walls.front();
  rebuild(line);
  const bool sparse = !line.summarised && line.raw->dataCount() <= kDottedPoints;
  line.smooth->setScatterStyle(sparse ? QCPScatterStyle(QCPScatterStyle::ssDisc, 6) : QCPScatterStyle());
  refit_later();
}

void MetricPlot::refit_later() {
  // One refit for a whole batch of lines loaded or removed (500 lines refitting each other made a selection
  // quadratic: 4 s; a deselection replotted once per run).
  if (!user_moved_ && !refit_pending_) {
    refit_pending_ = true;
    QMetaObject::invokeMethod(
        this,
        [this] {
          refit_pending_ = false;
          if (!user_moved_) refit();
          plot_->replot(QCustomPlot::rpQueuedReplot);
        },
        Qt::QueuedConnection);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values,
                        const QVector<double>& walls) {
  auto& line = line_of(run, name);
  // (A SeriesLoader appends only to lines of raw points; a summarised line is replaced whole.)
  if (line.first_wall == 0 && !walls.isEmpty()) line.first_wall = walls.front();
  const std::size_t from = line.steps.size();
  line.steps.insert(line.steps.end(), steps.begin(), steps.end());
  line.values.insert(line.values.end(), values.begin(), values.end());
  line.walls.insert(line.walls.end(), walls.begin(), walls.end());
  const QVector<double> x = x_axis_ == XAxis::step ? steps : keys(line, from);
  line.raw->addData(x, values, /*alreadySorted=*/true);
  // Extend the smoothed line from its running state: no need to redo the past.
  QVector<double> smoothed;
  smoothed.reserve(values.size());
  for (const double v : values) smoothed.push_back(line.smoother.push(v));
  line.smoothed.insert(line.smoothed.end(), smoothed.begin(), smoothed.end());
  line.smooth->addData(x, smoothed, /*alreadySorted=*/true);
  // Sparse metrics (an accuracy per epoch) get a dot at each point: a line through one point draws nothing.
  const bool sparse = line.raw->dataCount() <= kDottedPoints;
  line.smooth->setScatterStyle(sparse ? QCPScatterStyle(QCPScatterStyle::ssDisc, 6) : QCPScatterStyle());
  for (qsizetype i = 0; i < x.size(); ++i) grow_extent(x[i], values[i]);
  if (!user_moved_) fit_extent();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::remove_run(qint64 run) {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return;
  plot_->removeGraph(it->second.raw);
  plot_->removeGraph(it->second.smooth);
  lines_.erase(it);
  update_legend();
  refit_later();
}

void MetricPlot::rename_run(qint64 run, const QString& name) {
  const auto it = lines_.find(run);
  if (it == lines_.end() || it->second.name == name) return;
  it->second.name = name;
  it->second.smooth->setName(legend_name(run, it->second));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString MetricPlot::run_name(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? QString() : it->second.name;
}

QString MetricPlot::legend_name(qint64 run, const Line& line) const {
  return run == baseline_ ? tr("%1 (baseline)").arg(line.name) : line.name;
}

void MetricPlot::set_baseline(qint64 run, bool lower_is_better) {
  if (run == baseline_ && lower_is_better == lower_is_better_) return;
  baseline_ = run;
  lower_is_better_ = lower_is_better;
  for (auto& [id, line] : lines_) line.smooth->setName(legend_name(id, line));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::resmooth(Line& line) {
  line.smoother = app::Smoother(weight_);
  QVector<double> smoothed;
  smoothed.reserve(static_cast<qsizetype>(line.values.size()));
  for (std::size_t i = 0; i < line.values.size(); ++i) {
    // A bucket's mean counts as its points (TensorBoard's smoothing of the raw series, to within the bucket).
    const auto count = line.summarised ? static_cast<int64_t>(line.counts[i]) : int64_t{1};
    smoothed.push_back(line.smoother.push(line.values[i], count));
  }
  line.smoothed.assign(smoothed.begin(), smoothed.end());
  line.smooth->setData(keys(line, 0), smoothed, /*alreadySorted=*/true);
}

void MetricPlot::update_legend() {
  // Runs in id order: the first kLegendRuns named, the rest counted (a 500-entry legend covered the plot).
  // Many lines: their faint raw lines are drawn without antialiasing (a third of a 500-line replot's time; at alpha
  // 60 the steps do not show). The smoothed lines keep it.
  for (auto& [run, line] : lines_) line.raw->setAntialiased(lines_.size() <= 20);
  plot_->legend->clearItems();
  int shown = 0;
  for (auto& [run, line] : lines_) {
    if (shown == kLegendRuns) break;
    line.smooth->addToLegend();
    ++shown;
  }
  const auto more = static_cast<int>(lines_.size()) - shown;
  if (more > 0 && !more_) {
    more_ = plot_->addGraph();
    more_->setPen(Qt::NoPen);
    more_->removeFromLegend();
  }
  if (more_ && more > 0) {
    more_->setName(tr("and %n more", nullptr, more));
    more_->addToLegend();
  }
}

QStringList MetricPlot::legend_names() const {
  QStringList names;
  for (int i = 0; i < plot_->legend->itemCount(); ++i) {
    if (auto* item = qobject_cast<QCPPlottableLegendItem*>(plot_->legend->item(i))) names << item->plottable()->name();
  }
  return names;
}

qint64 MetricPlot::represented_points(qint64 run) const {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return 0;
  if (!it->second.summarised) return static_cast<qint64>(it->second.values.size());
  double total = 0;
  for (const double c : it->second.counts) total += c;
  return static_cast<qint64>(total);
}

bool MetricPlot::summarised(qint64 run) const {
  const auto it = lines_.find(run);
  return it != lines_.end() && it->second.summarised;
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

void MetricPlot::grow_extent(double key, double value) {
  if (!std::isfinite(key) || !std::isfinite(value)) return;
  if (!have_extent_) {
    key_lo_ = key_hi_ = key;
    value_lo_ = value_hi_ = value;
    have_extent_ = true;
  }
  key_lo_ = std::min(key_lo_, key);
  key_hi_ = std::max(key_hi_, key);
  value_lo_ = std::min(value_lo_, value);
  value_hi_ = std::max(value_hi_, value);
}

void MetricPlot::fit_extent() {
  // A log axis needs positive bounds: QCustomPlot's own scan knows which points to leave out.
  if (!have_extent_ || plot_->yAxis->scaleType() == QCPAxis::stLogarithmic) {
    plot_->rescaleAxes();
    return;
  }
  const auto widen = [](double lo, double hi) {
    return lo == hi ? QCPRange(lo - 0.5, hi + 0.5) : QCPRange(lo, hi);  // one point: a unit around it
  };
  plot_->xAxis->setRange(widen(key_lo_, key_hi_));
  // 4% of headroom above and below, so the highest and lowest points (and their dots) are not cut by the frame.
  const QCPRange values = widen(value_lo_, value_hi_);
  plot_->yAxis->setRange(values.lower - 0.04 * values.size(), values.upper + 0.04 * values.size());
}

void MetricPlot::refit() {
  // Recomputed from the data: runs may have gone, lines were read again, or the x axis changed.
  have_extent_ = false;
  for (const auto& [run, line] : lines_) {
    for (auto it = line.raw->data()->constBegin(); it != line.raw->data()->constEnd(); ++it)
      grow_extent(it->key, it->value);
  }
  fit_extent();
}

void MetricPlot::reset_view() {
  user_moved_ = false;
  view_timer_->stop();
  refit();
  plot_->replot();
  user_view_changed();  // back to the whole series, if a zoom had asked for less
}

}  // namespace spur::studio
