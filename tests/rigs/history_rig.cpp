// SPDX-License-Identifier: Apache-2.0
// A history writer for tests: `history_rig PATH NAME POINTS BATCH [PAUSE_US [SYSTEM_RANKS]]` creates run NAME and
// appends POINTS points of metric "x" (step i, value i) in commits of BATCH (PAUSE_US apart), printing "run ID"
// first and "flushed K" after each commit. With SYSTEM_RANKS > 0 it also writes, once a second of its own wall
// clock, what the launcher samples for that many ranks and one GPU, under the launcher's keys
// (system/rankR/cpu_percent and rss_mib, system/gpu0/utilization_percent, memory_mib and power_w; steps in seconds
// since the start), each in the commit it falls in, as the launcher's recorder does. With SPUR_RIG_NOISY=1 in the
// environment the values are a training loss's instead of i (a decaying curve with noise: every digit of a double
// used, as real metrics are; the benchmarks of bytes sent use it).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>
#include <thread>

#include <spur/history/writer.h>

int main(int argc, char** argv) try {
  if (argc < 5 || argc > 7) {
    std::fprintf(stderr, "usage: history_rig PATH NAME POINTS BATCH [PAUSE_US [SYSTEM_RANKS]]\n");
    return 2;
  }
  spur::history::HistoryWriter writer(argv[1]);
  spur::history::Run run;
  run.name = argv[2];
  const int64_t id = writer.create_run(run);
  std::printf("run %lld\n", static_cast<long long>(id));
  std::fflush(stdout);
  const long long points = std::atoll(argv[3]), batch = std::atoll(argv[4]);
  const long long pause = argc >= 6 ? std::atoll(argv[5]) : 0;
  const int system_ranks = argc == 7 ? std::atoi(argv[6]) : 0;
  const double start = spur::history::now_seconds();
  const char* noisy_env = std::getenv("SPUR_RIG_NOISY");
  const bool noisy = noisy_env && std::string(noisy_env) == "1";
  std::mt19937 random(static_cast<unsigned>(id));
  std::normal_distribution<double> noise(0.0, 0.05);
  long long seconds_sampled = 0;
  for (long long done = 0; done < points;) {
    std::vector<spur::history::MetricAppend> appends{{"x", {}}};
    for (long long i = 0; i < batch && done < points; ++i, ++done) {
      const double value =
          noisy ? 2.5 * std::exp(-static_cast<double>(done) / 300.0) + 0.1 + noise(random) : static_cast<double>(done);
      appends.front().points.push_back({done, value, spur::history::now_seconds()});
    }
    const double now = spur::history::now_seconds();
    if (system_ranks > 0 && now - start >= static_cast<double>(seconds_sampled)) {
      const auto second = seconds_sampled++;
      const auto wave = static_cast<double>(second % 10);  // values that move, so lines are drawn
      auto sample = [&](const std::string& key, double value) { appends.push_back({key, {{second, value, now}}}); };
      for (int rank = 0; rank < system_ranks; ++rank) {
        const std::string prefix = "system/rank" + std::to_string(rank) + "/";
        sample(prefix + "cpu_percent", 90.0 + wave + rank);
        sample(prefix + "rss_mib", 400.0 + 2.0 * static_cast<double>(second) + rank);
      }
      sample("system/gpu0/utilization_percent", 80.0 + wave);
      sample("system/gpu0/memory_mib", 12000.0 + wave);
      sample("system/gpu0/power_w", 300.0 + 5.0 * wave);
    }
    writer.append_metrics(id, appends);
    std::printf("flushed %lld\n", done);
    std::fflush(stdout);
    if (pause > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause));
  }
  writer.set_status(id, "finished", 0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "history_rig: %s\n", e.what());
  return 1;
}
