// SPDX-License-Identifier: Apache-2.0
// The history's multi-resolution summaries: HistoryReader::summary() against a brute-force min/max/first/last/sum
// over the raw points, for random ranges and widths, however the points were appended; single-point spikes seen at
// every zoom; a history from before summaries (schema 2) gaining them once; summaries that disagree with their
// points never trusted and rebuilt; their size next to the points'; and listing runs with filters and pages.
#include <sqlite3.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <spur/history/reader.h>
#include <spur/history/writer.h>

#include "rank_group.h"
#include "test_main.h"

namespace {

using spur::history::Bucket;
using spur::history::HistoryReader;
using spur::history::HistoryWriter;
using spur::history::Point;
using spur::history::SeriesRange;

// Steps 0..n-1, walls 1000 + step / 10, values a random walk with a few NaNs.
std::vector<Point> random_series(int64_t n, unsigned seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<Point> points(static_cast<size_t>(n));
  double value = 0;
  for (int64_t i = 0; i < n; ++i) {
    value += noise(random);
    const bool nan = random() % 997 == 0;
    points[static_cast<size_t>(i)] = {i, nan ? std::numeric_limits<double>::quiet_NaN() : value,
                                      1000 + static_cast<double>(i) / 10};
  }
  return points;
}

void append_in_batches(HistoryWriter& writer, int64_t run, const std::string& key, const std::vector<Point>& points,
                       size_t batch) {
  for (size_t at = 0; at < points.size(); at += batch) {
    const size_t end = std::min(points.size(), at + batch);
    writer.append_metrics(run, {{key, std::vector<Point>(points.begin() + static_cast<std::ptrdiff_t>(at),
                                                         points.begin() + static_cast<std::ptrdiff_t>(end))}});
  }
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Every bucket equals the brute-force summary of the raw points it spans (steps are 0..n-1, so a bucket spans
// points step_lo..step_hi); the buckets are contiguous and cover the range; there are between width and 2 x width
// of them unless the range holds fewer points.
QString check_summary(const std::vector<Point>& raw, const spur::history::SeriesSummary& summary,
                      const SeriesRange& range) {
  const auto& buckets = summary.buckets;
  int64_t in_range = 0;
  for (const auto& p : raw) in_range += static_cast<double>(p.step) >= range.lo && p.step <= range.hi ? 1 : 0;
  if (in_range == 0) return buckets.empty() ? QString() : QString("buckets for an empty range");
  if (buckets.empty()) return "no buckets";
  if (static_cast<double>(buckets.front().step_lo) > std::max(range.lo, 0.0)) return "the range's start is missing";
  if (static_cast<double>(buckets.back().step_hi) < std::min(range.hi, static_cast<double>(raw.size() - 1)))
    return "the range's end is missing";
  const auto n = static_cast<int64_t>(buckets.size());
  if (n > 2 * range.width) return QString("%1 buckets for width %2").arg(n).arg(range.width);
  if (n < std::min(in_range, range.width)) return QString("%1 buckets, fewer than %2").arg(n).arg(range.width);
  for (int64_t i = 0; i < n; ++i) {
    const Bucket& b = buckets[static_cast<size_t>(i)];
    if (i > 0 && b.step_lo != buckets[static_cast<size_t>(i - 1)].step_hi + 1) return QString("a gap at %1").arg(i);
    Bucket expect;
    expect.min = expect.max = std::numeric_limits<double>::quiet_NaN();
    for (int64_t s = b.step_lo; s <= b.step_hi; ++s) {
      const Point& p = raw[static_cast<size_t>(s)];
      if (expect.count == 0) expect.first = p.value;
      expect.last = p.value;
      expect.min = std::fmin(expect.min, p.value);
      expect.max = std::fmax(expect.max, p.value);
      if (std::isfinite(p.value)) expect.sum += p.value, ++expect.finite;
      ++expect.count;
    }
    if (b.count != expect.count || b.finite != expect.finite || !same(b.min, expect.min) || !same(b.max, expect.max) ||
        !same(b.first, expect.first) || !same(b.last, expect.last) ||
        !(same(b.sum, expect.sum) || std::abs(b.sum - expect.sum) <= 1e-9 * (1 + std::abs(expect.sum))) ||
        b.wall_lo != raw[static_cast<size_t>(b.step_lo)].wall ||
        b.wall_hi != raw[static_cast<size_t>(b.step_hi)].wall) {
      return QString("bucket %1 (steps %2-%3): count %4/%5 min %6/%7 max %8/%9 first %10/%11 last %12/%13")
          .arg(i)
          .arg(b.step_lo)
          .arg(b.step_hi)
          .arg(b.count)
          .arg(expect.count)
          .arg(b.min)
          .arg(expect.min)
          .arg(b.max)
          .arg(expect.max)
          .arg(b.first)
          .arg(expect.first)
          .arg(b.last)
          .arg(expect.last);
    }
  }
  return {};
}

int64_t query_integer(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* statement = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &statement, nullptr);
  const int64_t value = sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

void exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) QFAIL(("SQL failed: " + message).c_str());
}

spur::test::RankResult spur_cli(const QStringList& arguments) {
  return spur::test::run_process(SPUR_CLI, arguments, QProcessEnvironment::systemEnvironment(), 120000);
}

QList<qint64> listed_ids(const QString& json) {
  QList<qint64> ids;
  for (const auto& run : QJsonDocument::fromJson(json.toUtf8()).array()) ids << run.toObject()["id"].toInteger();
  return ids;
}

}  // namespace

