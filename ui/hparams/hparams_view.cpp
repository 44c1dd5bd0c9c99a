// SPDX-License-Identifier: GPL-3.0-or-later
// The hyperparameter view; see hparams_view.h.
#include "hparams/hparams_view.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelection>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace spur::studio {
namespace {

constexpr int kLeft = 48, kRight = 64, kTop = 40, kBottom = 24;

// Good (green) through the middle (amber) to bad (red), for a run's place on the first metric's axis.
QColor quality_colour(double goodness) {
  const QColor good(0x1a, 0x96, 0x41), middle(0xf0, 0xa0, 0x20), bad(0xd7, 0x19, 0x1c);
  const auto mix = [](const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                            static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                            static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
  };
  goodness = std::clamp(goodness, 0.0, 1.0);
  return goodness >= 0.5 ? mix(middle, good, (goodness - 0.5) * 2) : mix(bad, middle, goodness * 2);
}

QString tick_text(double v) { return QString::number(v, 'g', 3); }

}  // namespace

ParallelCoordinates::ParallelCoordinates(app::HParamsModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setObjectName("parallel_coordinates");
  setMouseTracking(false);
  setToolTip(tr("Drag along an axis to keep the runs within a range; click an axis to clear it"));
  connect(model_, &QAbstractItemModel::modelReset, this, qOverload<>(&QWidget::update));
  connect(model_, &QAbstractItemModel::dataChanged, this, qOverload<>(&QWidget::update));
}

int ParallelCoordinates::top() const { return kTop; }
int ParallelCoordinates::bottom() const { return height() - kBottom; }

int ParallelCoordinates::axis_x(int axis) const {
  const int n = static_cast<int>(model_->axes().size());
  if (n <= 1) return width() / 2;
  const double span = width() - kLeft - kRight;
  return kLeft + static_cast<int>(std::lround(span * axis / (n - 1)));
}

int ParallelCoordinates::axis_at(int x) const {
  const int n = static_cast<int>(model_->axes().size());
  for (int a = 0; a < n; ++a) {
    if (std::abs(axis_x(a) - x) <= 12) return a;
  }
  return -1;
}

double ParallelCoordinates::value_at(int y) const {
  const double h = std::max(1, bottom() - top());
  return std::clamp((bottom() - y) / h, 0.0, 1.0);
}

