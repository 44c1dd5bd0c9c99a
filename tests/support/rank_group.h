// SPDX-License-Identifier: Apache-2.0
// RankGroup: starts the ranks of a test run as real processes with torchrun's variables on a loopback port
// that the OS chose, and kills every one still running (by PID) when it goes out of scope, also on failure.
#pragma once

#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <memory>
#include <functional>
#include <vector>

namespace spur::test {

/// A TCP port that was free a moment ago (bound to port 0 on 127.0.0.1, then released).
int free_port();

struct RankResult {
  int exit_code = -1;
  bool crashed = false;
  QString output;  // stdout and stderr, merged
};

class RankGroup {
 public:
  RankGroup(QString program, QStringList arguments, int world_size);
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  /// Extra variables for every rank (set before start).
  void set_env(const QString& name, const QString& value);
  int port() const { return port_; }

  /// Starts the given ranks (all when empty). Returns false if one could not start.
  bool start(const std::vector<int>& ranks = {});
  /// Waits for every started rank to exit; false on timeout (the ranks are then killed).
  bool wait(int timeout_ms);
  RankResult result(int rank) const;
  /// The process id a rank was started with (also once it ended; 0 when it was not started).
  qint64 pid(int rank) const;
  /// Every rank's output, for failure messages.
  QString transcript() const;

 private:
  QString program_;
  QStringList arguments_;
  int world_size_;
  int port_;
  QProcessEnvironment env_;
  std::vector<std::unique_ptr<QProcess>> processes_;
  std::vector<qint64> pids_;
};

/// Runs one process to completion (killed after timeout_ms); for single-process programs.
RankResult run_process(const QString& program, const QStringList& arguments, const QProcessEnvironment& env,
                       int timeout_ms);

/// Every process's arguments as another user sees them: `ps -eo args` run as nobody (setpriv). Empty, with the
/// reason in `problem`, where that cannot be done (not root).
QStringList arguments_seen_by_another_user(QString* problem = nullptr);

/// The process exists and is not a zombie.
bool alive(qint64 pid);
/// The PIDs launch_rig wrote as DIR/rankN.pid for ranks 0..count-1 (those written so far).
std::vector<qint64> rank_pids(const QString& dir, int count);
/// Appends what `process` prints to `output` until `done(output)` holds (returns true), the process ends or
/// timeout_ms pass (returns false).
bool read_until(QProcess& process, QByteArray& output, const std::function<bool(const QByteArray&)>& done,
                int timeout_ms);
/// The same until `output` holds `text`.
bool read_until(QProcess& process, QByteArray& output, const QByteArray& text, int timeout_ms);
/// Waits until none of `pids` is alive; false after timeout_ms.
bool all_dead(const std::vector<qint64>& pids, int timeout_ms);
/// SIGKILLs, by PID, every process of this user whose command line names something under `folder` (a test's own
/// temporary folder): what a daemon the test stopped left behind (a Slurm step's shell). Returns how many.
int kill_processes_under(const QString& folder);

}  // namespace spur::test
