// SPDX-License-Identifier: Apache-2.0
// The progress file's writer and reader; see progress_file.h.
#include <spur/core/progress_file.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

namespace spur::progress {
namespace {

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void* map(const std::string& path, bool writable) {
  const int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return nullptr;
  struct stat info {};
  void* mapping = MAP_FAILED;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size >= static_cast<off_t>(sizeof(Record))) {
    mapping = ::mmap(nullptr, sizeof(Record), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  return mapping == MAP_FAILED ? nullptr : mapping;
}

}  // namespace

Writer& Writer::instance() {
  static Writer writer;  // never destroyed before the program's last operation: the mapping simply stays
  return writer;
}

Writer::Writer() {
  const char* path = std::getenv("SPUR_PROGRESS_FILE");
  if (!path || !*path) return;
  record_ = static_cast<Record*>(map(path, true));
  if (!record_) return;
  record_->step.store(0, std::memory_order_relaxed);
  record_->activity.fetch_add(1, std::memory_order_relaxed);
  record_->magic.store(kMagic, std::memory_order_release);
}

void Writer::publish() {
  // Under mutex_. The name, innermost first ("all-reduce in backward"), cut at kMaxOp bytes; no allocation.
  char text[sizeof(Record::op)] = {};
  std::size_t length = 0;
  const auto append = [&](const char* part) {
    for (; *part && length < kMaxOp; ++part) text[length++] = *part;
  };
  for (int i = std::min(depth_, kDepth) - 1; i >= 0; --i) {
    if (!stack_[i]) continue;
    if (length > 0) append(" in ");
    append(stack_[i]);
  }
  // A sequence lock with one writer (mutex_): odd while rewriting. The fence keeps the stores below from being
  // seen before the odd number; the release store publishes them with the even one.
  const uint64_t sequence = record_->sequence.load(std::memory_order_relaxed);
  record_->sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < sizeof(Record::op) / sizeof(uint64_t); ++i) {
    uint64_t word;
    std::memcpy(&word, text + i * sizeof(uint64_t), sizeof word);
    record_->op[i].store(word, std::memory_order_relaxed);
  }
  record_->op_since.store(depth_ > 0 ? since_[0] : 0, std::memory_order_relaxed);
  record_->sequence.store(sequence + 2, std::memory_order_release);
  record_->activity.fetch_add(1, std::memory_order_relaxed);
}

int Writer::enter(const char* op) {
  if (!record_) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const int before = depth_;
  if (depth_ < kDepth) {
    stack_[depth_] = op;
    since_[depth_] = now_ns();
  }
  ++depth_;
  // Deeper than kDepth: counted as activity, not named.
  if (before < kDepth) publish();
  return before;
}

void Writer::leave(int depth) {
  if (!record_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  depth_ = depth;
  publish();
}

void Writer::step() {
  if (!record_) return;
  record_->step.fetch_add(1, std::memory_order_relaxed);
  record_->activity.fetch_add(1, std::memory_order_relaxed);
}

Reader::Reader(const std::string& path) : record_(static_cast<const Record*>(map(path, false))) {}

Reader::~Reader() {
  if (record_) ::munmap(const_cast<Record*>(record_), sizeof(Record));
}

std::optional<Snapshot> Reader::read() const {
  if (!record_ || record_->magic.load(std::memory_order_acquire) != kMagic) return std::nullopt;
  Snapshot snapshot;
  char text[sizeof(Record::op) + 1] = {};
  bool consistent = false;
  for (int attempt = 0; attempt < 1000 && !consistent; ++attempt) {
    const uint64_t before = record_->sequence.load(std::memory_order_acquire);
    if (before % 2) {
      std::this_thread::yield();
      continue;
    }
    for (std::size_t i = 0; i < sizeof(Record::op) / sizeof(uint64_t); ++i) {
      const uint64_t word = record_->op[i].load(std::memory_order_relaxed);
      std::memcpy(text + i * sizeof(uint64_t), &word, sizeof word);
    }
    snapshot.op_since = record_->op_since.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    consistent = record_->sequence.load(std::memory_order_relaxed) == before;
  }
  if (!consistent) return std::nullopt;  // the launcher asks again next time
  text[kMaxOp] = '\0';
  snapshot.op = text;
  snapshot.activity = record_->activity.load(std::memory_order_relaxed);
  snapshot.step = record_->step.load(std::memory_order_relaxed);
  return snapshot;
}

bool create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  const bool ok = ::ftruncate(fd, sizeof(Record)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace spur::progress
