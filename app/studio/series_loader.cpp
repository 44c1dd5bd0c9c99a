// SPDX-License-Identifier: Apache-2.0
// The Studio's reads of metric series; see series_loader.h.
#include "studio/series_loader.h"

#include <QFileInfo>

#include <algorithm>

#include "runs/run_service.h"

namespace spur::app {

SeriesLoader::SeriesLoader(QString history_path) : path_(std::move(history_path)) {
  qRegisterMetaType<QVector<spur::app::SeriesDelta>>();
  qRegisterMetaType<spur::app::SeriesView>();
}

SeriesLoader::~SeriesLoader() = default;

void SeriesLoader::set_runs(const QList<qint64>& runs) {
  runs_ = std::set<qint64>(runs.begin(), runs.end());
  for (auto it = lines_.begin(); it != lines_.end();) {
    it = runs_.contains(it->first.first) ? std::next(it) : lines_.erase(it);
  }
}

void SeriesLoader::set_view(const QString& key, const SeriesView& view) { views_[key] = {view, next_serial_++}; }

SeriesDelta SeriesLoader::read(qint64 run, const std::string& key, Line& line, const SeriesView& view, int width) {
  history::SeriesRange range;
  range.lo = view.lo;
  range.hi = view.hi;
  range.by_wall = view.by_wall;
  range.width = width;
  const auto summary = service_->summary(run, key, range);
  if (!summary.summarised && summary.total_points > 0 && untrusted_.insert({run, key}).second) {
    emit untrusted(run, QString::fromStdString(key));
  }
  SeriesDelta delta;
  delta.run = run;
  delta.key = QString::fromStdString(key);
  delta.replace = true;
  delta.points_per_bucket = summary.points_per_bucket;
  delta.total_points = summary.total_points;
  delta.first_wall = summary.first_wall;
  const auto n = static_cast<qsizetype>(summary.buckets.size());
  delta.steps.reserve(n);
  delta.values.reserve(n);
  delta.walls.reserve(n);
  const bool raw = summary.points_per_bucket == 1;
  for (const auto& b : summary.buckets) {
    delta.steps.push_back(static_cast<double>(b.step_lo));
    delta.walls.push_back(b.wall_lo);
    delta.values.push_back(raw ? b.first : b.mean());
    if (raw) continue;
    delta.last_steps.push_back(static_cast<double>(b.step_hi));
    delta.last_walls.push_back(b.wall_hi);
    delta.mins.push_back(b.min);
    delta.maxs.push_back(b.max);
    delta.counts.push_back(static_cast<double>(b.count));
  }
  line.cursor = {summary.end_chunk_id, summary.end_chunk_points};
  line.loaded = true;
  line.raw = raw;
  line.points = n;
  return delta;
}

void SeriesLoader::poll() {
  QVector<SeriesDelta> deltas;
  try {
    if (!service_) service_ = std::make_unique<RunService>(path_.toStdString(), RemoteOptions::from_environment(false));
    if (!service_->exists()) return;
    // Nothing committed since the last poll: only lines not read yet, or read for another view, need reading.
    const int64_t version = service_->data_version();
    const bool changed = version != data_version_;
    data_version_ = version;
    for (const qint64 run : runs_) {
      for (const auto& key : service_->metric_keys(run)) {
        const QString name = QString::fromStdString(key);
        const auto found = views_.constFind(name);
        const SeriesView view = found == views_.constEnd() ? SeriesView{} : found->first;
        const quint64 serial = found == views_.constEnd() ? 0 : found->second;
        // The plot's budget shared by its lines (every selected run may log this metric).
        const int share = std::max<int>(kMinLinePoints, kPlotPoints / (2 * std::max<int>(1, int(runs_.size()))));
        const int width = std::max(1, std::min(view.width, share));
        auto& line = lines_[{run, key}];
        if (!line.loaded || line.view_serial != serial) {
          line.view_serial = serial;
          deltas.push_back(read(run, key, line, view, width));
          continue;
        }
        if (!changed) continue;
        history::SeriesCursor cursor = line.cursor;
        const auto points = service_->series(run, key, &cursor);
        if (points.empty()) continue;
        const bool in_view =
            view.whole() || (view.by_wall ? points.front().wall : double(points.front().step)) <= view.hi;
        if (!in_view) {
          line.cursor = cursor;
          continue;
        }
        if (!line.raw || !view.whole() || line.points + std::ssize(points) > 2 * static_cast<qint64>(width)) {
          deltas.push_back(read(run, key, line, view, width));  // read again at the resolution it now needs
          continue;
        }
        line.cursor = cursor;
        line.points += std::ssize(points);
        SeriesDelta delta;
        delta.run = run;
        delta.key = name;
        delta.total_points = line.points;
        delta.steps.reserve(std::ssize(points));
        delta.values.reserve(std::ssize(points));
        delta.walls.reserve(std::ssize(points));
        for (const auto& p : points) {
          delta.steps.push_back(static_cast<double>(p.step));
          delta.values.push_back(p.value);
          delta.walls.push_back(p.wall);
        }
        deltas.push_back(std::move(delta));
      }
    }
  } catch (const std::exception& e) {
    // What was read before the error is sent (those lines' cursors moved on); the rest is read again next time.
    service_.reset();
    data_version_ = -1;
    if (!deltas.isEmpty()) emit loaded(deltas);
    emit failed(QString::fromUtf8(e.what()));
    return;
  }
  if (!deltas.isEmpty()) emit loaded(deltas);
}

}  // namespace spur::app
