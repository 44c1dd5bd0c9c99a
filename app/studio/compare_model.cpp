// SPDX-License-Identifier: Apache-2.0
// Comparing runs; see compare_model.h.
#include "studio/compare_model.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <limits>
#include <set>

#include <yaml-cpp/yaml.h>

#include "runs/run_service.h"

#include "runs/run_status.h"

namespace spur::app {
namespace {

constexpr int kMaxDepth = 8;  // a configuration or parameters nested deeper are shown as one value

void flatten_yaml(const YAML::Node& node, const QString& prefix, int depth, std::map<QString, QString>& out) {
  if (node.IsMap() && depth < kMaxDepth) {
    for (const auto& item : node) {
      const QString key = QString::fromStdString(item.first.Scalar());
      flatten_yaml(item.second, prefix.isEmpty() ? key : prefix + "." + key, depth + 1, out);
    }
    return;
  }
  if (node.IsScalar()) {
    out[prefix] = QString::fromStdString(node.Scalar());
  } else if (node.IsNull()) {
    out[prefix] = QString();
  } else {
    YAML::Emitter flow;
    flow << YAML::Flow << node;
    out[prefix] = QString::fromUtf8(flow.c_str());
  }
}

void flatten_json(const QJsonValue& value, const QString& prefix, int depth, std::map<QString, QString>& out) {
  if (value.isObject() && depth < kMaxDepth) {
    const auto object = value.toObject();
    for (auto it = object.begin(); it != object.end(); ++it) {
      flatten_json(it.value(), prefix.isEmpty() ? it.key() : prefix + "/" + it.key(), depth + 1, out);
    }
    return;
  }
  if (value.isString()) out[prefix] = value.toString();
  else if (value.isDouble()) out[prefix] = QString::number(value.toDouble(), 'g', 10);
  else if (value.isBool()) out[prefix] = value.toBool() ? "true" : "false";
  else if (value.isNull()) out[prefix] = "null";
  else if (value.isArray())
    out[prefix] = QString::fromUtf8(QJsonDocument(value.toArray()).toJson(QJsonDocument::Compact));
  else out[prefix] = QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
}

QString number_text(double value) { return std::isnan(value) ? QString("NaN") : QString::number(value, 'g', 6); }

}  // namespace

CompareReader::CompareReader(std::string history_path) : path_(std::move(history_path)) {}

CompareSnapshot CompareReader::read(const QList<qint64>& runs) const {
  CompareSnapshot snapshot;
  if (runs.isEmpty()) return snapshot;
  try {
    const RunService reader(path_, RemoteOptions::from_environment(false));
    if (!reader.exists()) return snapshot;
    for (const qint64 id : runs) {
      auto record = reader.find(id);
      if (!record) continue;
      ComparedRun compared;
      compared.run = *record;
      compared.status = effective_status(*record);
      if (!record->config.empty()) {
        try {
          flatten_yaml(YAML::Load(record->config), {}, 0, compared.config);
        } catch (const YAML::Exception&) {
          compared.config["(configuration)"] = "not readable YAML";
        }
      }
      flatten_json(QJsonDocument::fromJson(QByteArray::fromStdString(record->params)).object(), {}, 0, compared.params);
      for (const auto& file : reader.files(id)) {
        ComparedFile shown{file, false, false};
        // A remote history's files are on its machines; a local one's on this machine unless recorded elsewhere.
        shown.here = !reader.remote() && (file.host.empty() || QString::fromStdString(file.host) == local_host_name());
        shown.present = shown.here && QFileInfo::exists(QString::fromStdString(file.path));
        compared.files.push_back(std::move(shown));
      }
      for (const auto& key : reader.metric_keys(id)) {
        const auto points = reader.series(id, key);
        if (points.empty()) continue;
        ComparedMetric metric;
        metric.final_value = points.back().value;
        metric.final_step = points.back().step;
        metric.points = points.size();
        metric.min = std::numeric_limits<double>::quiet_NaN();
        metric.max = metric.min;
        for (const auto& point : points) {
          if (!std::isfinite(point.value)) continue;
          if (std::isnan(metric.min) || point.value < metric.min) metric.min = point.value;
          if (std::isnan(metric.max) || point.value > metric.max) metric.max = point.value;
        }
        compared.metrics[QString::fromStdString(key)] = metric;
      }
      snapshot.runs.push_back(std::move(compared));
    }
  } catch (const std::exception& e) {
    snapshot = CompareSnapshot();
    snapshot.error = QString::fromUtf8(e.what());
  }
  return snapshot;
}

CompareReaderWorker::CompareReaderWorker(const QString& history_path) : reader_(history_path.toStdString()) {
  qRegisterMetaType<spur::app::CompareSnapshot>();
}

void CompareReaderWorker::read(const QList<qint64>& runs) { emit snapshot(reader_.read(runs)); }

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(snapshot_.runs.size());
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) {
    return section >= 0 && section < rowCount() ? QVariant(rows_[static_cast<std::size_t>(section)].label) : QVariant();
  }
  if (section < 0 || section >= columnCount()) return {};
  const auto& run = snapshot_.runs[static_cast<std::size_t>(section)].run;
  QString title = QString("%1 %2").arg(run.id).arg(QString::fromStdString(run.name));
  if (run.id == baseline_) title += tr(" (baseline)");
  return title;
}

