// SPDX-License-Identifier: GPL-3.0-or-later
// One metric's plot; see metric_plot.h. It draws app::PlotData's lines: QCustomPlot's adaptive sampling keeps
// first/min/max/last per pixel column, so a million points draw in milliseconds and spikes survive.
#include "dashboard/metric_plot.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QSpinBox>
#include <QMenu>
#include <QMessageBox>
#include <QScopeGuard>
#include <QMouseEvent>
#include <QPainter>
#include <QLabel>
#include <QSettings>
#include <QStandardPaths>
#include <QSvgGenerator>
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

namespace {

/// Steps are whole numbers: ticks 1 apart at the least (one point's axis showed 149.6 to 150.4).
class StepTicker : public QCPAxisTicker {
 protected:
  double getTickStep(const QCPRange& range) override { return std::max(1.0, QCPAxisTicker::getTickStep(range)); }
};

}  // namespace

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
  // The wheel and a drag move along x only (zooming y too pushed the curve out of view); y follows the data in view.
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->xAxis->setTicker(QSharedPointer<StepTicker>::create());
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this] { reset_view(); });
  connect(plot_, &QCustomPlot::mouseWheel, this, [this] {
    user_moved_ = true;
    follow_y_ = true;
  });
  connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* event) {
    user_moved_ = true;
    // Ctrl+drag draws a box to zoom into (both axes, as drawn); a plain drag pans along x.
    const bool box = event->modifiers() & Qt::ControlModifier;
    follow_y_ = !box;
    plot_->setSelectionRectMode(box ? QCP::srmZoom : QCP::srmNone);
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
    if (!user_moved_) return;
    view_timer_->start();
    if (follow_y_) fit_y_to_view();
  });
  // The hover read-out: a box over the axes (never over the next plot), the cursor a vertical line.
  readout_ = new QLabel(plot_);
  readout_->setObjectName("readout");
  readout_->setTextFormat(Qt::RichText);
  readout_->setWordWrap(false);
  readout_->setFont(QFont(font().family(), 8));
  readout_->setAttribute(Qt::WA_TransparentForMouseEvents);
  readout_->hide();
  cursor_ = new QCPItemStraightLine(plot_);
  cursor_->setVisible(false);
  cursor_->setSelectable(false);
  plot_->installEventFilter(this);
  apply_palette();
}

QWidget* MetricPlot::readout_box() const { return readout_; }

QRect MetricPlot::axes_rect() const { return plot_->axisRect()->rect().translated(plot_->pos()); }

std::optional<QPoint> MetricPlot::pixel_at(qint64 run, double x) const {
  const auto index = data_.nearest(run, x);
  if (index < 0) return std::nullopt;
  const double key = data_.keys(run).value(index), value = data_.smoothed(run).value(index);
  return QPoint(static_cast<int>(plot_->xAxis->coordToPixel(key)),
                static_cast<int>(plot_->yAxis->coordToPixel(value))) +
         plot_->pos();
}

bool MetricPlot::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_ && event->type() == QEvent::Leave) emit hovered(std::nan(""));
  return QWidget::eventFilter(watched, event);
}

void MetricPlot::fit_y_to_view() {
  if (plot_->yAxis->scaleType() == QCPAxis::stLogarithmic) return;
  bool found_any = false;
  QCPRange values;
  for (const auto& [run, graphs] : graphs_) {
    bool found = false;
    const QCPRange range = graphs.raw->getValueRange(found, QCP::sdBoth, plot_->xAxis->range());
    if (!found) continue;
    if (!found_any) values = range;
    else values.expand(range);
    found_any = true;
  }
  if (!found_any) return;
  const double pad = values.size() > 0 ? 0.04 * values.size() : std::max(std::abs(values.lower) * 0.1, 0.5);
  plot_->yAxis->setRange(values.lower - pad, values.upper + pad);
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

void MetricPlot::apply_palette() { apply_palette(palette()); }

void MetricPlot::apply_palette(const QPalette& p) {
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
  if (readout_) {
    QColor box = p.color(QPalette::Base);
    box.setAlpha(235);
    readout_->setStyleSheet(QString("QLabel#readout { background: %1; color: %2; border: 1px solid %3; padding: 3px; }")
                                .arg(box.name(QColor::HexArgb), text.name(), grid.name(QColor::HexArgb)));
  }
  if (cursor_) cursor_->setPen(QPen(grid.darker(), 1, Qt::DashLine));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) apply_palette();
  QWidget::changeEvent(event);
}

