// SPDX-License-Identifier: GPL-3.0-or-later
// HParamsView: the selected runs' parameters against their metrics (app/studio/HParamsModel), as TensorBoard's
// HParams and W&B's parallel coordinates: a parallel-coordinates plot (an axis per varying parameter and chosen
// metric, a line per run coloured by the first metric, the best run drawn thicker and ringed; drag along an axis
// to brush it, click it to clear) over a sortable table of the same values, whose brushed runs are selected. It
// only paints: the window hands it the CompareSnapshot its reader thread read for the Compare tab.
//
// Threads: the GUI thread's.
#pragma once

#include <QWidget>

#include "studio/hparams_model.h"

class QLabel;
class QTableView;
class QToolButton;

namespace spur::studio {

/// The plot alone (HParamsView lays it out with the table): it reads the model and writes brushes into it.
class ParallelCoordinates : public QWidget {
  Q_OBJECT

 public:
  explicit ParallelCoordinates(app::HParamsModel* model, QWidget* parent = nullptr);
  QSize minimumSizeHint() const override { return {320, 220}; }
  /// The x of an axis and the plot's top and bottom (for tests that brush with the mouse).
  int axis_x(int axis) const;
  int top() const;
  int bottom() const;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

 private:
  int axis_at(int x) const;
  double value_at(int y) const;

  app::HParamsModel* model_;
  int dragging_ = -1;  // the axis being brushed
  int drag_from_ = 0;  // y where the drag began
  bool dragged_ = false;
};

class HParamsView : public QWidget {
  Q_OBJECT

 public:
  explicit HParamsView(QWidget* parent = nullptr);
  app::HParamsModel* model() const { return model_; }
  ParallelCoordinates* plot() const { return plot_; }
  QTableView* table() const { return table_; }
  void set_snapshot(const app::CompareSnapshot& snapshot);

 private:
  void update_metrics_menu();
  void brushed(const QList<qint64>& runs);

  app::HParamsModel* model_;
  ParallelCoordinates* plot_;
  QTableView* table_;
  QToolButton* metrics_;
  QToolButton* clear_;
  QLabel* summary_;
  QLabel* empty_;
  bool had_brushes_ = false;  // the last brushed() selected the brushed runs
};

}  // namespace spur::studio
