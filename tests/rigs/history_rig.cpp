// SPDX-License-Identifier: Apache-2.0
// A history writer for tests: `history_rig PATH NAME POINTS BATCH [PAUSE_US]` creates run NAME and appends
// POINTS points of metric "x" (step i, value i) in commits of BATCH (PAUSE_US apart), printing "run ID" first and
// "flushed K" after each commit.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <spur/history/writer.h>

int main(int argc, char** argv) try {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: history_rig PATH NAME POINTS BATCH [PAUSE_US]\n");
    return 2;
  }
  spur::history::HistoryWriter writer(argv[1]);
  spur::history::Run run;
  run.name = argv[2];
  const int64_t id = writer.create_run(run);
  std::printf("run %lld\n", static_cast<long long>(id));
  std::fflush(stdout);
  const long long points = std::atoll(argv[3]), batch = std::atoll(argv[4]);
  const long long pause = argc == 6 ? std::atoll(argv[5]) : 0;
  for (long long done = 0; done < points;) {
    spur::history::MetricAppend append{"x", {}};
    for (long long i = 0; i < batch && done < points; ++i, ++done) {
      append.points.push_back({done, static_cast<double>(done), spur::history::now_seconds()});
    }
    writer.append_metrics(id, {append});
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
