// SPDX-License-Identifier: Apache-2.0
// SystemSampler: what a run costs the machine, sampled by the launcher (every second by default) and recorded in
// the history as series under "system/": each rank's CPU use ("system/rank0/cpu_percent": 100 is one core) and
// resident memory ("system/rank0/rss_mib"), read from /proc/PID/stat and /proc/PID/statm (the rank's process and
// its threads, as top counts them), and for each GPU its utilisation, memory used and power
// ("system/gpu0/utilization_percent", ".../memory_mib", ".../power_w", numbered as nvidia-smi numbers them) through
// NVML, loaded at run time from libnvidia-ml.so.1 when the driver has one (nothing links it; without it there are
// no GPU series). Only the GPUs the run may use are read: those CUDA_VISIBLE_DEVICES lists (indices or GPU-
// UUIDs, up to the first entry that names no device, as CUDA reads it), or every GPU when it is not set; none for a
// run on CPUs. Indices are NVML's (PCI bus order, as nvidia-smi's): they are CUDA's too with
// CUDA_DEVICE_ORDER=PCI_BUS_ID, or on machines whose GPUs are all of one model. MIG instances are not read.
// NVML is called on the sampler's own thread, never the caller's: loading it can take seconds (a driver without
// persistence mode) and a wedged driver never returns. sample() asks that thread for a reading and waits up to
// 100 ms for it; a reading not back by then is dropped, and while one is still out sample() neither asks nor
// waits, so a stuck driver shows as a gap in the GPU series and the ranks' own series go on.
// Threads: sample() and has_gpus() one at a time (the launcher's event loop); the GPU thread is internal.
#pragma once

#include <QString>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace spur::app {

struct SystemValue {
  QString key;
  double value = 0;
};

/// Reads every GPU's values once (on the sampler's GPU thread). Its first call may load what it needs; an empty
/// result from the first call means there are no GPUs, and it is not called again.
using GpuReader = std::function<std::vector<SystemValue>()>;

class SystemSampler {
 public:
  /// `gpus`: sample GPUs through NVML (when it loads). Default: true. `visible_devices`: the run's
  /// CUDA_VISIBLE_DEVICES (indices or UUIDs, comma-separated; empty: no GPU); unset: every GPU.
  explicit SystemSampler(bool gpus = true, const std::optional<QString>& visible_devices = std::nullopt);
  /// GPUs read by `gpus` instead of NVML (a test's stand-in for a driver).
  explicit SystemSampler(GpuReader gpus);
  /// Waits up to a second for a GPU reading under way; a thread still in the driver then is left (to the process's
  /// end).
  ~SystemSampler();
  SystemSampler(const SystemSampler&) = delete;
  SystemSampler& operator=(const SystemSampler&) = delete;

  /// The values now for these (rank, pid) pairs. A rank's CPU % needs two samples: its first sample has only its
  /// memory. A pid that is gone is left out.
  std::vector<SystemValue> sample(const std::vector<std::pair<int, qint64>>& ranks);
  /// Whether GPU values may come: NVML is still loading, or it loaded and found at least one GPU.
  bool has_gpus() const;

 private:
  struct Cpu {
    double seconds = 0;  // user + system time of the process
    double wall = 0;     // when it was read
  };
  std::map<qint64, Cpu> last_;
  struct Gpus;  // shared with the GPU thread, which may outlive the sampler
  std::shared_ptr<Gpus> gpus_;
};

}  // namespace spur::app
