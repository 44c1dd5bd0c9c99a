// SPDX-License-Identifier: GPL-3.0-or-later
// RunsColumns: the runs table's columns: which show (the header's context menu: the runs' own columns, then each
// metric's final value as a column) and how wide. Columns are sized to their contents and the names narrowed to
// keep every column in the pane, again whenever the pane is resized, a column is added or the texts change (the
// baseline's deltas); a column the user sizes (dragging or double-clicking a divider) keeps that width through
// refits and sessions, until the menu's "Fit columns to their contents".
// Threads: the GUI thread only. It measures what the model already holds; it reads nothing itself.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>

class QEvent;
class QPoint;
class QSettings;
class QTreeView;

namespace spur::app {
class RunsModel;
}

namespace spur::studio {

class RunsColumns : public QObject {
  Q_OBJECT

 public:
  /// Takes charge of the columns of `table`, which shows `runs` through proxies that keep its columns: hides those
  /// that do not fit the pane at its default width, and sets up the header's menu and the fitting. A child of the
  /// table (it goes with it).
  RunsColumns(QTreeView* table, app::RunsModel* runs);

  /// Columns sized to their contents, the names narrowed to keep every column in the pane; the widths the user set
  /// stay.
  void fit();
  /// The header's menu at `at` (in the header's coordinates): the columns to show, the metrics shown as columns,
  /// and "Fit columns to their contents" (the widths the user set are forgotten).
  void choose(const QPoint& at);
  /// The metric columns, the widths the user set, the hidden columns and the sort (settings: runs/metric_columns,
  /// runs/column_widths, runs/hidden_columns, runs/sort_column by its title and runs/sort_order).
  void restore(const QSettings& settings);
  void save(QSettings& settings) const;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QTreeView* table_;
  // The two viewports it watches, kept to compare with (never called through): their events keep coming while
  // the table is being destroyed, when table_ is no longer a QTreeView (UBSan caught calling through it).
  const QObject* viewport_;
  const QObject* header_viewport_;
  app::RunsModel* runs_;
  QHash<QString, int> manual_widths_;  // by column title: the widths the user gave
  bool user_resizing_ = false;         // the left button is down on the header
  bool fitting_ = false;               // the columns are being sized here, not by the user
};

}  // namespace spur::studio
