// SPDX-License-Identifier: Apache-2.0
// The shared-memory all-reduce; see shm_allreduce.h. Segment layout: a header (magic, rank count, then per rank
// on its own cache line: the pid, the "arrived" and the "reduced" counters), then two buffers of (ranks + 1)
// chunk slots: each rank's input slot and the shared output slot.
#include "distributed/shm_allreduce.h"
#include "distributed/communicator.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sched.h>
#include <thread>

#include <spur/error.h>

namespace spur::detail {
namespace {

constexpr uint64_t kMagic = 0x7370757273686d31ull;  // "spurshm1"
constexpr std::size_t kLine = 64;
constexpr int kMaxRanks = 1024;

// Per-rank fields, one cache line each, after the 64-byte header proper. kCall holds what the rank is reducing
// (its call count, the tensor's elements and element size), compared by every rank at each chunk.
enum Field : std::size_t { kPid = 0, kArrived = 1, kReduced = 2, kCall = 3, kFields = 4 };
// Set in a rank's kPid field when it leaves on purpose (mark_left).
constexpr uint64_t kLeftBit = uint64_t{1} << 63;
// In the header's line, after magic and size: 1 + the global rank that failed beyond this machine (fail_members).
constexpr std::size_t kFailedOffset = 16;
// What a member's call does, beside its element size in the kCall description: ranks must agree on it too.
constexpr uint64_t kBroadcastBit = uint64_t{1} << 40;

std::size_t field_offset(int size, Field field, int rank) {
  return kLine +
         (static_cast<std::size_t>(field) * static_cast<std::size_t>(size) + static_cast<std::size_t>(rank)) * kLine;
}

std::size_t data_offset(int size) {
  const std::size_t end = field_offset(size, kFields, 0);
  return (end + 4095) / 4096 * 4096;
}

std::size_t segment_bytes(int size) {
  return data_offset(size) + 2 * static_cast<std::size_t>(size + 1) * ShmAllreduce::kChunkBytes;
}

// This machine, as the ranks compare it: host name and boot id (containers on one host share neither /dev/shm
// nor, necessarily, a host name; two machines never share a boot id).
std::string machine_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  struct stat shm {};
  const std::string dev =
      ::stat("/dev/shm", &shm) == 0 ? std::to_string(shm.st_dev) + ":" + std::to_string(shm.st_ino) : "";
  return std::string(host) + "|" + id + "|" + dev;
}

std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::atomic<uint64_t>& counter(void* base, std::size_t offset) {
  return *reinterpret_cast<std::atomic<uint64_t>*>(static_cast<std::byte*>(base) + offset);
}

// Liveness without process ids (ranks may share /dev/shm but not a PID namespace): each rank holds an
// open-file-description lock on byte `rank` of the segment while it is attached; the kernel drops it when the
// process dies, however it dies.
bool lock_byte(int fd, int rank) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = rank;
  lock.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &lock) == 0;
}

// True when some process holds a lock on [start, start + length) of the file (0 length: to its end).
bool locked(int fd, off_t start, off_t length) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = length;
  if (::fcntl(fd, F_OFD_GETLK, &lock) != 0) return true;  // cannot tell: take it as alive
  return lock.l_type != F_UNLCK;
}

// Whether process `pid` (of this PID namespace) still runs: a zombie (dead, not yet reaped by its parent) does not.
bool running(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // cannot tell: take it as running
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || (line[close + 2] != 'Z' && line[close + 2] != 'X');
}

