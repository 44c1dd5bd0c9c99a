// SPDX-License-Identifier: Apache-2.0
// Reading the run history; see reader.h.
#include "spur/history/reader.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>

#include "chunk.h"
#include "summary.h"
#include "summary_table.h"

namespace spur::history {
namespace {

Database open_existing(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    throw HistoryError("no run history at " + path + " (nothing has been recorded there yet)");
  }
  // A history this process cannot write (read-only storage, a colleague's) is read as it is; one it can write is
  // opened as a writer would, so that an older schema is brought up to date.
  return Database(path, !Database::writable(path));
}

constexpr const char* kRunColumns =
    "id, name, project, status, created, started, ended, exit_code, target, hosts, config, command, notes, "
    "total_steps, last_step, pid, host, params, parent";
constexpr const char* kTagsOfRun = "SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag";

// A read transaction for the scope: what is read is one state of the file, whatever writers do meanwhile.
class ReadTransaction {
 public:
  explicit ReadTransaction(Database& db) : db_(db) { db_.exec("BEGIN"); }
  ~ReadTransaction() { sqlite3_exec(db_.handle(), "COMMIT", nullptr, nullptr, nullptr); }
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  Database& db_;
};

bool in_range(const Point& p, const SeriesRange& range) {
  const double x = range.by_wall ? p.wall : static_cast<double>(p.step);
  return x >= range.lo && x <= range.hi;
}

// Appends the points of one chunk that lie in the range.
void read_chunk(Statement& chunk, int64_t id, const SeriesRange& range, std::vector<Point>& out) {
  chunk.bind(1, id);
  if (chunk.step()) {
    size_t bytes = 0;
    const void* data = chunk.blob(0, bytes);
    const size_t from = out.size();
    decode_points(data, bytes, 0, out);
    out.erase(std::remove_if(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(),
                             [&](const Point& p) { return !in_range(p, range); }),
              out.end());
  }
  chunk.reset();
}

// Consecutive buckets merged in groups, so that between width and 2 x width remain (min and max kept); `group`:
// buckets per group.
std::vector<Bucket> coarsen(std::vector<Bucket> buckets, int64_t width, int64_t& group) {
  group = std::max<int64_t>(1, static_cast<int64_t>(buckets.size()) / std::max<int64_t>(1, width));
  if (group == 1) return buckets;
  std::vector<Bucket> out;
  out.reserve(buckets.size() / static_cast<size_t>(group) + 1);
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (i % static_cast<size_t>(group) == 0) out.emplace_back();
    merge_bucket(out.back(), buckets[i]);
  }
  return out;
}

// The WHERE clause of a filter; binds go in order: statuses, tag, project, since, from_id, before_id.
std::string where(const RunFilter& filter) {
  std::string clause;
  const auto add = [&](const char* condition) {
    clause += (clause.empty() ? " WHERE " : " AND ") + std::string(condition);
  };
  if (!filter.statuses.empty()) {
    std::string in = "status IN (?";
    for (size_t i = 1; i < filter.statuses.size(); ++i) in += ", ?";
    add((in + ")").c_str());
  }
  if (!filter.tag.empty()) add("id IN (SELECT run_id FROM run_tags WHERE tag = ?)");
  if (!filter.project.empty()) add("project = ?");
  if (filter.since > 0) add("created >= ?");
  if (filter.from_id > 0) add("id >= ?");
  if (filter.before_id > 0) add("id < ?");
  return clause;
}

int bind_filter(Statement& query, const RunFilter& filter) {
  int index = 1;
  for (const auto& status : filter.statuses) query.bind(index++, status);
  if (!filter.tag.empty()) query.bind(index++, filter.tag);
  if (!filter.project.empty()) query.bind(index++, filter.project);
  if (filter.since > 0) query.bind(index++, filter.since);
  if (filter.from_id > 0) query.bind(index++, filter.from_id);
  if (filter.before_id > 0) query.bind(index++, filter.before_id);
  return index;
}

