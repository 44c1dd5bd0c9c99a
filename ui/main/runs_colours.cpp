// SPDX-License-Identifier: GPL-3.0-or-later
// The runs table's colours; see runs_colours.h.
#include "main/runs_colours.h"

#include <QBrush>
#include <QColor>
#include <QPixmap>

#include "dashboard/metric_plot.h"
#include "studio/runs_model.h"

namespace spur::studio {

QVariant RunsColours::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  using app::RunsModel;
  if (role == Qt::DecorationRole && index.column() == RunsModel::Name) {
    QPixmap swatch(12, 12);
    swatch.fill(run_colour(QIdentityProxyModel::data(index, RunsModel::RunIdRole).toLongLong()));
    return swatch;
  }
  if (role == Qt::ForegroundRole) {
    if (index.column() == RunsModel::Status) {
      const QString status = QIdentityProxyModel::data(index, Qt::DisplayRole).toString();
      if (status == "failed" || status == "stopped") return QBrush(QColor(0xc6, 0x28, 0x28));
      if (status == "running") return QBrush(QColor(0x15, 0x65, 0xc0));
      if (status == "finished") return QBrush(QColor(0x1b, 0x87, 0x3f));
      return {};
    }
    if (index.column() >= RunsModel::ColumnCount) {
      const int verdict = QIdentityProxyModel::data(index, RunsModel::VerdictRole).toInt();
      if (verdict > 0) return QBrush(QColor(0x1b, 0x87, 0x3f));
      if (verdict < 0) return QBrush(QColor(0xc6, 0x28, 0x28));
    }
  }
  return QIdentityProxyModel::data(index, role);
}

}  // namespace spur::studio
