// SPDX-License-Identifier: Apache-2.0
// Reading and writing the `summaries` table (layout in summary.h), shared by the writer (which summarises each
// chunk as it fills, and rebuilds series) and the reader (which checks them before trusting them). Callers hold
// the transaction. Internal to the history library.
#pragma once

#include <cstdint>
#include <vector>

#include "spur/history/database.h"
#include "spur/history/reader.h"
#include "spur/history/records.h"

namespace spur::history {

/// A chunk of the `points` table: its row id and how many points it holds (a SeriesCursor at the chunk's end).
using ChunkRef = SeriesCursor;

/// What the reader needs to know about a series' summaries: whether they agree with its points, how many points
/// they cover (full chunks), the last chunk they cover and the total points in the series.
struct SummaryState {
  bool agree = false;
  int64_t full_chunks = 0;
  int64_t last_summarised_chunk = 0;  // 0: none
  int64_t total_points = 0;
};

/// Checks a series' summaries against its points: every full chunk summarised at level 1, in order, and every
/// higher level covering as many points. Reads a few index entries per chunk; never trusts `series.summarised` alone.
SummaryState summary_state(Database& db, int64_t series);

/// Summarises a chunk that has just become full (`data`: its kChunkPoints points, encoded) as the series' next
/// full chunk, into every level. Nothing when the series' summaries were never built (summarised < 0): the
/// background build does them whole.
void summarise_full_chunk(Database& db, int64_t series, int64_t chunk_id, const void* data, size_t bytes);

/// Drops a series' summaries and builds them again from its points.
void rebuild_summaries(Database& db, int64_t series);

/// A level's rows overlapping [lo, hi] (steps, or wall times), decoded, buckets outside the range left out.
std::vector<Bucket> read_level(Database& db, int64_t series, int level, const SeriesRange& range);

/// The level-1 rows' chunks overlapping the range (the raw chunks a fine read needs).
std::vector<int64_t> chunks_in_range(Database& db, int64_t series, const SeriesRange& range);

/// Whether a bucket overlaps the range.
inline bool overlaps(const Bucket& b, const SeriesRange& range) {
  return range.by_wall ? b.wall_hi >= range.lo && b.wall_lo <= range.hi
                       : static_cast<double>(b.step_hi) >= range.lo && static_cast<double>(b.step_lo) <= range.hi;
}

}  // namespace spur::history