std::optional<double> CompareModel::number(const Row& row, const ComparedRun& run) const {
  if (row.metric.isEmpty()) return std::nullopt;
  const auto it = run.metrics.find(row.metric);
  if (it == run.metrics.end()) return std::nullopt;
  if (!row.best) return it->second.final_value;
  const auto best = best_of(it->second.min, it->second.max, direction(row.metric));
  return best && std::isnan(*best) ? std::nullopt : best;
}

QString CompareModel::text(const Row& row, const ComparedRun& run) const {
  if (!row.metric.isEmpty()) {
    const auto value = number(row, run);
    if (!value) return "-";
    QString shown = number_text(*value);
    if (!row.best) shown += QString(" @ %1").arg(run.metrics.at(row.metric).final_step);
    return shown;
  }
  const auto& record = run.run;
  const QString& field = row.field;
  if (field.startsWith("config/")) {
    const auto it = run.config.find(field.mid(7));
    return it == run.config.end() ? QString("-") : it->second;
  }
  if (field.startsWith("params/")) {
    const auto it = run.params.find(field.mid(7));
    return it == run.params.end() ? QString("-") : it->second;
  }
  if (field == "run/name") return QString::fromStdString(record.name);
  if (field == "run/project") return QString::fromStdString(record.project);
  if (field == "run/status") return run.status;
  if (field == "run/target") return QString::fromStdString(record.target);
  if (field == "run/hosts") return QString::fromStdString(record.hosts);
  if (field == "run/started") return time_text(record.started);
  if (field == "run/duration") return duration_text(run_duration(record));
  if (field == "run/exit_code") return record.exit_code ? QString::number(*record.exit_code) : QString("-");
  if (field == "run/steps") return record.last_step >= 0 ? QString::number(record.last_step) : QString("-");
  if (field == "run/tags") {
    QStringList tags;
    for (const auto& tag : record.tags) tags << QString::fromStdString(tag);
    return tags.join(", ");
  }
  if (field == "run/notes") return QString::fromStdString(record.notes);
  if (field == "run/parent") return record.parent > 0 ? QString("run %1").arg(record.parent) : QString("-");
  return {};
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& row = rows_[static_cast<std::size_t>(index.row())];
  const auto& run = snapshot_.runs[static_cast<std::size_t>(index.column())];
  if (role == FieldRole) return row.field;
  // The delta against the baseline's value, for metric cells of other runs.
  std::optional<double> delta;
  double base = 0;
  if (!row.metric.isEmpty() && baseline_ != 0 && run.run.id != baseline_) {
    for (const auto& other : snapshot_.runs) {
      if (other.run.id != baseline_) continue;
      const auto mine = number(row, run);
      const auto theirs = number(row, other);
      if (mine && theirs) {
        delta = *mine - *theirs;
        base = *theirs;
      }
    }
  }
  const int verdict = delta ? delta_verdict(*delta, direction(row.metric)) : 0;
  switch (role) {
    case Qt::DisplayRole: {
      QString shown = text(row, run);
      if (delta) shown += "  (" + delta_text(*delta, base) + ")";
      return shown;
    }
    case Qt::ToolTipRole:
      return text(row, run);
    case DeltaRole:
      return delta ? QVariant(*delta) : QVariant();
    case VerdictRole:
      return verdict;
    case Qt::TextAlignmentRole:
      return row.metric.isEmpty() ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                  : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    default:
      return {};
  }
}

