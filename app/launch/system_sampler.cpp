// SPDX-License-Identifier: Apache-2.0
// Sampling what a run costs the machine; see system_sampler.h. NVML's entry points are declared here with the
// types nvml.h gives them (a handle is an opaque pointer; utilisation two unsigned ints; memory three unsigned
// long longs in bytes; power an unsigned int in milliwatts), so no NVML header or library is needed to build.
#include "launch/system_sampler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <QString>
#include <QStringList>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace spur::app {
namespace {

// A small /proc file, read with POSIX calls (a process that ends meanwhile is a failed read, not an exception).
std::string read_proc(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buffer[4096];
  const ssize_t got = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : std::string();
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

namespace {

struct Nvml {
  using Handle = void*;
  void* library = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, Handle*) = nullptr;
  int (*utilization)(Handle, unsigned*) = nullptr;       // nvmlUtilization_t: {gpu, memory}
  int (*memory)(Handle, unsigned long long*) = nullptr;  // nvmlMemory_t: {total, free, used}
  int (*power)(Handle, unsigned*) = nullptr;
  int (*by_uuid)(const char*, Handle*) = nullptr;
  int (*index_of)(Handle, unsigned*) = nullptr;
  std::vector<unsigned> indices;  // the devices read: the run's (CUDA_VISIBLE_DEVICES), or every one
  bool initialised = false;

  /// `visible`: CUDA_VISIBLE_DEVICES' entries (empty: every device).
  bool load(const QStringList& visible) {
    library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) return false;
    auto find = [this](const char* name) { return ::dlsym(library, name); };
    init = reinterpret_cast<int (*)()>(find("nvmlInit_v2"));
    shutdown = reinterpret_cast<int (*)()>(find("nvmlShutdown"));
    count = reinterpret_cast<int (*)(unsigned*)>(find("nvmlDeviceGetCount_v2"));
    handle = reinterpret_cast<int (*)(unsigned, Handle*)>(find("nvmlDeviceGetHandleByIndex_v2"));
    utilization = reinterpret_cast<int (*)(Handle, unsigned*)>(find("nvmlDeviceGetUtilizationRates"));
    memory = reinterpret_cast<int (*)(Handle, unsigned long long*)>(find("nvmlDeviceGetMemoryInfo"));
    power = reinterpret_cast<int (*)(Handle, unsigned*)>(find("nvmlDeviceGetPowerUsage"));
    by_uuid = reinterpret_cast<int (*)(const char*, Handle*)>(find("nvmlDeviceGetHandleByUUID"));
    index_of = reinterpret_cast<int (*)(Handle, unsigned*)>(find("nvmlDeviceGetIndex"));
    if (!init || !shutdown || !count || !handle || init() != 0) return false;
    initialised = true;
    unsigned devices = 0;
    if (count(&devices) != 0) devices = 0;
    if (visible.isEmpty()) {
      for (unsigned i = 0; i < devices; ++i) indices.push_back(i);
    }
    // As CUDA reads the list: indices or UUIDs (GPU-...), up to the first entry that names no device (CUDA
    // ignores the rest), each device once.
    for (const auto& entry : visible) {
      bool number = false;
      unsigned index = entry.toUInt(&number);
      if (!number) {
        Handle device = nullptr;
        if (!entry.startsWith("GPU-") || !by_uuid || !index_of || by_uuid(entry.toUtf8().constData(), &device) != 0 ||
            index_of(device, &index) != 0) {
          break;
        }
      }
      if (index >= devices || std::find(indices.begin(), indices.end(), index) != indices.end()) break;
      indices.push_back(index);
    }
    return !indices.empty();
  }
  std::vector<SystemValue> read() const {
    std::vector<SystemValue> values;
    for (const unsigned i : indices) {
      Handle device = nullptr;
      if (handle(i, &device) != 0) continue;
      const QString prefix = QString("system/gpu%1/").arg(i);
      unsigned rates[2] = {};
      if (utilization && utilization(device, rates) == 0) {
        values.push_back({prefix + "utilization_percent", static_cast<double>(rates[0])});
      }
      unsigned long long bytes[3] = {};
      if (memory && memory(device, bytes) == 0) {
        values.push_back({prefix + "memory_mib", static_cast<double>(bytes[2]) / (1024.0 * 1024.0)});
      }
      unsigned milliwatts = 0;
      if (power && power(device, &milliwatts) == 0) values.push_back({prefix + "power_w", milliwatts / 1000.0});
    }
    return values;
  }
  ~Nvml() {
    if (library) {
      if (initialised) shutdown();
      ::dlclose(library);
    }
  }
};

// NVML as a GpuReader: loaded on the first call (on the GPU thread); no values when it does not load.
GpuReader nvml_reader(const QStringList& visible) {
  return [nvml = std::shared_ptr<Nvml>(), tried = false, visible]() mutable -> std::vector<SystemValue> {
    if (!tried) {
      tried = true;
      auto loaded = std::make_shared<Nvml>();
      if (loaded->load(visible)) nvml = std::move(loaded);
    }
    return nvml ? nvml->read() : std::vector<SystemValue>();
  };
}

}  // namespace

// How long sample() waits for the reading it asks for, and the destructor for a reading under way: a driver that
// answers in time is waited for; one that does not is left (the next samples do not wait while it is out).
constexpr auto kReadingWait = std::chrono::milliseconds(100);
constexpr auto kEndWait = std::chrono::seconds(1);

