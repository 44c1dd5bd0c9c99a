// SPDX-License-Identifier: Apache-2.0
// HParamsModel: runs' parameters against their metrics, as TensorBoard's HParams and W&B's parallel coordinates
// show them: a row per run, a column per parameter (its recorded `params`, nested keys joined with '/') and per
// chosen metric (final value); and, for the parallel-coordinates plot, an axis per column (numbers on a linear or
// logarithmic scale, anything else as evenly spaced categories), each run's position on each axis (0 at the bottom,
// 1 at the top), the brushes the user drew on axes (a run is brushed when it lies inside every brush), and the best
// run of the first metric that has a direction, in it (studio/baseline.h). It reads nothing: the window hands it the
// same CompareSnapshot its Compare tab shows. GUI-free and tested without widgets (HParamsTest).
//
// Threads: the GUI thread's (a model).
#pragma once

#include <QAbstractTableModel>
#include <QStringList>

#include <map>
#include <optional>
#include <vector>

#include "studio/baseline.h"
#include "studio/compare_model.h"

namespace spur::app {

struct HParamsAxis {
  QString key;    // "params/lr" or "metric/loss"
  QString label;  // "lr", "loss"
  bool metric = false;
  bool numeric = true;  // every run's value is a number (else categories)
  bool log = false;     // numbers over more than two decades, all above 0: drawn on a log scale
  double lo = 0, hi = 0;
  QStringList categories;  // for categories: sorted, bottom to top
};

class HParamsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  /// Qt::UserRole on any cell: the run's id.
  static constexpr int RunIdRole = Qt::UserRole;
  /// Qt::UserRole + 1: true when the run is inside every brush (every run, when there is none).
  static constexpr int BrushedRole = Qt::UserRole + 1;
  /// Qt::UserRole + 2: true on the best run's cells.
  static constexpr int BestRole = Qt::UserRole + 2;
  /// Qt::UserRole + 3: the raw value to sort by (numbers as numbers).
  static constexpr int SortRole = Qt::UserRole + 3;

  explicit HParamsModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  /// The runs to show (a model reset). The chosen metrics stay where the runs have them; with none chosen yet,
  /// every metric but the system ones (system/...) is.
  void set_snapshot(const CompareSnapshot& snapshot);
  /// Every metric the runs logged (what set_metrics can choose from), sorted.
  QStringList metric_keys() const;
  void set_metrics(const QStringList& keys);
  const QStringList& metrics() const { return metrics_; }
  /// A parameter that is the same in every run is left out (it explains nothing). Default: true.
  void set_varying_only(bool on);

  /// Column 0 is the run's name; axes are the columns from 1 on.
  const std::vector<HParamsAxis>& axes() const { return axes_; }
  /// Where a row's run lies on an axis, 0 (bottom) to 1 (top); nullopt when it has no value there.
  std::optional<double> position(int row, int axis) const;
  qint64 run_id(int row) const;
  QString run_name(int row) const;

  /// Keeps the runs whose position on `axis` is within [lo, hi] (0..1, either order); clear_brush removes it.
  void set_brush(int axis, double lo, double hi);
  void clear_brush(int axis);
  void clear_brushes();
  /// The brushes drawn: axis -> (lo, hi).
  const std::map<int, std::pair<double, double>>& brushes() const { return brushes_; }
  bool brushed(int row) const;
  /// The ids of the brushed runs, in row order.
  QList<qint64> brushed_runs() const;
  /// The row of the best run by the first chosen metric with a direction (not a counter or a schedule), in that
  /// direction; -1 when there is no such metric value.
  int best_row() const;

 signals:
  /// The brushes changed: the runs inside them now (the window selects them in the runs table).
  void brushed_changed(const QList<qint64>& runs);

 private:
  struct Cell {
    bool present = false;
    QString text;
    std::optional<double> number;
  };
  void rebuild();
  Cell cell(const ComparedRun& run, const HParamsAxis& axis) const;

  CompareSnapshot snapshot_;
  QStringList metrics_;
  bool metrics_chosen_ = false;
  bool varying_only_ = true;
  std::vector<HParamsAxis> axes_;
  std::vector<std::vector<Cell>> cells_;  // [row][axis]
  std::map<int, std::pair<double, double>> brushes_;
  int best_ = -1;
};

}  // namespace spur::app
