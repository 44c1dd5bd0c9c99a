// SPDX-License-Identifier: Apache-2.0
// The launchers' signal discipline, in one place: a signal's name in messages, and the two ways a launcher keeps
// SIGINT, SIGTERM and SIGHUP from cutting its work in half (held while it supervises ranks; counted while it
// follows a job through Slurm's or AWS's commands).
//
// Threads: both guards act on the calling thread's signal handling (HeldSignals: its mask; SignalCounter: the
// process's handlers) and are made and destroyed on the launcher's main thread.
#pragma once

#include <signal.h>

#include <QString>

#include <memory>

namespace spur::app {

/// "SIGTERM" for 15; the number as text for a signal glibc has no name for.
QString signal_name(int signal);

/// While one lives, SIGINT, SIGTERM and SIGHUP wait, blocked, outside LocalLauncher::run (which takes them while
/// ranks run): between restarts, during the SSH probe after a failure, until the run's record is finished. A
/// signal taken with take() stops the run; one left pending is delivered when this goes (the record is complete by
/// then). The history's writer thread blocks every signal itself, so none is delivered to it instead.
class HeldSignals {
 public:
  HeldSignals();
  ~HeldSignals();
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;
  /// A signal that came while held (consumed), or 0.
  int take();

 private:
  sigset_t handled_, caller_mask_;
};

/// While one lives, SIGINT, SIGTERM and SIGHUP are only counted, so that no AWS or Slurm call is cut in half and a
/// job is never left running unseen; the previous handlers come back when it goes.
class SignalCounter {
 public:
  SignalCounter();
  ~SignalCounter();
  SignalCounter(const SignalCounter&) = delete;
  SignalCounter& operator=(const SignalCounter&) = delete;
  /// Signals received since the first SignalCounter of the process was made.
  static int count();
  static int last();

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

}  // namespace spur::app
