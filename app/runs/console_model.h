// SPDX-License-Identifier: Apache-2.0
// ConsoleModel: one run's console lines from the history as a list model ("[host rank1] text"), fetched
// incrementally (only lines newer than the last one), optionally for one rank and containing a search text.
#pragma once

#include <QAbstractListModel>
#include <QString>

#include <optional>
#include <vector>

#include <memory>

#include <spur/history/records.h>

namespace spur::history {
class HistoryReader;
}

namespace spur::app {

class ConsoleModel : public QAbstractListModel {
  Q_OBJECT

 public:
  static constexpr int RankRole = Qt::UserRole;
  static constexpr int StreamRole = Qt::UserRole + 1;
  /// Lines kept in the model: the history keeps 100,000 per run; a view needs fewer to stay quick.
  static constexpr int kMaxLines = 20000;

  explicit ConsoleModel(QString history_path, QObject* parent = nullptr);
  ~ConsoleModel() override;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

  /// Which run; clears the lines. 0: none.
  void set_run(int64_t run);
  /// std::nullopt: every rank; -1: the launcher's own lines.
  void set_rank(std::optional<int> rank);
  /// Only lines containing `text` (case-insensitive); empty: all.
  void set_search(const QString& text);
  /// Appends the lines written since the last fetch. False when the history cannot be read (error()).
  bool fetch_new();
  const QString& error() const { return error_; }

 private:
  void clear();
  bool wanted(const history::ConsoleLine& line) const;

  QString path_;
  int64_t run_ = 0;
  std::optional<int> rank_;
  QString search_;
  int64_t after_ = 0;
  bool remote_ = false;
  std::vector<history::ConsoleLine> lines_;
  std::unique_ptr<history::HistoryReader> reader_;  // opened once, again after an error
  QString error_;
};

}  // namespace spur::app
