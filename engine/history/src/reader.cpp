// SPDX-License-Identifier: Apache-2.0
// Reading the run history; see reader.h.
#include "spur/history/reader.h"

#include <filesystem>

#include "chunk.h"

namespace spur::history {
namespace {

Database open_existing(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw HistoryError("no run history at " + path + " (nothing has been recorded there yet)");
  }
  return Database(path);
}

constexpr const char* kRunColumns =
    "id, name, project, status, created, started, ended, exit_code, target, hosts, config, command, notes, "
    "total_steps, last_step, pid, host, params";

Run read_run(Database& db, Statement& row) {
  Run run;
  run.id = row.integer(0);
  run.name = row.text(1);
  run.project = row.text(2);
  run.status = row.text(3);
  run.created = row.real(4);
  run.started = row.real(5);
  run.ended = row.real(6);
  if (!row.null(7)) run.exit_code = static_cast<int>(row.integer(7));
  run.target = row.text(8);
  run.hosts = row.text(9);
  run.config = row.text(10);
  run.command = row.text(11);
  run.notes = row.text(12);
  run.total_steps = row.integer(13);
  run.last_step = row.integer(14);
  run.pid = row.integer(15);
  run.host = row.text(16);
  run.params = row.text(17);
  Statement tags(db.handle(), "SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag");
  tags.bind(1, run.id);
  while (tags.step()) run.tags.push_back(tags.text(0));
  return run;
}

}  // namespace

HistoryReader::HistoryReader(const std::string& path) : db_(open_existing(path)) {}

void HistoryReader::check_schema() {
  const int version = db_.schema_version();
  if (version > Database::kSchemaVersion) {
    throw HistoryError("run history " + db_.path() + " was written by a newer Spur (schema " + std::to_string(version) +
                       ", this one reads up to " + std::to_string(Database::kSchemaVersion) + ")");
  }
}

std::vector<Run> HistoryReader::runs() {
  Statement query(db_.handle(), std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id");
  std::vector<Run> runs;
  while (query.step()) runs.push_back(read_run(db_, query));
  return runs;
}

std::optional<Run> HistoryReader::run(int64_t id) {
  Statement query(db_.handle(), std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_run(db_, query);
}

std::vector<std::string> HistoryReader::metric_keys(int64_t run) {
  Statement query(db_.handle(), "SELECT key FROM series WHERE run_id = ? ORDER BY id");
  query.bind(1, run);
  std::vector<std::string> keys;
  while (query.step()) keys.push_back(query.text(0));
  return keys;
}

std::vector<Point> HistoryReader::series(int64_t run, const std::string& key, SeriesCursor* cursor) {
  Statement query(db_.handle(),
                  "SELECT p.id, p.count, p.data FROM points p JOIN series s ON s.id = p.series_id "
                  "WHERE s.run_id = ? AND s.key = ? AND p.id >= ? ORDER BY p.id");
  query.bind(1, run).bind(2, key).bind(3, cursor ? cursor->chunk_id : int64_t{0});
  std::vector<Point> points;
  // One transaction for the whole read: a chunk growing meanwhile is read as it was.
  db_.exec("BEGIN");
  try {
    // Sized once: growing a vector of a million points costs more in page faults than the read itself.
    Statement count(db_.handle(),
                    "SELECT coalesce(sum(p.count), 0) FROM points p JOIN series s ON s.id = p.series_id "
                    "WHERE s.run_id = ? AND s.key = ? AND p.id >= ?");
    count.bind(1, run).bind(2, key).bind(3, cursor ? cursor->chunk_id : int64_t{0});
    if (count.step()) points.reserve(static_cast<size_t>(count.integer(0)));
    count.reset();
    while (query.step()) {
      const int64_t id = query.integer(0);
      size_t bytes = 0;
      const void* data = query.blob(2, bytes);
      const size_t skip = cursor && id == cursor->chunk_id ? static_cast<size_t>(cursor->points_in_chunk) : 0;
      decode_points(data, bytes, skip, points);
      if (cursor) {
        cursor->chunk_id = id;
        cursor->points_in_chunk = static_cast<int64_t>(bytes / kPointBytes);
      }
    }
  } catch (...) {
    query.reset();
    db_.exec("COMMIT");
    throw;
  }
  query.reset();
  db_.exec("COMMIT");
  return points;
}

std::map<std::string, Point> HistoryReader::last_points(int64_t run) {
  Statement query(db_.handle(),
                  "SELECT s.key, p.data FROM series s JOIN points p ON p.id = "
                  "(SELECT max(id) FROM points WHERE series_id = s.id) WHERE s.run_id = ?");
  query.bind(1, run);
  std::map<std::string, Point> last;
  std::vector<Point> points;
  while (query.step()) {
    size_t bytes = 0;
    const void* data = query.blob(1, bytes);
    if (bytes < kPointBytes) continue;
    points.clear();
    decode_points(data, bytes, bytes / kPointBytes - 1, points);
    if (!points.empty()) last[query.text(0)] = points.back();
  }
  return last;
}

std::vector<ConsoleLine> HistoryReader::console(int64_t run, int64_t after_id, std::optional<int> rank, int64_t limit) {
  Statement query(db_.handle(),
                  "SELECT id, host, rank, stream, wall, text FROM console WHERE run_id = ?1 AND id > ?2 "
                  "AND (?3 IS NULL OR rank = ?3) ORDER BY id LIMIT ?4");
  query.bind(1, run).bind(2, after_id);
  if (rank) query.bind(3, static_cast<int64_t>(*rank));
  else query.bind_null(3);
  query.bind(4, limit);
  std::vector<ConsoleLine> lines;
  while (query.step()) {
    ConsoleLine line;
    line.id = query.integer(0);
    line.run_id = run;
    line.host = query.text(1);
    line.rank = static_cast<int>(query.integer(2));
    line.stream = query.text(3);
    line.wall = query.real(4);
    line.text = query.text(5);
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<Event> HistoryReader::events(int64_t run) {
  Statement query(db_.handle(), "SELECT id, wall, status, detail FROM events WHERE run_id = ? ORDER BY id");
  query.bind(1, run);
  std::vector<Event> events;
  while (query.step()) events.push_back({query.integer(0), run, query.real(1), query.text(2), query.text(3)});
  return events;
}

}  // namespace spur::history
