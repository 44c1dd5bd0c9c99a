// SPDX-License-Identifier: Apache-2.0
// The runs table model; see runs_model.h. Rows are runs in id order; a refresh merges the new list into the
// old one so that views keep their selection and scroll position.
#include "studio/runs_model.h"

#include <QFileInfo>
#include <QSet>

#include <cmath>
#include <limits>

#include <spur/history/reader.h>

#include "studio/baseline.h"
#include "studio/compare_model.h"
#include "runs/run_service.h"
#include "runs/run_status.h"

namespace spur::app {
namespace {

bool same(const history::Run& a, const history::Run& b) {
  return a.name == b.name && a.project == b.project && a.status == b.status && a.started == b.started &&
         a.ended == b.ended && a.exit_code == b.exit_code && a.last_step == b.last_step &&
         a.total_steps == b.total_steps && a.tags == b.tags && a.notes == b.notes && a.target == b.target;
}

}  // namespace

RunsModel::RunsModel(QString history_path, QObject* parent)
    : QAbstractTableModel(parent), path_(std::move(history_path)) {}

RunsModel::~RunsModel() = default;

int RunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

int RunsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount + static_cast<int>(metric_columns_.size());
}

QVariant RunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  if (section >= ColumnCount && section < columnCount()) return metric_columns_[section - ColumnCount];
  static const char* names[ColumnCount] = {"ID",      "Name",     "Project", "Status", "Progress",
                                           "Started", "Duration", "Exit",    "Target", "Tags"};
  return section >= 0 && section < ColumnCount ? QVariant(QString(names[section])) : QVariant();
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& run = runs_[static_cast<size_t>(index.row())];
  if (role == RunIdRole) return static_cast<qlonglong>(run.id);
  if (index.column() >= ColumnCount) {
    const QString& key = metric_columns_[index.column() - ColumnCount];
    const auto value = last_value(run.id, key);
    const auto change = delta(run.id, key);
    if (role == Qt::DisplayRole) {
      if (!value) return QString("-");
      QString shown = QString::number(*value, 'g', 5);
      // Short enough for a table's column (the Compare tab has 6 digits).
      if (change) shown += " (" + delta_text(*change, last_value(baseline_, key).value_or(0), 3) + ")";
      return shown;
    }
    if (role == VerdictRole) {
      if (!change) return 0;
      return delta_verdict(*change, direction_ ? direction_(key) : guess_direction(key));
    }
    if (role == SortRole) return value ? *value : -std::numeric_limits<double>::infinity();
    if (role == Qt::TextAlignmentRole) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
    return {};
  }
  QStringList tags;
  for (const auto& tag : run.tags) tags << QString::fromStdString(tag);
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Id:
        return static_cast<qlonglong>(run.id);
      case Name:
        return QString::fromStdString(run.name);
      case Project:
        return QString::fromStdString(run.project);
      case Status:
        return statuses_[static_cast<size_t>(index.row())];
      case Progress: {
        QString text = progress_text(run);
        // Alive but not logging (an evaluation pass): how long since the last point, so something moves.
        if (statuses_[static_cast<size_t>(index.row())] == "running") {
          double last = 0;
          if (const auto points = last_points_.find(run.id); points != last_points_.end()) {
            for (const auto& [key, point] : points->second) last = std::max(last, point.wall);
          }
          const double quiet = history::now_seconds() - last;
          if (last > 0 && quiet >= kQuietSeconds) text += tr(", last logged %1 ago").arg(duration_text(quiet));
        }
        return text;
      }
      case Started:
        return time_text(run.started);
      case Duration:
        return duration_text(run_duration(run));
      case ExitCode:
        return run.exit_code ? QVariant(*run.exit_code) : QVariant(QString("-"));
      case Target:
        return QString::fromStdString(run.target);
      case Tags:
        return tags.join(", ");
    }
  }
  if (role == SortRole) {
    switch (index.column()) {
      case Id:
        return static_cast<qlonglong>(run.id);
      case Progress:
        return progress_fraction(run);
      case Started:
        return run.started;
      case Duration:
        return run_duration(run);
      case ExitCode:
        return run.exit_code ? *run.exit_code : -1;
      default:
        return data(index, Qt::DisplayRole);
    }
  }
  if (role == Qt::ToolTipRole) {
    return QString::fromStdString(run.command) +
           (run.notes.empty() ? QString() : "\n" + QString::fromStdString(run.notes));
  }
  return {};
}

