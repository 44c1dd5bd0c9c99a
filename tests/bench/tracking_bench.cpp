// SPDX-License-Identifier: Apache-2.0
// Tracking, history and checkpoint-rotation speed, one process, as one JSON line for run_benchmarks.py:
//   log_ns_per_value      training-thread cost of accelerator.log per value (4 values a call, sqlite tracker),
//   baseline_ns_per_value the same loop appending the values to a std::vector (what logging costs at least)
//   drain_values_per_s    values/s from the first log to end_training() returning (everything in the database)
//   log_tensorboard_ns_per_value  the same log loop with the tensorboard tracker added (log_with)
//   tensorboard_drain_values_per_s  values/s from the first log to end_training() with both trackers
//   writer_values_per_s   HistoryWriter::append_metrics alone, batches of 10,000 over 4 metrics
//   read_ms               reading one series of `points` points (HistoryReader::series), the first time in the
//                         process (fresh memory: on this VM page faults cost as much as the read);
//   read_best_ms          the best of 5 further reads
//   visible_ms            the worst of 10: from accelerator.log returning to a reader (polling every 5 ms)
//                         seeing the value
//   save_ms, save_rotating_ms  the median of 16 automatic save_state() calls of a 4 M-parameter model (16 MB),
//                         200 ms apart (the steps between saves), without and with total_limit = 2: what rotation
//                         (one rename on the training thread, the removal in the background) adds to it
//   save_removing_first_ms  the same saves with the oldest removed on the training thread first (Accelerate's way)
// `tracking_bench [--values N] [--points P]`
// `tracking_bench --mlflow N` (MLFLOW_TRACKING_URI naming a running server; tests/bench/mlflow_bench.py) measures
// only, over N values: log_ns_per_value (sqlite alone), log_mlflow_ns_per_value (sqlite and mlflow, log_with), and
// mlflow_drain_values_per_s (from the first log to end_training() returning with every value taken by the server).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <spur/history/reader.h>
#include <spur/history/writer.h>
#include <spur/spur.h>
#include <torch/nn/modules/linear.h>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  int64_t values = 2'000'000, points = 1'000'000, mlflow = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--values") values = std::atoll(argv[i + 1]);
    if (flag == "--points") points = std::atoll(argv[i + 1]);
    if (flag == "--mlflow") mlflow = std::atoll(argv[i + 1]);
  }
  if (mlflow > 0) values = mlflow;
  const auto dir = std::filesystem::temp_directory_path() / ("spur-tracking-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "history.db").string();

  // Baseline: the cheapest possible "logging", values into a vector.
  std::vector<std::pair<int64_t, double>> sink;
  sink.reserve(static_cast<size_t>(values));
  auto start = Clock::now();
  for (int64_t step = 0; step < values / 4; ++step) {
    const auto v = static_cast<double>(step);
    sink.emplace_back(step, v);
    sink.emplace_back(step, v * 2);
    sink.emplace_back(step, v * 3);
    sink.emplace_back(step, v * 4);
  }
  const double baseline_ns = seconds_since(start) * 1e9 / static_cast<double>(values);

  // The log loop of a training program, 4 values a call: {ns per value on the training thread, values/s drained}.
  auto measure = [&](spur::AcceleratorOptions accelerator_options, const std::string& history) {
    spur::Accelerator accelerator(std::move(accelerator_options));
    spur::TrackingOptions options;
    options.trackers = {"sqlite"};
    options.history = history;
    accelerator.init_trackers("bench", {{"lr", 0.1}}, options);
    const auto begin = Clock::now();
    for (int64_t step = 0; step < values / 4; ++step) {
      const auto v = static_cast<double>(step);
      accelerator.log({{"loss", v}, {"lr", v * 2}, {"accuracy", v * 3}, {"grad_norm", v * 4}}, step);
    }
    const double ns = seconds_since(begin) * 1e9 / static_cast<double>(values);
    accelerator.end_training();
    return std::pair{ns, static_cast<double>(values) / seconds_since(begin)};
  };
  const auto [log_ns, drain_rate] = measure({}, path);
  if (mlflow > 0) {
    spur::AcceleratorOptions with_mlflow;
    with_mlflow.log_with = {"mlflow"};
    const auto [mlflow_log_ns, mlflow_drain] = measure(with_mlflow, (dir / "history-mlflow.db").string());
    if (!std::getenv("SPUR_BENCH_KEEP")) std::filesystem::remove_all(dir);
    std::printf(
        "{\"mlflow_values\": %lld, \"log_ns_per_value\": %.2f, \"log_mlflow_ns_per_value\": %.2f, "
        "\"mlflow_drain_values_per_s\": %.0f}\n",
        static_cast<long long>(values), log_ns, mlflow_log_ns, mlflow_drain);
    return 0;
  }
  // The same loop with TensorBoard event files written too (the training thread should not notice).
  spur::AcceleratorOptions with_tensorboard;
  with_tensorboard.project_config.logging_dir = (dir / "tensorboard").string();
  with_tensorboard.log_with = {"tensorboard"};
  const auto [tensorboard_log_ns, tensorboard_drain] = measure(with_tensorboard, (dir / "history-tb.db").string());

  double writer_rate = 0;
  {
    spur::history::HistoryWriter writer(path);
    const int64_t run = writer.create_run({});
    start = Clock::now();
    for (int64_t done = 0; done < values;) {
      std::vector<spur::history::MetricAppend> batch{{"a", {}}, {"b", {}}, {"c", {}}, {"d", {}}};
      for (int i = 0; i < 10000 && done < values; ++i, ++done) {
        batch[static_cast<size_t>(done % 4)].points.push_back({done, static_cast<double>(done), 1.7e9});
      }
      writer.append_metrics(run, batch);
    }
    writer_rate = static_cast<double>(values) / seconds_since(start);
    // The series to read: `points` points of one metric.
    const int64_t series_run = writer.create_run({});
    for (int64_t done = 0; done < points;) {
      spur::history::MetricAppend append{"loss", {}};
      for (int i = 0; i < 10000 && done < points; ++i, ++done) append.points.push_back({done, 0.5, 1.7e9});
      writer.append_metrics(series_run, {append});
    }
  }

  double read_ms = 0, read_best_ms = 1e9;
  size_t read_points = 0;
  {
    spur::history::HistoryReader reader(path);
    const int64_t run = reader.runs().back().id;
    for (int round = 0; round < 6; ++round) {
      start = Clock::now();
      const auto series = reader.series(run, "loss");
      const double ms = seconds_since(start) * 1000;
      if (round == 0) read_ms = ms;
      else read_best_ms = std::min(read_best_ms, ms);
      read_points = series.size();
    }
  }
  // Visibility: what a live plot waits for.
  double visible_ms = 0;
  {
    const std::string live = (dir / "live.db").string();
    spur::Accelerator accelerator;
    spur::TrackingOptions options;
    options.trackers = {"sqlite"};
    options.history = live;
    accelerator.init_trackers("live", {}, options);
    accelerator.log({{"x", 0.0}}, 0);
    std::optional<spur::history::HistoryReader> reader;
    while (!reader) {
      try {
        reader.emplace(live);
        if (reader->runs().empty()) reader.reset();
      } catch (const spur::history::HistoryError&) {
      }
      if (!reader) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const int64_t run = reader->runs().front().id;
    spur::history::SeriesCursor cursor;
    reader->series(run, "x", &cursor);
    for (int64_t step = 1; step <= 10; ++step) {
      accelerator.log({{"x", static_cast<double>(step)}}, step);
      start = Clock::now();
      while (reader->series(run, "x", &cursor).empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      visible_ms = std::max(visible_ms, seconds_since(start) * 1000);
      std::this_thread::sleep_for(std::chrono::milliseconds(37));  // land at different points of the flush cycle
    }
  }
  // Checkpoint rotation: the same saves with and without total_limit.
  // `remove_first`: no total_limit, but the oldest beyond 2 removed on the training thread before each save, as
  // Accelerate does (shutil.rmtree in save_state): the peer's way of rotating.
  const auto median_save_ms = [&](const std::string& name, std::optional<int> limit, bool remove_first = false) {
    spur::AcceleratorOptions options;
    options.project_config.project_dir = (dir / name).string();
    options.project_config.automatic_checkpoint_naming = true;
    options.project_config.total_limit = limit;
    spur::Accelerator accelerator(options);
    torch::manual_seed(0);
    torch::nn::Linear net(2048, 2048);
    auto model = accelerator.prepare(net);
    std::vector<double> times;
    for (int i = 0; i < 16; ++i) {
      // Training steps between saves (a save every so many steps): what the background removal has to finish in.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const auto begin = Clock::now();
      if (remove_first && i >= 2) {
        std::filesystem::remove_all(dir / name / "checkpoints" / ("checkpoint_" + std::to_string(i - 2)));
      }
      accelerator.save_state();
      times.push_back(seconds_since(begin) * 1000);
    }
    std::sort(times.begin(), times.end());
    return (times[7] + times[8]) / 2;
  };
  (void)median_save_ms("warm-up", std::nullopt);  // the first saves of a process are slower, whatever they do
  const double save_ms = median_save_ms("plain", std::nullopt);
  const double save_rotating_ms = median_save_ms("rotating", 2);
  const double save_removing_first_ms = median_save_ms("removing", std::nullopt, true);
  if (!std::getenv("SPUR_BENCH_KEEP")) std::filesystem::remove_all(dir);
  std::printf(
      "{\"values\": %lld, \"log_ns_per_value\": %.2f, \"baseline_ns_per_value\": %.2f, "
      "\"drain_values_per_s\": %.0f, \"writer_values_per_s\": %.0f, \"read_points\": %zu, \"read_ms\": %.2f, "
      "\"read_best_ms\": %.2f, \"visible_ms\": %.1f, \"log_tensorboard_ns_per_value\": %.2f, "
      "\"tensorboard_drain_values_per_s\": %.0f, \"save_ms\": %.2f, \"save_rotating_ms\": %.2f, "
      "\"save_removing_first_ms\": %.2f}\n",
      static_cast<long long>(values), log_ns, baseline_ns, drain_rate, writer_rate, read_points, read_ms, read_best_ms,
      visible_ms, tensorboard_log_ns, tensorboard_drain, save_ms, save_rotating_ms, save_removing_first_ms);
  return 0;
}
