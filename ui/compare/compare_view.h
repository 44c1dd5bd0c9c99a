// SPDX-License-Identifier: GPL-3.0-or-later
// CompareView: the selected runs side by side (app/runs/CompareModel): their records, configurations, parameters
// and each metric's final and best value, with "Differences only", a baseline whose deltas colour the other runs'
// metric cells green (better) or red (worse), and each metric's direction set from its row's context menu. It only
// paints: the window reads CompareSnapshots on its reader thread and hands them to set_snapshot().
#pragma once

#include <QWidget>

#include "studio/compare_model.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QTableView;

namespace spur::studio {

class CompareView : public QWidget {
  Q_OBJECT

 public:
  explicit CompareView(QWidget* parent = nullptr);

  app::CompareModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QCheckBox* differences_only() const { return differences_; }
  /// Shows a read; keeps the baseline when that run is still compared.
  void set_snapshot(const app::CompareSnapshot& snapshot);
  /// Chooses the baseline (0: none), as the combo box does; a run not compared yet becomes the baseline as soon
  /// as a read has it.
  void set_baseline(qint64 run);
  /// One run's values (a run's overview): no baseline or "Differences only" to choose, every row shown.
  void set_single_run(bool single);

 private:
  void context_menu(const QPoint& at);

  app::CompareModel* model_;
  QTableView* table_;
  QCheckBox* differences_;
  QComboBox* baseline_;
  QLabel* empty_;
  QWidget* bar_;
  qint64 wanted_baseline_ = 0;
};

}  // namespace spur::studio
