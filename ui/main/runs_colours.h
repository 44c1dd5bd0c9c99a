// SPDX-License-Identifier: GPL-3.0-or-later
// RunsColours: the runs table's colours over app/runs/RunsModel (app/ has no GUI types): each run's line colour
// as a swatch by its name (the same colour as its lines on every plot), the status coloured (failed and stopped
// red, running blue, finished green), and with a baseline, metric cells green when better and red when worse.
// An identity proxy: rows and columns are RunsModel's.
#pragma once

#include <QIdentityProxyModel>

namespace spur::studio {

class RunsColours : public QIdentityProxyModel {
  Q_OBJECT

 public:
  using QIdentityProxyModel::QIdentityProxyModel;
  QVariant data(const QModelIndex& index, int role) const override;
};

}  // namespace spur::studio
