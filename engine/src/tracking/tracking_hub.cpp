// SPDX-License-Identifier: Apache-2.0
// The tracking writer; see tracking_hub.h. A tracker that fails keeps its records in a bounded backlog and is
// retried at the next delivery: a locked, read-only or full history never stops training.
#include "tracking/tracking_hub.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include <spur/history/records.h>

namespace spur::detail {

std::string own_command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (auto& c : raw) {
    if (c == '\0') c = ' ';
  }
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

TrackingHub::TrackingHub(TrackingRun run, std::vector<std::shared_ptr<Tracker>> trackers,
                         const TrackingOptions& options)
    : run_(std::move(run)), interval_(options.flush_interval), max_backlog_(options.max_backlog) {
  for (auto& tracker : trackers) {
    Slot slot;
    slot.tracker = std::move(tracker);
    slots_.push_back(std::move(slot));
  }
  if (run_.total_steps > 0) total_steps_ = run_.total_steps;
  thread_ = std::thread([this] { loop(); });
}

TrackingHub::~TrackingHub() { finish("finished"); }

uint32_t TrackingHub::key_id(std::string_view key) {
  for (const auto& [name, id] : lookup_) {
    if (name == key) return id;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const auto id = static_cast<uint32_t>(keys_.size());
  keys_.emplace_back(key);
  lookup_.emplace_back(std::string(key), id);
  return id;
}

void TrackingHub::log(const std::pair<std::string_view, double>* values, std::size_t count, int64_t step) {
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  uint32_t ids[16];
  const bool small = count <= 16;
  if (small) {
    for (std::size_t i = 0; i < count; ++i) ids[i] = key_id(values[i].first);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < count; ++i) {
    // Rare: more than 16 values in one call; key_id takes the lock itself, so release it around the lookup.
    uint32_t id = 0;
    if (small) {
      id = ids[i];
    } else {
      lock.unlock();
      id = key_id(values[i].first);
      lock.lock();
    }
    // After the end, or while the writer is stuck (a tracker blocked on a lock or a full pipe), values are
    // counted, not queued without bound.
    if (stop_ || pending_.size() >= std::max<std::size_t>(max_backlog_, std::size_t{1} << 22)) {
      ++dropped_pending_;
      continue;
    }
    pending_.push_back(MetricRecord{id, step, values[i].second, wall});
  }
  last_step_ = std::max(last_step_, step);
}

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

void TrackingHub::log_file(FileRecord file) {
  file.wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mutex_);
  file.step = last_step_;
  if (stop_ || pending_files_.size() >= max_backlog_) {
    ++dropped_pending_;
    return;
  }
  pending_files_.push_back(std::move(file));
}

void TrackingHub::log_text(std::string_view key, std::string_view text, int64_t step) {
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  TextRecord record{std::string(key), std::string(text), step, wall};
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_ || pending_texts_.size() >= max_backlog_) {
    ++dropped_pending_;
    return;
  }
  pending_texts_.push_back(std::move(record));
}

void TrackingHub::set_total_steps(int64_t total_steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  total_steps_ = total_steps;
}

void TrackingHub::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (finished_) return;
  const uint64_t ticket = ++requested_;
  wake_.notify_one();
  flushed_.wait(lock, [&] { return delivered_ >= ticket || finished_; });
}

void TrackingHub::finish(const std::string& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    stop_ = true;
    final_status_ = status;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (dropped_pending_) {
    std::cerr
        << "spur: tracking: " << dropped_pending_
        << " logged value(s) were not recorded (logged after end_training, or while the trackers could not keep up)"
        << std::endl;
  }
  for (auto& slot : slots_) {
    const auto left = slot.backlog.size() + slot.text_backlog.size();
    if (slot.dropped || left) {
      std::cerr << "spur: tracking: " << slot.tracker->name() << ": " << (slot.dropped + left)
                << " logged value(s) could not be recorded (" << slot.error << ")" << std::endl;
    }
  }
}