void ParallelCoordinates::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QPalette& pal = palette();
  p.fillRect(rect(), pal.base());
  const auto& axes = model_->axes();
  const int n = static_cast<int>(axes.size());
  if (n == 0 || model_->rowCount() == 0) return;
  const double h = bottom() - top();
  auto y_of = [&](double position) { return bottom() - position * h; };

  // The first metric with a direction colours the lines: its better end green (a counter's or a schedule's values
  // are neither good nor bad).
  int colour_axis = -1;
  bool lower_better = true;
  for (int a = 0; a < n; ++a) {
    const auto& axis = axes[static_cast<size_t>(a)];
    const auto direction = axis.metric ? app::guess_direction(axis.label) : app::MetricDirection::neither;
    if (direction != app::MetricDirection::neither) {
      colour_axis = a;
      lower_better = direction == app::MetricDirection::lower_is_better;
      break;
    }
  }
  const int best = model_->best_row();
  QColor faded = pal.color(QPalette::Text);
  faded.setAlphaF(0.12f);
  auto line = [&](int row) {
    QPainterPath path;
    bool open = false;
    for (int a = 0; a < n; ++a) {
      const auto position = model_->position(row, a);
      if (!position) {
        open = false;
        continue;
      }
      const QPointF point(axis_x(a), y_of(*position));
      if (open) path.lineTo(point);
      else path.moveTo(point);
      open = true;
    }
    return path;
  };
  // Runs outside the brushes first, faded; then the brushed ones; the best last, on top.
  for (int pass = 0; pass < 2; ++pass) {
    for (int row = 0; row < model_->rowCount(); ++row) {
      const bool in = model_->brushed(row);
      if ((pass == 0) == in || row == best) continue;
      QColor colour = faded;
      if (in) {
        const auto position = colour_axis >= 0 ? model_->position(row, colour_axis) : std::nullopt;
        colour = position ? quality_colour(lower_better ? 1 - *position : *position) : pal.color(QPalette::Mid);
        colour.setAlphaF(0.8f);
      }
      p.setPen(QPen(colour, 1.4));
      p.drawPath(line(row));
    }
  }
  if (best >= 0) {
    const bool in = model_->brushed(best);
    p.setPen(QPen(in ? quality_colour(1) : faded, 3.2));
    p.drawPath(line(best));
    // Its points ringed (its name is in the summary above the plot).
    if (in) {
      p.setPen(QPen(pal.color(QPalette::Text), 1.5));
      p.setBrush(quality_colour(1));
      for (int a = 0; a < n; ++a) {
        if (const auto position = model_->position(best, a)) p.drawEllipse(QPointF(axis_x(a), y_of(*position)), 4, 4);
      }
      p.setBrush(Qt::NoBrush);
    }
  }

  // Axes, their titles, ticks and brushes.
  const QFontMetrics metrics(font());
  const int spacing = n > 1 ? axis_x(1) - axis_x(0) : width();
  for (int a = 0; a < n; ++a) {
    const auto& axis = axes[static_cast<size_t>(a)];
    const int x = axis_x(a);
    if (const auto it = model_->brushes().find(a); it != model_->brushes().end()) {
      QColor fill = pal.color(QPalette::Highlight);
      fill.setAlphaF(0.3f);
      const double y1 = y_of(it->second.second), y2 = y_of(it->second.first);
      p.fillRect(QRectF(x - 7, y1, 14, std::max(2.0, y2 - y1)), fill);
    }
    p.setPen(QPen(pal.color(QPalette::Text), 1));
    p.drawLine(x, top(), x, bottom());
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    const QString title = QFontMetrics(bold).elidedText(axis.label, Qt::ElideMiddle, std::max(40, spacing - 6));
    const int title_width = QFontMetrics(bold).horizontalAdvance(title);
    p.drawText(std::clamp(x - title_width / 2, 2, width() - title_width - 2), top() - 16, title);
    p.setFont(font());
    p.setPen(pal.color(QPalette::PlaceholderText));
    auto tick = [&](double position, const QString& text) {
      const int y = static_cast<int>(y_of(position));
      p.drawLine(x - 3, y, x, y);
      const QString shown = metrics.elidedText(text, Qt::ElideRight, std::max(30, spacing / 2 - 6));
      p.drawText(x + 4, y + metrics.ascent() / 2, shown);
    };
    if (axis.numeric) {
      if (axis.hi == axis.lo) {
        tick(0.5, tick_text(axis.lo));
      } else if (axis.log) {
        tick(0, tick_text(axis.lo));
        tick(0.5, tick_text(std::sqrt(axis.lo * axis.hi)));
        tick(1, tick_text(axis.hi));
      } else {
        tick(0, tick_text(axis.lo));
        tick(0.5, tick_text((axis.lo + axis.hi) / 2));
        tick(1, tick_text(axis.hi));
      }
    } else {
      const int k = static_cast<int>(axis.categories.size());
      const int every = std::max(1, k * metrics.height() / std::max(1, static_cast<int>(h)) + 1);
      for (int i = 0; i < k; i += every) tick(k == 1 ? 0.5 : static_cast<double>(i) / (k - 1), axis.categories[i]);
    }
  }
}

void ParallelCoordinates::mousePressEvent(QMouseEvent* event) {
  dragging_ = axis_at(static_cast<int>(event->position().x()));
  drag_from_ = static_cast<int>(event->position().y());
  dragged_ = false;
  if (dragging_ < 0) QWidget::mousePressEvent(event);
}

void ParallelCoordinates::mouseMoveEvent(QMouseEvent* event) {
  if (dragging_ < 0) return;
  const int y = static_cast<int>(event->position().y());
  if (std::abs(y - drag_from_) < 3 && !dragged_) return;
  dragged_ = true;
  model_->set_brush(dragging_, value_at(drag_from_), value_at(y));
}

void ParallelCoordinates::mouseReleaseEvent(QMouseEvent* event) {
  if (dragging_ >= 0 && !dragged_) model_->clear_brush(dragging_);  // a click clears the axis
  dragging_ = -1;
  QWidget::mouseReleaseEvent(event);
}

