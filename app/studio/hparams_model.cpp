// SPDX-License-Identifier: Apache-2.0
// The hyperparameter table and its axes (hparams_model.h).
#include "studio/hparams_model.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonValue>

#include <algorithm>
#include <cmath>
#include <set>

namespace spur::app {
namespace {

// A parameter's JSON text as shown: strings without their quotes.
QString shown(const QString& json_text) {
  if (json_text.startsWith('"')) {
    const auto document = QJsonDocument::fromJson(("[" + json_text + "]").toUtf8());
    if (document.isArray() && !document.array().isEmpty()) return document.array().first().toString();
  }
  return json_text;
}

}  // namespace

HParamsModel::HParamsModel(QObject* parent) : QAbstractTableModel(parent) {}

int HParamsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(snapshot_.runs.size());
}

int HParamsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 1 + static_cast<int>(axes_.size());
}

QVariant HParamsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) return {};
  const auto row = static_cast<size_t>(index.row());
  if (role == RunIdRole) return static_cast<qlonglong>(snapshot_.runs[row].run.id);
  if (role == BrushedRole) return brushed(index.row());
  if (role == BestRole) return index.row() == best_;
  if (index.column() == 0) {
    if (role == Qt::DisplayRole) return run_name(index.row());
    if (role == SortRole) return run_name(index.row()).toLower();
    return {};
  }
  const Cell& c = cells_[row][static_cast<size_t>(index.column() - 1)];
  if (role == Qt::DisplayRole) {
    if (!c.present) return QString();
    if (c.number) return QString::number(*c.number, 'g', 6);  // 0.000666818, not 0.00066681803660000003
    return c.text;
  }
  if (role == SortRole) {
    // One kind per column: numbers on a numeric axis, text on a category axis (mixed, sorting would be undefined).
    if (!c.present) return QVariant();
    if (axes_[static_cast<size_t>(index.column() - 1)].numeric && c.number) return *c.number;
    return c.text;
  }
  if (role == Qt::TextAlignmentRole && c.number) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant HParamsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section == 0) return tr("Run");
  if (section < 1 || section > static_cast<int>(axes_.size())) return {};
  return axes_[static_cast<size_t>(section - 1)].label;
}

void HParamsModel::set_snapshot(const CompareSnapshot& snapshot) {
  beginResetModel();
  snapshot_ = snapshot;
  if (!metrics_chosen_) {
    metrics_.clear();
    for (const QString& key : metric_keys()) {
      if (!key.startsWith("system/")) metrics_ << key;
    }
  }
  rebuild();
  endResetModel();
  emit brushed_changed(brushed_runs());
}

QStringList HParamsModel::metric_keys() const {
  std::set<QString> keys;
  for (const auto& run : snapshot_.runs) {
    for (const auto& [key, metric] : run.metrics) keys.insert(key);
  }
  return QStringList(keys.begin(), keys.end());
}

void HParamsModel::set_metrics(const QStringList& keys) {
  beginResetModel();
  metrics_ = keys;
  metrics_chosen_ = true;
  rebuild();
  endResetModel();
  emit brushed_changed(brushed_runs());
}

void HParamsModel::set_varying_only(bool on) {
  beginResetModel();
  varying_only_ = on;
  rebuild();
  endResetModel();
  emit brushed_changed(brushed_runs());
}

HParamsModel::Cell HParamsModel::cell(const ComparedRun& run, const HParamsAxis& axis) const {
  Cell c;
  if (axis.metric) {
    const auto it = run.metrics.find(axis.label);
    if (it == run.metrics.end() || it->second.points == 0) return c;
    c.present = true;
    c.number = it->second.final_value;
    c.text = QString::number(it->second.final_value, 'g', 6);
    if (!std::isfinite(it->second.final_value)) c.number.reset();
    return c;
  }
  const auto it = run.params.find(axis.label);
  if (it == run.params.end()) return c;
  c.present = true;
  c.text = shown(it->second);
  bool ok = false;
  const double v = it->second.toDouble(&ok);
  if (ok && std::isfinite(v)) c.number = v;
  return c;
}

