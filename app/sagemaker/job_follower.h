// SPDX-License-Identifier: Apache-2.0
// JobFollower: follows a SageMaker training job to its end, printing status changes and every instance's
// CloudWatch log lines ([algo-1] ...); Ctrl-C or SIGTERM stops the job (StopTrainingJob), a second one leaves.
#pragma once

#include <QString>

#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include "launch/signals.h"
#include "sagemaker/aws_cli.h"

class QTextStream;

namespace spur::app {

struct FollowOptions {
  /// Between DescribeTrainingJob calls; each CLI call costs about a second of start-up, so not much less.
  std::chrono::milliseconds poll{10000};
  /// What status lines start with ("spur launch", "spur sagemaker").
  QString who = "spur";
  /// Transient failures (throttling, network) retried this many times, with growing pauses, before giving up.
  int retries = 5;
  /// Sees every log line (instance "algo-1"...); returning true keeps it off the console (an "@spur" record).
  std::function<bool(const QString& instance, const QString& line)> on_line;
  /// Called after each poll (the run history flushes there).
  std::function<void()> after_poll;
};

class JobFollower {
 public:
  JobFollower(const AwsCli& aws, QString job, FollowOptions options, QTextStream& out, QTextStream& err);

  /// Returns when the job ends: 0 Completed, 1 Failed (its FailureReason printed), 128 + signal when it was
  /// stopped from here, 1 when stopped elsewhere. Throws AwsError (saying the job may still run) when it
  /// cannot follow any more.
  int run();
  /// After run(): the job's last status (Completed, Failed, Stopped), empty if it was not seen to end.
  const QString& final_status() const { return final_status_; }

 private:
  QJsonObject call(const QString& service, const QString& operation, const QStringList& arguments);
  void drain_logs();
  void stop(int signal);
  bool sleep_unless_signalled(std::chrono::milliseconds duration);
  bool signal_pending() const { return SignalCounter::count() > handled_signals_; }

  const AwsCli& aws_;
  QString job_;
  FollowOptions options_;
  QTextStream& out_;
  QTextStream& err_;
  std::map<QString, QString> log_tokens_;  // stream -> next forward token
  int handled_signals_ = 0;
  bool logs_broken_ = false;
  QString final_status_;
};

/// "job/algo-2-1700000000" -> "algo-2".
QString instance_of_log_stream(const QString& job, const QString& stream);

/// Throttling, a service hiccup or a network error: worth retrying.
bool transient(const AwsError& error);

}  // namespace spur::app
