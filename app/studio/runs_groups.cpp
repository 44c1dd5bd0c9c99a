// SPDX-License-Identifier: Apache-2.0
// The runs table's groups; see runs_groups.h.
#include "studio/runs_groups.h"

#include <QHash>
#include <QScopedValueRollback>

#include <algorithm>
#include <stdexcept>

#include <spur/json.h>

#include "studio/runs_model.h"

namespace spur::app {
namespace {

const QStringList kFixedKeys = {"sweep", "project", "status"};

// A parameter's value as the runs table shows it: text as it is, numbers and the rest as JSON writes them.
QString param_text(const json::Value& value) {
  return value.is_string() ? QString::fromStdString(value.as_string()) : QString::fromStdString(json::write(value));
}

}  // namespace

RunsGroupModel::RunsGroupModel(const RunsModel* runs, QObject* parent) : QAbstractProxyModel(parent), runs_(runs) {}

void RunsGroupModel::set_group_by(const QString& key) {
  if (!key.isEmpty() && !kFixedKeys.contains(key) && !(key.startsWith("param:") && key.size() > 6)) {
    throw std::invalid_argument("cannot group runs by \"" + key.toStdString() +
                                "\": sweep, project, status or param:NAME");
  }
  if (key == group_by_) return;
  // Views (and QAbstractItemModelTester) may ask for more rows from inside the reset's signals: not mid-reset.
  const QScopedValueRollback busy(regrouping_, true);
  beginResetModel();
  group_by_ = key;
  rebuild();
  endResetModel();
}

QStringList RunsGroupModel::group_keys(int first_row, int last_row) const {
  QStringList params;
  const auto& records = runs_->records();
  if (last_row < 0) last_row = static_cast<int>(records.size()) - 1;
  for (int row = std::max(0, first_row); row <= last_row && row < static_cast<int>(records.size()); ++row) {
    const auto& run = records[static_cast<size_t>(row)];
    try {
      const auto object = json::parse(run.params);
      if (!object.is_object()) continue;
      for (const auto& [name, value] : object.as_object()) {
        const QString key = "param:" + QString::fromStdString(name);
        if (!params.contains(key)) params << key;
      }
    } catch (const std::exception&) {
      // A record whose parameters do not parse offers none.
    }
  }
  params.sort();
  return kFixedKeys + params;
}

QString RunsGroupModel::group_of(int source_row) const {
  const auto& run = runs_->run(source_row);
  if (group_by_ == "sweep") {
    QString id, name;
    for (const auto& tag : run.tags) {
      const QString text = QString::fromStdString(tag);
      if (text.startsWith("sweep:")) id = text.mid(6);
      if (text.startsWith("sweep_name:")) name = text.mid(11);
    }
    if (id.isEmpty()) return tr("(not in a sweep)");
    return name.isEmpty() ? tr("sweep %1").arg(id) : QString("%1 (%2)").arg(name, id);
  }
  if (group_by_ == "project") return run.project.empty() ? tr("(no project)") : QString::fromStdString(run.project);
  if (group_by_ == "status") return runs_->status(source_row);
  if (group_by_.startsWith("param:")) {
    try {
      const auto object = json::parse(run.params);
      if (object.is_object()) {
        const auto& fields = object.as_object();
        const std::string name = group_by_.mid(6).toStdString();
        const auto it =
            std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == name; });
        if (it != fields.end()) {
          return param_text(it->second);
        }
      }
    } catch (const std::exception&) {
    }
    return tr("(none)");
  }
  return {};
}

