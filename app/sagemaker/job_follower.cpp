// SPDX-License-Identifier: Apache-2.0
// Following a training job through the AWS CLI; see job_follower.h. Signals only set a flag: the loop acts on
// it between calls, so an AWS call is never cut in half.
#include "sagemaker/job_follower.h"

#include <signal.h>

#include <QJsonArray>
#include <QRegularExpression>
#include <QTextStream>
#include <QThread>

#include <atomic>
#include <cstring>

namespace spur::app {
namespace {

constexpr const char* kLogGroup = "/aws/sagemaker/TrainingJobs";

std::atomic<int> signals_received{0};
std::atomic<int> last_signal{0};

void on_signal(int signal) {
  last_signal = signal;
  ++signals_received;
}

QString signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? QString("SIG") + name : QString::number(signal);
}

}  // namespace

QString instance_of_log_stream(const QString& job, const QString& stream) {
  static const QRegularExpression epoch("-\\d+$");
  QString name = stream.startsWith(job + "/") ? stream.mid(job.size() + 1) : stream;
  return name.remove(epoch);
}

JobFollower::JobFollower(const AwsCli& aws, QString job, FollowOptions options, QTextStream& out, QTextStream& err)
    : aws_(aws), job_(std::move(job)), options_(std::move(options)), out_(out), err_(err) {}

bool JobFollower::sleep_unless_signalled(std::chrono::milliseconds duration) {
  const int seen = signals_received;
  for (auto left = duration; left.count() > 0; left -= std::chrono::milliseconds(50)) {
    if (signals_received != seen) return false;
    QThread::msleep(static_cast<unsigned long>(std::min<long long>(50, left.count())));
  }
  return signals_received == seen;
}

void JobFollower::drain_logs() {
  QJsonObject streams;
  try {
    streams = aws_.call("logs", "describe-log-streams",
                        {"--log-group-name", kLogGroup, "--log-stream-name-prefix", job_ + "/"});
  } catch (const AwsError& e) {
    if (e.error_code() == "ResourceNotFoundException") return;  // no instance has written yet
    throw;
  }
  for (const auto& value : streams.value("logStreams").toArray()) {
    const QString stream = value.toObject().value("logStreamName").toString();
    const QString label = instance_of_log_stream(job_, stream);
    for (;;) {
      QStringList arguments{"--log-group-name", kLogGroup, "--log-stream-name", stream, "--start-from-head"};
      const auto known = log_tokens_.find(stream);
      if (known != log_tokens_.end()) arguments << "--next-token" << known->second;
      const auto page = aws_.call("logs", "get-log-events", arguments);
      const auto events = page.value("events").toArray();
      for (const auto& event : events) {
        for (const auto& line : event.toObject().value("message").toString().split('\n')) {
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
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  const int handled[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous[3];
  signals_received = 0;
  for (int i = 0; i < 3; ++i) ::sigaction(handled[i], &action, &previous[i]);
  struct Restore {
    const int* handled;
    struct sigaction* previous;
    ~Restore() {
      for (int i = 0; i < 3; ++i) ::sigaction(handled[i], &previous[i], nullptr);
    }
  } restore{handled, previous};

  QString shown;
  int stop_signal = 0;
  for (;;) {
    if (signals_received > 0 && !stop_signal) {
      stop_signal = last_signal;
      err_ << options_.who << ": " << signal_name(stop_signal) << ": stopping job " << job_
           << " (press Ctrl-C again to leave it stopping)\n";
      err_.flush();
      aws_.call("sagemaker", "stop-training-job", {"--training-job-name", job_});
    } else if (signals_received > 1) {
      err_ << options_.who << ": left job " << job_ << " stopping; follow it with: spur sagemaker follow " << job_
           << "\n";
      return 128 + last_signal;
    }
    const auto job = aws_.call("sagemaker", "describe-training-job", {"--training-job-name", job_});
    const QString status = job.value("TrainingJobStatus").toString();
    const QString secondary = job.value("SecondaryStatus").toString();
    const QString line = status + (secondary.isEmpty() || secondary == status ? QString() : " - " + secondary);
    if (line != shown) {
      err_ << options_.who << ": job " << job_ << ": " << line << "\n";
      err_.flush();
      shown = line;
    }
    drain_logs();
    if (status == "Completed") {
      const auto billable = job.value("BillableTimeInSeconds");
      err_ << options_.who << ": job " << job_ << " completed"
           << (billable.isUndefined() ? QString() : QString(" (%1 billable seconds)").arg(billable.toInt())) << "\n";
      return 0;
    }
    if (status == "Failed") {
      err_ << options_.who << ": job " << job_ << " failed: " << job.value("FailureReason").toString("no reason given")
           << "\n";
      return 1;
    }
    if (status == "Stopped") {
      if (stop_signal) return 128 + stop_signal;
      err_ << options_.who << ": job " << job_ << " was stopped (not from here)\n";
      return 1;
    }
    sleep_unless_signalled(options_.poll);
  }
}

}  // namespace spur::app
