// SPDX-License-Identifier: GPL-3.0-or-later
// The history and the Studio at scale (issue 20): builds a history of RUNS runs (METRICS metrics of POINTS points
// each; 10,000 x 3 x 3,334 = 100 million points by default) in a temporary folder, then measures
//   - the writer's ingest rate with summaries, against the writer without them (series marked unsummarised, the
//     path a history from before summaries takes), in the same run, alternated, and the two files' sizes;
//   - `spur runs list` (all runs, and --limit 50);
//   - in a child process (its memory its own): the Studio's runs table until first painted; selecting 1, 10, 100
//     and 500 runs until every plot holds every selected run's line and is drawn; zooming one plot into 1% of its
//     range until its lines are read again and drawn; the Studio's resident memory with 500 runs drawn.
// One JSON line per part. `scale_bench SPUR [RUNS] [METRICS] [POINTS]`; `scale_bench --studio HISTORY POINTS`.
// Built with -DSPUR_BENCH_BEFORE it also compiles against the Spur before summaries (fae0ed1), for the "before"
// figures in docs/benchmarks.md: there plots hold every point, so "represented" is the points drawn, a zoom is
// a replot, and the ingest and listing parts that need the new interfaces are left out.
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QMouseEvent>
#include <QProcess>
#include <QTreeView>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <spur/history/writer.h>

#include "dashboard/dashboard.h"
#include "dashboard/metric_plot.h"
#include "main/main_window.h"
#include "studio/runs_model.h"
#include "studio_bench_support.h"

#ifdef SPUR_BENCH_BEFORE
#define REPRESENTED(plot, id) (plot)->point_count(id)
#define TOTAL_RUNS(model) (model)->rowCount()
#else
#define REPRESENTED(plot, id) (plot)->represented_points(id)
#define TOTAL_RUNS(model) (model)->total_runs()
#endif

#undef QT_NO_FOREACH
#include <qcustomplot.h>

