// SPDX-License-Identifier: GPL-3.0-or-later
// Spur Studio on a history on another machine (issue 35's targets): the main window (offscreen) opened on
// ssh://HOST/PATH, through whatever link SPUR_SSH_CONFIG describes (tests/bench/remote_history_bench.py starts a
// throw-away sshd behind a relay that delays each direction and counts the bytes the serve sends, one line per
// chunk, into COUNT_FILE). Measured, one JSON line each:
//   - the runs table until first painted (from the window's construction: the connection included);
//   - 100 runs, then 500, selected until every selected run's whole line is represented in the plot and drawn,
//     with the bytes the serve sent for it;
//   - a live run written on that machine (HISTORY_RIG on LOCAL_PATH, the file the serve reads: one point per commit,
//     a commit a second), selected: for each commit, the time until the point is represented on screen.
// `studio_remote_bench ADDRESS LOCAL_PATH HISTORY_RIG COUNT_FILE POINTS [LIVE_POINTS]`
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QItemSelectionModel>
#include <QProcess>
#include <QTreeView>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "dashboard/dashboard.h"
#include "dashboard/metric_plot.h"
#include "main/main_window.h"
#include "studio/runs_model.h"
#include "studio_bench_support.h"

#undef QT_NO_FOREACH
#include <qcustomplot.h>

namespace {

using spur::bench::wait;

// The bytes the serve has sent so far (the relay's count file).
qint64 bytes_sent(const QString& count_file) {
  QFile file(count_file);
  if (!file.open(QIODevice::ReadOnly)) return 0;
  qint64 total = 0;
  for (const auto& line : file.readAll().split('\n')) total += line.trimmed().toLongLong();
  return total;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  if (argc < 6) {
    std::fprintf(stderr, "usage: studio_remote_bench ADDRESS LOCAL_PATH HISTORY_RIG COUNT_FILE POINTS [LIVE_POINTS]\n");
    return 2;
  }
  const QString address = argv[1], local_path = argv[2], rig = argv[3], count_file = argv[4];
  const qint64 points = QByteArray(argv[5]).toLongLong();
  const int live_points = argc > 6 ? std::atoi(argv[6]) : 20;

  QElapsedTimer clock;
  clock.start();
  const qint64 bytes_at_start = bytes_sent(count_file);
  spur::studio::MainWindow window(address);
  window.resize(1600, 1000);
  window.show();
  auto* table = window.runs_view();
  if (!wait([&] { return window.runs()->rowCount() > 0; }, 60000)) {
    std::fprintf(stderr, "the runs table stayed empty for 60 s\n");
    return 1;
  }
  table->viewport()->repaint();
  std::printf(
      "{\"part\": \"runs_table\", \"first_paint_ms\": %.1f, \"rows_fetched\": %d, \"runs\": %lld, \"bytes\": %lld}\n",
      clock.nsecsElapsed() / 1e6, window.runs()->rowCount(), static_cast<long long>(window.runs()->total_runs()),
      bytes_sent(count_file) - bytes_at_start);
  std::fflush(stdout);
  // Whatever the window selected by itself (the newest run) is done before the selections are timed.
  wait([] { return false; }, 2000);

  auto* model = table->model();
  for (const int n : {100, 500}) {
    table->clearSelection();
    wait([] { return false; }, 1500);  // the deselection's removals done
    QList<qint64> ids;
    const QItemSelection selection = spur::bench::first_rows(*model, n, ids);
    const qint64 before = bytes_sent(count_file);
    clock.restart();
    table->selectionModel()->select(selection, QItemSelectionModel::Select | QItemSelectionModel::Rows);
    const bool loaded = wait(
        [&] {
          const auto keys = window.dashboard()->keys();
          if (keys.isEmpty()) return false;
          for (const auto& key : keys) {
            for (const qint64 id : ids) {
              if (window.dashboard()->plot(key)->represented_points(id) < points) return false;
            }
          }
          return true;
        },
        120000);
    for (const auto& key : window.dashboard()->keys()) {
      window.dashboard()->plot(key)->plot()->replot(QCustomPlot::rpImmediateRefresh);
    }
    const double ms = clock.nsecsElapsed() / 1e6;
    const qint64 drawn_bytes = bytes_sent(count_file) - before;
    wait([] { return false; }, 1500);  // a poll or two after: what a selection costs once drawn
    std::printf(
        "{\"part\": \"select\", \"runs\": %d, \"loaded\": %s, \"drawn_ms\": %.1f, \"bytes\": %lld, "
        "\"bytes_1500ms_later\": %lld, \"resident_mib\": %.0f}\n",
        static_cast<int>(ids.size()), loaded ? "true" : "false", ms, drawn_bytes, bytes_sent(count_file) - before,
        spur::bench::resident_kib() / 1024.0);
    std::fflush(stdout);
    if (!loaded) return 1;
  }

  // A live run there: one point a second; each point's delay from its commit to the plot representing it.
  table->clearSelection();
  QProcess writer;
  writer.start(rig, {local_path, "live", QString::number(live_points), "1", "1000000"});
  qint64 run = 0;
  std::map<qint64, double> committed;  // point count -> when its commit was said (ms on `clock`)
  clock.restart();
  QByteArray pending;
  QObject::connect(&writer, &QProcess::readyReadStandardOutput, [&] {
    pending += writer.readAllStandardOutput();
    for (qsizetype end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      const QByteArray line = pending.left(end);
      pending.remove(0, end + 1);
      if (line.startsWith("run ")) run = line.mid(4).toLongLong();
      if (line.startsWith("flushed ")) committed[line.mid(8).toLongLong()] = clock.nsecsElapsed() / 1e6;
    }
  });
  std::vector<double> delays;
  std::map<qint64, bool> seen;
  bool selected = false;
  double selected_at = 0;
  wait(
      [&] {
        if (run == 0) return false;
        if (!selected) {
          for (int row = 0; row < model->rowCount(); ++row) {
            if (model->index(row, 0).data(spur::app::RunsModel::RunIdRole).toLongLong() == run) {
              table->selectionModel()->select(model->index(row, 0),
                                              QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
              selected = true;
              selected_at = clock.nsecsElapsed() / 1e6;
            }
          }
          return false;
        }
        auto* plot = window.dashboard()->plot("x");
        const qint64 shown = plot ? plot->represented_points(run) : 0;
        const double now = clock.nsecsElapsed() / 1e6;
        for (const auto& [count, at] : committed) {
          if (count <= shown && !seen[count]) {
            seen[count] = true;
            // The first points arrive before the run is selected: only those committed once it was are timed.
            if (at >= selected_at) delays.push_back(now - at);
          }
        }
        return writer.state() == QProcess::NotRunning && shown >= live_points;
      },
      live_points * 1000 + 30000);
  std::sort(delays.begin(), delays.end());
  std::printf("{\"part\": \"live\", \"points_timed\": %zu, \"delay_median_ms\": %.0f, \"delay_max_ms\": %.0f}\n",
              delays.size(), median(delays), delays.empty() ? 0.0 : delays.back());
  return delays.size() + 5 >= static_cast<size_t>(live_points) ? 0 : 1;
}
