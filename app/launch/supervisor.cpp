// SPDX-License-Identifier: Apache-2.0
// One launch from its record to its report (supervisor.h).
#include "launch/supervisor.h"

#include <QDir>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>

#include <algorithm>

#include "launch/launch_request.h"
#include "launch/run_recorder.h"
#include "launch/secrets.h"
#include "launch/signals.h"
#include <spur/core/stream_line.h>

namespace spur::app {
namespace {

// The launcher's samples as system/ series points: a point's step counts whole seconds since `since` (wall seconds:
// the run's start, one clock for every attempt and every machine); `put` takes each key and point.
std::function<void(const std::vector<SystemValue>&)> system_points(
    double since, std::function<void(const QString&, const history::Point&)> put) {
  return [since, put = std::move(put)](const std::vector<SystemValue>& values) {
    const double wall = history::now_seconds();
    const auto step = static_cast<int64_t>(std::max(0.0, wall - since));
    for (const auto& value : values) put(value.key, {step, value.value, wall});
  };
}

}  // namespace

Supervisor::Supervisor(SupervisorOptions options, QTextStream& out, QTextStream& err)
    : options_(std::move(options)), out_(out), err_(err), host_(local_host_name()), since_(history::now_seconds()) {
  if (options_.hold_signals) held_ = std::make_unique<HeldSignals>();
  if (!options_.record) return;
  history::Run run = *options_.record;
  if (!options_.command.isEmpty()) {
    run.command = launch_command_line(QDir::currentPath(), redact_secrets(options_.command)).toStdString();
  }
  RunRecorderOptions recording;
  recording.stream_key = options_.stream_key;
  recorder_ = std::make_unique<RunRecorder>(
      options_.history_path.empty() ? history::default_history_path() : options_.history_path, run, err_, recording);
  recorder_->files(options_.files);
}

Supervisor::~Supervisor() = default;

bool Supervisor::recording() const { return recorder_ && recorder_->recording(); }

QProcessEnvironment Supervisor::environment() const {
  return recorder_ ? recorder_->environment() : QProcessEnvironment();
}

Supervised Supervisor::run(const std::function<LaunchPlan(int attempt)>& prepare, SupervisionOptions supervision,
                           int max_restarts) {
  if (recorder_) {
    RunRecorder* recorder = recorder_.get();
    if (supervision.remote_children) {
      // A machine of an SSH run: its launcher's output carries its ranks' lines, already "[host] [rankN]"-labelled.
      supervision.on_line = [recorder](const RankSpec& child, bool error_stream, const QString& line) {
        return recorder->line(child.label, -1, error_stream, line);
      };
    } else {
      supervision.on_line = [recorder, host = host_](const RankSpec& rank, bool error_stream, const QString& line) {
        return recorder->line(host, rank.rank, error_stream, line);
      };
    }
    supervision.on_message = [this](const QString& message) { record_message(message); };
    // What the run costs the machine, as system/ series: each rank's CPU and memory, each GPU's use; seconds since
    // this launch, across restarts.
    if (!supervision.on_sample && !supervision.remote_children) {
      supervision.on_sample = system_points(
          since_, [recorder](const QString& key, const history::Point& point) { recorder->metric(key, point); });
    }
  }
  Supervised result;
  for (int attempt = 0;; ++attempt) {
    LaunchPlan plan = prepare(attempt);
    const QProcessEnvironment record_environment = environment();
    for (auto& rank : plan.ranks) {
      if (!supervision.remote_children) rank.environment.insert(record_environment);
      // A machine's launcher under an SSH fan-out gets its attempt from the fan-out (--env SPUR_RESTART_COUNT=k),
      // a Slurm node's from the batch script (its environment).
      const int count =
          rank.environment.value("SPUR_RESTART_COUNT", qEnvironmentVariable("SPUR_RESTART_COUNT", "0")).toInt() +
          attempt;
      rank.environment.insert("SPUR_RESTART_COUNT", QString::number(count));
      rank.environment.insert("TORCHELASTIC_RESTART_COUNT", QString::number(count));
      if (max_restarts > 0) rank.environment.insert("TORCHELASTIC_MAX_RESTARTS", QString::number(max_restarts));
    }
    LocalLauncher launcher(plan, supervision, out_, err_);
    result.code = launcher.run();
    result.stopped = launcher.stopped();
    result.failure = launcher.failure();
    result.restarts = attempt;
    if (launcher.interrupted()) result.stopped = true;  // Ctrl-C while a failure was handled: not restarted
    if (result.code == 0 || result.stopped || attempt >= max_restarts) break;
    say(QString("%1: restart %2 of %3 (attempt %4), after: %5")
            .arg(options_.who)
            .arg(attempt + 1)
            .arg(max_restarts)
            .arg(attempt + 2)
            .arg(result.failure.isEmpty() ? QString("exit code %1").arg(result.code)
                                          : result.failure.section('\n', 0, 0)));
  }
  // A signal that came after the last attempt's launcher ended: the run was stopped.
  while (const int signal = held_ ? held_->take() : 0) {
    if (result.code == 0) result.code = 128 + signal;
    result.stopped = true;
  }
  if (result.restarts > 0 && result.code != 0 && !result.stopped) {
    result.failure = QString("after %1 restart(s): %2").arg(result.restarts).arg(result.failure);
  }
  return result;
}

std::function<bool(const QString&, const QString&)> Supervisor::line_hook() {
  if (!recorder_) return {};
  return [recorder = recorder_.get()](const QString& host, const QString& line) {
    return recorder->line(host, -1, false, line);
  };
}

std::function<void()> Supervisor::poll_hook() {
  if (!recorder_) return {};
  return [recorder = recorder_.get()] { recorder->flush(); };
}

void Supervisor::say(const QString& message) {
  err_ << message << "\n";
  err_.flush();
  record_message(message);
}

void Supervisor::record_message(const QString& message) {
  if (!recorder_) return;
  for (const QString& part : message.split('\n')) recorder_->line(host_, -1, true, part);
}

int Supervisor::finish(int code, bool stopped, const QString& detail) {
  if (finished_ || !recorder_) return code;
  finished_ = true;
  recorder_->finish(code, stopped, detail);
  if (!recorder_->recording()) return code;
  if (recorder_->complete()) {
    err_ << options_.who << ": recorded as run " << recorder_->run_id() << " (spur runs show " << recorder_->run_id()
         << ")\n";
  } else {
    err_ << options_.who << ": warning: run " << recorder_->run_id()
         << "'s record is incomplete: " << recorder_->incomplete_reason() << "\n";
  }
  err_.flush();
  return code;
}

std::function<void(const std::vector<SystemValue>&)> samples_on_output(QTextStream& out, const QString& stream_key,
                                                                       int machine_rank, double since) {
  return system_points(
      since, [&out, machine_rank, prefix = QString::fromStdString(stream_line::prefix(stream_key.toStdString()))](
                 QString key, const history::Point& point) {
        if (key.startsWith("system/gpu")) key.insert(7, QString("machine%1/").arg(machine_rank));
        const QJsonObject record{{"type", "metric"},
                                 {"key", key},
                                 {"step", static_cast<qint64>(point.step)},
                                 {"value", point.value},
                                 {"wall", point.wall}};
        out << prefix << QJsonDocument(record).toJson(QJsonDocument::Compact) << "\n" << Qt::flush;
      });
}

}  // namespace spur::app
