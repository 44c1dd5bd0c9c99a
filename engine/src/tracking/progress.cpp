// SPDX-License-Identifier: Apache-2.0
// The terminal progress bar; see progress.h. Redrawn at most ten times a second.
#include <spur/progress.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace spur {
namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(text, sizeof(text), "%02lld:%02lld", s / 60, s % 60);
  }
  return text;
}

}  // namespace

ProgressBar::ProgressBar(int64_t total, std::string description, bool enabled)
    : total_(total),
      description_(std::move(description)),
      shown_(enabled && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (shown_) draw(false);
}

ProgressBar::~ProgressBar() { close(); }

void ProgressBar::update(int64_t n) {
  count_ += n;
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= std::chrono::milliseconds(100) || (total_ > 0 && count_ >= total_)) draw(false);
}

void ProgressBar::set_postfix(std::string text) { postfix_ = std::move(text); }

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (shown_) draw(true);
}

void ProgressBar::draw(bool final) {
  last_draw_ = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(count_) / elapsed : 0;
  std::string line = "\r" + (description_.empty() ? std::string() : description_ + ": ");
  if (total_ > 0) {
    const double fraction = std::min(1.0, static_cast<double>(count_) / static_cast<double>(total_));
    const int width = 30, filled = static_cast<int>(fraction * width);
    char head[16];
    std::snprintf(head, sizeof(head), "%3d%%|", static_cast<int>(fraction * 100));
    line += head + std::string(static_cast<size_t>(filled), '#') +
            std::string(static_cast<size_t>(width - filled), ' ') + "| " + std::to_string(count_) + "/" +
            std::to_string(total_);
    const double left = rate > 0 ? static_cast<double>(total_ - count_) / rate : 0;
    line += " [" + clock_text(elapsed) + "<" + clock_text(left);
  } else {
    line += std::to_string(count_) + " [" + clock_text(elapsed);
  }
  char speed[32];
  std::snprintf(speed, sizeof(speed), ", %.2f it/s]", rate);
  line += speed;
  if (!postfix_.empty()) line += " " + postfix_;
  line += "\x1b[K";  // clear what a longer previous line left
  if (final) line += "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace spur
