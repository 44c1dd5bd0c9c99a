// SPDX-License-Identifier: GPL-3.0-or-later
// Spur Studio's Compare tab (issue 18: the table for 50 runs opens in < 100 ms): a history of RUNS finished runs of
// 10 metrics x POINTS points each, in a temporary folder; then, median of 5, the read on the reader thread
// (CompareReader: records, configurations, parameters, each series scanned for its final and best value) and the
// GUI thread's part (the snapshot into CompareView and the first paint, offscreen); and the same snapshot into the
// Hyperparameters tab (HParamsView: its model, the parallel-coordinates plot painted, a line per run, and its table;
// issue 39: 500 runs in under 300 ms). One JSON line. `compare_bench [RUNS] [POINTS]` (default 50 2000).
#include <QApplication>
#include <QElapsedTimer>
#include <QTableView>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <spur/history/writer.h>

#include "compare/compare_view.h"
#include "hparams/hparams_view.h"

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const int runs = argc > 1 ? std::atoi(argv[1]) : 50;
  const int points = argc > 2 ? std::atoi(argv[2]) : 2000;
  QTemporaryDir dir;
  const std::string path = dir.filePath("history.db").toStdString();
  QList<qint64> ids;
  {
    spur::history::HistoryWriter writer(path);
    for (int i = 0; i < runs; ++i) {
      spur::history::Run run;
      run.status = "finished";
      run.config =
          "distributed_type: MULTI_CPU\nnum_processes: " + std::to_string(1 + i % 4) + "\nmixed_precision: no\n";
      run.params = R"({"lr": )" + std::to_string(0.001 * (i + 1)) + R"(, "batch_size": )" +
                   std::to_string(32 << (i % 3)) + R"(, "optimizer": ")" + (i % 2 ? "adam" : "sgd") +
                   R"(", "dropout": )" + std::to_string(0.1 * (i % 5)) + "}";
      const int64_t id = writer.create_run(run);
      std::vector<spur::history::MetricAppend> metrics;
      for (int m = 0; m < 10; ++m) {
        std::vector<spur::history::Point> series;
        series.reserve(static_cast<std::size_t>(points));
        for (int step = 0; step < points; ++step) series.push_back({step, std::sin(step * 0.01 + i + m), 0});
        metrics.push_back({"metric" + std::to_string(m), series});
      }
      writer.append_metrics(id, metrics);
      ids << id;
    }
  }
  const spur::app::CompareReader reader(path);
  spur::studio::CompareView view;
  view.resize(1200, 800);
  view.show();
  spur::studio::HParamsView hparams;
  hparams.resize(1200, 800);
  hparams.show();
  std::vector<double> read_ms, show_ms, hparams_ms;
  for (int repeat = 0; repeat < 5; ++repeat) {
    QElapsedTimer timer;
    timer.start();
    const auto snapshot = reader.read(ids);
    read_ms.push_back(timer.nsecsElapsed() / 1e6);
    timer.restart();
    view.set_snapshot(snapshot);
    view.table()->viewport()->repaint();
    show_ms.push_back(timer.nsecsElapsed() / 1e6);
    if (view.model()->columnCount() != runs) return 1;
    timer.restart();
    hparams.set_snapshot(snapshot);
    hparams.plot()->repaint();
    hparams.table()->viewport()->repaint();
    hparams_ms.push_back(timer.nsecsElapsed() / 1e6);
    if (hparams.model()->rowCount() != runs) return 1;
  }
  std::sort(read_ms.begin(), read_ms.end());
  std::sort(show_ms.begin(), show_ms.end());
  std::sort(hparams_ms.begin(), hparams_ms.end());
  std::printf(
      "{\"runs\": %d, \"points_per_series\": %d, \"read_ms\": %.1f, \"show_ms\": %.1f, \"total_ms\": %.1f, "
      "\"hparams_ms\": %.1f}\n",
      runs, points, read_ms[2], show_ms[2], read_ms[2] + show_ms[2], hparams_ms[2]);
  return 0;
}
