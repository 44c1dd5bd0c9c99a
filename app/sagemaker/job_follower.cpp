// SPDX-License-Identifier: Apache-2.0
// Following a training job through the AWS CLI; see job_follower.h. Signals only bump a counter (launch/signals.h):
// the loop acts on it between calls, so an AWS call is never cut in half.
#include "sagemaker/job_follower.h"

#include <signal.h>

#include <QJsonArray>
#include <QRegularExpression>
#include <QTextStream>
#include <QThread>

#include <atomic>
#include <set>

#include "launch/signals.h"

namespace spur::app {
namespace {

constexpr const char* kLogGroup = "/aws/sagemaker/TrainingJobs";

}  // namespace

bool transient(const AwsError& error) {
  static const std::set<QString> codes = {
      "ThrottlingException",      "Throttling",          "RequestLimitExceeded",
      "TooManyRequestsException", "ServiceUnavailable",  "ServiceUnavailableException",
      "InternalFailure",          "InternalServerError", "RequestTimeout"};
  return codes.contains(error.error_code()) || error.exit_code() == 255 || error.exit_code() == 124;
}

QString instance_of_log_stream(const QString& job, const QString& stream) {
  static const QRegularExpression epoch("-\\d+$");
  QString name = stream.startsWith(job + "/") ? stream.mid(job.size() + 1) : stream;
  return name.remove(epoch);
}

JobFollower::JobFollower(const AwsCli& aws, QString job, FollowOptions options, QTextStream& out, QTextStream& err)
    : aws_(aws), job_(std::move(job)), options_(std::move(options)), out_(out), err_(err) {}

bool JobFollower::sleep_unless_signalled(std::chrono::milliseconds duration) {
  for (auto left = duration; left.count() > 0; left -= std::chrono::milliseconds(50)) {
    if (signal_pending()) return false;
    QThread::msleep(static_cast<unsigned long>(std::min<long long>(50, left.count())));
  }
  return !signal_pending();
}

QJsonObject JobFollower::call(const QString& service, const QString& operation, const QStringList& arguments) {
  for (int attempt = 0;; ++attempt) {
    try {
      return aws_.call(service, operation, arguments);
    } catch (const AwsError& e) {
      if (!transient(e) || attempt >= options_.retries) throw;
      const int pause = std::min(30, 2 << attempt);
      err_ << options_.who << ": " << e.what() << " (retrying in " << pause << " s)\n";
      err_.flush();
      sleep_unless_signalled(std::chrono::seconds(pause));
    }
  }
}

void JobFollower::drain_logs() {
  if (logs_broken_) return;
  QJsonObject streams;
  try {
    streams =
        call("logs", "describe-log-streams", {"--log-group-name", kLogGroup, "--log-stream-name-prefix", job_ + "/"});
  } catch (const AwsError& e) {
    if (e.error_code() == "ResourceNotFoundException") return;  // no instance has written yet
    // Without logs the job can still be followed (AccessDenied on CloudWatch is common): say so once.
    err_ << options_.who << ": cannot read the job's logs (" << e.what() << "); following its status only\n";
    logs_broken_ = true;
    return;
  }
  for (const auto& value : streams.value("logStreams").toArray()) {
    const QString stream = value.toObject().value("logStreamName").toString();
    const QString label = instance_of_log_stream(job_, stream);
    for (;;) {
      if (signal_pending()) return;  // many instances mean many calls: act on Ctrl-C first
      QStringList arguments{"--log-group-name", kLogGroup, "--log-stream-name", stream, "--start-from-head"};
      const auto known = log_tokens_.find(stream);
      if (known != log_tokens_.end()) arguments << "--next-token" << known->second;
      const auto page = call("logs", "get-log-events", arguments);
      const auto events = page.value("events").toArray();
      for (const auto& event : events) {
        for (const auto& line : event.toObject().value("message").toString().split('\n')) {
          if (options_.on_line && options_.on_line(label, line)) continue;
          out_ << "[" << label << "] " << line << "\n";
        }
      }
      out_.flush();
      const QString next = page.value("nextForwardToken").toString();
      const bool same = known != log_tokens_.end() && known->second == next;
      log_tokens_[stream] = next;
      if (events.isEmpty() || same || next.isEmpty()) break;  // the same token back: nothing newer yet
    }
  }
}

int JobFollower::run() {
  SignalCounter counting;
  handled_signals_ = SignalCounter::count();
  QString shown;
  int stop_signal = 0;
  try {
    for (;;) {
      if (signal_pending()) {
        if (stop_signal) {
          err_ << options_.who << ": left job " << job_ << " stopping; follow it with: spur sagemaker follow " << job_
               << "\n";
          return 128 + SignalCounter::last();
        }
        handled_signals_ = SignalCounter::count();
        stop_signal = SignalCounter::last();
        err_ << options_.who << ": " << signal_name(stop_signal) << ": stopping job " << job_
             << " (press Ctrl-C again to leave it stopping)\n";
        err_.flush();
        call("sagemaker", "stop-training-job", {"--training-job-name", job_});
      }
      const auto job = call("sagemaker", "describe-training-job", {"--training-job-name", job_});
      const QString status = job.value("TrainingJobStatus").toString();
      const QString secondary = job.value("SecondaryStatus").toString();
      const QString line = status + (secondary.isEmpty() || secondary == status ? QString() : " - " + secondary);
      if (line != shown) {
        err_ << options_.who << ": job " << job_ << ": " << line << "\n";
        err_.flush();
        shown = line;
      }
      drain_logs();
      if (options_.after_poll) options_.after_poll();
      const bool over = status == "Completed" || status == "Failed" || status == "Stopped";
      if (over) {
        final_status_ = status;
        // CloudWatch lags the instances by a few seconds: the last lines (often the error) come late.
        sleep_unless_signalled(std::min<std::chrono::milliseconds>(options_.poll, std::chrono::seconds(5)));
        drain_logs();
      }
      if (status == "Completed") {
        const auto billable = job.value("BillableTimeInSeconds");
        err_ << options_.who << ": job " << job_ << " completed"
             << (billable.isUndefined() ? QString() : QString(" (%1 billable seconds)").arg(billable.toInt())) << "\n";
        return 0;
      }
      if (status == "Failed") {
        err_ << options_.who << ": job " << job_
             << " failed: " << job.value("FailureReason").toString("no reason given") << "\n";
        return 1;
      }
      if (status == "Stopped") {
        if (stop_signal) return 128 + stop_signal;
        err_ << options_.who << ": job " << job_ << " was stopped (not from here)\n";
        return 1;
      }
      sleep_unless_signalled(options_.poll);
    }
  } catch (const AwsError& e) {
    throw AwsError(QString(e.what()) + "\n  the job may still be running: spur sagemaker follow " + job_ +
                       " (or stop it: spur sagemaker stop " + job_ + ")",
                   e.exit_code(), e.error_code());
  }
}

}  // namespace spur::app
