// SPDX-License-Identifier: Apache-2.0
// The launcher's run record; see run_recorder.h. A history that is busy (another launch writing), read-only or
// full never stops the run: the writer thread keeps what it took and retries with backoff; the end of the run
// waits for it, and says plainly what could not be recorded.
#include "launch/run_recorder.h"

#include "launch/byte_text.h"

#include <spur/core/stream_line.h>

#include <signal.h>
#include <unistd.h>

#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTextStream>

#include <algorithm>
#include <random>
#include <utility>

#include <spur/history/writer.h>

namespace spur::app {

QString local_host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? QString::fromLocal8Bit(name) : QString("localhost");
}
namespace {

using namespace std::chrono_literals;

// How long one statement waits for another connection's lock before the writer thread backs off and retries.
constexpr int kBusyTimeoutMs = 2000;
// Creating the run happens before any rank starts, so it may wait this long for a busy history.
constexpr auto kCreateDeadline = 60s;

}  // namespace

std::optional<QString> stream_record(const QString& line, const QString& key, int* rank) {
  if (key.isEmpty()) return std::nullopt;
  static const QRegularExpression prefixes(R"(^(?:\[[^\]]*\] )*?(?:\[rank(\d+)\] )?(?=@spur:))");
  const auto match = prefixes.match(line);
  if (!match.hasMatch()) return std::nullopt;
  const std::string text = line.mid(match.capturedLength()).toStdString();
  const auto json = stream_line::record(text, key.toStdString());
  if (!json) return std::nullopt;
  if (rank && !match.captured(1).isEmpty()) *rank = match.captured(1).toInt();
  return QString::fromStdString(std::string(*json));
}

std::size_t RunRecorder::Queue::values() const {
  std::size_t count = console.size();
  for (const auto& [key, points] : metrics) count += points.size();
  return count;
}

void RunRecorder::Queue::take(Queue& from) {
  if (console.empty()) {
    console.swap(from.console);
  } else {
    console.insert(console.end(), std::make_move_iterator(from.console.begin()),
                   std::make_move_iterator(from.console.end()));
    from.console.clear();
  }
  for (auto& [key, points] : from.metrics) {
    auto& mine = metrics[key];
    mine.insert(mine.end(), points.begin(), points.end());
  }
  from.metrics.clear();
  files.insert(files.end(), from.files.begin(), from.files.end());
  from.files.clear();
  if (from.total_steps) total_steps = from.total_steps;
  if (from.names) names = from.names;
  if (from.params) params = from.params;
  from.total_steps.reset();
  from.names.reset();
  from.params.reset();
}

RunRecorder::RunRecorder(const std::string& path, const history::Run& run, QTextStream& err, RunRecorderOptions options)
    : path_(path), command_(run.command), err_(err), options_(std::move(options)) {
  const auto deadline = std::chrono::steady_clock::now() + kCreateDeadline;
  bool said_waiting = false;
  for (auto backoff = 50ms;; backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1000ms)) {
    try {
      if (!writer_) writer_ = std::make_unique<history::HistoryWriter>(path, kBusyTimeoutMs);
      run_id_ = writer_->create_run(run);
      break;
    } catch (const history::HistoryError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() > deadline) {
        writer_.reset();
        warn(e.what());
        return;
      }
      if (!said_waiting) {
        said_waiting = true;
        err_ << "spur launch: waiting for the run history (another process is writing it)\n";
        err_.flush();
      }
      std::this_thread::sleep_for(backoff);
    } catch (const std::exception& e) {
      writer_.reset();
      warn(e.what());
      return;
    }
  }
  // The writer thread takes no signals: Ctrl-C, SIGTERM and SIGHUP are the launcher's (main thread's) to handle
  // or to hold back between restarts; a thread that accepted them would die of them instead.
  sigset_t all, previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  thread_ = std::thread([this] { writer_loop(); });
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

RunRecorder::~RunRecorder() {
  if (recording() && !finished_) finish(-1, false, "the launcher ended without recording how the run ended");
}

QProcessEnvironment RunRecorder::environment() const {
  QProcessEnvironment environment;
  if (!recording()) return environment;
  environment.insert("SPUR_HISTORY", QString::fromStdString(path_));
  environment.insert("SPUR_RUN_ID", QString::number(run_id_));
  // What a tracker elsewhere tags the run with (the mlflow tracker's spur.launch_command).
  if (!command_.empty()) environment.insert("SPUR_LAUNCH_COMMAND", QString::fromStdString(command_));
  return environment;
}

