// SPDX-License-Identifier: GPL-3.0-or-later
// The runs table's columns; see runs_columns.h. The GUI thread only: it sizes widgets from the model's texts.
#include "main/runs_columns.h"

#include <QAction>
#include <QEvent>
#include <QHeaderView>
#include <QMap>
#include <QMenu>
#include <QMouseEvent>
#include <QScopeGuard>
#include <QScopedValueRollback>
#include <QSettings>
#include <QStringList>
#include <QStyle>
#include <QTimer>
#include <QTreeView>
#include <QVariant>

#include <algorithm>

#include "studio/runs_model.h"

namespace spur::studio {

RunsColumns::RunsColumns(QTreeView* table, app::RunsModel* runs)
    : QObject(table),
      table_(table),
      viewport_(table->viewport()),
      header_viewport_(table->header()->viewport()),
      runs_(runs) {
  auto* header = table_->header();
  // Column widths from the first rows only: measuring 10,000 rows' texts on every new run froze the window.
  header->setResizeContentsPrecision(200);
  header->setStretchLastSection(true);
  header->setContextMenuPolicy(Qt::CustomContextMenu);
  header->setToolTip(tr("Right-click: choose the columns, and the metrics shown as columns"));
  connect(header, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) { choose(at); });
  // The columns that fit the pane at its default width; the header's context menu shows the others.
  // Most histories hold one project; the status says failed (the exit code is in the overview and the console);
  // the target and start time are in the overview (and the table sorts newest first by id).
  for (const int column :
       {app::RunsModel::Project, app::RunsModel::Started, app::RunsModel::ExitCode, app::RunsModel::Target}) {
    table_->hideColumn(column);
  }
  table_->viewport()->installEventFilter(this);  // its resizes refit the columns
  // So do metric columns shown or hidden (the header's menu, settings), and the baseline's deltas (the window).
  connect(runs_, &QAbstractItemModel::columnsInserted, this, [this] { fit(); });
  // A running run's Progress and Duration grow with it ("360/938 38% eta 1m44s"): fitted again when a text no longer
  // fits its column (it was elided to "360/9...1m44s"); checked on the rows that changed, fitted rarely.
  connect(runs_, &QAbstractItemModel::dataChanged, this, [this](const QModelIndex& from, const QModelIndex& to) {
    if (fitting_) return;
    for (const int column : {int(app::RunsModel::Progress), int(app::RunsModel::Duration)}) {
      if (column < from.column() || column > to.column() || table_->isColumnHidden(column)) continue;
      if (manual_widths_.contains(runs_->headerData(column, Qt::Horizontal).toString())) continue;
      // The cell's text margins, as the style lays an item view's text out.
      const int margin = table_->style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, table_) + 1;
      const int room = table_->columnWidth(column) - 2 * margin;
      for (int row = from.row(); row <= to.row(); ++row) {
        if (table_->fontMetrics().horizontalAdvance(runs_->index(row, column).data().toString()) > room) {
          fit();
          return;
        }
      }
    }
  });
  // And new rows, 250 ms after the last comes: the first fit ran on an empty table (the reader had read nothing yet),
  // which sized the names to their header ("f...0" for every run of a sweep), and a run with a longer name may come.
  // So does a grouping (the view's rows made again).
  auto* refit = new QTimer(this);
  refit->setSingleShot(true);
  refit->setInterval(250);
  connect(refit, &QTimer::timeout, this, [this] { fit(); });
  connect(runs_, &QAbstractItemModel::rowsInserted, refit, qOverload<>(&QTimer::start));
  connect(table_->model(), &QAbstractItemModel::modelReset, refit, qOverload<>(&QTimer::start));
  // A column the user sizes (dragging or double-clicking a divider) keeps that width through refits and sessions;
  // the header's menu fits them again. Only the user's resizes count: the header's press and release bracket them.
  header->viewport()->installEventFilter(this);
  connect(header, &QHeaderView::sectionResized, this, [this, header](int column, int, int width) {
    int last = header->count() - 1;  // the last shown column takes what is left (the stretch): not a choice
    while (last > 0 && header->isSectionHidden(header->logicalIndex(last))) --last;
    if (user_resizing_ && !fitting_ && width > 0 && column != header->logicalIndex(last)) {
      manual_widths_[runs_->headerData(column, Qt::Horizontal).toString()] = width;
    }
  });
}

bool RunsColumns::eventFilter(QObject* watched, QEvent* event) {
  if (watched == viewport_ && event->type() == QEvent::Resize) fit();
  if (watched == header_viewport_) {
    // A left-button drag or double-click on a divider; a right-click opens the menu (which takes the release).
    const auto type = event->type();
    if (type == QEvent::MouseButtonPress || type == QEvent::MouseButtonDblClick || type == QEvent::MouseButtonRelease) {
      const auto* mouse = static_cast<QMouseEvent*>(event);
      user_resizing_ = type != QEvent::MouseButtonRelease && mouse->button() == Qt::LeftButton;
    } else if (type == QEvent::ContextMenu || type == QEvent::Hide) {
      user_resizing_ = false;
    }
  }
  return QObject::eventFilter(watched, event);
}

