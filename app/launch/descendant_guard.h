// SPDX-License-Identifier: Apache-2.0
// DescendantGuard: nothing a rank started outlives the run. The launcher becomes a child subreaper (orphaned
// descendants of its ranks are re-parented to it, not to init) and forks a small guard process that knows every
// rank's process group: when the launcher dies, even by SIGKILL, the guard sees its pipe close and kills those
// groups. At the end of a run, finish() stops what is left of each group and every re-parented orphan (SIGTERM,
// then SIGKILL after the grace period) and reaps them.
//
// Limits: a descendant that left its rank's process group (setsid, setpgid) is still caught by finish() through
// the subreaper, but not by the guard after a SIGKILL of the launcher (a cgroup would be needed for that).
//
// Threading: one thread, the launcher's; the guard process uses only async-signal-safe calls after fork().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace spur::app {

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
  /// Stops every watched group's remaining members and every orphan re-parented to this process: SIGTERM, then
  /// SIGKILL after `grace`; reaps the orphans, then dismisses the guard. Returns how many processes it had to stop.
  int finish(std::chrono::milliseconds grace);

 private:
  std::vector<pid_t> left();
  void signal_all(int signal);

  std::vector<pid_t> groups_;
  pid_t guard_ = -1;
  int pipe_ = -1;  // the write end; the guard's read end sees EOF when this process dies
  bool finished_ = false;
};

}  // namespace spur::app