void RunRecorder::warn(const std::string& what) {
  if (warned_) return;
  warned_ = true;
  err_ << "spur launch: warning: the run history cannot be written (" << QString::fromStdString(what)
       << "); the run goes on, its record may be incomplete\n";
  err_.flush();
}

bool RunRecorder::line(const QString& host, int rank, bool error_stream, const QString& text) {
  if (!recording()) return stream_record(text, options_.stream_key).has_value();
  if (unreported_error_ && !warned_) {
    std::string error;
    {
      std::lock_guard lock(mutex_);
      error = last_error_;
    }
    warn(error + "; retrying");
  }
  int record_rank = rank;
  if (const auto json = stream_record(text, options_.stream_key, &record_rank)) {
    ingest(*json);
    return true;
  }
  // A remote launcher's lines arrive as "[rankN] text": keep the rank, drop the prefix.
  static const QRegularExpression prefix(R"(^\[rank(\d+)\] )");
  QString body = text;
  if (rank < 0) {
    if (const auto match = prefix.match(text); match.hasMatch()) {
      record_rank = match.captured(1).toInt();
      body = text.mid(match.capturedLength());
    }
  }
  history::ConsoleLine line;
  line.run_id = run_id_;
  line.host = host.toStdString();
  line.rank = record_rank;
  line.stream = error_stream ? "stderr" : "stdout";
  line.wall = history::now_seconds();
  line.text = text_with_replacements(body).toStdString();  // an invalid byte is U+FFFD there, not '?'
  std::lock_guard lock(mutex_);
  if (queued_ >= options_.queue_limit) {
    ++dropped_;
    return false;
  }
  ++queued_;
  pending_.console.push_back(std::move(line));
  return false;
}

void RunRecorder::metric(const QString& key, const history::Point& point) {
  if (!recording()) return;
  std::lock_guard lock(mutex_);
  queue_point(key.toStdString(), point);
}

void RunRecorder::files(const std::vector<history::RunFile>& files) {
  if (!recording()) return;
  std::lock_guard lock(mutex_);
  for (auto file : files) {
    file.run_id = run_id_;
    pending_.files.push_back(std::move(file));
  }
}

void RunRecorder::queue_point(const std::string& key, const history::Point& point) {
  if (queued_ < options_.queue_limit) {
    ++queued_;
    pending_.metrics[key].push_back(point);
  } else {
    ++dropped_;
  }
}

void RunRecorder::ingest(const QString& json) {
  const auto object = QJsonDocument::fromJson(json.toUtf8()).object();
  const QString type = object.value("type").toString();
  std::lock_guard lock(mutex_);
  if (type == "metric") {
    queue_point(object.value("key").toString().toStdString(),
                {static_cast<int64_t>(object.value("step").toDouble()), object.value("value").toDouble(),
                 object.value("wall").toDouble(history::now_seconds())});
  } else if ((type == "run" || type == "total_steps") && object.value("total_steps").toDouble() > 0) {
    pending_.total_steps = static_cast<int64_t>(object.value("total_steps").toDouble());
  }
  if (type == "file" && !object.value("path").toString().isEmpty()) {
    // A checkpoint or model a rank wrote on its machine (the stream tracker's record).
    history::RunFile file;
    file.run_id = run_id_;
    file.kind = object.value("kind").toString().left(32).toStdString();
    file.path = object.value("path").toString().toStdString();
    file.step = static_cast<int64_t>(object.value("step").toDouble(-1));
    file.bytes = static_cast<int64_t>(object.value("bytes").toDouble());
    file.wall = object.value("wall").toDouble(history::now_seconds());
    file.host = object.value("host").toString().toStdString();
    pending_.files.push_back(std::move(file));
  }
  if (type == "run") {
    pending_.names = {object.value("project").toString().toStdString(), object.value("name").toString().toStdString()};
    pending_.params = QJsonDocument(object.value("params").toObject()).toJson(QJsonDocument::Compact).toStdString();
  }
}

void RunRecorder::flush() {
  if (!recording()) return;
  std::lock_guard lock(mutex_);
  flush_asked_ = true;
  wake_.notify_all();
}