class SummaryTest : public QObject {
  Q_OBJECT

 private slots:
  void summaries_equal_brute_force_data() {
    QTest::addColumn<qint64>("points");
    QTest::addColumn<qint64>("batch");
    QTest::newRow("a few points") << qint64{100} << qint64{7};
    QTest::newRow("one point per append, 5 chunks") << qint64{5000} << qint64{1};
    QTest::newRow("ragged appends across chunks") << qint64{70000} << qint64{999};
    QTest::newRow("exact chunks") << qint64{8192} << qint64{1024};
    QTest::newRow("level 3: 300,000 points") << qint64{300000} << qint64{50000};
  }
  // For random ranges and widths, each bucket read equals a brute-force summary of the raw points it spans.
  void summaries_equal_brute_force() {
    QFETCH(qint64, points);
    QFETCH(qint64, batch);
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    const auto raw = random_series(points, static_cast<unsigned>(points));
    HistoryWriter writer(path);
    const int64_t run = writer.create_run({});
    append_in_batches(writer, run, "loss", raw, static_cast<size_t>(batch));
    HistoryReader reader(path);
    std::mt19937 random(7);
    for (int trial = 0; trial < 40; ++trial) {
      SeriesRange range;
      if (trial > 0) {
        const auto a = static_cast<double>(random() % static_cast<unsigned>(points + 20)) - 10;
        const auto b = static_cast<double>(random() % static_cast<unsigned>(points + 20)) - 10;
        range.lo = std::min(a, b);
        range.hi = std::max(a, b);
      }
      range.width = std::vector<int64_t>{1, 3, 50, 333, 1000, 4000}[static_cast<size_t>(trial % 6)];
      const auto summary = reader.summary(run, "loss", range);
      QVERIFY(summary.summarised);
      QCOMPARE(summary.total_points, points);
      const QString problem = check_summary(raw, summary, range);
      QVERIFY2(problem.isEmpty(), qPrintable(QString("range %1..%2 width %3 (level %4): %5")
                                                 .arg(range.lo)
                                                 .arg(range.hi)
                                                 .arg(range.width)
                                                 .arg(summary.level)
                                                 .arg(problem)));
    }
    // Read by wall time: the same buckets as by the steps those times belong to.
    SeriesRange by_wall;
    by_wall.by_wall = true;
    by_wall.lo = 1000 + static_cast<double>(points) / 40;
    by_wall.hi = 1000 + static_cast<double>(points) / 20;
    by_wall.width = 100;
    SeriesRange by_step = by_wall;
    by_step.by_wall = false;
    by_step.lo = static_cast<double>(points) / 4;
    by_step.hi = static_cast<double>(points) / 2;
    const auto a = reader.summary(run, "loss", by_wall), b = reader.summary(run, "loss", by_step);
    QCOMPARE(a.buckets.size(), b.buckets.size());
    QVERIFY(check_summary(raw, a, by_step).isEmpty());
  }

