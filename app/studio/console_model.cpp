// SPDX-License-Identifier: Apache-2.0
// A run's console as a list model; see console_model.h.
#include "studio/console_model.h"

#include <QFileInfo>

#include "runs/run_service.h"

namespace spur::app {

ConsoleModel::ConsoleModel(QString history_path, QObject* parent)
    : QAbstractListModel(parent), source_(std::move(history_path)) {}

ConsoleModel::~ConsoleModel() = default;

int ConsoleModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(lines_.size());
}

QVariant ConsoleModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& line = lines_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) return display_text(line);
  // A long line in full where the view is narrow.
  if (role == Qt::ToolTipRole && line.text.size() > 100) return display_text(line);
  if (role == RankRole) return line.rank;
  if (role == StreamRole) return QString::fromStdString(line.stream);
  if (role == HostRole) return QString::fromStdString(line.host);
  return {};
}

QString ConsoleModel::display_text(const history::ConsoleLine& line) const {
  QString label = line.rank >= 0 ? QString("rank%1").arg(line.rank) : QString("launcher");
  if (remote_ && !line.host.empty()) label = QString::fromStdString(line.host) + " " + label;
  return "[" + label + "] " + QString::fromStdString(line.text);
}

void ConsoleModel::clear() {
  beginResetModel();
  lines_.clear();
  longest_ = 0;
  longest_text_.clear();
  after_ = 0;
  ++generation_;  // answers to earlier queries no longer fit
  endResetModel();
}

void ConsoleModel::set_run(int64_t run) {
  run_ = run;
  record_.reset();
  cause_.clear();
  clear();
  emit run_changed();
}

void ConsoleModel::set_host(std::optional<QString> host) {
  host_ = std::move(host);
  clear();
}

void ConsoleModel::set_rank(std::optional<int> rank) {
  rank_ = rank;
  clear();
}

void ConsoleModel::set_search(const QString& text) {
  search_ = text;
  clear();
}

bool ConsoleModel::wanted(const history::ConsoleLine& line) const {
  if (host_ && QString::fromStdString(line.host) != *host_) return false;
  return search_.isEmpty() || QString::fromStdString(line.text).contains(search_, Qt::CaseInsensitive);
}

ConsoleSource::ConsoleSource(QString history_path) : path_(std::move(history_path)) {}

ConsoleSource::~ConsoleSource() = default;

ConsoleBatch ConsoleSource::read(const ConsoleQuery& query) {
  ConsoleBatch batch;
  batch.query = query;
  if (query.run == 0) return batch;
  try {
    if (!service_) service_ = std::make_unique<RunService>(path_.toStdString(), RemoteOptions::from_environment(false));
    if (!service_->exists()) return batch;
    service_->check_schema();
    batch.record = service_->find(query.run);
    const auto& known = query.known;
    batch.record_changed =
        !known != !batch.record ||
        (batch.record && (batch.record->status != known->status || batch.record->exit_code != known->exit_code));
    if (batch.record_changed && batch.record &&
        (batch.record->status == "failed" || batch.record->status == "stopped")) {
      const auto events = service_->events(query.run);
      // The newest event that says why (backwards by index: clang-tidy's clang 14 cannot read libstdc++ 12's
      // std::ranges::reverse_view).
      for (std::size_t i = events.size(); i-- > 0;) {
        if (!events[i].detail.empty()) {
          batch.cause = QString::fromStdString(events[i].detail);
          break;
        }
      }
    }
    batch.lines = service_->console(query.run, query.after, query.rank);
  } catch (const std::exception& e) {
    service_.reset();  // opened again at the next read
    batch.error = QString::fromUtf8(e.what());
  }
  return batch;
}

ConsoleQuery ConsoleModel::next_query() const {
  ConsoleQuery query;
  query.generation = generation_;
  query.run = run_;
  query.after = after_;
  query.rank = rank_;
  query.known = record_;
  return query;
}

bool ConsoleModel::fetch_new() { return apply(source_.read(next_query())); }

bool ConsoleModel::apply(const ConsoleBatch& batch) {
  // Filters changed, or lines were appended since this was asked: a newer query follows.
  if (batch.query.generation != generation_ || batch.query.after != after_) return true;
  if (!batch.error.isEmpty()) {
    error_ = batch.error;
    return false;
  }
  error_.clear();
  if (run_ == 0) return true;
  if (batch.record_changed) {
    record_ = batch.record;
    cause_ = batch.cause;
    emit run_changed();
  } else {
    record_ = batch.record;
  }
  remote_ = record_ && record_->target != "local";
  const auto& fresh = batch.lines;
  if (fresh.empty()) return true;
  after_ = fresh.back().id;
  std::vector<history::ConsoleLine> kept;
  for (const auto& line : fresh) {
    if (wanted(line)) kept.push_back(line);
  }
  if (kept.empty()) return true;
  // Keep the newest kMaxLines: drop from the front first.
  const auto total = lines_.size() + kept.size();
  if (total > static_cast<size_t>(kMaxLines)) {
    const auto drop = std::min(lines_.size(), total - static_cast<size_t>(kMaxLines));
    if (drop > 0) {
      beginRemoveRows({}, 0, static_cast<int>(drop) - 1);
      lines_.erase(lines_.begin(), lines_.begin() + static_cast<std::ptrdiff_t>(drop));
      endRemoveRows();
    }
    if (kept.size() > static_cast<size_t>(kMaxLines)) kept.erase(kept.begin(), kept.end() - kMaxLines);
  }
  const int before = longest_;
  for (const auto& line : kept) {
    QString text = display_text(line);
    if (text.size() > longest_) {
      longest_ = static_cast<int>(text.size());
      longest_text_ = std::move(text);
    }
  }
  const int first = static_cast<int>(lines_.size());
  beginInsertRows({}, first, first + static_cast<int>(kept.size()) - 1);
  lines_.insert(lines_.end(), kept.begin(), kept.end());
  endInsertRows();
  if (longest_ > before) emit longest_line_grew(longest_);
  return true;
}

}  // namespace spur::app