void HParamsModel::rebuild() {
  const auto old_axes = axes_;
  axes_.clear();
  std::set<QString> params;
  for (const auto& run : snapshot_.runs) {
    for (const auto& [key, value] : run.params) params.insert(key);
  }
  for (const QString& key : params) {
    HParamsAxis axis;
    axis.key = "params/" + key;
    axis.label = key;
    if (varying_only_ && snapshot_.runs.size() > 1) {
      std::set<QString> values;
      for (const auto& run : snapshot_.runs) {
        const auto it = run.params.find(key);
        values.insert(it == run.params.end() ? QString("\x01missing") : it->second);
      }
      if (values.size() < 2) continue;
    }
    axes_.push_back(axis);
  }
  for (const QString& key : metrics_) {
    HParamsAxis axis;
    axis.key = "metric/" + key;
    axis.label = key;
    axis.metric = true;
    axes_.push_back(axis);
  }
  cells_.assign(snapshot_.runs.size(), std::vector<Cell>(axes_.size()));
  for (size_t a = 0; a < axes_.size(); ++a) {
    HParamsAxis& axis = axes_[a];
    bool numeric = true, any = false;
    double lo = INFINITY, hi = -INFINITY;
    std::set<QString> categories;
    for (size_t r = 0; r < snapshot_.runs.size(); ++r) {
      Cell c = cell(snapshot_.runs[r], axis);
      if (c.present) {
        any = true;
        categories.insert(c.text);
        if (c.number) {
          lo = std::min(lo, *c.number);
          hi = std::max(hi, *c.number);
        } else if (!axis.metric) {
          numeric = false;
        }
      }
      cells_[r][a] = std::move(c);
    }
    axis.numeric = numeric && any && std::isfinite(lo);
    if (axis.numeric) {
      axis.lo = lo;
      axis.hi = hi;
      axis.log = lo > 0 && hi / lo >= 100;
    } else {
      axis.numeric = false;
      axis.categories = QStringList(categories.begin(), categories.end());
    }
  }
  // Brushes stay on axes that are still there (by key).
  std::map<int, std::pair<double, double>> kept;
  for (const auto& [index, range] : brushes_) {
    if (index < 0 || index >= static_cast<int>(old_axes.size())) continue;
    for (size_t a = 0; a < axes_.size(); ++a) {
      if (axes_[a].key == old_axes[static_cast<size_t>(index)].key) kept[static_cast<int>(a)] = range;
    }
  }
  brushes_ = kept;
  // The best run: by the first metric with a direction (a counter or a schedule has no best), in that direction.
  best_ = -1;
  for (size_t a = 0; a < axes_.size() && best_ < 0; ++a) {
    if (!axes_[a].metric) continue;
    const auto direction = guess_direction(axes_[a].label);
    if (direction == MetricDirection::neither) continue;
    std::optional<double> best;
    for (size_t r = 0; r < cells_.size(); ++r) {
      const auto& n = cells_[r][a].number;
      if (n && (!best || better(*n, *best, direction))) {
        best = n;
        best_ = static_cast<int>(r);
      }
    }
    break;
  }
}

std::optional<double> HParamsModel::position(int row, int axis) const {
  if (row < 0 || row >= rowCount() || axis < 0 || axis >= static_cast<int>(axes_.size())) return std::nullopt;
  const HParamsAxis& a = axes_[static_cast<size_t>(axis)];
  const Cell& c = cells_[static_cast<size_t>(row)][static_cast<size_t>(axis)];
  if (!c.present) return std::nullopt;
  if (a.numeric) {
    if (!c.number) return std::nullopt;
    if (a.hi == a.lo) return 0.5;
    if (a.log) return (std::log(*c.number) - std::log(a.lo)) / (std::log(a.hi) - std::log(a.lo));
    return (*c.number - a.lo) / (a.hi - a.lo);
  }
  const auto i = a.categories.indexOf(c.text);
  if (i < 0) return std::nullopt;
  if (a.categories.size() == 1) return 0.5;
  return static_cast<double>(i) / static_cast<double>(a.categories.size() - 1);
}

qint64 HParamsModel::run_id(int row) const { return snapshot_.runs.at(static_cast<size_t>(row)).run.id; }

QString HParamsModel::run_name(int row) const {
  const auto& run = snapshot_.runs.at(static_cast<size_t>(row)).run;
  return run.name.empty() ? QString("run %1").arg(run.id) : QString::fromStdString(run.name);
}

void HParamsModel::set_brush(int axis, double lo, double hi) {
  if (axis < 0 || axis >= static_cast<int>(axes_.size())) return;
  brushes_[axis] = {std::min(lo, hi), std::max(lo, hi)};
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1), {BrushedRole});
  emit brushed_changed(brushed_runs());
}

void HParamsModel::clear_brush(int axis) {
  if (brushes_.erase(axis) == 0) return;
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1), {BrushedRole});
  emit brushed_changed(brushed_runs());
}

void HParamsModel::clear_brushes() {
  if (brushes_.empty()) return;
  brushes_.clear();
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1), {BrushedRole});
  emit brushed_changed(brushed_runs());
}

bool HParamsModel::brushed(int row) const {
  return std::ranges::all_of(brushes_, [&](const auto& brush) {
    const auto p = position(row, brush.first);
    return p && *p >= brush.second.first - 1e-9 && *p <= brush.second.second + 1e-9;
  });
}

QList<qint64> HParamsModel::brushed_runs() const {
  QList<qint64> runs;
  for (int row = 0; row < rowCount(); ++row) {
    if (brushed(row)) runs << run_id(row);
  }
  return runs;
}

int HParamsModel::best_row() const { return best_; }

}  // namespace spur::app