void RunsGroupModel::setSourceModel(QAbstractItemModel* source) {
  beginResetModel();
  for (const auto& connection : connections_) disconnect(connection);
  connections_.clear();
  QAbstractProxyModel::setSourceModel(source);
  if (source) {
    auto& c = connections_;
    c.push_back(connect(source, &QAbstractItemModel::modelAboutToBeReset, this, [this] { beginResetModel(); }));
    c.push_back(connect(source, &QAbstractItemModel::modelReset, this, [this] {
      rebuild();
      endResetModel();
    }));
    // A source that reorders its rows (none of the Studio's do): read again.
    c.push_back(connect(source, &QAbstractItemModel::layoutAboutToBeChanged, this, [this] { beginResetModel(); }));
    c.push_back(connect(source, &QAbstractItemModel::layoutChanged, this, [this] {
      rebuild();
      endResetModel();
    }));
    c.push_back(connect(source, &QAbstractItemModel::rowsAboutToBeInserted, this,
                        [this](const QModelIndex&, int first, int last) {
                          if (!grouped()) beginInsertRows({}, first, last);
                        }));
    c.push_back(
        connect(source, &QAbstractItemModel::rowsInserted, this, [this](const QModelIndex&, int first, int last) {
          if (!grouped()) {
            endInsertRows();
            return;
          }
          // The rows from `first` on moved down by `count` (an older page comes in at the top).
          const int count = last - first + 1;
          shift_rows(first, count);
          where_.insert(where_.begin() + first, static_cast<size_t>(count), {0, 0});
          for (int row = first; row <= last; ++row) add_row(row);
        }));
    c.push_back(connect(source, &QAbstractItemModel::rowsAboutToBeRemoved, this,
                        [this](const QModelIndex&, int first, int last) {
                          if (!grouped()) {
                            beginRemoveRows({}, first, last);
                            return;
                          }
                          for (int row = last; row >= first; --row) remove_row(row);
                        }));
    c.push_back(
        connect(source, &QAbstractItemModel::rowsRemoved, this, [this](const QModelIndex&, int first, int last) {
          if (!grouped()) {
            endRemoveRows();
            return;
          }
          where_.erase(where_.begin() + first, where_.begin() + last + 1);
          shift_rows(first, -(last - first + 1));
        }));
    c.push_back(connect(
        source, &QAbstractItemModel::dataChanged, this,
        [this](const QModelIndex& top_left, const QModelIndex& bottom_right, const QList<int>& roles) {
          const int first_column = top_left.column(), last_column = bottom_right.column();
          if (!grouped()) {
            emit dataChanged(index(top_left.row(), first_column), index(bottom_right.row(), last_column), roles);
            return;
          }
          for (int row = top_left.row(); row <= bottom_right.row(); ++row) {
            const int g = group_index(where_[static_cast<size_t>(row)].first);
            if (g >= 0 && groups_[static_cast<size_t>(g)].key == group_of(row)) {
              const auto at = mapFromSource(sourceModel()->index(row, 0));
              emit dataChanged(at.siblingAtColumn(first_column), at.siblingAtColumn(last_column), roles);
            } else {
              // Its group changed (a status, a parameter recorded late): it moves there.
              move_row(row);
            }
          }
        }));
    c.push_back(connect(source, &QAbstractItemModel::headerDataChanged, this,
                        [this](Qt::Orientation orientation, int first, int last) {
                          emit headerDataChanged(orientation, first, last);
                        }));
    // Columns (the metric columns) come and go for every row at once. Ungrouped, as the source says; grouped, a
    // reset: every group's runs have them too, and a sorting proxy above keeps each parent's columns apart.
    const auto columns_coming = [this](bool inserted) {
      return [this, inserted](const QModelIndex&, int first, int last) {
        if (grouped()) {
          beginResetModel();
        } else if (inserted) {
          beginInsertColumns({}, first, last);
        } else {
          beginRemoveColumns({}, first, last);
        }
      };
    };
    const auto columns_done = [this](bool inserted) {
      return [this, inserted] {
        if (grouped()) {
          endResetModel();
        } else if (inserted) {
          endInsertColumns();
        } else {
          endRemoveColumns();
        }
      };
    };
    c.push_back(connect(source, &QAbstractItemModel::columnsAboutToBeInserted, this, columns_coming(true)));
    c.push_back(connect(source, &QAbstractItemModel::columnsInserted, this, columns_done(true)));
    c.push_back(connect(source, &QAbstractItemModel::columnsAboutToBeRemoved, this, columns_coming(false)));
    c.push_back(connect(source, &QAbstractItemModel::columnsRemoved, this, columns_done(false)));
  }
  rebuild();
  endResetModel();
}

int RunsGroupModel::group_index(quintptr id) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].id == id) return static_cast<int>(g);
  }
  return -1;
}

