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
  for (auto it = keys_.begin(); it != keys_.end();) it = runs_.contains(it->first) ? std::next(it) : keys_.erase(it);
}

void SeriesLoader::set_view(const QString& key, const SeriesView& view) { views_[key] = {view, next_serial_++}; }

SeriesDelta SeriesLoader::whole(qint64 run, const std::string& key, Line& line, const history::SeriesSummary& summary) {
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
    // The runs' metric keys: a metric appears with a commit, so they are read again only after one. Every read
    // below is one batch (over SSH one round trip, however many runs are selected).
    if (changed) keys_.clear();
    std::vector<int64_t> unknown;
    for (const qint64 run : runs_) {
      if (!keys_.contains(run)) unknown.push_back(run);
    }
    auto read_keys = service_->metric_keys(unknown);
    for (size_t i = 0; i < unknown.size(); ++i) keys_[unknown[i]] = std::move(read_keys[i]);
    // The plot's budget shared by its lines (every selected run may log this metric).
    const int budget = service_->remote() ? kRemotePlotPoints : kPlotPoints;
    const int share = std::max<int>(kMinLinePoints, budget / (2 * std::max<int>(1, int(runs_.size()))));
    struct Wanted {
      qint64 run;
      std::string key;
      SeriesView view;
      int width;
    };
    std::vector<Wanted> wholes, follows;
    std::vector<RunService::SeriesRead> follow_reads;
    for (const qint64 run : runs_) {
      for (const auto& key : keys_[run]) {
        const auto found = views_.constFind(QString::fromStdString(key));
        const SeriesView view = found == views_.constEnd() ? SeriesView{} : found->first;
        const quint64 serial = found == views_.constEnd() ? 0 : found->second;
        const int width = std::max(1, std::min(view.width, share));
        auto& line = lines_[{run, key}];
        if (!line.loaded || line.view_serial != serial) {
          line.view_serial = serial;
          wholes.push_back({run, key, view, width});
        } else if (changed) {
          follows.push_back({run, key, view, width});
          follow_reads.push_back({run, key, line.cursor});
        }
      }
    }
    // The followed lines' new points: appended, or the line read whole again at the resolution it now needs.
    const auto new_points = service_->series(follow_reads);
    for (size_t i = 0; i < follows.size(); ++i) {
      const auto& [run, key, view, width] = follows[i];
      const auto& points = new_points[i];
      auto& line = lines_[{run, key}];
      if (points.empty()) continue;
      const bool in_view =
          view.whole() || (view.by_wall ? points.front().wall : double(points.front().step)) <= view.hi;
      if (!in_view) {
        line.cursor = follow_reads[i].cursor;
        continue;
      }
      if (!line.raw || !view.whole() || line.points + std::ssize(points) > 2 * static_cast<qint64>(width)) {
        wholes.push_back(follows[i]);
        continue;
      }
      line.cursor = follow_reads[i].cursor;
      line.points += std::ssize(points);
      SeriesDelta delta;
      delta.run = run;
      delta.key = QString::fromStdString(key);
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
    // The lines read whole: over the view's range at the line's share of the plot.
    std::vector<RunService::SummaryRead> reads;
    for (const auto& [run, key, view, width] : wholes) {
      history::SeriesRange range;
      range.lo = view.lo;
      range.hi = view.hi;
      range.by_wall = view.by_wall;
      range.width = width;
      reads.push_back({run, key, range});
    }
    const auto summaries = service_->summaries(reads);
    for (size_t i = 0; i < wholes.size(); ++i) {
      deltas.push_back(whole(wholes[i].run, wholes[i].key, lines_[{wholes[i].run, wholes[i].key}], summaries[i]));
    }
  } catch (const std::exception& e) {
    // What was read before the error is sent (those lines' cursors moved on); the rest is read again next time.
    service_.reset();
    data_version_ = -1;
    keys_.clear();
    if (!deltas.isEmpty()) emit loaded(deltas);
    emit failed(QString::fromUtf8(e.what()));
    return;
  }
  if (!deltas.isEmpty()) emit loaded(deltas);
}

}  // namespace spur::app
