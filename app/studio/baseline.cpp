// SPDX-License-Identifier: Apache-2.0
// Deltas against a baseline; see baseline.h.
#include "studio/baseline.h"

#include <QRegularExpression>

#include <cmath>

namespace spur::app {

MetricDirection guess_direction(const QString& key) {
  static const QRegularExpression higher(
      "(^|[/_.\\- ])(acc|f1|precision|recall|auc|score|reward|bleu|rouge|map($|[/_.\\- ])|iou|throughput|"
      "samples_per|tokens_per)",
      QRegularExpression::CaseInsensitiveOption);
  return higher.match(key).hasMatch() ? MetricDirection::higher_is_better : MetricDirection::lower_is_better;
}

int delta_verdict(double delta, MetricDirection direction) {
  if (delta == 0 || !std::isfinite(delta)) return 0;
  return (delta < 0) == (direction == MetricDirection::lower_is_better) ? 1 : -1;
}

QString delta_text(double delta, double baseline, int digits) {
  if (std::isnan(delta)) return "NaN";
  if (delta == 0) delta = 0;  // not "-0"
  QString text = QString("%1%2").arg(delta > 0 ? "+" : "").arg(QString::number(delta, 'g', digits));
  if (baseline != 0 && std::isfinite(baseline) && std::isfinite(delta)) {
    const double percent = delta / std::abs(baseline) * 100;
    text += QString(", %1%2%").arg(percent > 0 ? "+" : "").arg(QString::number(percent, 'f', 1));
  }
  return text;
}

}  // namespace spur::app
