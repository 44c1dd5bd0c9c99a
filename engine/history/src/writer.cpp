// SPDX-License-Identifier: Apache-2.0
// Writing the run history; see writer.h. Points go into the series' last chunk until it holds kChunkPoints,
// then into a new one, so a series is a few rows per thousand points whatever the commit rhythm.
#include "spur/history/writer.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "chunk.h"
#include "summary_table.h"

namespace spur::history {

HistoryWriter::HistoryWriter(const std::string& path, int busy_timeout_ms) : db_(path, false, busy_timeout_ms) {}

int64_t HistoryWriter::create_run(Run run) {
  Transaction transaction(db_);
  const int64_t id = insert_run(std::move(run), {});
  transaction.commit();
  return id;
}

std::optional<int64_t> HistoryWriter::import_run(Run run, const std::vector<MetricAppend>& metrics,
                                                 const std::string& origin, bool again) {
  if (origin.empty()) throw HistoryError("run history: an imported run needs its origin");
  try {
    Transaction transaction(db_);  // BEGIN IMMEDIATE: two imports of the same files cannot both pass the check
    if (!again) {
      Statement earlier(db_.handle(), "SELECT run_id FROM events WHERE detail = ? ORDER BY id LIMIT 1");
      earlier.bind(1, origin);
      if (earlier.step()) {
        last_imported_as_ = earlier.integer(0);
        last_import_changed_ = false;
        return std::nullopt;
      }
      if (!run.command.empty()) {
        Statement same(db_.handle(), "SELECT id FROM runs WHERE target = ? AND command = ? ORDER BY id DESC LIMIT 1");
        same.bind(1, run.target).bind(2, run.command);
        if (same.step()) {
          last_imported_as_ = same.integer(0);
          last_import_changed_ = true;
          return std::nullopt;
        }
      }
    }
    const int64_t id = insert_run(std::move(run), origin);
    append_points(id, metrics);
    transaction.commit();
    return id;
  } catch (...) {
    series_.clear();  // the rolled-back transaction took its new series with it
    throw;
  }
}

int64_t HistoryWriter::insert_run(Run run, const std::string& event_detail) {
  const double now = now_seconds();
  if (run.created == 0) run.created = now;
  if (run.started == 0 && run.status == "running") run.started = now;
  if (run.pid == 0) run.pid = ::getpid();
  if (run.host.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) run.host = name;
  }
  if (!valid_status(run.status)) throw HistoryError("run history: unknown status '" + run.status + "'");
  Statement insert(db_.handle(),
                   "INSERT INTO runs(name, project, status, created, started, ended, exit_code, target, hosts, config, "
                   "command, notes, total_steps, pid, host, params, parent) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  insert.bind(1, run.name).bind(2, run.project).bind(3, run.status).bind(4, run.created).bind(5, run.started);
  insert.bind(6, run.ended);
  if (run.exit_code) insert.bind(7, static_cast<int64_t>(*run.exit_code));
  else insert.bind_null(7);
  insert.bind(8, run.target).bind(9, run.hosts).bind(10, run.config).bind(11, run.command).bind(12, run.notes);
  insert.bind(13, run.total_steps).bind(14, run.pid).bind(15, run.host).bind(16, run.params).bind(17, run.parent);
  insert.run();
  const int64_t id = sqlite3_last_insert_rowid(db_.handle());
  if (run.name.empty()) {
    Statement name(db_.handle(), "UPDATE runs SET name = ? WHERE id = ?");
    name.bind(1, "run-" + std::to_string(id)).bind(2, id).run();
  }
  for (const auto& tag : run.tags) {
    Statement(db_.handle(), "INSERT OR IGNORE INTO run_tags(run_id, tag) VALUES(?, ?)").bind(1, id).bind(2, tag).run();
  }
  Statement event(db_.handle(), "INSERT INTO events(run_id, wall, status, detail) VALUES(?, ?, ?, ?)");
  event.bind(1, id).bind(2, now).bind(3, run.status).bind(4, event_detail).run();
  return id;
}

void HistoryWriter::set_status(int64_t run, const std::string& status, std::optional<int> exit_code,
                               const std::string& detail) {
  if (!valid_status(status)) throw HistoryError("run history: unknown status '" + status + "'");
  const double now = now_seconds();
  const bool over = status == "finished" || status == "failed" || status == "stopped";
  Transaction transaction(db_);
  Statement update(db_.handle(),
                   "UPDATE runs SET status = ?1, "
                   "started = CASE WHEN ?1 = 'running' AND started = 0 THEN ?2 ELSE started END, "
                   "ended = CASE WHEN ?3 THEN ?2 ELSE ended END, exit_code = COALESCE(?4, exit_code) WHERE id = ?5");
  update.bind(1, status).bind(2, now).bind(3, static_cast<int64_t>(over));
  if (exit_code) update.bind(4, static_cast<int64_t>(*exit_code));
  else update.bind_null(4);
  update.bind(5, run).run();
  Statement event(db_.handle(), "INSERT INTO events(run_id, wall, status, detail) VALUES(?, ?, ?, ?)");
  event.bind(1, run).bind(2, now).bind(3, status).bind(4, detail).run();
  transaction.commit();
}

void HistoryWriter::set_total_steps(int64_t run, int64_t total_steps) {
  Statement(db_.handle(), "UPDATE runs SET total_steps = ? WHERE id = ?").bind(1, total_steps).bind(2, run).run();
}

void HistoryWriter::set_names(int64_t run, const std::string& project, const std::string& name) {
  Statement update(db_.handle(),
                   "UPDATE runs SET project = CASE WHEN ?1 = '' THEN project ELSE ?1 END, "
                   "name = CASE WHEN ?2 = '' THEN name ELSE ?2 END WHERE id = ?3");
  update.bind(1, project).bind(2, name).bind(3, run).run();
}

void HistoryWriter::set_notes(int64_t run, const std::string& notes) {
  Statement(db_.handle(), "UPDATE runs SET notes = ? WHERE id = ?").bind(1, notes).bind(2, run).run();
}

void HistoryWriter::set_params(int64_t run, const std::string& params_json) {
  Statement(db_.handle(), "UPDATE runs SET params = ? WHERE id = ?").bind(1, params_json).bind(2, run).run();
}

void HistoryWriter::add_tag(int64_t run, const std::string& tag) {
  Statement(db_.handle(), "INSERT OR IGNORE INTO run_tags(run_id, tag) VALUES(?, ?)").bind(1, run).bind(2, tag).run();
}

void HistoryWriter::remove_tag(int64_t run, const std::string& tag) {
  Statement(db_.handle(), "DELETE FROM run_tags WHERE run_id = ? AND tag = ?").bind(1, run).bind(2, tag).run();
}

bool HistoryWriter::has_run(int64_t run) {
  Statement query(db_.handle(), "SELECT 1 FROM runs WHERE id = ?");
  query.bind(1, run);
  return query.step();
}

bool HistoryWriter::delete_run(int64_t run) {
  if (!has_run(run)) return false;
  Transaction transaction(db_);
  Statement(db_.handle(), "DELETE FROM runs WHERE id = ?").bind(1, run).run();  // cascades
  transaction.commit();
  for (auto it = series_.begin(); it != series_.end();) it = it->first.first == run ? series_.erase(it) : std::next(it);
  return true;
}

int64_t HistoryWriter::series_id(int64_t run, const std::string& key) {
  const auto known = series_.find({run, key});
  if (known != series_.end()) return known->second;
  // A new series is summarised from its first chunk on (summarised 0; a series from before version 3 has -1).
  Statement(db_.handle(), "INSERT OR IGNORE INTO series(run_id, key, summarised) VALUES(?, ?, 0)")
      .bind(1, run)
      .bind(2, key)
      .run();
  Statement query(db_.handle(), "SELECT id FROM series WHERE run_id = ? AND key = ?");
  query.bind(1, run).bind(2, key);
  if (!query.step()) throw HistoryError("run history: no run " + std::to_string(run));
  const int64_t id = query.integer(0);
  series_[{run, key}] = id;
  return id;
}

void HistoryWriter::append_metrics(int64_t run, const std::vector<MetricAppend>& metrics) {
  try {
    append_metrics_once(run, metrics);
  } catch (...) {
    // A rolled-back transaction may have taken new series with it (or another process deleted the run).
    series_.clear();
    throw;
  }
}

void HistoryWriter::append_metrics_once(int64_t run, const std::vector<MetricAppend>& metrics) {
  Transaction transaction(db_);
  append_points(run, metrics);
  transaction.commit();
}

void HistoryWriter::append_points(int64_t run, const std::vector<MetricAppend>& metrics) {
  Statement last(db_.handle(), "SELECT id, count, data FROM points WHERE series_id = ? ORDER BY id DESC LIMIT 1");
  // The grown chunk is rebuilt here and bound whole: `data || ?` in SQL would turn the BLOB into TEXT.
  Statement grow(db_.handle(), "UPDATE points SET data = ?, count = count + ? WHERE id = ?");
  Statement insert(db_.handle(), "INSERT INTO points(series_id, count, data) VALUES(?, ?, ?)");
  std::vector<unsigned char> buffer;
  int64_t max_step = -1;
  for (const auto& metric : metrics) {
    if (metric.points.empty()) continue;
    const int64_t series = series_id(run, metric.key);
    size_t done = 0;
    last.bind(1, series);
    if (last.step()) {
      const int64_t chunk = last.integer(0);
      const int64_t room = kChunkPoints - last.integer(1);
      if (room > 0) {
        const size_t n = std::min<size_t>(static_cast<size_t>(room), metric.points.size());
        size_t old_bytes = 0;
        const auto* old_data = static_cast<const unsigned char*>(last.blob(2, old_bytes));
        std::vector<unsigned char> grown(old_data, old_data + old_bytes);
        encode_points(metric.points.data(), n, buffer);
        grown.insert(grown.end(), buffer.begin(), buffer.end());
        grow.bind_blob(1, grown.data(), grown.size()).bind(2, static_cast<int64_t>(n)).bind(3, chunk).run();
        done = n;
        if (static_cast<int64_t>(n) == room) {  // it is full now
          summarise_full_chunk(db_, series, chunk, grown.data(), grown.size());
        }
      }
    }
    last.reset();
    while (done < metric.points.size()) {
      const size_t n = std::min<size_t>(kChunkPoints, metric.points.size() - done);
      encode_points(metric.points.data() + done, n, buffer);
      insert.bind(1, series).bind(2, static_cast<int64_t>(n)).bind_blob(3, buffer.data(), buffer.size()).run();
      if (static_cast<int64_t>(n) == kChunkPoints) {
        summarise_full_chunk(db_, series, sqlite3_last_insert_rowid(db_.handle()), buffer.data(), buffer.size());
      }
      done += n;
    }
    // The launcher's own measurements (system/: CPU, memory, GPUs, stepped in seconds) are not the program's steps.
    if (metric.key.rfind("system/", 0) == 0) continue;
    for (const auto& point : metric.points) max_step = std::max(max_step, point.step);
  }
  if (max_step >= 0) {
    Statement(db_.handle(), "UPDATE runs SET last_step = max(last_step, ?) WHERE id = ?")
        .bind(1, max_step)
        .bind(2, run)
        .run();
  }
}

void HistoryWriter::append_console(const std::vector<ConsoleLine>& lines) {
  if (lines.empty()) return;
  Transaction transaction(db_);
  Statement insert(db_.handle(), "INSERT INTO console(run_id, host, rank, stream, wall, text) VALUES(?,?,?,?,?,?)");
  std::vector<int64_t> runs;
  for (const auto& line : lines) {
    insert.bind(1, line.run_id).bind(2, line.host).bind(3, static_cast<int64_t>(line.rank)).bind(4, line.stream);
    insert.bind(5, line.wall == 0 ? now_seconds() : line.wall).bind(6, line.text).run();
    if (std::find(runs.begin(), runs.end(), line.run_id) == runs.end()) runs.push_back(line.run_id);
  }
  // Bounded per run: a chatty run keeps its newest lines (W&B keeps 100,000 too).
  Statement trim(db_.handle(),
                 "DELETE FROM console WHERE run_id = ?1 AND id < (SELECT id FROM console WHERE run_id = ?1 "
                 "ORDER BY id DESC LIMIT 1 OFFSET ?2)");
  for (const int64_t run : runs) trim.bind(1, run).bind(2, kConsoleLinesPerRun - 1).run();
  transaction.commit();
}

void HistoryWriter::add_files(const std::vector<RunFile>& files) {
  if (files.empty()) return;
  Transaction transaction(db_);
  Statement insert(db_.handle(),
                   "INSERT INTO files(run_id, kind, path, step, bytes, wall, host) VALUES(?,?,?,?,?,?,?)");
  for (const auto& file : files) {
    insert.bind(1, file.run_id).bind(2, file.kind).bind(3, file.path).bind(4, file.step).bind(5, file.bytes);
    insert.bind(6, file.wall == 0 ? now_seconds() : file.wall).bind(7, file.host).run();
  }
  transaction.commit();
}

std::vector<int64_t> HistoryWriter::series_to_summarise(bool check_all) {
  std::vector<int64_t> series, needing;
  {
    Statement all(db_.handle(), check_all ? "SELECT id FROM series ORDER BY id"
                                          : "SELECT id FROM series WHERE summarised < 0 ORDER BY id");
    while (all.step()) series.push_back(all.integer(0));
  }
  if (!check_all) return series;
  db_.exec("BEGIN");  // one read of the file: no writer waits for this
  try {
    for (const int64_t id : series) {
      if (!summary_state(db_, id).agree) needing.push_back(id);
    }
  } catch (...) {
    db_.exec("COMMIT");
    throw;
  }
  db_.exec("COMMIT");
  return needing;
}

int64_t HistoryWriter::build_summaries(const std::function<bool(int64_t done, int64_t total)>& progress,
                                       bool check_all) {
  const auto series = series_to_summarise(check_all);
  const auto total = static_cast<int64_t>(series.size());
  int64_t built = 0;
  for (int64_t done = 0; done < total; ++done) {
    if (progress && !progress(done, total)) return built;
    // One transaction per series: a writer appending to it meanwhile waits at most one series' rebuild. Checked
    // again inside it: the writer may have added to the series since.
    Transaction transaction(db_);
    const int64_t id = series[static_cast<size_t>(done)];
    if (summary_state(db_, id).agree) continue;
    history::rebuild_summaries(db_, id);
    transaction.commit();
    ++built;
  }
  if (progress) progress(total, total);
  return built;
}

bool HistoryWriter::rebuild_summaries(int64_t run, const std::string& key) {
  Transaction transaction(db_);
  Statement find(db_.handle(), "SELECT id FROM series WHERE run_id = ? AND key = ?");
  find.bind(1, run).bind(2, key);
  if (!find.step()) return false;
  const int64_t id = find.integer(0);
  find.reset();
  if (summary_state(db_, id).agree) return false;
  history::rebuild_summaries(db_, id);
  transaction.commit();
  return true;
}

int64_t HistoryWriter::series_needing_summaries() { return static_cast<int64_t>(series_to_summarise(true).size()); }

}  // namespace spur::history