  void spikes_are_seen_at_every_zoom_data() {
    QTest::addColumn<double>("fraction");
    QTest::newRow("everything") << 1.0;
    QTest::newRow("10%") << 0.1;
    QTest::newRow("1%") << 0.01;
    QTest::newRow("0.1%") << 0.001;
  }
  // Single-point spikes planted in a flat series of 400,000 points: every one in the range is some bucket's max
  // (or min), at every zoom, whatever the level read.
  void spikes_are_seen_at_every_zoom() {
    QFETCH(double, fraction);
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    constexpr int64_t n = 400000;
    std::vector<Point> raw(n);
    for (int64_t i = 0; i < n; ++i) raw[static_cast<size_t>(i)] = {i, 1.0, static_cast<double>(i)};
    std::mt19937 random(11);
    std::vector<int64_t> spikes;
    for (int i = 0; i < 300; ++i) {
      const int64_t at = random() % n;
      raw[static_cast<size_t>(at)].value = i % 2 ? 1000.0 : -1000.0;
      spikes.push_back(at);
    }
    HistoryWriter writer(path);
    const int64_t run = writer.create_run({});
    append_in_batches(writer, run, "grad_norm", raw, 65536);
    HistoryReader reader(path);
    for (int window = 0; window < 5; ++window) {
      SeriesRange range;
      range.width = 800;
      const double span = fraction * n;
      range.lo = std::floor((n - span) * window / 4.0);
      range.hi = range.lo + span;
      const auto summary = reader.summary(run, "grad_norm", range);
      for (const int64_t at : spikes) {
        if (static_cast<double>(at) < range.lo || static_cast<double>(at) > range.hi) continue;
        const double value = raw[static_cast<size_t>(at)].value;
        bool seen = false;
        for (const auto& b : summary.buckets) {
          if (b.step_lo <= at && at <= b.step_hi) seen = value > 0 ? b.max == value : b.min == value;
        }
        QVERIFY2(seen, qPrintable(QString("spike at %1 not seen in %2..%3 (level %4)")
                                      .arg(at)
                                      .arg(range.lo)
                                      .arg(range.hi)
                                      .arg(summary.level)));
      }
    }
  }

  // A history from before summaries (schema 2, three chunks written as that Spur wrote them) opens, reads right
  // (from the raw points) before it has summaries, gains them once, and its series are summarised from then on.
  void an_older_history_gains_summaries_once() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("v2.db").toStdString();
    spur::history::Database::create_at_version(path, 2);
    const auto raw = random_series(3000, 5);
    {
      sqlite3* db = nullptr;
      QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
      QCOMPARE(sqlite3_exec(db,
                            "INSERT INTO runs(id, name, status) VALUES(1, 'old', 'finished');"
                            "INSERT INTO series(id, run_id, key) VALUES(1, 1, 'loss')",
                            nullptr, nullptr, nullptr),
               SQLITE_OK);
      for (size_t at = 0; at < raw.size(); at += 1024) {
        const size_t count = std::min<size_t>(1024, raw.size() - at);
        std::vector<unsigned char> blob(count * 24);
        for (size_t i = 0; i < count; ++i) {
          std::memcpy(&blob[24 * i], &raw[at + i].step, 8);
          std::memcpy(&blob[24 * i + 8], &raw[at + i].value, 8);
          std::memcpy(&blob[24 * i + 16], &raw[at + i].wall, 8);
        }
        sqlite3_stmt* insert = nullptr;
        sqlite3_prepare_v2(db, "INSERT INTO points(series_id, count, data) VALUES(1, ?, ?)", -1, &insert, nullptr);
        sqlite3_bind_int64(insert, 1, static_cast<sqlite3_int64>(count));
        sqlite3_bind_blob(insert, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
        QCOMPARE(sqlite3_step(insert), SQLITE_DONE);
        sqlite3_finalize(insert);
      }
      sqlite3_close(db);
    }
    HistoryWriter writer(path);  // migrates to the current schema: quick, no summaries built yet
    QCOMPARE(writer.database().schema_version(), spur::history::Database::kSchemaVersion);
    SeriesRange range;
    range.width = 20;
    {
      HistoryReader reader(path);
      const auto before = reader.summary(1, "loss", range);
      QVERIFY(!before.summarised);
      QVERIFY(check_summary(raw, before, range).isEmpty());
    }
    QCOMPARE(writer.series_needing_summaries(), int64_t{1});
    std::vector<std::pair<int64_t, int64_t>> progress;
    QCOMPARE(writer.build_summaries([&](int64_t done, int64_t total) {
      progress.emplace_back(done, total);
      return true;
    }),
             int64_t{1});
    QCOMPARE(progress.back(), (std::pair<int64_t, int64_t>{1, 1}));
    QCOMPARE(writer.build_summaries(), int64_t{0});  // once
    QCOMPARE(writer.series_needing_summaries(), int64_t{0});
    // More points after the migration are summarised as they come.
    auto more = random_series(5000, 6);
    for (auto& p : more) p.wall += 300;
    std::vector<Point> rest(more.begin() + 3000, more.end());
    writer.append_metrics(1, {{"loss", rest}});
    std::vector<Point> all = raw;
    all.insert(all.end(), rest.begin(), rest.end());
    HistoryReader reader(path);
    const auto after = reader.summary(1, "loss", range);
    QVERIFY(after.summarised);
    QCOMPARE(after.level, 1);
    QVERIFY2(check_summary(all, after, range).isEmpty(), qPrintable(check_summary(all, after, range)));
  }

