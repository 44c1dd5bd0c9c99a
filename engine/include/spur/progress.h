// SPDX-License-Identifier: Apache-2.0
// ProgressBar: a tqdm-like bar on stderr for training loops, shown by one process per machine (pass
// accelerator.is_local_main_process()) and only when stderr is a terminal, so logs stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace spur {

class ProgressBar {
 public:
  /// `total` 0: unknown (counts without a bar).
  ProgressBar(int64_t total, std::string description = {}, bool enabled = true);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t n = 1);
  /// Text after the bar, such as "loss=0.31".
  void set_postfix(std::string text);
  /// Draws the final state and moves to the next line.
  void close();
  int64_t count() const { return count_; }
  bool shown() const { return shown_; }

 private:
  void draw(bool final);

  int64_t total_;
  int64_t count_ = 0;
  std::string description_;
  std::string postfix_;
  bool shown_;
  bool closed_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace spur
