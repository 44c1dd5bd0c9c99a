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

namespace spur::app {

class RunService;

/// What a console fetch asks of the history: lines of `run` after `after` (for `rank`), and the run's record.
struct ConsoleQuery {
  uint64_t generation = 0;  // the model's filters when asked; a stale answer is dropped
  int64_t run = 0;
  int64_t after = 0;
  std::optional<int> rank;
  std::optional<history::Run> known;  // the record as the model has it: the cause is read when it changes
};

/// The history's answer to a ConsoleQuery.
struct ConsoleBatch {
  ConsoleQuery query;
  std::vector<history::ConsoleLine> lines;
  std::optional<history::Run> record;
  bool record_changed = false;
  QString cause;  // read when record_changed
  QString error;  // the history could not be read
};

/// Reads ConsoleBatches; one per thread (it keeps its history reader open between reads).
class ConsoleSource {
 public:
  explicit ConsoleSource(QString history_path);
  ~ConsoleSource();
  ConsoleBatch read(const ConsoleQuery& query);

 private:
  QString path_;
  std::unique_ptr<RunService> service_;  // here or over SSH (run_service.h)
};

class ConsoleModel : public QAbstractListModel {
  Q_OBJECT

 public:
  static constexpr int RankRole = Qt::UserRole;
  static constexpr int StreamRole = Qt::UserRole + 1;
  static constexpr int HostRole = Qt::UserRole + 2;
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
  /// std::nullopt: every host; else only lines from this host.
  void set_host(std::optional<QString> host);
  /// Only lines containing `text` (case-insensitive); empty: all.
  void set_search(const QString& text);
  /// Appends the lines written since the last fetch, read on this thread. False when the history cannot be read
  /// (error()).
  bool fetch_new();
  /// The same in two halves, for reading on another thread: what to read next, and applying what was read
  /// (dropped when the filters or the position changed meanwhile). apply() returns false on a read error.
  ConsoleQuery next_query() const;
  bool apply(const ConsoleBatch& batch);
  const QString& error() const { return error_; }
  /// The run's record as of the last fetch.
  const std::optional<history::Run>& run_record() const { return record_; }
  /// How the run ended, when it failed or was stopped: the launcher's account (which rank failed, its exit code,
  /// its last lines). Empty while it runs or when it finished.
  const QString& cause() const { return cause_; }
  /// The characters of the longest line shown since the last reset, and its text (a view measures it for its
  /// lines' width); longest_line_grew says when it grows.
  int longest_line() const { return longest_; }
  const QString& longest_line_text() const { return longest_text_; }

 signals:
  /// The run's status, exit code or cause changed.
  void run_changed();
  /// longest_line() grew to `characters`.
  void longest_line_grew(int characters);

 private:
  void clear();
  bool wanted(const history::ConsoleLine& line) const;

  int64_t run_ = 0;
  std::optional<int> rank_;
  std::optional<QString> host_;
  std::optional<history::Run> record_;
  QString cause_;
  QString search_;
  int64_t after_ = 0;
  bool remote_ = false;
  std::vector<history::ConsoleLine> lines_;
  int longest_ = 0;
  QString longest_text_;
  QString display_text(const history::ConsoleLine& line) const;
  ConsoleSource source_;  // for fetch_new()
  uint64_t generation_ = 0;
  QString error_;
};

}  // namespace spur::app
