// SPDX-License-Identifier: GPL-3.0-or-later
// One metric's plot; see metric_plot.h. It draws app::PlotData's lines: QCustomPlot's adaptive sampling keeps
// first/min/max/last per pixel column, so a million points draw in milliseconds and spikes survive.
#include "dashboard/metric_plot.h"

#include <QDialogButtonBox>
#include <QDoubleSpinBox>
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
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

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

QColor run_colour(qint64 run) { return QColor(app::run_colour_name(run)); }

MetricPlot::MetricPlot(QString key, QWidget* parent)
    : QWidget(parent), data_(std::move(key)), plot_(new QCustomPlot(this)), view_timer_(new QTimer(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  setMinimumHeight(220);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0,
                                  new QCPTextElement(plot_, data_.key(), QFont(font().family(), 10, QFont::Bold)));
  plot_->xAxis->setLabel(data_.x_label());
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
  if (!user_moved_ || data_.x_axis() == XAxis::relative_time) return view;
  view.lo = plot_->xAxis->range().lower;
  view.hi = plot_->xAxis->range().upper;
  view.by_wall = data_.x_axis() == XAxis::wall_time;
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
  if (axis == plot_->xAxis && data_.x_axis() == XAxis::wall_time) return metrics.horizontalAdvance("0000-00-00");
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

QString MetricPlot::readout(double x) const { return data_.readout(x); }

void MetricPlot::hover(QMouseEvent* event) {
  if (event->buttons() != Qt::NoButton) return;  // dragging
  const QString text = readout(plot_->xAxis->pixelToCoord(event->position().x()));
  if (text.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(event->globalPosition().toPoint(), "<b>" + data_.key().toHtmlEscaped() + "</b><br>" + text,
                       plot_);
  }
}

void MetricPlot::redraw(qint64 run, Graphs& graphs) {
  // The faint line: the raw points, or a summarised line's min-max envelope; over it the smoothed line.
  const app::PlotData::Points faint = data_.envelope(run);
  graphs.raw->setData(faint.keys, faint.values, /*alreadySorted=*/true);
  graphs.smooth->setData(data_.keys(run), data_.smoothed(run), /*alreadySorted=*/true);
}

void MetricPlot::set_x_axis(XAxis axis) {
  data_.set_x_axis(axis);
  if (axis == XAxis::wall_time) {
    auto ticker = QSharedPointer<QCPAxisTickerDateTime>::create();
    ticker->setDateTimeFormat("HH:mm:ss\nyyyy-MM-dd");
    plot_->xAxis->setTicker(ticker);
  } else {
    plot_->xAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  plot_->xAxis->setLabel(data_.x_label());
  for (auto& [run, graphs] : graphs_) redraw(run, graphs);
  reset_view();
}

void MetricPlot::set_steps_are_seconds(bool on) {
  data_.set_steps_are_seconds(on);
  set_x_axis(data_.x_axis());
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
    svg.setTitle(data_.key());
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

bool MetricPlot::save_csv(const QString& file) const { return data_.save_csv(file); }

double MetricPlot::first_x(qint64 run) const { return data_.first_x(run); }

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
        QFileDialog::getSaveFileName(this, tr("Export plot"), data_.key() + ".png", tr("Images (*.png *.svg *.pdf)"));
    if (file.isEmpty()) return;
    ImageSizeDialog size(plot_->size(), file.endsWith(".png", Qt::CaseInsensitive), this);
    if (size.exec() == QDialog::Accepted && !save_image(file, size.image_size(), size.image_scale())) {
      QMessageBox::warning(this, tr("Export plot"), tr("%1 could not be written.").arg(file));
    }
  });
  menu.addAction(tr("Export data (CSV)..."), this, [this] {
    const QString file = QFileDialog::getSaveFileName(this, tr("Export data"), data_.key() + ".csv", tr("CSV (*.csv)"));
    if (!file.isEmpty()) save_csv(file);
  });
  menu.exec(plot_->mapToGlobal(at));
}

void MetricPlot::load(const app::SeriesDelta& delta, const QString& name) { draw(delta.run, data_.load(delta, name)); }

void MetricPlot::append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values,
                        const QVector<double>& walls) {
  draw(run, data_.append(run, name, steps, values, walls));
}