  void disagreeing_summaries_are_rebuilt_data() {
    QTest::addColumn<QString>("damage");
    QTest::newRow("a level-1 row lost") << "DELETE FROM summaries WHERE level = 1 AND ordinal = 3";
    QTest::newRow("a level-2 row short") << "UPDATE summaries SET count = count - 1 WHERE level = 2";
    QTest::newRow("a level-3 row lost") << "DELETE FROM summaries WHERE level = 3";
    QTest::newRow("a chunk added behind their back")
        << "INSERT INTO points(series_id, count, data) SELECT series_id, count, data FROM points "
           "WHERE id = (SELECT min(id) FROM points)";
    QTest::newRow("the count says more") << "UPDATE series SET summarised = summarised + 1";
  }
  // Summaries that disagree with their points (a crash between writes, an edit) are never trusted: the read
  // comes from the raw points, and build_summaries() rebuilds them.
  void disagreeing_summaries_are_rebuilt() {
    QFETCH(QString, damage);
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    auto raw = random_series(int64_t{10} * 1024, 9);
    {
      HistoryWriter writer(path);
      writer.append_metrics(writer.create_run({}), {{"loss", raw}});
    }
    exec(path, damage.toUtf8().constData());
    if (damage.startsWith("INSERT INTO points")) {
      // The copied chunk is the series' first 1024 points again, after the others: what a read now returns.
      std::vector<Point> copy(raw.begin(), raw.begin() + 1024);
      raw.insert(raw.end(), copy.begin(), copy.end());
    }
    SeriesRange range;
    range.width = 40;
    {
      HistoryReader reader(path);
      const auto read = reader.summary(1, "loss", range);
      QVERIFY(!read.summarised);
      QCOMPARE(read.total_points, static_cast<int64_t>(raw.size()));
      // Steps repeat after a copied chunk: compare the extremes only.
      double lo = raw[0].value, hi = raw[0].value, got_lo = read.buckets[0].min, got_hi = read.buckets[0].max;
      for (const auto& p : raw) lo = std::fmin(lo, p.value), hi = std::fmax(hi, p.value);
      for (const auto& b : read.buckets) got_lo = std::fmin(got_lo, b.min), got_hi = std::fmax(got_hi, b.max);
      QCOMPARE(got_lo, lo);
      QCOMPARE(got_hi, hi);
    }
    HistoryWriter writer(path);
    QCOMPARE(writer.build_summaries(), int64_t{1});
    HistoryReader reader(path);
    const auto read = reader.summary(1, "loss", range);
    QVERIFY(read.summarised);
    if (!damage.startsWith("INSERT INTO points")) QVERIFY(check_summary(raw, read, range).isEmpty());
  }

