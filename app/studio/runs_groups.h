// SPDX-License-Identifier: Apache-2.0
// RunsGroupModel: the runs table grouped (by sweep, project, status or a parameter) as a two-level tree: a row per
// group, its runs below it; ungrouped, the runs as they are (one level). A proxy over the RunsModel's rows (the
// model itself or an identity proxy over it, such as the Studio's colours): live updates keep their meaning, a run
// that changes group (its status, in "by status") moves there and stays selected, groups come and go with their
// runs, and only a change of the grouping (or, while grouped, of the columns) resets the view.
//
// Threads: the GUI thread, as its source.
#pragma once

#include <QAbstractProxyModel>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

namespace spur::app {

class RunsModel;

class RunsGroupModel : public QAbstractProxyModel {
  Q_OBJECT

 public:
  /// Qt::UserRole + 10, on a group's row: its key as grouped by ("lr-grid (7psrfd7t)", "finished", "0.01"); empty
  /// on a run's row.
  static constexpr int GroupRole = Qt::UserRole + 10;
  /// Qt::UserRole + 11, on a group's row: how many runs it holds.
  static constexpr int GroupSizeRole = Qt::UserRole + 11;

  /// `runs`: whose rows the source's are (the source is `runs` or an identity proxy over it).
  explicit RunsGroupModel(const RunsModel* runs, QObject* parent = nullptr);

  /// What to group by: "" (nothing: one level), "sweep", "project", "status" or "param:NAME" (a recorded parameter's
  /// value). Default: "". std::invalid_argument for another key.
  void set_group_by(const QString& key);
  const QString& group_by() const { return group_by_; }
  /// The keys set_group_by takes for the runs in the source's rows first_row..last_row (Default: all): the fixed
  /// ones, then "param:NAME" for each parameter one of them recorded, sorted.
  QStringList group_keys(int first_row = 0, int last_row = -1) const;
  /// The group of a source row as set_group_by's key reads it ("(none)" when the run has no such value).
  QString group_of(int source_row) const;

  void setSourceModel(QAbstractItemModel* source) override;
  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  QModelIndex sibling(int row, int column, const QModelIndex& at) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  bool hasChildren(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& at, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& at) const override;
  QModelIndex mapToSource(const QModelIndex& proxy) const override;
  QModelIndex mapFromSource(const QModelIndex& source) const override;
  bool canFetchMore(const QModelIndex& parent) const override;
  void fetchMore(const QModelIndex& parent) override;

 private:
  struct Group {
    quintptr id;  // stable while the group lives (its runs' internal id)
    QString key;
    std::vector<int> rows;  // source rows
  };
  bool grouped() const { return !group_by_.isEmpty(); }
  int group_index(quintptr id) const;
  void rebuild();
  /// The row of the group of `key`, made (and said to views) when there is none.
  int group_for(const QString& key);
  void add_row(int source_row);
  void remove_row(int source_row);
  /// To the group its key says now (made when new; the one it leaves removed when emptied).
  void move_row(int source_row);
  void shift_rows(int from, int by);

  const RunsModel* runs_;
  QString group_by_;
  std::vector<Group> groups_;
  std::vector<std::pair<quintptr, int>> where_;  // by source row: (its group's id, its position there)
  quintptr next_id_ = 1;
  bool regrouping_ = false;  // inside set_group_by (no page is fetched mid-reset)
  std::vector<QMetaObject::Connection> connections_;
};

}  // namespace spur::app
