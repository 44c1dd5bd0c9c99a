// SPDX-License-Identifier: Apache-2.0
// The progress file: how a rank tells the launcher watching it for hangs (`spur launch --hang_timeout S`) what it
// is doing. The launcher creates one small file per rank and names it in SPUR_PROGRESS_FILE; the rank maps it
// and updates it with atomic stores only (no system call per step: the cost is a few stores per operation); the
// launcher maps it read-only and reads it about once a second. Torch-free: the engine writes it, app/ reads it.
//
// Threads: one Writer per process (the engine's), written by the threads that train (collectives may run on
// any); a reader in another process may read at any time and sees a consistent operation name (a sequence lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace spur::progress {

/// The file's layout: 128 bytes at offset 0, native byte order (writer and reader run on one machine).
struct Record {
  std::atomic<uint64_t> magic;     // kMagic once a rank has attached
  std::atomic<uint64_t> activity;  // changes at every operation's start and end and at every step
  std::atomic<int64_t> step;       // optimizer steps taken by this process
  std::atomic<uint64_t> sequence;  // odd while `op` is being rewritten
  std::atomic<int64_t> op_since;   // when the current operation began (ns, CLOCK_REALTIME); 0 in the program's code
  std::atomic<uint64_t> op[10];    // the operation's name, NUL-padded: "" while in the program's own code
  std::atomic<uint64_t> reserved;
};
static_assert(sizeof(Record) == 128, "the progress file's layout is fixed");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the record is shared between processes");
inline constexpr uint64_t kMagic = 0x3130676f72507053ULL;  // "SpProg01"
inline constexpr std::size_t kMaxOp = sizeof(Record::op) - 1;

/// What a reader sees.
struct Snapshot {
  uint64_t activity = 0;
  int64_t step = 0;
  std::string op;        // "" in the program's own code
  int64_t op_since = 0;  // ns since the epoch (CLOCK_REALTIME), 0 with no operation
};

/// The rank's side. Inactive (every call a no-op) unless SPUR_PROGRESS_FILE names a file the launcher made.
class Writer {
 public:
  /// The process's writer: attached to SPUR_PROGRESS_FILE on first use, if set.
  static Writer& instance();
  bool active() const { return record_ != nullptr; }
  /// Enters `op` (a string literal; nested operations show as "inner in outer"); returns the depth before it,
  /// for leave().
  int enter(const char* op);
  void leave(int depth);
  /// One more optimizer step taken.
  void step();

 private:
  Writer();
  void publish();

  Record* record_ = nullptr;
  static constexpr int kDepth = 4;
  std::mutex mutex_;  // the stack: collectives may be entered from autograd's threads too
  const char* stack_[kDepth] = {};
  int64_t since_[kDepth] = {};  // when each was entered: the report times the outermost
  int depth_ = 0;
};

/// Enters an operation for its lifetime.
class Scope {
 public:
  explicit Scope(const char* op) : depth_(Writer::instance().enter(op)) {}
  ~Scope() { Writer::instance().leave(depth_); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  int depth_;
};

/// The launcher's side: maps `path` read-only. Empty until the rank has attached (or when the file is not one).
class Reader {
 public:
  explicit Reader(const std::string& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  /// Empty when nothing is attached, or (rarely) when the rank rewrote the name on every try.
  std::optional<Snapshot> read() const;

 private:
  const Record* record_ = nullptr;
};

/// Creates (or empties) a progress file of the right size, mode 0600. Returns false with errno set on failure.
bool create_file(const std::string& path);

}  // namespace spur::progress