// The GPU thread's side: it waits for a request, reads, and leaves the values for sample().
struct SystemSampler::Gpus {
  std::mutex mutex;
  std::condition_variable wake;  // a request, or the end
  std::condition_variable done;  // a reading is back, or the thread has ended
  bool asked = false;            // a reading is asked for or under way
  bool ending = false;           // the sampler is going
  bool none = false;             // the first reading found no GPUs
  bool ended = false;            // the thread has returned
  std::vector<SystemValue> values;
  std::thread thread;

  void run(const GpuReader& reader) {
    bool first = true;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [this] { return asked || ending; });
        if (ending) return;
      }
      auto got = reader();  // no lock held: the driver may take its time
      std::lock_guard lock(mutex);
      asked = false;
      if (first && got.empty()) {
        none = true;
        return;
      }
      first = false;
      values = std::move(got);
      done.notify_all();
    }
  }
};

namespace {

// No reader for a run on CPUs, or one whose CUDA_VISIBLE_DEVICES lists no GPU.
GpuReader gpu_reader(bool gpus, const std::optional<QString>& visible) {
  if (!gpus || (visible && visible->trimmed().isEmpty())) return {};
  QStringList entries;
  if (visible) {
    for (const auto& entry : visible->split(',')) entries << entry.trimmed();
  }
  return nvml_reader(entries);
}

}  // namespace

SystemSampler::SystemSampler(bool gpus, const std::optional<QString>& visible_devices)
    : SystemSampler(gpu_reader(gpus, visible_devices)) {}

SystemSampler::SystemSampler(GpuReader gpus) {
  if (!gpus) return;
  gpus_ = std::make_shared<Gpus>();
  gpus_->asked = true;  // the first reading (and NVML's loading) starts now, not at the first sample
  gpus_->thread = std::thread([state = gpus_, reader = std::move(gpus)]() {
    state->run(reader);
    std::lock_guard lock(state->mutex);
    state->ended = true;
    state->done.notify_all();
  });
}

SystemSampler::~SystemSampler() {
  if (!gpus_) return;
  std::unique_lock lock(gpus_->mutex);
  gpus_->ending = true;
  gpus_->wake.notify_all();
  // A reading under way is given a moment; a thread still inside the driver after it is left (it holds its own
  // reference to the state), so a wedged driver does not hold up the launcher's end.
  const bool ended = gpus_->done.wait_for(lock, kEndWait, [this] { return gpus_->ended; });
  lock.unlock();
  if (ended) {
    gpus_->thread.join();
  } else {
    gpus_->thread.detach();
  }
}

bool SystemSampler::has_gpus() const {
  if (!gpus_) return false;
  std::lock_guard lock(gpus_->mutex);
  return !gpus_->none;
}

std::vector<SystemValue> SystemSampler::sample(const std::vector<std::pair<int, qint64>>& ranks) {
  std::vector<SystemValue> values;
  static const auto ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  static const auto page_mib = static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
  std::map<qint64, Cpu> seen;
  for (const auto& [rank, pid] : ranks) {
    const std::string stat = read_proc("/proc/" + std::to_string(pid) + "/stat");
    const std::string statm = read_proc("/proc/" + std::to_string(pid) + "/statm");
    // stat: "pid (comm) state ..."; comm may hold spaces and parentheses, so fields count from the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos || statm.empty()) continue;
    unsigned long long utime = 0, stime = 0;
    char state = 0;
    // After ')': state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15).
    if (std::sscanf(stat.c_str() + close + 1, " %c %*d %*d %*d %*d %*d %*u %*llu %*llu %*llu %*llu %llu %llu", &state,
                    &utime, &stime) != 3) {
      continue;
    }
    // A rank that has exited and is not reaped yet (a zombie) has no memory left to report: its 0 MiB is not a sample
    // (one sampled at that instant failed SystemMetricsTest in a cold CI run).
    if (state == 'Z' || state == 'X' || state == 'x') continue;
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(statm.c_str(), "%llu %llu", &size, &resident) != 2 || size == 0) continue;
    const QString prefix = QString("system/rank%1/").arg(rank);
    Cpu cpu{static_cast<double>(utime + stime) / ticks, now_seconds()};
    const auto before = last_.find(pid);
    if (before != last_.end() && cpu.wall > before->second.wall) {
      const double percent = (cpu.seconds - before->second.seconds) / (cpu.wall - before->second.wall) * 100.0;
      values.push_back({prefix + "cpu_percent", percent < 0 ? 0 : percent});
    }
    values.push_back({prefix + "rss_mib", static_cast<double>(resident) * page_mib});
    seen[pid] = cpu;
  }
  last_ = std::move(seen);
  if (gpus_) {
    std::unique_lock lock(gpus_->mutex);
    // A reading still out (NVML loading, or a driver that did not answer) is not asked again or waited for.
    if (!gpus_->asked && !gpus_->ended) {
      gpus_->asked = true;
      gpus_->values.clear();
      gpus_->wake.notify_all();
      const bool back = gpus_->done.wait_for(lock, kReadingWait, [this] { return !gpus_->asked || gpus_->ended; });
      if (back && !gpus_->asked) values.insert(values.end(), gpus_->values.begin(), gpus_->values.end());
    }
  }
  return values;
}

}  // namespace spur::app