Run read_run(Statement& row, Statement& tags) {
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
  run.parent = row.integer(18);
  tags.bind(1, run.id);
  while (tags.step()) run.tags.push_back(tags.text(0));
  tags.reset();
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

int64_t HistoryReader::data_version() {
  Prepared version_reused(db_, "PRAGMA data_version");
  Statement& version = *version_reused;
  return version.step() ? version.integer(0) : 0;
}

std::vector<Run> HistoryReader::runs(const RunFilter& filter) {
  ReadTransaction transaction(db_);  // the runs and their tags as of one moment
  Statement query(db_.handle(), std::string("SELECT ") + kRunColumns + " FROM runs" + where(filter) + " ORDER BY id" +
                                    (filter.newest_first ? " DESC" : "") + " LIMIT ? OFFSET ?");
  const int index = bind_filter(query, filter);
  query.bind(index, filter.limit).bind(index + 1, std::max<int64_t>(0, filter.offset));
  Statement tags(db_.handle(), kTagsOfRun);
  std::vector<Run> runs;
  while (query.step()) runs.push_back(read_run(query, tags));
  return runs;
}

int64_t HistoryReader::count_runs(const RunFilter& filter) {
  Statement query(db_.handle(), "SELECT count(*) FROM runs" + where(filter));
  bind_filter(query, filter);
  return query.step() ? query.integer(0) : 0;
}

std::optional<Run> HistoryReader::run(int64_t id) {
  Statement query(db_.handle(), std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  Statement tags(db_.handle(), kTagsOfRun);
  return read_run(query, tags);
}

std::vector<std::string> HistoryReader::metric_keys(int64_t run) {
  Prepared query_reused(db_, "SELECT key FROM series WHERE run_id = ? ORDER BY id");
  Statement& query = *query_reused;
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

HistoryReader::SeriesState HistoryReader::read_series_state(int64_t series) {
  SeriesState known;
  known.id = series;
  const SummaryState state = summary_state(db_, series);
  known.agree = state.agree;
  known.total_points = state.total_points;
  known.last_summarised_chunk = state.last_summarised_chunk;
  // The series' first and last points (24 bytes each, not their chunks) and where it ends.
  Prepared ends_reused(db_,
                       "SELECT (SELECT substr(data, 1, 24) FROM points WHERE series_id = ?1 ORDER BY id LIMIT 1), "
                       "id, count, substr(data, count * 24 - 23, 24) FROM points WHERE series_id = ?1 "
                       "ORDER BY id DESC LIMIT 1");
  Statement& ends = *ends_reused;
  ends.bind(1, series);
  if (ends.step()) {
    size_t bytes = 0;
    const void* first = ends.blob(0, bytes);
    if (bytes >= kPointBytes) decode_points(first, kPointBytes, 0, known.extent);
    const void* last = ends.blob(3, bytes);
    if (known.extent.size() == 1 && bytes >= kPointBytes) decode_points(last, kPointBytes, 0, known.extent);
    if (!known.extent.empty()) known.first_wall = known.extent.front().wall;
    known.end_chunk_id = ends.integer(1);
    known.end_chunk_points = ends.integer(2);
  }
  return known;
}

SeriesSummary HistoryReader::summary(int64_t run, const std::string& key, const SeriesRange& range) {
  SeriesSummary out;
  const int64_t width = std::max<int64_t>(1, range.width);
  ReadTransaction transaction(db_);
  // What a read learns of a series before its buckets (its id, whether its summaries agree, its extent) holds
  // until another connection commits: a zoom over 500 lines reads only their buckets.
  const int64_t version = data_version();
  if (version != cached_version_) {
    cached_.clear();
    cached_version_ = version;
  }
  auto cached = cached_.find({run, key});
  if (cached == cached_.end()) {
    Prepared find_reused(db_, "SELECT id FROM series WHERE run_id = ? AND key = ?");
    Statement& find = *find_reused;
    find.bind(1, run).bind(2, key);
    if (!find.step()) return out;
    cached = cached_.emplace(std::make_pair(run, key), read_series_state(find.integer(0))).first;
  }
  const SeriesState& known = cached->second;
  const int64_t series = known.id;
  const std::vector<Point>& extent = known.extent;
  out.total_points = known.total_points;
  out.first_wall = known.first_wall;
  out.end_chunk_id = known.end_chunk_id;
  out.end_chunk_points = known.end_chunk_points;
  Prepared chunk_reused(db_, "SELECT data FROM points WHERE id = ?");
  Statement& chunk = *chunk_reused;
  std::vector<Point> points;
  const auto from_points = [&] {
    const int64_t group = std::max<int64_t>(1, static_cast<int64_t>(points.size()) / width);
    out.buckets = bucket_points(points.data(), points.size(), group);
    out.points_per_bucket = group;
    out.level = 0;
    return out;
  };
  if (!known.agree) {
    // Not trusted: computed from every point (what build_summaries() will store).
    out.summarised = false;
    Prepared ids_reused(db_, "SELECT id FROM points WHERE series_id = ? ORDER BY id");
    Statement& ids = *ids_reused;
    ids.bind(1, series);
    while (ids.step()) read_chunk(chunk, ids.integer(0), range, points);
    return from_points();
  }
  // The points after the last summarised chunk (at most one chunk's): read raw at every level.
  std::vector<Point> tail;
  {
    Prepared ids_reused(db_, "SELECT id FROM points WHERE series_id = ? AND id > ? ORDER BY id");
    Statement& ids = *ids_reused;
    ids.bind(1, series).bind(2, known.last_summarised_chunk);
    while (ids.step()) read_chunk(chunk, ids.integer(0), range, tail);
  }
  // The coarsest level that is fine enough: at least `width` buckets in the range. The search starts where the
  // range's share of the series' extent (as if its points were evenly spaced) says; a wrong guess costs a level
  // more, never a wrong answer (a guess too fine is merged down to the width like any other).
  int start = kLevels;
  if (extent.size() == 2) {
    const auto x = [&](const Point& p) { return range.by_wall ? p.wall : static_cast<double>(p.step); };
    const double first = x(extent[0]), last = x(extent[1]);
    const double span = std::min(range.hi, last) - std::max(range.lo, first);
    const double share = last > first ? std::clamp(span / (last - first), 0.0, 1.0) : 1.0;
    const double expected = share * static_cast<double>(known.total_points);
    // Level 1 at least: the guess assumes evenly spread points, and a range in the dense part of an uneven
    // series holds more than it says (a level-1 read costs a 64th of the raw one it may save).
    start = 1;
    for (int level = kLevels; level > 1; --level) {
      if (expected / static_cast<double>(kLevelPoints[level]) >= static_cast<double>(width)) {
        start = level;
        break;
      }
    }
  }
  for (int level = start; level >= 1; --level) {
    auto buckets = read_level(db_, series, level, range);
    const auto tail_buckets = bucket_points(tail.data(), tail.size(), kLevelPoints[level]);
    buckets.insert(buckets.end(), tail_buckets.begin(), tail_buckets.end());
    if (static_cast<int64_t>(buckets.size()) >= width) {
      int64_t group = 1;
      out.buckets = coarsen(std::move(buckets), width, group);
      out.points_per_bucket = kLevelPoints[level] * group;
      out.level = level;
      return out;
    }
  }
  // Only the raw points are fine enough: those of the chunks in the range, then the tail.
  for (const int64_t id : chunks_in_range(db_, series, range)) read_chunk(chunk, id, range, points);
  points.insert(points.end(), tail.begin(), tail.end());
  return from_points();
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

std::vector<RunFile> HistoryReader::files(int64_t run) {
  Statement query(db_.handle(),
                  "SELECT id, kind, path, step, bytes, wall, host FROM files WHERE run_id = ? ORDER BY id");
  query.bind(1, run);
  std::vector<RunFile> files;
  while (query.step()) {
    files.push_back({query.integer(0), run, query.text(1), query.text(2), query.integer(3), query.integer(4),
                     query.real(5), query.text(6)});
  }
  return files;
}

std::vector<Event> HistoryReader::events(int64_t run) {
  Statement query(db_.handle(), "SELECT id, wall, status, detail FROM events WHERE run_id = ? ORDER BY id");
  query.bind(1, run);
  std::vector<Event> events;
  while (query.step()) events.push_back({query.integer(0), run, query.real(1), query.text(2), query.text(3)});
  return events;
}

}  // namespace spur::history