void RunsGroupModel::rebuild() {
  groups_.clear();
  where_.clear();
  if (!grouped() || !sourceModel()) return;
  const int rows = sourceModel()->rowCount();
  where_.resize(static_cast<size_t>(rows));
  QHash<QString, size_t> found;
  for (int row = 0; row < rows; ++row) {
    const QString key = group_of(row);
    auto it = found.find(key);
    if (it == found.end()) {
      it = found.insert(key, groups_.size());
      groups_.push_back({next_id_++, key, {}});
    }
    auto& group = groups_[*it];
    where_[static_cast<size_t>(row)] = {group.id, static_cast<int>(group.rows.size())};
    group.rows.push_back(row);
  }
}

int RunsGroupModel::group_for(const QString& key) {
  const auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.key == key; });
  if (it != groups_.end()) return static_cast<int>(it - groups_.begin());
  const int at = static_cast<int>(groups_.size());
  beginInsertRows({}, at, at);
  groups_.push_back({next_id_++, key, {}});
  endInsertRows();
  return at;
}

void RunsGroupModel::add_row(int source_row) {
  const int g = group_for(group_of(source_row));
  auto it = groups_.begin() + g;
  const int position = static_cast<int>(it->rows.size());
  beginInsertRows(index(g, 0), position, position);
  it->rows.push_back(source_row);
  where_[static_cast<size_t>(source_row)] = {it->id, position};
  endInsertRows();
  emit dataChanged(index(g, 0), index(g, columnCount() - 1));  // its count
}

void RunsGroupModel::remove_row(int source_row) {
  const auto [id, position] = where_[static_cast<size_t>(source_row)];
  const int g = group_index(id);
  if (g < 0) return;
  auto& group = groups_[static_cast<size_t>(g)];
  beginRemoveRows(index(g, 0), position, position);
  group.rows.erase(group.rows.begin() + position);
  for (auto k = static_cast<size_t>(position); k < group.rows.size(); ++k) {
    where_[static_cast<size_t>(group.rows[k])].second = static_cast<int>(k);
  }
  where_[static_cast<size_t>(source_row)] = {0, 0};
  endRemoveRows();
  if (group.rows.empty()) {
    beginRemoveRows({}, g, g);
    groups_.erase(groups_.begin() + g);
    endRemoveRows();
  } else {
    emit dataChanged(index(g, 0), index(g, columnCount() - 1));
  }
}

void RunsGroupModel::move_row(int source_row) {
  const QString key = group_of(source_row);
  const auto [id, position] = where_[static_cast<size_t>(source_row)];
  const int from = group_index(id);
  if (from < 0) return;
  const int to = group_for(key);
  auto it = groups_.begin() + to;
  const quintptr to_id = it->id;
  const int destination = static_cast<int>(it->rows.size());
  // A move, not a removal and an insertion: a view's selection and current row follow the run.
  beginMoveRows(index(from, 0), position, position, index(to, 0), destination);
  auto& old_rows = groups_[static_cast<size_t>(from)].rows;
  old_rows.erase(old_rows.begin() + position);
  for (auto k = static_cast<size_t>(position); k < old_rows.size(); ++k) {
    where_[static_cast<size_t>(old_rows[k])].second = static_cast<int>(k);
  }
  groups_[static_cast<size_t>(to)].rows.push_back(source_row);
  where_[static_cast<size_t>(source_row)] = {to_id, destination};
  endMoveRows();
  if (groups_[static_cast<size_t>(from)].rows.empty()) {
    beginRemoveRows({}, from, from);
    groups_.erase(groups_.begin() + from);
    endRemoveRows();
  } else {
    emit dataChanged(index(from, 0), index(from, columnCount() - 1));
  }
  const int now = group_index(to_id);
  emit dataChanged(index(now, 0), index(now, columnCount() - 1));
  const QModelIndex moved = mapFromSource(sourceModel()->index(source_row, 0));
  emit dataChanged(moved, moved.siblingAtColumn(columnCount() - 1));
}

void RunsGroupModel::shift_rows(int from, int by) {
  for (auto& group : groups_) {
    for (int& row : group.rows) {
      if (row >= from) row += by;
    }
  }
}

QModelIndex RunsGroupModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= columnCount()) return {};
  if (!parent.isValid()) return row < rowCount() ? createIndex(row, column, quintptr{0}) : QModelIndex();
  if (!grouped() || parent.internalId() != 0 || parent.column() != 0 ||
      parent.row() >= static_cast<int>(groups_.size())) {
    return {};
  }
  const auto& group = groups_[static_cast<size_t>(parent.row())];
  return row < static_cast<int>(group.rows.size()) ? createIndex(row, column, group.id) : QModelIndex();
}