  // The summaries' size next to the points' (the history may grow by no more than 10%).
  void summaries_are_small_next_to_the_points() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    {
      HistoryWriter writer(path);
      const int64_t run = writer.create_run({});
      append_in_batches(writer, run, "loss", random_series(200000, 3), 100);
    }
    const int64_t points = query_integer(path, "SELECT sum(length(data)) FROM points");
    const int64_t summaries = query_integer(path, "SELECT sum(length(data)) + 60 * count(*) FROM summaries");
    QVERIFY2(summaries * 100 < points * 7,
             qPrintable(QString("%1 bytes of summaries for %2 of points").arg(summaries).arg(points)));
  }

  // runs() with filters, newest first, in pages; count_runs agrees.
  void runs_are_listed_with_filters_and_pages() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    HistoryWriter writer(path);
    for (int i = 1; i <= 30; ++i) {
      spur::history::Run run;
      run.status = i % 3 == 0 ? "failed" : "finished";
      run.created = 1000 + i;
      run.project = i <= 10 ? "a" : "b";
      if (i % 5 == 0) run.tags = {"best"};
      writer.create_run(run);
    }
    HistoryReader reader(path);
    spur::history::RunFilter filter;
    QCOMPARE(reader.count_runs(filter), int64_t{30});
    filter.statuses = {"failed"};
    QCOMPARE(reader.count_runs(filter), int64_t{10});
    filter.tag = "best";
    const auto failed_best = reader.runs(filter);  // 15 and 30
    QCOMPARE(failed_best.size(), size_t{2});
    QCOMPARE(failed_best[0].id, int64_t{15});
    QCOMPARE(failed_best[0].tags, std::vector<std::string>{"best"});
    filter = {};
    filter.since = 1021;
    filter.newest_first = true;
    filter.limit = 4;
    filter.offset = 2;
    const auto page = reader.runs(filter);  // 30..21, skipping two
    QCOMPARE(page.size(), size_t{4});
    QCOMPARE(page[0].id, int64_t{28});
    QCOMPARE(page[3].id, int64_t{25});
    QCOMPARE(reader.count_runs(filter), int64_t{10});
    filter = {};
    filter.project = "a";
    QCOMPARE(reader.count_runs(filter), int64_t{10});

    // The same from the command line: the newest first picked, printed oldest first; a bad value named.
    const QString history = QString::fromStdString(path);
    auto listed = spur_cli({"runs", "list", "--json", "--history", history, "--status", "failed", "--limit", "3"});
    QVERIFY2(listed.exit_code == 0, qPrintable(listed.output));
    QCOMPARE(listed_ids(listed.output.mid(listed.output.indexOf('['))), (QList<qint64>{24, 27, 30}));
    listed = spur_cli({"runs", "list", "--json", "--history", history, "--tag", "best", "--project", "b"});
    QCOMPARE(listed_ids(listed.output), (QList<qint64>{15, 20, 25, 30}));
    listed = spur_cli({"runs", "list", "--history", history, "--limit", "2", "--offset", "1"});
    QVERIFY2(listed.output.contains("2 of 30 runs"), qPrintable(listed.output));
    QVERIFY2(QRegularExpression(R"(\n\s+28 )").match(listed.output).hasMatch() &&
                 QRegularExpression(R"(\n\s+29 )").match(listed.output).hasMatch() &&
                 !QRegularExpression(R"(\n\s+30 )").match(listed.output).hasMatch(),
             qPrintable(listed.output));
    listed = spur_cli({"runs", "list", "--history", history, "--since", "yesterday-ish"});
    QCOMPARE(listed.exit_code, 2);
    QVERIFY2(listed.output.contains("--since 'yesterday-ish'"), qPrintable(listed.output));
    listed = spur_cli({"runs", "list", "--json", "--history", history, "--since", "1h"});  // created 1970
    QCOMPARE(listed_ids(listed.output), QList<qint64>{});
    listed = spur_cli({"runs", "list", "--history", history, "--status", "done"});
    QCOMPARE(listed.exit_code, 2);
    QVERIFY2(listed.output.contains("--status 'done'"), qPrintable(listed.output));
  }

  // `spur runs summarise`: a history without summaries gains them once, with progress, from the command line.
  void summarise_from_the_command_line() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("h.db").toStdString();
    {
      HistoryWriter writer(path);
      writer.append_metrics(writer.create_run({}), {{"loss", random_series(5000, 1)}});
    }
    exec(path, "DELETE FROM summaries; UPDATE series SET summarised = -1");  // as an older Spur left it
    const QString history = QString::fromStdString(path);
    auto result = spur_cli({"runs", "summarise", "--history", history});
    QVERIFY2(result.exit_code == 0 && result.output.contains("summarising 1 of 1 series") &&
                 result.output.contains("1 series summarised"),
             qPrintable(result.output));
    result = spur_cli({"runs", "summarise", "--check", "--history", history});
    QVERIFY2(result.exit_code == 0 && result.output.contains("0 series summarised"), qPrintable(result.output));
    HistoryReader reader(path);
    QVERIFY(reader.summary(1, "loss").summarised);
  }
};

SPUR_TEST_CLASS(SummaryTest)
#include "summary_test.moc"