void RunRecorder::write(Queue& queue, const std::optional<Final>& final) {
  if (queue.names) {
    writer_->set_names(run_id_, queue.names->first, queue.names->second);
    queue.names.reset();
  }
  if (queue.params) {
    writer_->set_params(run_id_, *queue.params);
    queue.params.reset();
  }
  if (!queue.console.empty()) {
    writer_->append_console(queue.console);  // one transaction: all or nothing
    queue.console.clear();
  }
  if (!queue.metrics.empty()) {
    std::vector<history::MetricAppend> append;
    for (const auto& [key, points] : queue.metrics) append.push_back({key, points});
    writer_->append_metrics(run_id_, append);
    queue.metrics.clear();
  }
  if (queue.total_steps) {
    writer_->set_total_steps(run_id_, *queue.total_steps);
    queue.total_steps.reset();
  }
  if (!queue.files.empty()) {
    writer_->add_files(queue.files);
    queue.files.clear();
  }
  if (final) writer_->set_status(run_id_, final->status, final->exit_code, final->detail);
}

void RunRecorder::writer_loop() {
  struct Done {
    RunRecorder* self;
    ~Done() {
      std::lock_guard lock(self->mutex_);
      self->writer_done_ = true;
      self->wake_.notify_all();
    }
  } done{this};
  std::minstd_rand jitter(static_cast<unsigned>(run_id_));
  Queue unwritten;  // taken from pending_, not yet in the history
  auto backoff = 20ms;
  int failures_after_final = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait_for(lock, options_.interval, [this] { return flush_asked_ || final_ || give_up_; });
    if (give_up_) return;
    flush_asked_ = false;
    unwritten.take(pending_);
    const auto final = final_;
    const std::size_t before = unwritten.values();
    lock.unlock();
    std::string error;
    bool error_busy = false;
    try {
      write(unwritten, final);
    } catch (const history::HistoryError& e) {
      error = e.what();
      error_busy = e.busy();
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    queued_ -= before - unwritten.values();
    if (error.empty()) {
      backoff = 20ms;
      if (final) {
        final_written_ = true;
        wake_.notify_all();
        return;
      }
      continue;
    }
    // Another launch holds the history, or it cannot be written now: keep everything, wait, try again. A
    // history that fails for another reason (read-only, full) gets a few more tries once the run has ended.
    last_error_ = error;
    last_error_busy_ = error_busy;
    if (!error_busy) {
      unreported_error_ = true;
      if (final && ++failures_after_final > 3) return;
    }
    const auto pause = backoff + std::chrono::milliseconds(jitter() % (backoff.count() + 1));
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, 1000ms);
    if (wake_.wait_for(lock, pause, [this] { return give_up_; })) return;
  }
}

bool RunRecorder::finish(int exit_code, bool stopped, const QString& detail) {
  if (finished_) return complete_;
  finished_ = true;
  if (!recording()) return false;
  Final final;
  final.status = exit_code == 0 ? "finished" : stopped ? "stopped" : "failed";
  final.exit_code = exit_code;
  uint64_t dropped = 0;
  {
    std::unique_lock lock(mutex_);
    dropped = dropped_;
    QString text = detail;
    if (dropped) {
      text += QString(text.isEmpty() ? "" : "; ") + QString::number(dropped) +
              " line(s) or value(s) not recorded (more than " + QString::number(options_.queue_limit) +
              " waited for the history at once)";
    }
    final.detail = text.toStdString();
    final_ = final;
    wake_.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + options_.finish_timeout;
    if (!wake_.wait_for(lock, std::min<std::chrono::milliseconds>(options_.finish_timeout, 3000ms),
                        [this] { return final_written_ || writer_done_; })) {
      err_ << "spur launch: waiting for the run history to take the run's last lines and status ("
           << QString::fromStdString(last_error_.empty() ? "busy" : last_error_) << ")\n";
      err_.flush();
      wake_.wait_until(lock, deadline, [this] { return final_written_ || writer_done_; });
    }
    if (!final_written_) give_up_ = true;
    wake_.notify_all();
  }
  thread_.join();
  std::lock_guard lock(mutex_);
  complete_ = final_written_ && dropped == 0;
  if (!final_written_) {
    incomplete_ = QString("%1 line(s) or value(s) and the run's status were not written within %2 s: %3")
                      .arg(queued_)
                      .arg(options_.finish_timeout.count() / 1000.0)
                      .arg(QString::fromStdString(last_error_));
  } else if (dropped) {
    incomplete_ = QString::fromStdString(final.detail);
  }
  writer_.reset();
  return complete_;
}

}  // namespace spur::app
