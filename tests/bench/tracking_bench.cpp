// SPDX-License-Identifier: Apache-2.0
// Tracking and history speed, one process, as one JSON line for run_benchmarks.py:
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
// `tracking_bench [--values N] [--points P]`
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

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  int64_t values = 2'000'000, points = 1'000'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--values") values = std::atoll(argv[i + 1]);
    if (flag == "--points") points = std::atoll(argv[i + 1]);
  }
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
  if (!std::getenv("SPUR_BENCH_KEEP")) std::filesystem::remove_all(dir);
  std::printf(
      "{\"values\": %lld, \"log_ns_per_value\": %.2f, \"baseline_ns_per_value\": %.2f, "
      "\"drain_values_per_s\": %.0f, \"writer_values_per_s\": %.0f, \"read_points\": %zu, \"read_ms\": %.2f, "
      "\"read_best_ms\": %.2f, \"visible_ms\": %.1f, \"log_tensorboard_ns_per_value\": %.2f, "
      "\"tensorboard_drain_values_per_s\": %.0f}\n",
      static_cast<long long>(values), log_ns, baseline_ns, drain_rate, writer_rate, read_points, read_ms, read_best_ms,
      visible_ms, tensorboard_log_ns, tensorboard_drain);
  return 0;
}