QModelIndex RunsGroupModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == 0) return {};
  const int g = group_index(child.internalId());
  return g < 0 ? QModelIndex() : createIndex(g, 0, quintptr{0});
}

QModelIndex RunsGroupModel::sibling(int row, int column, const QModelIndex& at) const {
  return index(row, column, parent(at));
}

int RunsGroupModel::rowCount(const QModelIndex& parent) const {
  if (!sourceModel()) return 0;
  if (!parent.isValid()) return grouped() ? static_cast<int>(groups_.size()) : sourceModel()->rowCount();
  if (!grouped() || parent.internalId() != 0 || parent.column() != 0) return 0;
  return parent.row() < static_cast<int>(groups_.size())
             ? static_cast<int>(groups_[static_cast<size_t>(parent.row())].rows.size())
             : 0;
}

int RunsGroupModel::columnCount(const QModelIndex&) const { return sourceModel() ? sourceModel()->columnCount() : 0; }

bool RunsGroupModel::hasChildren(const QModelIndex& parent) const { return rowCount(parent) > 0; }

QVariant RunsGroupModel::data(const QModelIndex& at, int role) const {
  if (!at.isValid()) return {};
  if (!grouped() || at.internalId() != 0) return sourceModel()->data(mapToSource(at), role);
  const auto& group = groups_.at(static_cast<size_t>(at.row()));
  const auto size = static_cast<int>(group.rows.size());
  switch (role) {
    case Qt::DisplayRole:
      if (at.column() != 0) return {};
      return size == 1 ? tr("%1  (1 run)").arg(group.key) : tr("%1  (%2 runs)").arg(group.key).arg(size);
    case Qt::ToolTipRole:
      return tr("%1: %2").arg(group_by_, group.key);
    case GroupRole:
      return group.key;
    case GroupSizeRole:
      return size;
    case RunsModel::SortRole: {
      // By the Id column, the group of the newest run first (newest first, as the runs); by the others, its key.
      if (at.column() != RunsModel::Id) return group.key;
      int64_t newest = 0;
      for (const int row : group.rows) newest = std::max(newest, runs_->run(row).id);
      return static_cast<qlonglong>(newest);
    }
    default:
      return {};
  }
}

QVariant RunsGroupModel::headerData(int section, Qt::Orientation orientation, int role) const {
  return sourceModel() ? sourceModel()->headerData(section, orientation, role) : QVariant();
}

Qt::ItemFlags RunsGroupModel::flags(const QModelIndex& at) const {
  if (!at.isValid()) return Qt::NoItemFlags;
  if (grouped() && at.internalId() == 0) return Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  // A run's row never has children: a tree view keeps no state for it.
  return sourceModel()->flags(mapToSource(at)) | Qt::ItemNeverHasChildren;
}

QModelIndex RunsGroupModel::mapToSource(const QModelIndex& proxy) const {
  if (!proxy.isValid() || !sourceModel()) return {};
  if (!grouped()) return sourceModel()->index(proxy.row(), proxy.column());
  if (proxy.internalId() == 0) return {};  // a group's row
  const int g = group_index(proxy.internalId());
  if (g < 0) return {};
  const auto& rows = groups_[static_cast<size_t>(g)].rows;
  return proxy.row() < static_cast<int>(rows.size())
             ? sourceModel()->index(rows[static_cast<size_t>(proxy.row())], proxy.column())
             : QModelIndex();
}

QModelIndex RunsGroupModel::mapFromSource(const QModelIndex& source) const {
  if (!source.isValid()) return {};
  if (!grouped()) return index(source.row(), source.column());
  if (source.row() >= static_cast<int>(where_.size())) return {};
  const auto [id, position] = where_[static_cast<size_t>(source.row())];
  return id == 0 ? QModelIndex() : createIndex(position, source.column(), id);
}

bool RunsGroupModel::canFetchMore(const QModelIndex& parent) const {
  // Older runs are fetched for the whole table, never for a group's expansion, nor while regrouping.
  return !parent.isValid() && !regrouping_ && sourceModel() && sourceModel()->canFetchMore({});
}

void RunsGroupModel::fetchMore(const QModelIndex& parent) {
  if (canFetchMore(parent)) sourceModel()->fetchMore({});
}

}  // namespace spur::app
