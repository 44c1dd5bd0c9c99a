// SPDX-License-Identifier: Apache-2.0
// The launcher's run record; see run_recorder.h. A history that fails (locked, read-only, full) never stops the
// run: one warning, a bounded buffer, and a count of what was dropped.
#include "runs/run_recorder.h"

#include <signal.h>

#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTextStream>

#include <spur/history/writer.h>

namespace spur::app {

std::optional<QString> stream_record(const QString& line, int* rank) {
  static const QRegularExpression record(R"(^(?:\[[^\]]*\] )*?(?:\[rank(\d+)\] )?@spur (\{.*\})\s*$)");
  const auto match = record.match(line);
  if (!match.hasMatch()) return std::nullopt;
  if (rank && !match.captured(1).isEmpty()) *rank = match.captured(1).toInt();
  return match.captured(2);
}

RunRecorder::RunRecorder(const std::string& path, history::Run run, QTextStream& err) : path_(path), err_(err) {
  try {
    // A short wait for locks: this runs on the launcher's event loop, which must keep reading the ranks' output.
    writer_ = std::make_unique<history::HistoryWriter>(path, /*busy_timeout_ms=*/200);
    run_id_ = writer_->create_run(run);
  } catch (const std::exception& e) {
    writer_.reset();
    warn(e.what());
    return;
  }
  timer_.setInterval(200);
  connect(&timer_, &QTimer::timeout, this, [this] { flush(); });
  timer_.start();
}

RunRecorder::~RunRecorder() { flush(); }

QProcessEnvironment RunRecorder::environment() const {
  QProcessEnvironment environment;
  if (!recording()) return environment;
  environment.insert("SPUR_HISTORY", QString::fromStdString(path_));
  environment.insert("SPUR_RUN_ID", QString::number(run_id_));
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
  if (!recording()) return stream_record(text).has_value();
  int record_rank = rank;
  if (const auto json = stream_record(text, &record_rank)) {
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
  if (console_.size() >= buffered_limit_) {
    ++dropped_;
    return false;
  }
  history::ConsoleLine line;
  line.run_id = run_id_;
  line.host = host.toStdString();
  line.rank = record_rank;
  line.stream = error_stream ? "stderr" : "stdout";
  line.wall = history::now_seconds();
  line.text = body.toStdString();
  console_.push_back(std::move(line));
  return false;
}

void RunRecorder::ingest(const QString& json) {
  const auto object = QJsonDocument::fromJson(json.toUtf8()).object();
  const QString type = object.value("type").toString();
  if (type == "metric") {
    auto& points = metrics_[object.value("key").toString().toStdString()];
    if (points.size() < buffered_limit_) {
      points.push_back({static_cast<int64_t>(object.value("step").toDouble()), object.value("value").toDouble(),
                        object.value("wall").toDouble(history::now_seconds())});
    } else {
      ++dropped_;
    }
  } else if ((type == "run" || type == "total_steps") && object.value("total_steps").toDouble() > 0) {
    total_steps_ = static_cast<int64_t>(object.value("total_steps").toDouble());
  }
  if (type == "run" && writer_) {
    try {
      writer_->set_names(run_id_, object.value("project").toString().toStdString(),
                         object.value("name").toString().toStdString());
      writer_->set_params(run_id_, QJsonDocument(object.value("params").toObject()).toJson(QJsonDocument::Compact).toStdString());
    } catch (const std::exception& e) {
      warn(e.what());
    }
  }
}

void RunRecorder::flush() {
  if (!writer_) return;
  try {
    if (!console_.empty()) {
      writer_->append_console(console_);
      console_.clear();
    }
    if (!metrics_.empty()) {
      std::vector<history::MetricAppend> append;
      for (const auto& [key, points] : metrics_) append.push_back({key, points});  // kept until written
      writer_->append_metrics(run_id_, append);
      metrics_.clear();
    }
    if (total_steps_) {
      writer_->set_total_steps(run_id_, *total_steps_);
      total_steps_.reset();
    }
  } catch (const std::exception& e) {
    warn(e.what());  // kept in memory (bounded) and tried again at the next flush
  }
}

void RunRecorder::finish(int exit_code, bool stopped, const QString& detail) {
  timer_.stop();
  flush();
  if (!writer_) return;
  const std::string status = exit_code == 0 ? "finished" : stopped ? "stopped" : "failed";
  QString text = detail;
  if (dropped_) text += QString(text.isEmpty() ? "" : "; ") + QString::number(dropped_) + " line(s) or value(s) not recorded";
  try {
    writer_->set_status(run_id_, status, exit_code, text.toStdString());
  } catch (const std::exception& e) {
    warn(e.what());
  }
  writer_.reset();
}

}  // namespace spur::app