void MetricPlot::draw(qint64 run, const app::PlotData::Change& change) {
  auto& graphs = graphs_[run];
  if (!graphs.raw) {
    const QColor colour = run_colour(run);
    QColor faint = colour;
    faint.setAlpha(60);
    graphs.raw = plot_->addGraph();
    graphs.raw->setPen(QPen(faint));
    graphs.raw->removeFromLegend();
    graphs.smooth = plot_->addGraph();
    graphs.smooth->setPen(QPen(colour, 1.0));  // a 1.6 px pen made a 1M-point replot 8x slower (65 ms)
    graphs.smooth->setName(data_.legend_name(run));
    update_legend();
  }
  // Sparse metrics (an accuracy per epoch) get a dot at each point: a line through one point draws nothing.
  const auto dots = [&](bool sparse) {
    graphs.smooth->setScatterStyle(sparse ? QCPScatterStyle(QCPScatterStyle::ssDisc, 6) : QCPScatterStyle());
  };
  if (change.replaced) {
    redraw(run, graphs);
    dots(!data_.summarised(run) && graphs.raw->dataCount() <= kDottedPoints);
    refit_later();
    return;
  }
  // Appended points: added to the graphs as they are (the smoothed line was extended from its running state).
  graphs.raw->addData(change.keys, change.values, /*alreadySorted=*/true);
  graphs.smooth->addData(change.keys, change.smoothed, /*alreadySorted=*/true);
  dots(graphs.raw->dataCount() <= kDottedPoints);
  if (!user_moved_) fit_extent();
  plot_->replot(QCustomPlot::rpQueuedReplot);
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
          if (!user_moved_) fit_extent();
          plot_->replot(QCustomPlot::rpQueuedReplot);
        },
        Qt::QueuedConnection);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::remove_run(qint64 run) {
  if (!data_.remove_run(run)) return;
  if (const auto it = graphs_.find(run); it != graphs_.end()) {
    plot_->removeGraph(it->second.raw);
    plot_->removeGraph(it->second.smooth);
    graphs_.erase(it);
  }
  update_legend();
  refit_later();
}

void MetricPlot::rename_run(qint64 run, const QString& name) {
  if (!data_.rename_run(run, name)) return;
  if (const auto it = graphs_.find(run); it != graphs_.end()) it->second.smooth->setName(data_.legend_name(run));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString MetricPlot::run_name(qint64 run) const { return data_.name(run); }

void MetricPlot::set_baseline(qint64 run, bool lower_is_better) {
  if (!data_.set_baseline(run, lower_is_better)) return;
  for (auto& [id, graphs] : graphs_) graphs.smooth->setName(data_.legend_name(id));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::update_legend() {
  // Runs in id order: the first kLegendRuns named, the rest counted (a 500-entry legend covered the plot).
  // Many lines: their faint raw lines are drawn without antialiasing (a third of a 500-line replot's time; at alpha
  // 60 the steps do not show). The smoothed lines keep it.
  for (auto& [run, graphs] : graphs_) graphs.raw->setAntialiased(graphs_.size() <= 20);
  plot_->legend->clearItems();
  int shown = 0;
  for (auto& [run, graphs] : graphs_) {
    if (shown == kLegendRuns) break;
    graphs.smooth->addToLegend();
    ++shown;
  }
  const auto more = static_cast<int>(graphs_.size()) - shown;
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

qint64 MetricPlot::represented_points(qint64 run) const { return data_.represented_points(run); }

bool MetricPlot::summarised(qint64 run) const { return data_.summarised(run); }

void MetricPlot::set_smoothing(double weight) {
  data_.set_smoothing(weight);
  for (auto& [run, graphs] : graphs_) {
    graphs.smooth->setData(data_.keys(run), data_.smoothed(run), /*alreadySorted=*/true);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

int MetricPlot::point_count(qint64 run) const { return data_.point_count(run); }

void MetricPlot::fit_extent() {
  // The data's extent, grown with each append (a rescale scanning every point of every line made a live update
  // O(all points)). A log axis needs positive bounds: QCustomPlot's own scan knows which points to leave out.
  const app::PlotData::Extent extent = data_.extent();
  if (!extent.valid || plot_->yAxis->scaleType() == QCPAxis::stLogarithmic) {
    plot_->rescaleAxes();
    return;
  }
  const auto widen = [](double lo, double hi) {
    return lo == hi ? QCPRange(lo - 0.5, hi + 0.5) : QCPRange(lo, hi);  // one point: a unit around it
  };
  plot_->xAxis->setRange(widen(extent.key_lo, extent.key_hi));
  // 4% of headroom above and below, so the highest and lowest points (and their dots) are not cut by the frame.
  const QCPRange values = widen(extent.value_lo, extent.value_hi);
  plot_->yAxis->setRange(values.lower - 0.04 * values.size(), values.upper + 0.04 * values.size());
}

void MetricPlot::reset_view() {
  user_moved_ = false;
  view_timer_->stop();
  fit_extent();
  plot_->replot();
  user_view_changed();  // back to the whole series, if a zoom had asked for less
}

}  // namespace spur::studio