int RunsModel::row_of(int64_t id) const {
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

std::optional<double> RunsModel::delta(int64_t run, const QString& key) const {
  if (baseline_ == 0 || run == baseline_) return std::nullopt;
  const auto mine = last_value(run, key);
  const auto theirs = last_value(baseline_, key);
  if (!mine || !theirs) return std::nullopt;
  return *mine - *theirs;
}

void RunsModel::set_baseline(qint64 run, std::function<MetricDirection(const QString& key)> direction) {
  baseline_ = run;
  direction_ = std::move(direction);
  if (rowCount() > 0 && columnCount() > ColumnCount) {
    emit dataChanged(index(0, ColumnCount), index(rowCount() - 1, columnCount() - 1));
  }
}

void RunsModel::tick() {
  for (size_t row = 0; row < runs_.size(); ++row) {
    if (statuses_[row] != "running") continue;
    const int r = static_cast<int>(row);
    emit dataChanged(index(r, Progress), index(r, Duration), {Qt::DisplayRole});
  }
}

void RunsModel::set_metric_columns(const QStringList& keys) {
  if (keys == metric_columns_) return;
  if (!metric_columns_.isEmpty()) {
    beginRemoveColumns({}, ColumnCount, ColumnCount + static_cast<int>(metric_columns_.size()) - 1);
    metric_columns_.clear();
    endRemoveColumns();
  }
  if (!keys.isEmpty()) {
    beginInsertColumns({}, ColumnCount, ColumnCount + static_cast<int>(keys.size()) - 1);
    metric_columns_ = keys;
    endInsertColumns();
  }
}

QStringList RunsModel::metric_keys() const {
  QSet<QString> keys;
  for (const auto& [run, points] : last_points_) {
    for (const auto& [key, point] : points) keys.insert(QString::fromStdString(key));
  }
  QStringList sorted(keys.begin(), keys.end());
  sorted.sort();
  return sorted;
}

std::optional<double> RunsModel::last_value(int64_t run, const QString& key) const {
  const auto points = last_points_.find(run);
  if (points == last_points_.end()) return std::nullopt;
  const auto point = points->second.find(key.toStdString());
  return point == points->second.end() ? std::nullopt : std::optional<double>(point->second.value);
}

RunsReader::RunsReader(QString history_path, int64_t page) : path_(std::move(history_path)), page_(page) {}

void RunsReader::fetch_more() { more_ = true; }

void RunsReader::include(int64_t id) { include_ = include_ == 0 ? id : std::min(include_, id); }

RunsReader::~RunsReader() = default;

RunsSnapshot RunsReader::read() {
  RunsSnapshot snapshot;
  // A history over SSH that could not be read is tried again after 2 s, not at every refresh (a machine that cannot
  // be reached would otherwise start ssh four times a second).
  if (!failed_.isEmpty() && failure_.isValid() && failure_.elapsed() < 2000) {
    snapshot.error = failed_;
    snapshot.fetched_more = true;
    return snapshot;
  }
  failed_.clear();
  try {
    if (!service_) {
      auto options = RemoteOptions::from_environment(false);
      options.notice = notice_;
      service_ = std::make_unique<RunService>(path_.toStdString(), options);
    }
    if (!service_->exists()) return snapshot;  // no history yet: no runs
    service_->check_schema();
    // Nothing committed since the last read: nothing to read again. A status can change without a commit (a
    // launcher that died is "failed"), so a whole read at least every 2 s; over SSH at most one a second (each
    // reads every shown run's record).
    const int64_t version = service_->data_version();
    const bool asked = more_ || include_ != included_;
    if (!asked && last_whole_.isValid() &&
        ((version == version_ && last_whole_.elapsed() < 2000) ||
         (service_->remote() && last_whole_.elapsed() < 1000))) {
      snapshot.unchanged = true;
      snapshot.read_only = read_only_;
      snapshot.total_runs = total_;
      return snapshot;
    }
    version_ = version;
    included_ = include_;
    last_whole_.start();
    snapshot.read_only = read_only_ = service_->read_only();
    // The oldest run shown: the newest page at first, a page further back each fetch_more().
    snapshot.fetched_more = more_;
    if (from_id_ < 0 || (more_ && from_id_ > 0)) {
      history::RunFilter page;
      page.newest_first = true;
      page.limit = 1;
      page.offset = page_ - 1;
      if (from_id_ > 0) page.before_id = from_id_;
      const auto oldest = service_->runs(page);
      from_id_ = oldest.empty() ? 0 : oldest.front().id;
    }
    more_ = false;
    if (include_ > 0 && from_id_ > include_) from_id_ = include_;
    history::RunFilter shown;
    shown.from_id = from_id_;
    snapshot.runs = service_->runs(shown);
    snapshot.total_runs = total_ = service_->count_runs(history::RunFilter{});
    snapshot.statuses.reserve(snapshot.runs.size());
    std::map<int64_t, std::pair<int64_t, std::string>> seen_now;
    std::vector<int64_t> changed;
    for (const auto& run : snapshot.runs) {
      snapshot.statuses.push_back(effective_status(run));
      const auto seen = last_read_.find(run.id);
      // Latest values: read again only for runs that logged or changed status since the last read. A running
      // run may log at a step it already reached (validation at the same step): read it always.
      if (run.status == "running" || seen == last_read_.end() || seen->second.first != run.last_step ||
          seen->second.second != run.status) {
        changed.push_back(run.id);
      }
      seen_now[run.id] = {run.last_step, run.status};
    }
    auto values = service_->last_points(changed);  // over SSH: one round trip for every run
    for (size_t i = 0; i < changed.size(); ++i) snapshot.last_points[changed[i]] = std::move(values[i]);
    last_read_ = std::move(seen_now);
  } catch (const std::exception& e) {
    service_.reset();
    version_ = -1;
    last_whole_.invalidate();
    last_read_.clear();  // the next good read reads every run's values again
    more_ = false;
    snapshot = RunsSnapshot();
    snapshot.error = QString::fromUtf8(e.what());
    snapshot.fetched_more = true;  // asked again after the error
    if (snapshot.error.isEmpty()) snapshot.error = "the run history cannot be read";
    if (HistoryAddress::is_address(path_)) {
      failed_ = snapshot.error;
      failure_.start();
    }
  }
  return snapshot;
}

RunsReaderWorker::RunsReaderWorker(QString history_path) : reader_(std::move(history_path)) {
  qRegisterMetaType<spur::app::RunsSnapshot>();
  reader_.set_notice([this](const QString& text) { emit notice(text); });
}

void RunsReaderWorker::read() { emit snapshot(reader_.read()); }

void RunsReaderWorker::fetch_more() {
  reader_.fetch_more();
  read();
}

bool RunsModel::canFetchMore(const QModelIndex& parent) const {
  return !parent.isValid() && static_cast<int64_t>(runs_.size()) < total_runs_ && !fetching_ && !applying_;
}

void RunsModel::fetchMore(const QModelIndex& parent) {
  if (!canFetchMore(parent)) return;
  if (reader_) {
    reader_->fetch_more();
    refresh();
    return;
  }
  fetching_ = true;
  emit more_wanted();
}

bool RunsModel::refresh() {
  if (!reader_) reader_ = std::make_unique<RunsReader>(path_);
  return apply(reader_->read());
}

bool RunsModel::apply(const RunsSnapshot& snapshot) {
  if (!snapshot.error.isEmpty()) {
    error_ = snapshot.error;
    return false;
  }
  error_.clear();
  if (snapshot.unchanged) return true;
  if (snapshot.fetched_more) fetching_ = false;
  // Views (and QAbstractItemModelTester) may ask canFetchMore() from inside the row signals below: the total is
  // set once the rows are, so a page is never asked for mid-merge.
  applying_ = true;
  const auto& fresh = snapshot.runs;
  for (const auto& [run, points] : snapshot.last_points) last_points_[run] = points;
  // Merge by id (both lists ascend): remove the gone, update the changed, insert the new.
  size_t old_row = 0, next = 0;
  while (old_row < runs_.size() || next < fresh.size()) {
    if (old_row < runs_.size() && (next >= fresh.size() || runs_[old_row].id < fresh[next].id)) {
      const int row = static_cast<int>(old_row);
      beginRemoveRows({}, row, row);
      last_points_.erase(runs_[old_row].id);
      runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(old_row));
      statuses_.erase(statuses_.begin() + static_cast<std::ptrdiff_t>(old_row));
      endRemoveRows();
    } else if (old_row >= runs_.size() || fresh[next].id < runs_[old_row].id) {
      // New runs in one block per gap (a page of 500 is one insert, not 500: each insert costs the views a pass).
      size_t end = next + 1;
      while (end < fresh.size() && (old_row >= runs_.size() || fresh[end].id < runs_[old_row].id)) ++end;
      const int row = static_cast<int>(old_row);
      const auto count = static_cast<std::ptrdiff_t>(end - next);
      beginInsertRows({}, row, row + static_cast<int>(count) - 1);
      const auto from = fresh.begin() + static_cast<std::ptrdiff_t>(next);
      runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(old_row), from, from + count);
      const auto statuses = snapshot.statuses.begin() + static_cast<std::ptrdiff_t>(next);
      statuses_.insert(statuses_.begin() + static_cast<std::ptrdiff_t>(old_row), statuses, statuses + count);
      endInsertRows();
      old_row += static_cast<size_t>(count);
      next = end;
    } else {
      // Running rows change every refresh (duration, ETA) even when the record does not.
      const bool changed = !same(runs_[old_row], fresh[next]) || fresh[next].status == "running";
      runs_[old_row] = fresh[next];
      statuses_[old_row] = snapshot.statuses[next];
      if (changed) {
        const int row = static_cast<int>(old_row);
        emit dataChanged(index(row, 0), index(row, columnCount() - 1));
      }
      ++old_row;
      ++next;
    }
  }
  applying_ = false;
  total_runs_ = snapshot.total_runs;
  return true;
}

}  // namespace spur::app
