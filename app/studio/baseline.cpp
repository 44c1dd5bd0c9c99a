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
  if (higher.match(key).hasMatch()) return MetricDirection::higher_is_better;
  // Counters, schedules and what the run uses: the key's last part is one of these (with a unit or a parameter
  // group after it: memory_mb, lr_group1), or the key is the launcher's system/ sample.
  static const QRegularExpression neither(
      "(^system/|(^|/)(epochs?|steps?|global_step|iter|iterations?|lr|learning_rate|momentum|beta[12]?|warmup|"
      "batch_size|seq_len|grad_norm|gradient_norm|loss_scale|scale|mem|memory|peak_memory|max_memory|"
      "memory_allocated|memory_reserved|rss|tokens|tokens_seen|samples|samples_seen)"
      "([_.\\-](mb|gb|kb|mib|gib|bytes|\\d+|group\\d+|pg\\d+))?$)",
      QRegularExpression::CaseInsensitiveOption);
  if (neither.match(key).hasMatch()) return MetricDirection::neither;
  return MetricDirection::lower_is_better;
}

int delta_verdict(double delta, MetricDirection direction) {
  if (delta == 0 || !std::isfinite(delta) || direction == MetricDirection::neither) return 0;
  return (delta < 0) == (direction == MetricDirection::lower_is_better) ? 1 : -1;
}

std::optional<double> best_of(double min, double max, MetricDirection direction) {
  switch (direction) {
    case MetricDirection::lower_is_better:
      return min;
    case MetricDirection::higher_is_better:
      return max;
    case MetricDirection::neither:
      break;
  }
  return std::nullopt;
}

bool better(double a, double b, MetricDirection direction) {
  if (direction == MetricDirection::lower_is_better) return a < b;
  if (direction == MetricDirection::higher_is_better) return a > b;
  return false;
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
