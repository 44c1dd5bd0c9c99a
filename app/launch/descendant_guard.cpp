// SPDX-License-Identifier: Apache-2.0
// Keeps a run's descendants from outliving it; see descendant_guard.h.
#include "launch/descendant_guard.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

namespace spur::app {

std::optional<std::string> read_proc_file(const std::string& path) {
  // POSIX reads, not an ifstream: libstdc++'s filebuf throws when read() fails, and reading /proc/PID/stat of a
  // process that exits in between fails with ESRCH ("No such process"): it once ended an SSH launch that way.
  const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  for (;;) {
    const auto got = ::read(file, buffer, sizeof buffer);
    if (got > 0) {
      text.append(buffer, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    ::close(file);
    if (got < 0) return std::nullopt;
    return text;
  }
}

namespace {

// What the guard does after fork() is limited to async-signal-safe calls (the launcher has threads): no malloc,
// no opendir/readdir (they allocate), no stdio. Directories are listed with getdents64 into a static buffer.
struct LinuxDirent {
  std::uint64_t inode;
  std::int64_t offset;
  unsigned short length;
  unsigned char type;
  char name[1];
};

// Calls `each(name)` for the entries of the open directory `folder` other than . and ..
template <class Each>
void for_each_entry(int folder, Each each) {
  alignas(8) static char buffer[16384];
  for (;;) {
    const long got = ::syscall(SYS_getdents64, folder, buffer, sizeof buffer);
    if (got <= 0) return;
    for (long at = 0; at < got;) {
      const auto* entry = reinterpret_cast<const LinuxDirent*>(buffer + at);
      at += entry->length;
      if (std::strcmp(entry->name, ".") != 0 && std::strcmp(entry->name, "..") != 0) each(entry->name);
    }
  }
}

// A /proc entry's pid, or 0 when the name is not a number.
pid_t pid_of(const char* name) {
  long value = 0;
  for (const char* c = name; *c; ++c) {
    if (*c < '0' || *c > '9') return 0;
    value = value * 10 + (*c - '0');
  }
  return static_cast<pid_t>(value);
}

// Whether the environment of `pid` (/proc/PID/environ: NUL-separated entries, readable for this user's processes
// only) holds the entry `mark` exactly.
bool holds_mark(pid_t pid, const char* mark, std::size_t length) {
  char path[40] = "/proc/";
  char digits[16];
  int count = 0;
  for (auto value = static_cast<unsigned long>(pid); value > 0 || count == 0; value /= 10) {
    digits[count++] = static_cast<char>('0' + value % 10);
  }
  std::size_t at = 6;
  while (count > 0) path[at++] = digits[--count];
  std::memcpy(path + at, "/environ", 9);
  const int file = ::open(path, O_RDONLY | O_CLOEXEC);
  if (file < 0) return false;
  // Entries are compared one at a time: `entry` holds the current one's first bytes (a longer entry cannot match).
  static char buffer[8192];
  static char entry[512];
  std::size_t filled = 0;
  bool too_long = false, found = false;
  for (;;) {
    const auto got = ::read(file, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (ssize_t i = 0; i < got && !found; ++i) {
      if (buffer[i] == '\0') {
        found = !too_long && filled == length && std::memcmp(entry, mark, length) == 0;
        filled = 0;
        too_long = false;
      } else if (filled < sizeof entry) {
        entry[filled++] = buffer[i];
      } else {
        too_long = true;
      }
    }
    if (found) break;
  }
  ::close(file);
  return found;
}

// Kills every process (but this one) whose environment holds `mark`; returns how many it signalled.
int kill_marked(const char* mark) {
  const std::size_t length = std::strlen(mark);
  const int proc = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return 0;
  int killed = 0;
  const pid_t self = ::getpid();
  for_each_entry(proc, [&](const char* name) {
    const pid_t pid = pid_of(name);
    if (pid > 0 && pid != self && holds_mark(pid, mark, length) && ::kill(pid, SIGKILL) == 0) ++killed;
  });
  ::close(proc);
  return killed;
}

// Removes the files of `path` (one level: the ranks' progress files), then the folder.
void remove_folder(const char* path) {
  const int folder = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder < 0) return;
  for_each_entry(folder, [&](const char* name) { ::unlinkat(folder, name, 0); });
  ::close(folder);
  ::rmdir(path);
}

// The guard: reads group ids (int32) until the launcher says stand down (0) or its pipe closes (it died), then
// kills the groups it was told about. Only async-signal-safe calls: the launcher has threads.
[[noreturn]] void guard_main(int read_end, const sigset_t& parent_mask, const char* mark, const char* leftover) {
  ::setpgid(0, 0);  // out of the terminal's foreground group: Ctrl-C is the launcher's to handle
  // The launcher's handlers write to its signal pipe: none of them may run here. Signals were blocked around
  // fork(), so none has run yet.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &parent_mask, nullptr);
  if (read_end != 3) {
    ::dup2(read_end, 3);
    ::close(read_end);
  }
  ::close_range(4, ~0U, 0);  // no file of the launcher's (its output pipes above all) kept open by the guard
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
  if (null > 2) ::close(null);
  static pid_t groups[8192];
  int count = 0;
  for (;;) {
    std::int32_t value = 0;
    const auto got = ::read(3, &value, sizeof(value));
    if (got == static_cast<ssize_t>(sizeof(value))) {
      if (value == 0) ::_exit(0);  // the launcher finished and cleaned up itself
      if (value < 0) {             // forget a group that emptied (its number may be reused)
        for (int i = 0; i < count; ++i) {
          if (groups[i] == -value) groups[i] = groups[--count];
        }
        continue;
      }
      if (count < 8192) groups[count++] = static_cast<pid_t>(value);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break;  // end of file: the launcher is gone
  }
  for (int i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
  if (*mark) {
    // Until none is left (a marked process may fork while the scan runs), for at most about 5 s.
    for (int round = 0; round < 100 && kill_marked(mark) > 0; ++round) {
      const timespec pause{0, 50L * 1000 * 1000};
      ::nanosleep(&pause, nullptr);
    }
  }
  if (*leftover) remove_folder(leftover);
  ::_exit(0);
}

}  // namespace

DescendantGuard::~DescendantGuard() {
  if (!finished_) finish(std::chrono::milliseconds(0));
}

bool DescendantGuard::start() {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return false;
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ends[1]);
    guard_main(ends[0], previous, mark_.c_str(), leftover_.c_str());
  }
  const int error = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (child < 0) {
    ::close(ends[0]);
    ::close(ends[1]);
    errno = error;
    return false;
  }
  ::close(ends[0]);
  guard_ = child;
  pipe_ = ends[1];
  return true;
}

void DescendantGuard::forget(pid_t group) {
  groups_.erase(std::remove(groups_.begin(), groups_.end(), group), groups_.end());
  ranks_.push_back(group);  // still never reaped here: QProcess reaps its own
  if (pipe_ >= 0) {
    const std::int32_t value = -group;
    [[maybe_unused]] const auto written = ::write(pipe_, &value, sizeof(value));
  }
}

void DescendantGuard::watch(pid_t group) {
  if (group <= 0) return;
  groups_.push_back(group);
  if (pipe_ >= 0) {
    const std::int32_t value = group;
    [[maybe_unused]] const auto written = ::write(pipe_, &value, sizeof(value));
  }
}

std::vector<pid_t> DescendantGuard::left() {
  // Live members of the ranks' process groups (in this session: a group number reused by an unrelated process
  // elsewhere is not ours), and, with stop_orphans, children of this process that are neither the guard nor a
  // rank: descendants re-parented here by the subreaper flag. Ended orphans are reaped on the way; ranks never
  // are (QProcess reaps its own).
  std::vector<pid_t> found;
  const pid_t self = ::getpid();
  const pid_t session = ::getsid(0);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const auto read = read_proc_file((entry.path() / "stat").string());
    if (!read) continue;  // it ended while we looked
    const std::string& text = *read;
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long parent = 0, group = 0, sid = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %ld %ld %ld", &state, &parent, &group, &sid) != 4) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    const bool rank = std::find(groups_.begin(), groups_.end(), pid) != groups_.end() ||
                      std::find(ranks_.begin(), ranks_.end(), pid) != ranks_.end();
    if (pid == guard_ || (rank && parent == self)) continue;
    const bool orphan = stop_orphans_ && parent == self;
    const bool member =
        sid == session && std::find(groups_.begin(), groups_.end(), static_cast<pid_t>(group)) != groups_.end();
    if (!orphan && !member) continue;
    if (state == 'Z') {
      if (parent == self) ::waitpid(pid, nullptr, WNOHANG);
      continue;
    }
    found.push_back(pid);
  }
  return found;
}

void DescendantGuard::signal_all(int signal) {
  for (const pid_t pid : left()) ::kill(pid, signal);
}

int DescendantGuard::finish(std::chrono::milliseconds grace) {
  const int stopped = static_cast<int>(left().size());
  if (stopped > 0) {
    signal_all(grace.count() > 0 ? SIGTERM : SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!left().empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto last = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!left().empty() && std::chrono::steady_clock::now() < last) {
      signal_all(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (pipe_ >= 0) {
    const std::int32_t stand_down = 0;
    [[maybe_unused]] const auto written = ::write(pipe_, &stand_down, sizeof(stand_down));
    ::close(pipe_);
    pipe_ = -1;
  }
  if (guard_ > 0) {
    while (::waitpid(guard_, nullptr, 0) < 0 && errno == EINTR) {
    }
    guard_ = -1;
  }
  finished_ = true;
  return stopped;
}

}  // namespace spur::app