void RunsColumns::fit() {
  // Measured without the last column's stretch (it is given what is left, not what it needs).
  const QScopedValueRollback fitting(fitting_, true);  // its resizes are not the user's
  auto* header = table_->header();
  header->setStretchLastSection(false);
  for (int column = 0; column < table_->model()->columnCount(); ++column) {
    if (!table_->isColumnHidden(column)) table_->resizeColumnToContents(column);
  }
  const QScopeGuard stretch([header] { header->setStretchLastSection(true); });
  // The widths the user set stay.
  for (int column = 0; column < table_->model()->columnCount(); ++column) {
    const auto manual = manual_widths_.find(table_->model()->headerData(column, Qt::Horizontal).toString());
    if (manual != manual_widths_.end()) table_->setColumnWidth(column, *manual);
  }
  // Columns too wide for the pane give way, so the others stay in view without a scroll bar: the tags first (a
  // sweep's run has four; they took the room and squeezed every name to "f...0"), down to a few characters; then
  // long names (elided in the middle; the tooltip and the overview have them whole). Metric columns keep their
  // values whole. Widths the user set stay.
  const auto manual = [this](int column) {
    return manual_widths_.contains(runs_->headerData(column, Qt::Horizontal).toString());
  };
  const auto total = [this] {
    int sum = 0;
    for (int column = 0; column < table_->model()->columnCount(); ++column) {
      if (!table_->isColumnHidden(column)) sum += table_->columnWidth(column);
    }
    return sum;
  };
  const int pane = table_->viewport()->width();
  const int tags = app::RunsModel::Tags;
  if (!table_->isColumnHidden(tags) && !manual(tags) && total() > pane) {
    const int least = table_->fontMetrics().horizontalAdvance("sweep:ab");
    const int width = table_->columnWidth(tags);
    table_->setColumnWidth(tags, std::min(width, std::max(least, width - (total() - pane))));
  }
  const int name = app::RunsModel::Name;
  const int room = pane - (total() - table_->columnWidth(name));
  if (room < table_->columnWidth(name) && !manual(name)) {
    table_->setColumnWidth(name, std::max(table_->fontMetrics().horizontalAdvance("run-00..."), room));
  }
}

void RunsColumns::choose(const QPoint& at) {
  QMenu menu(table_->window());
  // The runs' own columns (the name always shows), then each metric's final value.
  for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
    if (column == app::RunsModel::Name) continue;
    auto* action = menu.addAction(runs_->headerData(column, Qt::Horizontal).toString());
    action->setCheckable(true);
    action->setChecked(!table_->isColumnHidden(column));
    connect(action, &QAction::toggled, this, [this, column](bool on) {
      const QScopedValueRollback fitting(fitting_, true);
      table_->setColumnHidden(column, !on);
      if (on) fit();
    });
  }
  menu.addSection(tr("Final values"));
  const QStringList shown = runs_->metric_columns();
  const QStringList keys = runs_->metric_keys();
  if (keys.isEmpty()) menu.addAction(tr("No metrics logged yet"))->setEnabled(false);
  for (const auto& key : keys) {
    auto* action = menu.addAction(key);
    action->setCheckable(true);
    action->setChecked(shown.contains(key));
    connect(action, &QAction::toggled, this, [this, key](bool on) {
      QStringList columns = runs_->metric_columns();
      if (on) columns << key;
      else columns.removeAll(key);
      runs_->set_metric_columns(columns);
      fit();
    });
  }
  menu.addSeparator();
  auto* fit_all = menu.addAction(tr("Fit columns to their contents"));
  fit_all->setObjectName("fit_columns");
  fit_all->setEnabled(!manual_widths_.isEmpty());
  connect(fit_all, &QAction::triggered, this, [this] {
    manual_widths_.clear();
    fit();
  });
  menu.exec(table_->header()->mapToGlobal(at));
}

void RunsColumns::restore(const QSettings& settings) {
  runs_->set_metric_columns(settings.value("runs/metric_columns").toStringList());
  const auto widths = settings.value("runs/column_widths").toMap();
  for (auto width = widths.begin(); width != widths.end(); ++width) {
    if (width.value().toInt() > 0) manual_widths_[width.key()] = width.value().toInt();
  }
  if (settings.contains("runs/hidden_columns")) {
    const QStringList hidden = settings.value("runs/hidden_columns").toStringList();
    for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
      table_->setColumnHidden(column, column != app::RunsModel::Name && hidden.contains(QString::number(column)));
    }
  }
  // The sort the user chose (by the column's title: metric columns come and go), else newest first.
  const QString sorted_by = settings.value("runs/sort_column").toString();
  for (int column = 0; column < table_->model()->columnCount(); ++column) {
    if (!sorted_by.isEmpty() && table_->model()->headerData(column, Qt::Horizontal).toString() == sorted_by) {
      table_->sortByColumn(column, settings.value("runs/sort_order").toString() == "ascending" ? Qt::AscendingOrder
                                                                                               : Qt::DescendingOrder);
    }
  }
}

void RunsColumns::save(QSettings& settings) const {
  settings.setValue("runs/metric_columns", runs_->metric_columns());
  QStringList hidden;
  for (int column = 0; column < app::RunsModel::ColumnCount; ++column) {
    if (table_->isColumnHidden(column)) hidden << QString::number(column);
  }
  settings.setValue("runs/hidden_columns", hidden);
  QVariantMap widths;
  for (auto width = manual_widths_.begin(); width != manual_widths_.end(); ++width) widths[width.key()] = *width;
  settings.setValue("runs/column_widths", widths);
  const auto* header = table_->header();
  settings.setValue("runs/sort_column", table_->model()->headerData(header->sortIndicatorSection(), Qt::Horizontal));
  settings.setValue("runs/sort_order", header->sortIndicatorOrder() == Qt::AscendingOrder ? "ascending" : "descending");
}

}  // namespace spur::studio