void TrackingHub::loop() {
  std::vector<MetricRecord> batch;
  std::vector<TextRecord> texts;
  std::vector<FileRecord> files;
  std::vector<std::string> keys;
  for (;;) {
    int64_t total = -1;
    uint64_t ticket = 0;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, interval_, [&] { return stop_ || requested_ > delivered_; });
      batch.swap(pending_);
      texts.swap(pending_texts_);
      files.swap(pending_files_);
      if (keys.size() != keys_.size()) keys = keys_;
      total = total_steps_;
      total_steps_ = -1;
      ticket = requested_;
      stopping = stop_;
    }
    deliver(batch, texts, files, keys, total);
    batch.clear();
    texts.clear();
    files.clear();
    if (stopping) {
      // The run's last values wait for a history that another process is writing (several launches at once),
      // for up to a minute, rather than being dropped.
      using namespace std::chrono_literals;
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      for (auto pause = 50ms; std::chrono::steady_clock::now() < deadline;
           pause = std::min<std::chrono::milliseconds>(pause * 2, 1s)) {
        const bool waiting = std::any_of(slots_.begin(), slots_.end(), [](const Slot& slot) {
          return slot.busy &&
                 (!slot.backlog.empty() || !slot.text_backlog.empty() || !slot.file_backlog.empty() || !slot.started);
        });
        if (!waiting) break;
        std::this_thread::sleep_for(pause);
        deliver(batch, texts, files, keys, -1);
      }
      for (auto& slot : slots_) {
        try {
          if (slot.started) slot.tracker->finish(final_status_);
        } catch (const std::exception& e) {
          slot.error = e.what();
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
      delivered_ = ticket;
      flushed_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    delivered_ = ticket;
    flushed_.notify_all();
  }
}

void TrackingHub::deliver(std::vector<MetricRecord>& batch, std::vector<TextRecord>& texts,
                          std::vector<FileRecord>& files, const std::vector<std::string>& keys, int64_t total_steps) {
  for (auto& slot : slots_) {
    std::vector<MetricRecord>* records = &batch;
    if (!slot.backlog.empty()) {
      slot.backlog.insert(slot.backlog.end(), batch.begin(), batch.end());
      records = &slot.backlog;
    }
    // Texts are rare: each slot keeps its own copy until its tracker took them.
    slot.text_backlog.insert(slot.text_backlog.end(), texts.begin(), texts.end());
    slot.file_backlog.insert(slot.file_backlog.end(), files.begin(), files.end());
    bool written = false;
    try {
      if (!slot.started) {
        TrackingRun run = run_;
        slot.tracker->start(run);
        slot.started = true;
      }
      if (total_steps >= 0) slot.tracker->set_total_steps(total_steps);
      if (!records->empty()) slot.tracker->write(MetricBatch{keys, *records});
      slot.backlog.clear();
      written = true;
      if (!slot.text_backlog.empty()) slot.tracker->write_text(slot.text_backlog);
      slot.text_backlog.clear();
      if (!slot.file_backlog.empty()) slot.tracker->write_files(slot.file_backlog);
      slot.file_backlog.clear();
      slot.busy = false;
      if (slot.warned) {
        std::cerr << "spur: tracking: " << slot.tracker->name() << " writes again" << std::endl;
        slot.warned = false;
      }
    } catch (const std::exception& e) {
      slot.error = e.what();
      const auto* history_error = dynamic_cast<const history::HistoryError*>(&e);
      slot.busy = history_error && history_error->busy();
      if (records == &batch && !written) slot.backlog = batch;
      if (slot.backlog.size() > max_backlog_) {
        const auto excess = slot.backlog.size() - max_backlog_;
        slot.backlog.erase(slot.backlog.begin(), slot.backlog.begin() + static_cast<std::ptrdiff_t>(excess));
        slot.dropped += excess;
      }
      if (slot.file_backlog.size() > max_backlog_) {
        slot.dropped += slot.file_backlog.size() - max_backlog_;
        slot.file_backlog.resize(max_backlog_);
      }
      if (slot.text_backlog.size() > max_backlog_) {
        const auto excess = slot.text_backlog.size() - max_backlog_;
        slot.text_backlog.erase(slot.text_backlog.begin(),
                                slot.text_backlog.begin() + static_cast<std::ptrdiff_t>(excess));
        slot.dropped += excess;
      }
      if (!slot.warned) {
        std::cerr << "spur: tracking: " << slot.tracker->name() << " cannot write (" << e.what()
                  << "); training goes on, keeping up to " << max_backlog_ << " values and retrying" << std::endl;
        slot.warned = true;
      }
    }
  }
}

}  // namespace spur::detail
