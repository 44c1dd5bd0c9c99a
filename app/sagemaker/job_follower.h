// SPDX-License-Identifier: Apache-2.0
// JobFollower: follows a SageMaker training job to its end, printing status changes and every instance's
// CloudWatch log lines ([algo-1] ...); Ctrl-C or SIGTERM stops the job (StopTrainingJob), a second one leaves.
#pragma once

#include <QString>

#include <chrono>
#include <map>

#include "sagemaker/aws_cli.h"

class QTextStream;

namespace spur::app {

struct FollowOptions {
  /// Between DescribeTrainingJob calls; each CLI call costs about a second of start-up, so not much less.
  std::chrono::milliseconds poll{10000};
  /// What status lines start with ("spur launch", "spur sagemaker").
  QString who = "spur";
};

class JobFollower {
 public:
  JobFollower(const AwsCli& aws, QString job, FollowOptions options, QTextStream& out, QTextStream& err);

  /// Returns when the job ends: 0 Completed, 1 Failed (its FailureReason printed), 128 + signal when it was
  /// stopped from here, 1 when stopped elsewhere. Throws AwsError when the job cannot be described.
  int run();

 private:
  void drain_logs();
  bool sleep_unless_signalled(std::chrono::milliseconds duration);

  const AwsCli& aws_;
  QString job_;
  FollowOptions options_;
  QTextStream& out_;
  QTextStream& err_;
  std::map<QString, QString> log_tokens_;  // stream -> next forward token
};

/// "job/algo-2-1700000000" -> "algo-2".
QString instance_of_log_stream(const QString& job, const QString& stream);

}  // namespace spur::app