void CompareModel::set_snapshot(const CompareSnapshot& snapshot) {
  beginResetModel();
  snapshot_ = snapshot;
  bool baseline_there = false;
  for (const auto& run : snapshot_.runs) baseline_there = baseline_there || run.run.id == baseline_;
  if (!baseline_there) baseline_ = 0;
  all_rows_.clear();
  for (const auto& [field, label] :
       std::initializer_list<std::pair<const char*, const char*>>{{"run/name", "name"},
                                                                  {"run/project", "project"},
                                                                  {"run/status", "status"},
                                                                  {"run/target", "target"},
                                                                  {"run/hosts", "hosts"},
                                                                  {"run/started", "started"},
                                                                  {"run/duration", "duration"},
                                                                  {"run/exit_code", "exit code"},
                                                                  {"run/steps", "last step"},
                                                                  {"run/tags", "tags"},
                                                                  {"run/notes", "notes"},
                                                                  {"run/parent", "launched again from"}}) {
    all_rows_.push_back({field, label, {}, false});
  }
  std::set<QString> config, params, metrics;
  for (const auto& run : snapshot_.runs) {
    for (const auto& [key, value] : run.config) config.insert(key);
    for (const auto& [key, value] : run.params) params.insert(key);
    for (const auto& [key, value] : run.metrics) metrics.insert(key);
  }
  // Results first, then what produced them.
  for (const auto& key : metrics) {
    all_rows_.push_back({"metric/" + key + "/final", key + " (final)", key, false});
    all_rows_.push_back({"metric/" + key + "/best", key + " (best)", key, true});
  }
  for (const auto& key : params) all_rows_.push_back({"params/" + key, "param: " + key, {}, false});
  for (const auto& key : config) all_rows_.push_back({"config/" + key, "config: " + key, {}, false});
  rebuild();
  endResetModel();
}

void CompareModel::rebuild() {
  rows_.clear();
  for (const auto& row : all_rows_) {
    // A counter's or a schedule's best is no result (the largest epoch, the smallest lr).
    if (row.best && direction(row.metric) == MetricDirection::neither) continue;
    if (differences_only_ && snapshot_.runs.size() > 1) {
      bool differs = false;
      const QString first = text(row, snapshot_.runs.front());
      for (const auto& run : snapshot_.runs) differs = differs || text(row, run) != first;
      if (!differs) continue;
    }
    rows_.push_back(row);
  }
}

void CompareModel::set_differences_only(bool on) {
  if (on == differences_only_) return;
  beginResetModel();
  differences_only_ = on;
  rebuild();
  endResetModel();
}

bool CompareModel::set_baseline(qint64 run) {
  if (run != 0) {
    bool found = false;
    for (const auto& compared : snapshot_.runs) found = found || compared.run.id == run;
    if (!found) return false;
  }
  baseline_ = run;
  if (rowCount() > 0 && columnCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
  if (columnCount() > 0) emit headerDataChanged(Qt::Horizontal, 0, columnCount() - 1);
  return true;
}

void CompareModel::set_direction(const QString& metric, MetricDirection direction) {
  directions_[metric] = direction;
  // "best" rows change value, and "differences only" may show or hide them.
  beginResetModel();
  rebuild();
  endResetModel();
}

MetricDirection CompareModel::direction(const QString& metric) const {
  const auto it = directions_.find(metric);
  return it == directions_.end() ? guess_direction(metric) : it->second;
}

int CompareModel::row_of(const QString& field) const {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].field == field) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace spur::app
