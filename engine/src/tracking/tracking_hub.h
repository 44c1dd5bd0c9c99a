// SPDX-License-Identifier: Apache-2.0
// TrackingHub: takes logged values on the training thread (a mutex-guarded append, no I/O) and hands them to
// the trackers on its own writer thread every flush interval. Internal to the engine.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <spur/tracking.h>

namespace spur::detail {

/// This program's command line (/proc/self/cmdline, its arguments joined with spaces): what the trackers record as
/// the run's command.
std::string own_command_line();
/// This machine's name (gethostname): where the files a tracker records are.
std::string this_host();

class TrackingHub {
 public:
  TrackingHub(TrackingRun run, std::vector<std::shared_ptr<Tracker>> trackers, const TrackingOptions& options);
  ~TrackingHub();
  TrackingHub(const TrackingHub&) = delete;
  TrackingHub& operator=(const TrackingHub&) = delete;

  /// Training thread: queue values (their wall time is now).
  void log(const std::pair<std::string_view, double>* values, std::size_t count, int64_t step);
  /// Training thread: queue a text (its wall time is now).
  void log_text(std::string_view key, std::string_view text, int64_t step);
  void set_total_steps(int64_t total_steps);
  /// Training thread: queue a file written (its step is the last logged one, its wall time now).
  void log_file(FileRecord file);
  /// Delivers everything queued, finishes the trackers with `status` and stops the writer; idempotent.
  void finish(const std::string& status);
  /// Waits until everything queued before the call was handed to the trackers.
  void flush();

 private:
  struct Slot {
    std::shared_ptr<Tracker> tracker;
    bool started = false;
    std::vector<MetricRecord> backlog;
    std::vector<TextRecord> text_backlog;
    std::vector<FileRecord> file_backlog;
    uint64_t dropped = 0;
    bool warned = false;
    std::string error;
    bool busy = false;  // the last failure was a history busy with another process's writes
  };

  uint32_t key_id(std::string_view key);
  void loop();
  void deliver(std::vector<MetricRecord>& batch, std::vector<TextRecord>& texts, std::vector<FileRecord>& files,
               const std::vector<std::string>& keys, int64_t total_steps);

  TrackingRun run_;
  std::chrono::milliseconds interval_;
  std::size_t max_backlog_;
  std::vector<Slot> slots_;
  // Training thread only: key lookups without allocating.
  std::vector<std::pair<std::string, uint32_t>> lookup_;

  std::mutex mutex_;
  std::condition_variable wake_, flushed_;
  std::vector<MetricRecord> pending_;
  std::vector<TextRecord> pending_texts_;
  std::vector<FileRecord> pending_files_;
  int64_t last_step_ = -1;  // the last step logged
  std::vector<std::string> keys_;
  int64_t total_steps_ = -1;  // -1: unchanged since the last delivery
  uint64_t requested_ = 0, delivered_ = 0;
  bool stop_ = false, finished_ = false;
  uint64_t dropped_pending_ = 0;
  std::string final_status_ = "finished";
  std::thread thread_;
};

}  // namespace spur::detail