QString MetricPlot::readout(double x) const { return data_.readout(x); }

void MetricPlot::hover(QMouseEvent* event) {
  if (event->buttons() != Qt::NoButton) return;  // dragging
  if (!plot_->axisRect()->rect().contains(event->position().toPoint())) {
    emit hovered(std::nan(""));
    return;
  }
  emit hovered(plot_->xAxis->pixelToCoord(event->position().x()));
}

void MetricPlot::show_cursor(double x) {
  // One step for every run (the common case): said once in the heading, each row its value and time.
  const std::optional<qint64> step = std::isfinite(x) && data_.x_axis() == XAxis::step && !data_.steps_are_seconds()
                                         ? data_.common_step(x)
                                         : std::nullopt;
  const QString rows = std::isfinite(x) ? data_.readout(x, 4, !step) : QString();
  if (rows.isEmpty()) {
    if (!readout_->isVisible() && !cursor_->visible()) return;
    readout_->hide();
    cursor_->setVisible(false);
    plot_->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  cursor_->point1->setCoords(x, 0);
  cursor_->point2->setCoords(x, 1);
  cursor_->setVisible(true);
  // 4 significant digits and the legend's font: a read-out of 3 runs fits a plot of two columns.
  const QString where = step ? tr("step %1").arg(*step) : data_.x_text(x);
  readout_->setText("<b>" + data_.key().toHtmlEscaped() + "</b> &middot; " + where.toHtmlEscaped() + "<br>" + rows);
  readout_->adjustSize();
  place_readout(x);
  readout_->show();
  readout_->raise();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void MetricPlot::place_readout(double x) {
  // Beside the cursor, on the side with more room, at the top or the bottom of the axes, whichever covers fewer of
  // the points drawn there (the box went where the mouse was: over the curve, over the next plot).
  const QRect axes = plot_->axisRect()->rect();
  const QSize size = readout_->sizeHint().boundedTo(axes.size() - QSize(8, 8));
  readout_->resize(size);
  const int cursor = static_cast<int>(plot_->xAxis->coordToPixel(x));
  const int left = cursor > axes.center().x() ? axes.left() + 4 : axes.right() - size.width() - 4;
  const QRect top(QPoint(left, axes.top() + 4), size), bottom(QPoint(left, axes.bottom() - size.height() - 4), size);
  int in_top = 0, in_bottom = 0;
  const QCPRange span(plot_->xAxis->pixelToCoord(left), plot_->xAxis->pixelToCoord(left + size.width()));
  for (const auto& [run, graphs] : graphs_) {
    for (QCPGraph* graph : {graphs.smooth, graphs.raw}) {
      const auto data = graph->data();
      auto begin = data->findBegin(span.lower), end = data->findEnd(span.upper);
      const auto count = end - begin;
      const auto stride = std::max<decltype(count)>(1, count / 200);  // sampled: a line may hold 200,000 points
      for (auto it = begin; it < end; it += stride) {
        const QPoint at(static_cast<int>(plot_->xAxis->coordToPixel(it->key)),
                        static_cast<int>(plot_->yAxis->coordToPixel(it->value)));
        in_top += top.contains(at);
        in_bottom += bottom.contains(at);
      }
    }
  }
  readout_->move(in_bottom < in_top ? bottom.topLeft() : top.topLeft());
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
  } else if (axis == XAxis::step && !data_.steps_are_seconds()) {
    plot_->xAxis->setTicker(QSharedPointer<StepTicker>::create());
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
  // On white, as a figure goes into a paper or a slide (the dark theme's background came along).
  QPalette light;
  light.setColor(QPalette::Base, Qt::white);
  light.setColor(QPalette::Text, Qt::black);
  apply_palette(light);
  const bool cursor = cursor_->visible();
  cursor_->setVisible(false);
  const QScopeGuard back([this, cursor] {
    apply_palette();
    cursor_->setVisible(cursor);
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

QString MetricPlot::export_folder() {
  QString kept = QSettings().value("dashboard/export_folder").toString();
  if (!kept.isEmpty() && QFileInfo(kept).isDir()) return kept;
  const QString pictures = QStandardPaths::writableLocation(QStandardPaths::PicturesLocation);
  return !pictures.isEmpty() && QFileInfo(pictures).isDir() ? pictures : QDir::homePath();
}

void MetricPlot::context_menu(const QPoint& at) {
  QMenu menu(this);
  auto* pin = menu.addAction(tr("Pin to the top"));
  pin->setCheckable(true);
  pin->setChecked(pinned_);
  connect(pin, &QAction::toggled, this, [this](bool on) { emit pin_toggled(on); });
  auto* wide = menu.addAction(tr("Full width"));
  wide->setCheckable(true);
  wide->setChecked(wide_);
  connect(wide, &QAction::toggled, this, [this](bool on) { emit wide_toggled(on); });
  menu.addSeparator();
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
  // Both exports: offered in the folder last used, named after the whole key; said when written, or why not.
  const auto written = [this](const QString& title, const QString& file, bool ok) {
    if (!ok) {
      QMessageBox::warning(this, title, tr("%1 could not be written.").arg(file));
      return;
    }
    QSettings().setValue("dashboard/export_folder", QFileInfo(file).absolutePath());
    emit exported(file);
  };
  menu.addAction(tr("Export image (PNG, SVG, PDF)..."), this, [this, written] {
    const QString file = QFileDialog::getSaveFileName(this, tr("Export plot"),
                                                      QDir(export_folder()).filePath(data_.file_stem() + ".png"),
                                                      tr("Images (*.png *.svg *.pdf)"));
    if (file.isEmpty()) return;
    ImageSizeDialog size(plot_->size(), file.endsWith(".png", Qt::CaseInsensitive), this);
    if (size.exec() != QDialog::Accepted) return;
    written(tr("Export plot"), file, save_image(file, size.image_size(), size.image_scale()));
  });
  menu.addAction(tr("Export data (CSV)..."), this, [this, written] {
    const QString file = QFileDialog::getSaveFileName(
        this, tr("Export data"), QDir(export_folder()).filePath(data_.file_stem() + ".csv"), tr("CSV (*.csv)"));
    if (!file.isEmpty()) written(tr("Export data"), file, save_csv(file));
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

void MetricPlot::set_run_start(qint64 run, double wall) {
  if (!data_.set_run_start(run, wall) || data_.x_axis() != XAxis::relative_time) return;
  if (const auto it = graphs_.find(run); it != graphs_.end()) redraw(run, it->second);
  refit_later();
}

void MetricPlot::set_baseline(qint64 run, app::MetricDirection direction) {
  if (!data_.set_baseline(run, direction)) return;
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
  // One x: a step either side (whole steps); one value: a tenth of it either side (an lr of 0.001 on an axis from
  // -0.5 to 0.5 read "0"), or 1 around 0.
  const bool steps = data_.x_axis() == XAxis::step && !data_.steps_are_seconds();
  const auto widen = [](double lo, double hi, double by) {
    return lo == hi ? QCPRange(lo - by, hi + by) : QCPRange(lo, hi);
  };
  plot_->xAxis->setRange(widen(extent.key_lo, extent.key_hi, steps ? 1.0 : 0.5));
  const double half = extent.value_lo == 0 ? 1.0 : std::abs(extent.value_lo) * 0.1;
  const QCPRange values = widen(extent.value_lo, extent.value_hi, half);
  // 4% of headroom above and below, so the highest and lowest points (and their dots) are not cut by the frame.
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
