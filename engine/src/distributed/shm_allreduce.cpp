// SPDX-License-Identifier: Apache-2.0
// The shared-memory all-reduce; see shm_allreduce.h. Segment layout: a header (magic, rank count, then per rank
// on its own cache line: the pid, the "arrived" and the "reduced" counters), then two buffers of (ranks + 1)
// chunk slots: each rank's input slot and the shared output slot.
#include "distributed/shm_allreduce.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

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

// Per-rank fields, one cache line each, after the 64-byte header proper.
enum Field : std::size_t { kPid = 0, kArrived = 1, kReduced = 2, kFields = 3 };

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

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(c10d::Store& store, int rank, int size,
                                                   std::chrono::milliseconds timeout, std::string* why_not) {
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");
  // torchrun's agent store outlives a restarted group: keys of this attempt only.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string prefix = std::string("spur/shm/") + (restart ? restart : "0") + "/";
  auto say = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return nullptr;
  };
  if (size < 2 || size > kMaxRanks) return say("not a multi-process run of at most 1024 ranks");

  // 1. All ranks on this machine? Every rank reaches the same verdict from the same keys.
  store.set(prefix + "host/" + std::to_string(rank), bytes(machine_identity()));
  std::string first;
  for (int r = 0; r < size; ++r) {
    const std::string identity = text(store.get(prefix + "host/" + std::to_string(r)));
    if (r == 0) first = identity;
    if (identity != first) return say("the ranks are on several machines");
  }

  // 2. Rank 0 makes the segment and names it; the others open it. Failures are agreed on through the store.
  const std::size_t length = segment_bytes(size);
  std::string name;
  std::string failure;
  int fd = -1;
  if (rank == 0) {
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
      }
    }
    store.set(prefix + "name", bytes(failure.empty() ? name : std::string()));
  } else {
    name = text(store.get(prefix + "name"));
    if (name.empty()) {
      failure = "rank 0 could not create shared memory";
    } else {
      fd = ::shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) failure = "cannot open shared memory " + name + ": " + std::strerror(errno);
    }
  }
  void* base = MAP_FAILED;
  if (failure.empty()) {
    base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) failure = std::string("cannot map shared memory: ") + std::strerror(errno);
  }
  if (fd >= 0) ::close(fd);
  if (base != MAP_FAILED) {
    if (rank == 0) {
      auto* header = static_cast<Header*>(base);
      header->magic = kMagic;
      header->size = size;
    }
    counter(base, field_offset(size, kPid, rank)).store(static_cast<uint64_t>(::getpid()), std::memory_order_release);
  }
  store.add(prefix + "failed", failure.empty() ? 0 : 1);
  store.add(prefix + "attached", 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (store.add(prefix + "attached", 0) < size) {
    if (std::chrono::steady_clock::now() > deadline) {
      failure = "not every rank attached to the shared memory in time";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Everyone has mapped it (or given up): the name can go, the memory stays until the last rank unmaps it.
  if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());
  const auto failed = store.add(prefix + "failed", 0);
  if (failed > 0 || !failure.empty()) {
    if (base != MAP_FAILED) ::munmap(base, length);
    return say(failure.empty() ? "another rank could not attach to the shared memory" : failure);
  }
  return std::unique_ptr<ShmAllreduce>(new ShmAllreduce(base, length, rank, size, timeout));
}

ShmAllreduce::ShmAllreduce(void* base, std::size_t bytes, int rank, int size, std::chrono::milliseconds timeout)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), timeout_(timeout) {}

ShmAllreduce::~ShmAllreduce() { ::munmap(base_, bytes_); }

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
      const auto pid = static_cast<pid_t>(counter(base_, field_offset(size_, kPid, r)).load(std::memory_order_acquire));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
        throw Error("shared-memory gradient all-reduce (" + std::string(what) + "): peer rank " + std::to_string(r) +
                    " (pid " + std::to_string(pid) + ") is gone");
      }
      if (now - start > timeout_) {
        throw Error("shared-memory gradient all-reduce (" + std::string(what) + "): Timed out after " +
                    std::to_string(timeout_.count() / 1000) + " s waiting for peer rank " + std::to_string(r));
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
  for (int64_t begin = 0; begin < total; begin += per_chunk) {
    const int64_t n = std::min(per_chunk, total - begin);
    const uint64_t generation = ++generation_;
    const int buffer = static_cast<int>(generation % 2);
    const auto chunk_bytes = static_cast<std::size_t>(n * element);
    std::memcpy(slot(buffer, rank_), data + begin * element, chunk_bytes);
    counter(base_, field_offset(size_, kArrived, rank_)).store(generation, std::memory_order_release);
    wait_all("waiting for every rank's gradients", field_offset(size_, kArrived, 0), generation);
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

}  // namespace spur::detail
