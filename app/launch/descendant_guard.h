// SPDX-License-Identifier: Apache-2.0
// DescendantGuard: nothing a rank started outlives the run. The launcher becomes a child subreaper (orphaned
// descendants of its ranks are re-parented to it, not to init) and forks a small guard process that knows every
// rank's process group: when the launcher dies, even by SIGKILL, the guard sees its pipe close and kills those
// groups. At the end of a run, finish() stops what is left of each group and every re-parented orphan (SIGTERM,
// then SIGKILL after the grace period) and reaps them.
//
// A descendant that left its rank's process group (setsid, setpgid) is caught by finish() through the subreaper,
// and after a SIGKILL of the launcher by its mark: the launcher gives every rank an environment variable unique
// to the launch (set_mark), which descendants inherit, and the guard kills every process of this user whose
// environment holds it. The guard also removes a folder the launcher names (the ranks' progress files), which the
// launcher would have removed itself. Limits: a descendant that left the group and cleared or replaced its
// environment escapes the guard (a cgroup would be needed for that). Group members are matched in the launcher's
// session only, and a group that empties is forgotten, so a reused group number never points the guard at an
// unrelated process.
//
// Threading: one thread, the launcher's; the guard process uses only async-signal-safe calls after fork().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace spur::app {

/// The whole of a small file such as /proc/PID/stat; nullopt if it cannot be opened or read (the process ended
/// between listing /proc and reading: read() fails with ESRCH). Never throws.
std::optional<std::string> read_proc_file(const std::string& path);

class DescendantGuard {
 public:
  DescendantGuard() = default;
  DescendantGuard(const DescendantGuard&) = delete;
  DescendantGuard& operator=(const DescendantGuard&) = delete;
  /// Kills what is left at once (finish with no grace) if finish() was not called.
  ~DescendantGuard();

  /// Makes this process a child subreaper and forks the guard. False (with errno set) if the guard could not be
  /// started; the run goes on without it.
  bool start();
  /// A rank's process group (its pid: ranks lead their own group).
  void watch(pid_t group);
  /// A rank whose group emptied: no longer watched (its number may be reused by an unrelated process).
  void forget(pid_t group);
  /// Whether finish() also stops orphans re-parented here that left the ranks' groups (a setsid daemon).
  /// Default: true. The SSH fan-out turns it off: ssh's own ControlPersist master is such an orphan.
  void set_stop_orphans(bool stop) { stop_orphans_ = stop; }
  /// The "NAME=value" entry that every rank's environment holds (call before start()): if this process dies, the
  /// guard kills every process whose environment holds it. Default: none (groups only).
  void set_mark(std::string entry) { mark_ = std::move(entry); }
  /// A folder the guard removes (its files, then itself) if this process dies (call before start()). Default: none.
  void set_leftover_folder(std::string path) { leftover_ = std::move(path); }
  /// Stops every watched group's remaining members and every orphan re-parented to this process: SIGTERM, then
  /// SIGKILL after `grace`; reaps the orphans, then dismisses the guard. Returns how many processes it had to stop.
  int finish(std::chrono::milliseconds grace);

 private:
  std::vector<pid_t> left();
  void signal_all(int signal);

  std::vector<pid_t> groups_;
  std::vector<pid_t> ranks_;  // forgotten ranks: never reaped here
  bool stop_orphans_ = true;
  std::string mark_;
  std::string leftover_;
  pid_t guard_ = -1;
  int pipe_ = -1;  // the write end; the guard's read end sees EOF when this process dies
  bool finished_ = false;
};

}  // namespace spur::app
