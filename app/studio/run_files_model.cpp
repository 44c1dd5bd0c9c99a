// SPDX-License-Identifier: Apache-2.0
// A run's files; see run_files_model.h.
#include "studio/run_files_model.h"

#include <algorithm>

#include "runs/run_status.h"

namespace spur::app {

QStringList resume_arguments(const QStringList& arguments, const QString& checkpoint) {
  static const QString flag = QStringLiteral("--resume_from_checkpoint");
  QStringList kept;
  for (qsizetype i = 0; i < arguments.size(); ++i) {
    if (arguments[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (arguments[i].startsWith(flag + "=")) continue;
    kept << arguments[i];
  }
  return kept << flag << checkpoint;
}

RunFilesModel::RunFilesModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunFilesModel::set_files(const std::vector<ComparedFile>& files) {
  beginResetModel();
  files_ = files;
  // Newest first: the checkpoint to resume from is the top one.
  std::stable_sort(files_.begin(), files_.end(),
                   [](const ComparedFile& a, const ComparedFile& b) { return a.file.id > b.file.id; });
  endResetModel();
}

int RunFilesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(files_.size());
}

int RunFilesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunFilesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  switch (section) {
    case Kind:
      return tr("File");
    case Step:
      return tr("Step");
    case Size:
      return tr("Size");
    case Written:
      return tr("Written");
    case Path:
      return tr("Path");
  }
  return {};
}

QVariant RunFilesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const auto& [file, here, present] = files_[static_cast<size_t>(index.row())];
  const QString path = QString::fromStdString(file.path);
  if (role == PathRole) return path;
  if (role == PresentRole) return present;
  if (role == KindRole) return QString::fromStdString(file.kind);
  if (role == Qt::ToolTipRole) {
    if (!here) return tr("%1 on %2").arg(path, QString::fromStdString(file.host));
    return present ? path : tr("%1 (no longer there: a newer checkpoint replaced it, or it was removed)").arg(path);
  }
  if (role == Qt::TextAlignmentRole && (index.column() == Step || index.column() == Size)) {
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Kind:
      if (file.kind == "checkpoint") return tr("checkpoint");
      if (file.kind == "model") return tr("model");
      if (file.kind == "config") return tr("configuration");
      return QString::fromStdString(file.kind);
    case Step:
      return file.step >= 0 ? QString::number(file.step) : QString("-");
    case Size:
      return size_text(file.bytes);
    case Written:
      return time_text(file.wall);
    case Path:
      if (!here) return tr("%1 (on %2)").arg(path, QString::fromStdString(file.host));
      return present ? path : tr("%1 (removed)").arg(path);
  }
  return {};
}

}  // namespace spur::app
