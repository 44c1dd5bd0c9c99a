// SPDX-License-Identifier: Apache-2.0
// The `summaries` table; see summary_table.h.
#include "summary_table.h"

#include <string>

#include "summary.h"

namespace spur::history {
namespace {

void write_row(Database& db, int64_t series, int level, int64_t ordinal, int64_t chunk_id,
               const std::vector<Bucket>& buckets) {
  const Bucket all = merged(buckets);
  std::vector<unsigned char> data;
  encode_buckets(buckets, data);
  Prepared write_reused(
      db,
      "INSERT INTO summaries(series_id, level, ordinal, chunk_id, count, step_lo, step_hi, wall_lo, "
      "wall_hi, data) VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(series_id, level, ordinal) DO UPDATE SET "
      "count = excluded.count, step_lo = excluded.step_lo, step_hi = excluded.step_hi, "
      "wall_lo = excluded.wall_lo, wall_hi = excluded.wall_hi, data = excluded.data");
  Statement& write = *write_reused;
  write.bind(1, series).bind(2, static_cast<int64_t>(level)).bind(3, ordinal).bind(4, chunk_id).bind(5, all.count);
  write.bind(6, all.step_lo).bind(7, all.step_hi).bind(8, all.wall_lo).bind(9, all.wall_hi);
  write.bind_blob(10, data.data(), data.size()).run();
}

// Adds a full chunk's summary (`whole`, and its level-1 buckets) as full chunk number `ordinal` of the series.
void add_chunk(Database& db, int64_t series, int64_t ordinal, int64_t chunk_id, const std::vector<Bucket>& level1) {
  write_row(db, series, 1, ordinal, chunk_id, level1);
  const Bucket whole = merged(level1);
  Prepared read_reused(db, "SELECT data FROM summaries WHERE series_id = ? AND level = ? AND ordinal = ?");
  Statement& read = *read_reused;
  std::vector<Bucket> buckets;
  for (int level = 2; level <= kLevels; ++level) {
    const int64_t row = ordinal / kChunksPerRow[level];
    const auto index = static_cast<size_t>((ordinal % kChunksPerRow[level]) / kChunksPerBucket[level]);
    buckets.clear();
    int64_t first_chunk = chunk_id;
    read.bind(1, series).bind(2, static_cast<int64_t>(level)).bind(3, row);
    if (read.step()) {
      size_t bytes = 0;
      const void* data = read.blob(0, bytes);
      decode_buckets(data, bytes, buckets);
      first_chunk = 0;  // kept by the update
    }
    read.reset();
    if (buckets.size() <= index) buckets.resize(index + 1);
    merge_bucket(buckets[index], whole);
    write_row(db, series, level, row, first_chunk, buckets);
  }
}

std::vector<Bucket> summarise_chunk(const void* data, size_t bytes) {
  std::vector<Point> points;
  points.reserve(static_cast<size_t>(kChunkPoints));
  decode_points(data, bytes, 0, points);
  return bucket_points(points.data(), points.size(), kLevelPoints[1]);
}

}  // namespace

SummaryState summary_state(Database& db, int64_t series) {
  SummaryState state;
  Prepared query_reused(db,
                        "SELECT s.summarised, (SELECT count(*) FROM points WHERE series_id = s.id), "
                        "(SELECT count(*) FROM summaries WHERE series_id = s.id AND level = 1), "
                        "(SELECT max(chunk_id) FROM summaries WHERE series_id = s.id AND level = 1) FROM series s "
                        "WHERE s.id = ?");
  Statement& query = *query_reused;
  query.bind(1, series);
  if (!query.step()) return state;
  const int64_t summarised = query.integer(0);
  const int64_t chunks = query.integer(1);
  const int64_t level1_rows = query.integer(2);
  const int64_t level1_last = query.null(3) ? 0 : query.integer(3);
  query.reset();
  // Only the last chunk may be short: the writer fills a chunk before it starts the next.
  Prepared last_reused(db, "SELECT id, count FROM points WHERE series_id = ? ORDER BY id DESC LIMIT 2");
  Statement& last = *last_reused;
  last.bind(1, series);
  ChunkRef tail[2];
  int got = 0;
  while (got < 2 && last.step()) tail[got++] = {last.integer(0), last.integer(1)};
  last.reset();
  const bool last_full = got > 0 && tail[0].points_in_chunk >= kChunkPoints;
  state.full_chunks = got == 0 ? 0 : chunks - (last_full ? 0 : 1);
  const int64_t last_full_id = got == 0 ? 0 : last_full ? tail[0].chunk_id : got > 1 ? tail[1].chunk_id : 0;
  state.total_points = state.full_chunks * kChunkPoints + (got > 0 && !last_full ? tail[0].points_in_chunk : 0);
  state.last_summarised_chunk = level1_last;
  state.agree = summarised >= 0 && summarised == state.full_chunks && level1_rows == state.full_chunks &&
                level1_last == last_full_id;
  if (!state.agree || state.full_chunks == 0) return state;
  // The levels above cover the same points (a row half-written by a crash, or edited, shows up here).
  Prepared levels_reused(db, "SELECT level, coalesce(sum(count), 0) FROM summaries WHERE series_id = ? GROUP BY level");
  Statement& levels = *levels_reused;
  levels.bind(1, series);
  int seen = 0;
  while (levels.step()) {
    ++seen;
    if (levels.integer(1) != state.full_chunks * kChunkPoints) state.agree = false;
  }
  if (seen != kLevels) state.agree = false;
  return state;
}

void summarise_full_chunk(Database& db, int64_t series, int64_t chunk_id, const void* data, size_t bytes) {
  Prepared state_reused(db, "SELECT summarised FROM series WHERE id = ?");
  Statement& state = *state_reused;
  state.bind(1, series);
  if (!state.step()) return;
  const int64_t ordinal = state.integer(0);
  state.reset();
  if (ordinal < 0) return;
  add_chunk(db, series, ordinal, chunk_id, summarise_chunk(data, bytes));
  Statement(db.handle(), "UPDATE series SET summarised = ? WHERE id = ?").bind(1, ordinal + 1).bind(2, series).run();
}

void rebuild_summaries(Database& db, int64_t series) {
  Statement(db.handle(), "DELETE FROM summaries WHERE series_id = ?").bind(1, series).run();
  Statement chunks(db.handle(), "SELECT id, count, data FROM points WHERE series_id = ? ORDER BY id");
  chunks.bind(1, series);
  int64_t ordinal = 0;
  while (chunks.step()) {
    if (chunks.integer(1) < kChunkPoints) break;  // the open tail
    size_t bytes = 0;
    const void* data = chunks.blob(2, bytes);
    add_chunk(db, series, ordinal++, chunks.integer(0), summarise_chunk(data, bytes));
  }
  chunks.reset();
  Statement(db.handle(), "UPDATE series SET summarised = ? WHERE id = ?").bind(1, ordinal).bind(2, series).run();
}

std::vector<Bucket> read_level(Database& db, int64_t series, int level, const SeriesRange& range) {
  Prepared query_reused(db, range.by_wall
                                ? "SELECT data FROM summaries WHERE series_id = ? AND level = ? AND wall_hi >= ? "
                                  "AND wall_lo <= ? ORDER BY ordinal"
                                : "SELECT data FROM summaries WHERE series_id = ? AND level = ? AND step_hi >= ? "
                                  "AND step_lo <= ? ORDER BY ordinal");
  Statement& query = *query_reused;
  query.bind(1, series).bind(2, static_cast<int64_t>(level)).bind(3, range.lo).bind(4, range.hi);
  std::vector<Bucket> row, out;
  while (query.step()) {
    size_t bytes = 0;
    const void* data = query.blob(0, bytes);
    row.clear();
    decode_buckets(data, bytes, row);
    for (const auto& b : row) {
      if (overlaps(b, range)) out.push_back(b);
    }
  }
  return out;
}

std::vector<int64_t> chunks_in_range(Database& db, int64_t series, const SeriesRange& range) {
  Prepared query_reused(db, range.by_wall ? "SELECT chunk_id FROM summaries WHERE series_id = ? AND level = 1 AND "
                                            "wall_hi >= ? AND wall_lo <= ? ORDER BY ordinal"
                                          : "SELECT chunk_id FROM summaries WHERE series_id = ? AND level = 1 AND "
                                            "step_hi >= ? AND step_lo <= ? ORDER BY ordinal");
  Statement& query = *query_reused;
  query.bind(1, series).bind(2, range.lo).bind(3, range.hi);
  std::vector<int64_t> ids;
  while (query.step()) ids.push_back(query.integer(0));
  return ids;
}

}  // namespace spur::history
