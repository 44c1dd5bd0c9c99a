// SPDX-License-Identifier: Apache-2.0
// What the C++ step benchmarks share: a clock, the median, memory as run_benchmarks.py compares it (peak RSS, PSS,
// private) and the per-rank JSON record it reads. Header-only; single-threaded use.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace spur::bench {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // kilobytes on Linux
}

// Proportional and private (unshared) memory now, from /proc/self/smaps_rollup, in MiB.
inline std::pair<double, double> pss_and_private_mib() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  double pss = 0, priv = 0;
  for (std::string line; std::getline(rollup, line);) {
    std::istringstream fields(line);
    std::string key;
    double kib = 0;
    if (!(fields >> key >> kib)) continue;  // the first line names the range
    if (key == "Pss:") pss = kib;
    if (key == "Private_Clean:" || key == "Private_Dirty:") priv += kib;
  }
  return {pss / 1024.0, priv / 1024.0};
}

// One rank's record, as run_benchmarks.py reads it: the median step and memory now.
inline void print_rank_record(const std::string& workload, long long rank, const std::vector<double>& step_ms) {
  const auto [pss, priv] = pss_and_private_mib();
  std::printf(
      "{\"mode\": \"rank\", \"impl\": \"spur\", \"workload\": \"%s\", \"rank\": %lld, \"median_ms\": %.4f, "
      "\"peak_rss_mib\": %.1f, \"pss_mib\": %.1f, \"private_mib\": %.1f}\n",
      workload.c_str(), rank, median(step_ms), peak_rss_mib(), pss, priv);
  std::fflush(stdout);
}

}  // namespace spur::bench
