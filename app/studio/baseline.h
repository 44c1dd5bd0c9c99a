// SPDX-License-Identifier: Apache-2.0
// A metric against a baseline run's, said one way by the runs table, the Compare tab and the plots' read-out: the
// difference with its share of the baseline's magnitude, and whether it is better in the metric's direction. A
// metric's direction is what its name suggests until the user sets it: higher is better for accuracy, f1,
// precision, recall, auc, score, reward, throughput; neither for counters, schedules and what a run uses (epoch,
// step, lr, momentum, warmup, batch size, grad norm, loss scale, memory, and the launcher's system/ samples: no
// best, no green or red); lower for the rest (loss, error, perplexity, time). Pure functions; any thread.
#pragma once

#include <QString>

#include <optional>

namespace spur::app {

/// Which way a metric gets better; `neither` for counters and schedules (epoch, lr): they have no best value and a
/// difference is neither better nor worse.
enum class MetricDirection { lower_is_better, higher_is_better, neither };

/// The direction a metric's name suggests (above): a term counts where a word of the key starts ("eval/accuracy",
/// "val_f1"), so "previous_loss" is no IoU.
MetricDirection guess_direction(const QString& key);
/// +1 when `delta` (the value minus the baseline's) is better in `direction`, -1 when worse; 0 when it is zero,
/// not a number, or the direction is neither.
int delta_verdict(double delta, MetricDirection direction);
/// The best of a run's values in `direction`: its minimum or maximum; none for neither.
std::optional<double> best_of(double min, double max, MetricDirection direction);
/// Whether `a` is better than `b` in `direction` (never for neither).
bool better(double a, double b, MetricDirection direction);
/// "+0.25, +50.0%": the difference (`digits` significant digits, signed) and its percentage of |baseline| (one
/// decimal),
/// the percentage left out when the baseline is 0 or either is not finite; "0, 0.0%" for no difference; "NaN" when
/// either value is not a number.
QString delta_text(double delta, double baseline, int digits = 6);

}  // namespace spur::app
