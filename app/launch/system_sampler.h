// SPDX-License-Identifier: Apache-2.0
// SystemSampler: what a run costs the machine, sampled by the launcher (every second by default) and recorded in
// the history as series under "system/": each rank's CPU use ("system/rank0/cpu_percent": 100 is one core) and
// resident memory ("system/rank0/rss_mib"), read from /proc/PID/stat and /proc/PID/statm (the rank's process and
// its threads, as top counts them), and for each GPU its utilisation, memory used and power
// ("system/gpu0/utilization_percent", ".../memory_mib", ".../power_w") through NVML, loaded at run time from
// libnvidia-ml.so.1 when the driver has one (nothing links it; without it there are no GPU series).
// Threads: one at a time (the launcher's event loop).
#pragma once

#include <QString>

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace spur::app {

struct SystemValue {
  QString key;
  double value = 0;
};

class SystemSampler {
 public:
  /// `gpus`: sample GPUs through NVML (when it loads). Default: true.
  explicit SystemSampler(bool gpus = true);
  ~SystemSampler();
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  /// The values now for these (rank, pid) pairs. A rank's CPU % needs two samples: its first sample has only its
  /// memory. A pid that is gone is left out.
  std::vector<SystemValue> sample(const std::vector<std::pair<int, qint64>>& ranks);
  /// Whether NVML loaded and found at least one GPU.
  bool has_gpus() const;

 private:
  struct Cpu {
    double seconds = 0;  // user + system time of the process
    double wall = 0;     // when it was read
  };
  std::map<qint64, Cpu> last_;
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
};

}  // namespace spur::app