HParamsView::HParamsView(QWidget* parent)
    : QWidget(parent),
      model_(new app::HParamsModel(this)),
      plot_(new ParallelCoordinates(model_, this)),
      table_(new QTableView(this)),
      metrics_(new QToolButton(this)),
      clear_(new QToolButton(this)),
      summary_(new QLabel(this)),
      empty_(new QLabel(tr("Select runs in the table (a sweep's: filter by its tag, sweep:ID) to see their "
                           "parameters against their metrics."),
                        this)) {
  setObjectName("hparams_view");
  metrics_->setText(tr("Metrics"));
  metrics_->setObjectName("hparams_metrics");
  metrics_->setPopupMode(QToolButton::InstantPopup);
  metrics_->setMenu(new QMenu(metrics_));
  clear_->setText(tr("Clear brushes"));
  clear_->setObjectName("hparams_clear");
  connect(clear_, &QToolButton::clicked, model_, &app::HParamsModel::clear_brushes);
  summary_->setObjectName("hparams_summary");
  empty_->setWordWrap(true);
  empty_->setAlignment(Qt::AlignCenter);

  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(model_);
  proxy->setSortRole(app::HParamsModel::SortRole);
  table_->setModel(proxy);
  table_->setObjectName("hparams_table");
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);

  auto* bar = new QHBoxLayout;
  bar->addWidget(metrics_);
  bar->addWidget(clear_);
  bar->addWidget(summary_, 1);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(plot_);
  splitter->addWidget(table_);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setSizes({480, 320});  // the plot first: the table is there to read exact values
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(empty_);
  layout->addWidget(splitter, 1);

  connect(model_, &app::HParamsModel::brushed_changed, this, &HParamsView::brushed);
  connect(model_, &QAbstractItemModel::modelReset, this, [this, splitter] {
    const bool none = model_->rowCount() == 0;
    empty_->setVisible(none);
    splitter->setVisible(!none);
    table_->resizeColumnsToContents();
  });
  empty_->setVisible(true);
  splitter->setVisible(false);
}

void HParamsView::set_snapshot(const app::CompareSnapshot& snapshot) {
  model_->set_snapshot(snapshot);
  update_metrics_menu();
}

void HParamsView::update_metrics_menu() {
  QMenu* menu = metrics_->menu();
  menu->clear();
  const QStringList chosen = model_->metrics();
  for (const QString& key : model_->metric_keys()) {
    QAction* action = menu->addAction(key);
    action->setCheckable(true);
    action->setChecked(chosen.contains(key));
    connect(action, &QAction::toggled, this, [this, key](bool on) {
      QStringList keys = model_->metrics();
      if (on && !keys.contains(key)) keys << key;
      if (!on) keys.removeAll(key);
      model_->set_metrics(keys);
    });
  }
}

void HParamsView::brushed(const QList<qint64>& runs) {
  const int total = model_->rowCount();
  QString text = tr("%n run(s)", nullptr, total);
  if (!model_->brushes().empty()) text += tr(", %1 within the brushes").arg(runs.size());
  if (const int best = model_->best_row(); best >= 0) {
    for (const auto& axis : model_->axes()) {
      if (!axis.metric) continue;
      const int column = static_cast<int>(&axis - model_->axes().data()) + 1;
      text += tr("; best %1: %2 (%3)")
                  .arg(axis.label, model_->run_name(best), model_->data(model_->index(best, column)).toString());
      break;
    }
  }
  summary_->setText(text);
  // The brushed runs are selected in the table; the table's selection is the user's own when nothing is brushed
  // (and is cleared once, when the last brush goes).
  const bool brushing = !model_->brushes().empty();
  if (!brushing && !had_brushes_) return;
  had_brushes_ = brushing;
  auto* proxy = static_cast<QSortFilterProxyModel*>(table_->model());
  QItemSelection selection;
  if (!model_->brushes().empty()) {
    for (int row = 0; row < total; ++row) {
      if (!model_->brushed(row)) continue;
      const QModelIndex left = proxy->mapFromSource(model_->index(row, 0));
      const QModelIndex right = proxy->mapFromSource(model_->index(row, model_->columnCount() - 1));
      selection.select(left, right);
    }
  }
  table_->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

}  // namespace spur::studio