// The PID namespace of this process ("pid:[4026531836]"): a peer's pid means something here only if it is ours.
std::string pid_namespace() {
  char target[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

// Segments of runs whose ranks all died before unlinking them (rank 0 killed while the others attached): none of
// their bytes is locked any more. Only names of this module's form, older than a minute (a segment being made
// now is locked before its name is published, and the age keeps that moment out of reach).
void remove_abandoned_segments() {
  const std::string folder = "/dev/shm";
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return;
  const auto now = std::chrono::system_clock::now();
  while (const dirent* item = ::readdir(dir)) {
    const std::string name = item->d_name;
    // "spur-<pid>-<number>": digits, a dash, digits (spur-progress-* files are another module's).
    if (name.rfind("spur-", 0) != 0) continue;
    const auto rest = name.substr(5);
    const auto dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) continue;
    if (rest.find_first_not_of("0123456789-") != std::string::npos || rest.find('-', dash + 1) != std::string::npos)
      continue;
    const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_NOFOLLOW, 0);
    if (fd < 0) continue;
    struct stat info {};
    const bool old_enough = ::fstat(fd, &info) == 0 && info.st_uid == ::geteuid() &&
                            now - std::chrono::system_clock::from_time_t(info.st_mtime) > std::chrono::minutes(1);
    if (old_enough && !locked(fd, 0, 0)) ::shm_unlink(("/" + name).c_str());
    ::close(fd);
  }
  ::closedir(dir);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

struct ShmAllreduce::Header {
  uint64_t magic;
  int64_t size;
};

std::string ShmAllreduce::store_prefix() {
  // torchrun's agent store outlives a restarted group: keys of this attempt only.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return std::string("spur/shm/") + (restart ? restart : "0") + "/";
}

std::vector<int> ShmAllreduce::machines(c10d::Store& store, int rank, int size) {
  const std::string prefix = store_prefix();
  store.set(prefix + "host/" + std::to_string(rank), bytes(machine_identity()));
  std::vector<std::string> seen;
  std::vector<int> machine(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const std::string identity = text(store.get(prefix + "host/" + std::to_string(r)));
    auto it = std::find(seen.begin(), seen.end(), identity);
    machine[static_cast<std::size_t>(r)] = static_cast<int>(it - seen.begin());
    if (it == seen.end()) seen.push_back(identity);
  }
  return machine;
}

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(c10d::Store& store, const std::vector<int>& members, int index,
                                                   std::chrono::milliseconds attach_timeout,
                                                   std::chrono::milliseconds timeout, std::string* why_not) {
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");
  // Each machine's ranks have their own keys, under their first rank's number.
  const std::string prefix = store_prefix() + "group-" + std::to_string(members.empty() ? 0 : members.front()) + "/";
  auto say = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return nullptr;
  };
  const int size = static_cast<int>(members.size());
  const int rank = index;
  if (size < 2 || size > kMaxRanks) return say("not a multi-process run of at most 1024 ranks");
  auto global = [&](int r) { return std::to_string(members[static_cast<std::size_t>(r)]); };

  // Who each rank is, for the attach wait below: a peer that dies before it attaches is seen by its pid where the
  // ranks share a PID namespace; elsewhere only the attach timeout ends the wait.
  const std::string here = pid_namespace();
  store.set(prefix + "pid/" + std::to_string(rank), bytes(std::to_string(::getpid()) + " " + here));

  // 2. Rank 0 makes the segment and names it; the others open it. Failures are agreed on through the store.
  const std::size_t length = segment_bytes(size);
  std::string name;
  std::string failure;
  int fd = -1;
  if (rank == 0) {
    remove_abandoned_segments();
    std::random_device random;
    name = "/spur-" + std::to_string(::getpid()) + "-" + std::to_string(random());
    struct statvfs room {};
    if (::statvfs("/dev/shm", &room) != 0 || room.f_bavail * room.f_frsize < length + (length >> 2)) {
      failure = "/dev/shm has less than " + std::to_string((length >> 20) + 1) + " MiB free";
    } else {
      fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      // posix_fallocate: the pages are reserved now, so a full /dev/shm is an error here, not a SIGBUS later.
      if (fd < 0 || ::posix_fallocate(fd, 0, static_cast<off_t>(length)) != 0) {
        failure = std::string("cannot create shared memory ") + name + ": " + std::strerror(errno);
      } else if (!lock_byte(fd, rank)) {
        failure = std::string("cannot lock shared memory ") + name + ": " + std::strerror(errno);
      }
    }
    store.set(prefix + "name", bytes(failure.empty() ? name : std::string()));
  } else {
    name = text(store.get(prefix + "name"));
    if (name.empty()) {
      failure = "rank " + global(0) + " could not create shared memory";
    } else {
      fd = ::shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) {
        failure = "cannot open shared memory " + name + ": " + std::strerror(errno);
      } else if (!lock_byte(fd, rank)) {
        failure = "cannot lock shared memory " + name + ": " + std::strerror(errno);
      }
    }
  }
  // The name goes however this ends: a store call that throws (rank 0, which holds the store, killed while the
  // others wait for the last attach) must not leave the segment in /dev/shm. (SharedMemoryTest caught it once
  // under load: rank 1 lost the store before it saw every rank attached, and threw past the unlink below.)
  struct UnlinkOnExit {
    std::string name;
    ~UnlinkOnExit() {
      if (!name.empty()) ::shm_unlink(name.c_str());
    }
  } unlink_on_exit{failure.empty() ? name : std::string()};
  void* base = MAP_FAILED;
  if (failure.empty()) {
    base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) failure = std::string("cannot map shared memory: ") + std::strerror(errno);
  }
  if (base != MAP_FAILED) {
    if (rank == 0) {
      auto* header = static_cast<Header*>(base);
      header->magic = kMagic;
      header->size = size;
    }
    counter(base, field_offset(size, kPid, rank)).store(static_cast<uint64_t>(::getpid()), std::memory_order_release);
  }
  store.add(prefix + "failed", failure.empty() ? 0 : 1);
  store.set(prefix + "attached/" + std::to_string(rank), bytes("1"));
  store.add(prefix + "attached", 1);
  const auto deadline = std::chrono::steady_clock::now() + attach_timeout;
  auto next_check = std::chrono::steady_clock::now();
  while (failure.empty() && store.add(prefix + "attached", 0) < size) {
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      failure = "not every rank attached to the shared memory within " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(attach_timeout).count()) + " s";
      break;
    }
    if (now >= next_check) {
      next_check = now + std::chrono::milliseconds(100);
      for (int r = 0; r < size && failure.empty(); ++r) {
        if (store.check({prefix + "attached/" + std::to_string(r)}) ||
            !store.check({prefix + "pid/" + std::to_string(r)}))
          continue;
        const std::string who = text(store.get(prefix + "pid/" + std::to_string(r)));
        const auto space = who.find(' ');
        if (space == std::string::npos || here.empty() || who.substr(space + 1) != here) continue;
        const auto pid = static_cast<pid_t>(std::stol(who.substr(0, space)));
        if (pid > 0 && !running(pid)) {
          failure = "rank " + global(r) + " (pid " + std::to_string(pid) + ") died before attaching";
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Everyone has mapped it (or given up): the name can go, the memory stays until the last rank unmaps it. Every
  // rank that knows the name unlinks it, so that rank 0 dying here leaves nothing in /dev/shm either.
  if (!name.empty()) ::shm_unlink(name.c_str());
  unlink_on_exit.name.clear();
  const auto failed = store.add(prefix + "failed", 0);
  if (failed > 0 || !failure.empty()) {
    if (base != MAP_FAILED) ::munmap(base, length);
    if (fd >= 0) ::close(fd);
    return say(failure.empty() ? "another rank could not attach to the shared memory" : failure);
  }
  return std::unique_ptr<ShmAllreduce>(new ShmAllreduce(base, length, fd, members, rank, timeout));
}

ShmAllreduce::ShmAllreduce(void* base, std::size_t bytes, int fd, std::vector<int> members, int index,
                           std::chrono::milliseconds timeout)
    : base_(base),
      bytes_(bytes),
      fd_(fd),
      members_(std::move(members)),
      rank_(index),
      size_(static_cast<int>(members_.size())),
      timeout_(timeout) {}

void ShmAllreduce::mark_left() {
  auto& pid = counter(base_, field_offset(size_, kPid, rank_));
  pid.store(pid.load(std::memory_order_relaxed) | kLeftBit, std::memory_order_release);
}

void ShmAllreduce::fail_members() {
  counter(base_, kFailedOffset)
      .store(static_cast<uint64_t>(members_[static_cast<std::size_t>(rank_)]) + 1, std::memory_order_release);
}

void ShmAllreduce::mark_present() {
  auto& pid = counter(base_, field_offset(size_, kPid, rank_));
  pid.store(pid.load(std::memory_order_relaxed) & ~kLeftBit, std::memory_order_release);
}

ShmAllreduce::~ShmAllreduce() {
  ::munmap(base_, bytes_);
  ::close(fd_);  // drops this rank's lock
}

std::byte* ShmAllreduce::slot(int buffer, int index) const {
  return static_cast<std::byte*>(base_) + data_offset(size_) +
         (static_cast<std::size_t>(buffer) * static_cast<std::size_t>(size_ + 1) + static_cast<std::size_t>(index)) *
             kChunkBytes;
}

void ShmAllreduce::wait_all(const char* what, std::size_t first_offset, uint64_t generation) {
  const auto start = std::chrono::steady_clock::now();
  auto next_check = start + std::chrono::milliseconds(10);
  for (int r = 0; r < size_; ++r) {
    auto& value = counter(base_, first_offset + static_cast<std::size_t>(r) * kLine);
    for (int spins = 0; value.load(std::memory_order_acquire) < generation; ++spins) {
      if (spins < 2000) {
        cpu_relax();
        continue;
      }
      if (spins < 4000) {
        ::sched_yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      const auto now = std::chrono::steady_clock::now();
      if (now < next_check) continue;
      next_check = now + std::chrono::milliseconds(10);
      if (const auto failed = counter(base_, kFailedOffset).load(std::memory_order_acquire)) {
        throw Error("shared-memory gradient sum (" + std::string(what) + "): rank " + std::to_string(failed - 1) +
                    ", this machine's leader, could not sum with the other machines (the leg between machines "
                    "failed: its own error says why)");
      }
      if (!locked(fd_, r, 1)) {
        const auto pid = counter(base_, field_offset(size_, kPid, r)).load(std::memory_order_acquire);
        if (pid & kLeftBit) {
          throw Error("shared-memory gradient all-reduce (" + std::string(what) + "): peer rank " + rank_name(r) +
                      " (pid " + std::to_string(pid & ~kLeftBit) + ") " + left_early_explanation());
        }
        throw Error("shared-memory gradient all-reduce (" + std::string(what) + "): peer rank " + rank_name(r) +
                    " (pid " + std::to_string(pid) + ") is gone");
      }
      if (now - start > timeout_) {
        throw Error("shared-memory gradient all-reduce (" + std::string(what) + "): Timed out after " +
                    std::to_string(timeout_.count() / 1000) + " s waiting for peer rank " + rank_name(r));
      }
    }
  }
}

void ShmAllreduce::allreduce(at::Tensor& tensor) {
  if (!tensor.is_contiguous() || !tensor.device().is_cpu()) {
    throw Error("shared-memory all-reduce takes contiguous CPU tensors");
  }
  const auto element = static_cast<int64_t>(tensor.element_size());
  const int64_t per_chunk = static_cast<int64_t>(kChunkBytes) / element;
  const int64_t total = tensor.numel();
  auto flat = tensor.view({-1});
  auto* data = static_cast<std::byte*>(tensor.data_ptr());
  const auto options = tensor.options();
  const uint64_t call = ++calls_;
  for (int64_t begin = 0; begin < total; begin += per_chunk) {
    const int64_t n = std::min(per_chunk, total - begin);
    const uint64_t generation = ++generation_;
    const int buffer = static_cast<int>(generation % 2);
    const auto chunk_bytes = static_cast<std::size_t>(n * element);
    std::memcpy(slot(buffer, rank_), data + begin * element, chunk_bytes);
    arrive(call, total, static_cast<uint64_t>(element), generation);
    wait_all("waiting for every rank's gradients", field_offset(size_, kArrived, 0), generation);
    check_same_call(call, total, element);
    // This rank's slice of the chunk, summed over the ranks in rank order.
    const int64_t lo = n * rank_ / size_, hi = n * (rank_ + 1) / size_;
    if (hi > lo) {
      auto view = [&](int index) { return at::from_blob(slot(buffer, index) + lo * element, {hi - lo}, options); };
      auto out = view(size_);
      at::add_out(out, view(0), view(1));
      for (int r = 2; r < size_; ++r) out.add_(view(r));
    }
    counter(base_, field_offset(size_, kReduced, rank_)).store(generation, std::memory_order_release);
    wait_all("waiting for every rank's share of the sum", field_offset(size_, kReduced, 0), generation);
    std::memcpy(data + begin * element, slot(buffer, size_), chunk_bytes);
  }
  (void)flat;
}

c10::intrusive_ptr<c10::ivalue::Future> GradientSum::start(at::Tensor& tensor) {
  allreduce(tensor);
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(c10::IValue(tensor));
  return future;
}

void ShmAllreduce::broadcast(at::Tensor& tensor, int root) {
  if (!tensor.is_contiguous() || !tensor.device().is_cpu()) {
    throw Error("shared-memory broadcast takes contiguous CPU tensors");
  }
  const auto element = static_cast<int64_t>(tensor.element_size());
  const int64_t per_chunk = static_cast<int64_t>(kChunkBytes) / element;
  const int64_t total = tensor.numel();
  auto* data = static_cast<std::byte*>(tensor.data_ptr());
  const uint64_t call = ++calls_;
  for (int64_t begin = 0; begin < total; begin += per_chunk) {
    const int64_t n = std::min(per_chunk, total - begin);
    const uint64_t generation = ++generation_;
    const int buffer = static_cast<int>(generation % 2);
    const auto chunk_bytes = static_cast<std::size_t>(n * element);
    // The root's chunk goes straight to the output slot, which every rank copies once all have arrived.
    if (rank_ == root) std::memcpy(slot(buffer, size_), data + begin * element, chunk_bytes);
    arrive(call, total, static_cast<uint64_t>(element) | kBroadcastBit, generation);
    wait_all("waiting for the machine's sum", field_offset(size_, kArrived, 0), generation);
    check_same_call(call, total, element | static_cast<int64_t>(kBroadcastBit));
    if (rank_ != root) std::memcpy(data + begin * element, slot(buffer, size_), chunk_bytes);
    counter(base_, field_offset(size_, kReduced, rank_)).store(generation, std::memory_order_release);
    wait_all("waiting for every rank to take the machine's sum", field_offset(size_, kReduced, 0), generation);
  }
}

void ShmAllreduce::arrive(uint64_t call, int64_t total, uint64_t described, uint64_t generation) {
  // What this rank does, beside its data: written before "arrived" is released, read after it is acquired.
  const std::size_t mine = field_offset(size_, kCall, rank_);
  counter(base_, mine).store(call, std::memory_order_relaxed);
  counter(base_, mine + 8).store(static_cast<uint64_t>(total), std::memory_order_relaxed);
  counter(base_, mine + 16).store(described, std::memory_order_relaxed);
  counter(base_, field_offset(size_, kArrived, rank_)).store(generation, std::memory_order_release);
}

void ShmAllreduce::check_same_call(uint64_t call, int64_t total, int64_t element) const {
  // Every rank compares every peer's description with its own, so on a mismatch all of them throw here, at the
  // first chunk, before any data is mixed: no rank is left waiting.
  for (int r = 0; r < size_; ++r) {
    const std::size_t theirs = field_offset(size_, kCall, r);
    const auto their_call = counter(base_, theirs).load(std::memory_order_relaxed);
    const auto their_total = static_cast<int64_t>(counter(base_, theirs + 8).load(std::memory_order_relaxed));
    const auto their_element = static_cast<int64_t>(counter(base_, theirs + 16).load(std::memory_order_relaxed));
    if (their_call == call && their_total == total && their_element == element) continue;
    auto describe = [](int64_t n, int64_t described) {
      const auto bits = static_cast<uint64_t>(described);
      return std::string((bits & kBroadcastBit) ? "broadcasts " : "reduces ") + std::to_string(n) + " elements of " +
             std::to_string(bits & ~kBroadcastBit) + " bytes";
    };
    throw Error("shared-memory gradient all-reduce: rank " + rank_name(r) + " " + describe(their_total, their_element) +
                " (its call " + std::to_string(their_call) + ") where rank " + rank_name(rank_) + " " +
                describe(total, element) + " (call " + std::to_string(call) +
                "): the ranks' models, their buckets or the order of their collectives differ, and summing them "
                "would mix unrelated values");
  }
}

}  // namespace spur::detail