namespace {

using spur::bench::resident_kib;
using spur::bench::wait;
using spur::history::HistoryWriter;
using spur::history::MetricAppend;
using spur::history::Point;

const char* const kMetrics[] = {"loss", "accuracy", "learning_rate", "grad_norm", "throughput"};

std::vector<MetricAppend> run_points(int metrics, int points, unsigned seed) {
  std::mt19937 random(seed);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<MetricAppend> out;
  for (int m = 0; m < metrics; ++m) {
    MetricAppend metric;
    metric.key = kMetrics[m % 5];
    if (m >= 5) metric.key += "_" + std::to_string(m);
    metric.points.resize(static_cast<size_t>(points));
    for (int i = 0; i < points; ++i) {
      metric.points[static_cast<size_t>(i)] = {i, std::exp(-i / 1000.0) + noise(random), 1.7e9 + i * 0.1};
    }
    out.push_back(std::move(metric));
  }
  return out;
}

// Appends a run's points in tracker-sized flushes (100 points per metric per transaction).
void write_run(HistoryWriter& writer, int64_t run, const std::vector<MetricAppend>& metrics, size_t flush) {
  const size_t n = metrics.front().points.size();
  for (size_t at = 0; at < n; at += flush) {
    std::vector<MetricAppend> batch;
    for (const auto& m : metrics) {
      const size_t end = std::min(n, at + flush);
      batch.push_back({m.key, std::vector<Point>(m.points.begin() + static_cast<std::ptrdiff_t>(at),
                                                 m.points.begin() + static_cast<std::ptrdiff_t>(end))});
    }
    writer.append_metrics(run, batch);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Ingest with and without summaries, alternated: points per second each, and each file's size.
void ingest(const QString& dir) {
  constexpr int kRuns = 40, kMetricsPerRun = 3, kPoints = 20000;
  std::vector<double> with, without;
  qint64 size_with = 0, size_without = 0;
  for (int round = 0; round < 4; ++round) {
    for (const bool summaries : {true, false}) {
      const QString path = QString("%1/ingest-%2-%3.db").arg(dir).arg(summaries).arg(round);
      QElapsedTimer clock;
      {
        HistoryWriter writer(path.toStdString());
        for (int r = 0; r < kRuns; ++r) {
          const auto metrics = run_points(kMetricsPerRun, kPoints, static_cast<unsigned>(r));
          spur::history::Run run;
          run.status = "finished";
          const int64_t id = writer.create_run(run);
          if (!summaries) {
            // The writer's path for a series from before summaries (summarised -1): no summary work at all.
            for (const auto& m : metrics) {
              writer.database().exec("INSERT INTO series(run_id, key, summarised) VALUES(" + std::to_string(id) +
                                     ", '" + m.key + "', -1)");
            }
          }
          if (r == 0) clock.start();  // the file's creation is not ingest
          write_run(writer, id, metrics, 100);
        }
        (summaries ? with : without)
            .push_back(double(kRuns - 1) * kMetricsPerRun * kPoints / (clock.nsecsElapsed() / 1e9));
        writer.database().exec("PRAGMA wal_checkpoint(TRUNCATE)");
      }
      (summaries ? size_with : size_without) = QFileInfo(path).size();
      QFile::remove(path);
      QFile::remove(path + "-wal");
      QFile::remove(path + "-shm");
    }
  }
  std::printf(
      "{\"part\": \"ingest\", \"points_per_s_with_summaries\": %.0f, \"points_per_s_without\": %.0f, "
      "\"ratio\": %.3f, \"file_bytes_with\": %lld, \"file_bytes_without\": %lld, \"size_ratio\": %.4f}\n",
      median(with), median(without), median(with) / median(without), static_cast<long long>(size_with),
      static_cast<long long>(size_without), double(size_with) / double(size_without));
  std::fflush(stdout);
}

double run_cli_ms(const QString& spur, const QStringList& args, const QString& history, qint64* bytes = nullptr) {
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    QProcess process;
    QElapsedTimer clock;
    clock.start();
    process.start(spur, QStringList{"runs"} + args + QStringList{"--history", history});
    process.waitForFinished(120000);
    times.push_back(clock.nsecsElapsed() / 1e6);
    if (bytes) *bytes = process.readAllStandardOutput().size();
  }
  return median(times);
}

int studio(const QString& history, qint64 points) {
  QElapsedTimer clock;
  clock.start();
  spur::studio::MainWindow window(history);
  window.resize(1600, 1000);
  window.show();
  auto* table = window.runs_view();
  if (!wait([&] { return window.runs()->rowCount() > 0; }, 60000)) return 1;
  table->viewport()->repaint();
  const double first_paint = clock.nsecsElapsed() / 1e6;
  std::printf("{\"part\": \"runs_table\", \"first_paint_ms\": %.1f, \"rows_fetched\": %d, \"runs\": %lld}\n",
              first_paint, window.runs()->rowCount(), static_cast<long long>(TOTAL_RUNS(window.runs())));
  std::fflush(stdout);
  auto* model = table->model();
  for (const int n : {1, 10, 100, 500}) {
    table->clearSelection();
    wait([] { return false; }, 300);  // the deselection's removals done
    QList<qint64> ids;
    clock.restart();
    const QItemSelection selection = spur::bench::first_rows(*model, n, ids);
    table->selectionModel()->select(selection, QItemSelectionModel::Select | QItemSelectionModel::Rows);
    const bool loaded = wait(
        [&] {
          const auto keys = window.dashboard()->keys();
          if (keys.isEmpty()) return false;
          for (const auto& key : keys) {
            for (const qint64 id : ids) {
              if (REPRESENTED(window.dashboard()->plot(key), id) < points) return false;
            }
          }
          return true;
        },
        120000);
    int drawn = 0;
    for (const auto& key : window.dashboard()->keys()) {
      auto* plot = window.dashboard()->plot(key);
      plot->plot()->replot(QCustomPlot::rpImmediateRefresh);
      for (const qint64 id : ids) drawn += plot->point_count(id);
    }
    const double ms = clock.nsecsElapsed() / 1e6;
    std::printf(
        "{\"part\": \"select\", \"runs\": %d, \"loaded\": %s, \"drawn_ms\": %.1f, \"plots\": %lld, "
        "\"points_held\": %d, \"resident_mib\": %.0f}\n",
        n, loaded ? "true" : "false", ms, static_cast<long long>(window.dashboard()->keys().size()), drawn,
        resident_kib() / 1024.0);
    std::fflush(stdout);
  }
  // Zoom the loss plot (500 runs) into 1% of its steps, as a wheel would, and wait for the finer read.
  auto* plot = window.dashboard()->plot("loss");
  if (!plot) return 1;
  // As a user's zoom starts: a press on the plot (the plot then keeps the user's range instead of fitting the data).
  {
    const QPointF centre = plot->plot()->rect().center();
    QMouseEvent press(QEvent::MouseButtonPress, centre, plot->plot()->mapToGlobal(centre), Qt::LeftButton,
                      Qt::LeftButton, Qt::NoModifier);
    QMouseEvent release(QEvent::MouseButtonRelease, centre, plot->plot()->mapToGlobal(centre), Qt::LeftButton,
                        Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(plot->plot(), &press);
    QApplication::sendEvent(plot->plot(), &release);
  }
  std::vector<double> zooms;
  for (int i = 0; i < 5; ++i) {
    const double lo = points * (0.1 + 0.15 * i), hi = lo + points * 0.01;
    clock.restart();
    plot->plot()->xAxis->setRange(lo, hi);
#ifdef SPUR_BENCH_BEFORE
    plot->plot()->replot(QCustomPlot::rpImmediateRefresh);  // every point is in the plot already: a zoom is a replot
    zooms.push_back(clock.nsecsElapsed() / 1e6);
#else
    // Until the first replot that shows the lines read again for the range (load() queues one).
    const qint64 first = window.runs()->run(window.runs()->rowCount() - 1).id;
    const double before = plot->first_x(first);
    double read_ms = 0, drawn_ms = 0;
    const auto replotted = QObject::connect(plot->plot(), &QCustomPlot::afterReplot, [&] {
      if (drawn_ms == 0 && plot->first_x(first) != before && plot->first_x(first) >= lo - 1) {
        drawn_ms = clock.nsecsElapsed() / 1e6;
      }
    });
    spur::app::SeriesView view;
    view.lo = lo;
    view.hi = hi;
    view.width = plot->plot()->axisRect()->width();
    emit plot->view_changed(view);
    wait(
        [&] {
          if (read_ms == 0 && plot->first_x(first) != before) read_ms = clock.nsecsElapsed() / 1e6;
          return drawn_ms > 0;
        },
        30000);
    QObject::disconnect(replotted);
    if (drawn_ms > 0) zooms.push_back(drawn_ms);
    if (qEnvironmentVariableIsSet("SPUR_BENCH_VERBOSE")) {
      std::fprintf(stderr, "zoom %d: lines read again by %.1f ms, drawn by %.1f ms\n", i, read_ms, drawn_ms);
    }
#endif
  }
  std::printf("{\"part\": \"zoom_1pct\", \"runs\": 500, \"redraw_ms\": %.1f, \"zooms\": %zu}\n", median(zooms),
              zooms.size());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  if (argc >= 4 && QString(argv[1]) == "--studio") return studio(argv[2], QString(argv[3]).toLongLong());
  if (argc < 2) {
    std::fprintf(stderr, "usage: scale_bench SPUR [RUNS] [METRICS] [POINTS]\n");
    return 2;
  }
  const QString spur = argv[1];
  const int runs = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int metrics = argc > 3 ? std::atoi(argv[3]) : 3;
  const int points = argc > 4 ? std::atoi(argv[4]) : 3334;
  QTemporaryDir dir(QDir::tempPath() + "/spur-scale-XXXXXX");
  // SPUR_BENCH_KEEP=1 keeps the history (its path is printed), to open in the Studio or measure again.
  if (qEnvironmentVariableIsSet("SPUR_BENCH_KEEP")) dir.setAutoRemove(false);
#ifndef SPUR_BENCH_BEFORE
  ingest(dir.path());
#endif

  const QString history = dir.filePath("history.db");
  QElapsedTimer clock;
  clock.start();
  {
    HistoryWriter writer(history.toStdString());
    for (int r = 0; r < runs; ++r) {
      spur::history::Run run;
      run.status = r % 7 == 0 ? "failed" : "finished";
      run.project = r % 2 ? "vision" : "language";
      run.created = run.started = 1.7e9 + r * 60.0;
      run.ended = run.started + 300;
      run.exit_code = run.status == "failed" ? 1 : 0;
      if (r % 10 == 0) run.tags = {"sweep"};
      const int64_t id = writer.create_run(run);
      writer.append_metrics(id, run_points(metrics, points, static_cast<unsigned>(r)));
    }
    writer.database().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  const double build_s = clock.nsecsElapsed() / 1e9;
  std::printf("{\"part\": \"history\", \"runs\": %d, \"points\": %lld, \"bytes\": %lld, \"build_s\": %.1f}\n", runs,
              static_cast<long long>(runs) * metrics * points, static_cast<long long>(QFileInfo(history).size()),
              build_s);
  if (!dir.autoRemove()) std::fprintf(stderr, "scale_bench: the history stays at %s\n", qPrintable(history));
  std::fflush(stdout);
  qint64 bytes = 0;
  const double list_all = run_cli_ms(spur, {"list"}, history, &bytes);
#ifdef SPUR_BENCH_BEFORE
  const double list_50 = 0, list_tag = 0;  // no --limit, no --tag before
#else
  const double list_50 = run_cli_ms(spur, {"list", "--limit", "50"}, history);
  const double list_tag = run_cli_ms(spur, {"list", "--tag", "sweep", "--limit", "50"}, history);
#endif
  std::printf(
      "{\"part\": \"runs_list\", \"all_ms\": %.1f, \"all_bytes\": %lld, \"limit_50_ms\": %.1f, "
      "\"tag_limit_50_ms\": %.1f}\n",
      list_all, static_cast<long long>(bytes), list_50, list_tag);
  std::fflush(stdout);
  QProcess child;
  child.setProcessChannelMode(QProcess::ForwardedChannels);
  child.start(QCoreApplication::applicationFilePath(), {"--studio", history, QString::number(points)});
  child.waitForFinished(-1);
  return child.exitCode();
}
