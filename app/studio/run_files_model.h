// SPDX-License-Identifier: Apache-2.0
// RunFilesModel: the files a run recorded, as its overview lists them: its checkpoints (save_state's folders, with
// the step they were saved at and their size), the models it exported (save_model) and the configuration it was
// launched with; whether each is on this machine and still there (a rotated checkpoint is gone), checked where the
// history was read (CompareReader), not here. And resume_arguments(): a run's arguments to start again from one of
// its checkpoints, as Accelerate's scripts take it (--resume_from_checkpoint PATH).
//
// Threads: the GUI thread's (a model); it reads nothing.
#pragma once

#include <QAbstractTableModel>
#include <QStringList>

#include <vector>

#include "studio/compare_model.h"

namespace spur::app {

/// `arguments` with `--resume_from_checkpoint CHECKPOINT` in place of any they had (both spellings, "--flag value"
/// and "--flag=value"), at their end.
QStringList resume_arguments(const QStringList& arguments, const QString& checkpoint);

class RunFilesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Kind, Step, Size, Written, Path, ColumnCount };
  /// Qt::UserRole: the file's path (absolute, on its machine).
  static constexpr int PathRole = Qt::UserRole;
  /// Qt::UserRole + 1: true when the file is on this machine and still there (its folder can be opened, a
  /// checkpoint resumed from).
  static constexpr int PresentRole = Qt::UserRole + 1;
  /// Qt::UserRole + 2: the kind, as recorded ("checkpoint", "model", "config").
  static constexpr int KindRole = Qt::UserRole + 2;

  explicit RunFilesModel(QObject* parent = nullptr);

  /// The files of a read (newest first); a read without them empties the list.
  void set_files(const std::vector<ComparedFile>& files);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<ComparedFile> files_;
};

}  // namespace spur::app
