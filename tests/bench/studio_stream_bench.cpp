// SPDX-License-Identifier: GPL-3.0-or-later
// Spur Studio while 10 runs stream at once: the main window (offscreen) shows all of them, fed from the history
// by 10 writer processes, each also writing the launcher's system/ series once a second (SYSTEM_RANKS ranks' CPU
// and memory and a GPU's use, memory and power), so the dashboard's system section streams too; a 10 ms timer
// measures how late the GUI thread answers (event-loop lag), against the same window idle in the same process.
// One JSON line. `studio_stream_bench HISTORY_RIG [RUNS] [POINTS] [SYSTEM_RANKS]` (defaults 10, 30000, 2)
#include <QApplication>
#include <QElapsedTimer>
#include <QProcess>
#include <QTreeView>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "dashboard/dashboard.h"
#include "dashboard/metric_plot.h"
#include "main/main_window.h"
#include "studio/runs_model.h"

namespace {

struct Lag {
  double p50 = 0, p99 = 0, max = 0;
};

// Runs the event loop for `ms` (or until `done`), timing a 10 ms timer's ticks.
Lag measure(int ms, const std::function<bool()>& done = {}) {
  std::vector<double> lags;
  QElapsedTimer clock;
  clock.start();
  qint64 last = clock.nsecsElapsed();
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  QEventLoop loop;
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    lags.push_back(std::max(0.0, (now - last) / 1e6 - 10.0));
    last = now;
    if (clock.elapsed() > ms || (done && done())) loop.quit();
  });
  tick.start(10);
  loop.exec();
  std::sort(lags.begin(), lags.end());
  Lag lag;
  if (!lags.empty()) {
    lag.p50 = lags[lags.size() / 2];
    lag.p99 = lags[std::min(lags.size() - 1, lags.size() * 99 / 100)];
    lag.max = lags.back();
  }
  return lag;
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: studio_stream_bench HISTORY_RIG [RUNS] [POINTS] [SYSTEM_RANKS]\n");
    return 2;
  }
  const QString rig = argv[1];
  const int runs = argc > 2 ? std::atoi(argv[2]) : 10;
  const int points = argc > 3 ? std::atoi(argv[3]) : 30000;
  const int system_ranks = argc > 4 ? std::atoi(argv[4]) : 2;
  QTemporaryDir dir;
  const QString path = dir.filePath("history.db");
  spur::studio::MainWindow window(path);
  window.resize(1280, 800);
  window.show();
  const Lag idle = measure(3000);

  // Each writer: `points` points in commits of 100, 30 ms apart (about 10 s at 30,000 points).
  std::vector<std::unique_ptr<QProcess>> writers;
  for (int i = 0; i < runs; ++i) {
    auto writer = std::make_unique<QProcess>();
    writer->start(rig, {path, QString("stream %1").arg(i), QString::number(points), "100", "30000",
                        QString::number(system_ranks)});
    writers.push_back(std::move(writer));
  }
  // Compare all of them, as a person would once they appear.
  QTimer select_all;
  QObject::connect(&select_all, &QTimer::timeout, [&] {
    if (window.runs()->rowCount() > window.runs_view()->selectionModel()->selectedRows().size()) {
      window.runs_view()->selectAll();
    }
  });
  select_all.start(200);
  QElapsedTimer wall;
  wall.start();
  const auto finished = [&] {
    return std::all_of(writers.begin(), writers.end(),
                       [](const auto& w) { return w->state() == QProcess::NotRunning; });
  };
  const Lag streaming = measure(120000, finished);
  const double stream_seconds = wall.elapsed() / 1000.0;
  // Then until every point is drawn.
  auto plot = [&] { return window.dashboard()->plot("x"); };
  const auto all_drawn = [&] {
    if (!plot()) return false;
    for (int row = 0; row < window.runs()->rowCount(); ++row) {
      if (plot()->represented_points(window.runs()->run(row).id) < points) return false;
    }
    return window.runs()->rowCount() == runs;
  };
  // Every run's system series is plotted in the system section too (one line per run in each system plot).
  const auto system_drawn = [&] {
    if (system_ranks <= 0) return true;
    auto* cpu = window.dashboard()->plot("system/rank0/cpu_percent");
    if (!cpu) return false;
    for (int row = 0; row < window.runs()->rowCount(); ++row) {
      if (cpu->represented_points(window.runs()->run(row).id) < 1) return false;
    }
    return true;
  };
  QElapsedTimer catch_up;
  catch_up.start();
  measure(30000, [&] { return all_drawn() && system_drawn(); });
  int system_plots = 0;
  for (const auto& key : window.dashboard()->keys()) system_plots += key.startsWith("system/") ? 1 : 0;
  std::printf(
      "{\"runs\": %d, \"points_per_run\": %d, \"system_ranks\": %d, \"system_plots\": %d, \"stream_s\": %.1f, "
      "\"idle_lag_p99_ms\": %.2f, \"stream_lag_p50_ms\": %.2f, \"stream_lag_p99_ms\": %.2f, "
      "\"stream_lag_max_ms\": %.2f, \"all_drawn\": %s, \"drawn_after_writers_ms\": %lld}\n",
      runs, points, system_ranks, system_plots, stream_seconds, idle.p99, streaming.p50, streaming.p99, streaming.max,
      all_drawn() && system_drawn() ? "true" : "false", static_cast<long long>(catch_up.elapsed()));
  if (all_drawn() && system_drawn()) return 0;
  if (!system_drawn()) std::fprintf(stderr, "the system section does not have every run's line\n");
  // Say why: a writer that failed, or a run the dashboard did not finish drawing.
  for (int i = 0; i < runs; ++i) {
    const auto& w = writers[static_cast<size_t>(i)];
    if (w->exitStatus() != QProcess::NormalExit || w->exitCode() != 0) {
      std::fprintf(stderr, "writer %d exited %d: %s\n", i, w->exitCode(), w->readAllStandardError().constData());
    }
  }
  for (int row = 0; row < window.runs()->rowCount(); ++row) {
    const auto id = window.runs()->run(row).id;
    std::fprintf(stderr, "run %lld: %d of %d points drawn\n", static_cast<long long>(id),
                 plot() ? static_cast<int>(plot()->represented_points(id)) : -1, points);
  }
  return 1;
}
