// SPDX-License-Identifier: Apache-2.0
// `spur runs serve --stdio`; see history_server.h.
#include "runs/history_server.h"

#include <unistd.h>

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cerrno>

#include "runs/history_protocol.h"
#include "runs/run_service.h"

namespace spur::app {
namespace {

constexpr qsizetype kMaxRequest = 1 << 20;
constexpr qint64 kConsolePage = 5000;  // console lines per answer at most (the client asks again from the last)

bool write_all(int fd, const QByteArray& bytes) {
  qsizetype done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.constData() + done, static_cast<size_t>(bytes.size() - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += n;
  }
  return true;
}

qint64 run_of(const QJsonObject& request) { return protocol::to_integer(request.value("run"), "run"); }

QString text_of(const QJsonObject& request, const char* key) {
  const auto value = request.value(key);
  if (!value.isString()) throw protocol::ProtocolError(std::string(key) + " is not text");
  return value.toString();
}

}  // namespace

HistoryServer::HistoryServer(RunService& service, QString version) : service_(service), version_(std::move(version)) {}

QByteArray HistoryServer::hello() const {
  protocol::Hello hello;
  hello.protocol = protocol::kVersion;
  hello.version = version_;
  hello.history = QFileInfo(QString::fromStdString(service_.history_path())).absoluteFilePath();
  hello.exists = service_.exists();
  hello.read_only = service_.read_only();
  return protocol::encode_hello(hello);
}

QByteArray HistoryServer::answer(const QByteArray& line) {
  qint64 id = 0;
  try {
    QJsonParseError error{};
    const auto document = QJsonDocument::fromJson(line, &error);
    if (error.error != QJsonParseError::NoError || !document.isObject()) {
      throw protocol::ProtocolError("a request is not a JSON object");
    }
    const QJsonObject request = document.object();
    id = protocol::to_integer(request.value("id"), "id");
    const QString call = request.value("call").toString();
    QJsonValue result;
    if (call == "state") {
      result = QJsonObject{{"exists", service_.exists()}, {"read_only", service_.read_only()}};
    } else if (call == "runs") {
      result = protocol::encode(service_.runs(protocol::decode_filter(request.value("filter"))));
    } else if (call == "count_runs") {
      result = static_cast<qint64>(service_.count_runs(protocol::decode_filter(request.value("filter"))));
    } else if (call == "find") {
      const auto run = service_.find(run_of(request));
      result = run ? QJsonValue(protocol::encode(*run)) : QJsonValue();
    } else if (call == "metric_briefs") {
      result = protocol::encode(service_.metric_briefs(run_of(request)));
    } else if (call == "events") {
      result = protocol::encode(service_.events(run_of(request)));
    } else if (call == "files") {
      result = protocol::encode(service_.files(run_of(request)));
    } else if (call == "console") {
      std::optional<int> rank;
      if (request.contains("rank") && !request.value("rank").isNull()) {
        rank = static_cast<int>(std::clamp<qint64>(protocol::to_integer(request.value("rank"), "rank"), -1, 1 << 30));
      }
      const qint64 after = protocol::to_integer(request.value("after"), "after");
      auto lines = service_.console(run_of(request), after, rank);
      if (std::ssize(lines) > kConsolePage) lines.resize(kConsolePage);
      result = protocol::encode(lines);
    } else if (call == "config") {
      result = service_.config(run_of(request));
    } else if (call == "export") {
      const QString format = text_of(request, "format");
      if (format != "csv" && format != "json") throw protocol::ProtocolError("format is neither csv nor json");
      QStringList keys;
      for (const auto& key : request.value("keys").toArray()) keys << key.toString();
      result = QString::fromUtf8(
          service_.export_metrics(run_of(request), format == "csv" ? ExportFormat::csv : ExportFormat::json, keys));
    } else if (call == "data_version") {
      service_.check_schema();
      result = static_cast<qint64>(service_.exists() ? service_.data_version() : 0);
    } else if (call == "metric_keys") {
      QJsonArray keys;
      for (const auto& key : service_.metric_keys(run_of(request))) keys.append(QString::fromStdString(key));
      result = keys;
    } else if (call == "last_points") {
      result = protocol::encode(service_.last_points(run_of(request)));
    } else if (call == "series") {
      const std::string key = text_of(request, "key").toStdString();
      if (request.contains("cursor")) {
        auto cursor = protocol::decode_cursor(request.value("cursor"));
        const auto points = service_.series(run_of(request), key, &cursor);
        result = QJsonObject{{"points", protocol::encode(points)}, {"cursor", protocol::encode(cursor)}};
      } else {
        result = QJsonObject{{"points", protocol::encode(service_.series(run_of(request), key))}};
      }
    } else if (call == "summary") {
      result = protocol::encode(service_.summary(run_of(request), text_of(request, "key").toStdString(),
                                                 protocol::decode_range(request.value("range"))));
    } else if (call == "rebuild_summaries") {
      result = service_.rebuild_summaries(run_of(request), text_of(request, "key").toStdString());
    } else if (call == "summarise") {
      result = static_cast<qint64>(service_.summarise({}, request.value("check").toBool()));
    } else if (call == "rename") {
      service_.rename(run_of(request), text_of(request, "name"));
    } else if (call == "tag") {
      service_.tag(run_of(request), text_of(request, "tag"), request.value("remove").toBool());
    } else if (call == "notes") {
      service_.set_notes(run_of(request), text_of(request, "notes"));
    } else if (call == "stop") {
      service_.stop(run_of(request));
    } else if (call == "remove") {
      service_.remove(run_of(request), request.value("force").toBool());
    } else {
      return protocol::encode_error(
          id, "protocol",
          QString("unknown call '%1' (this Spur %2 speaks protocol %3)").arg(call, version_).arg(protocol::kVersion));
    }
    return protocol::encode_result(id, result);
  } catch (const protocol::ProtocolError& e) {
    return protocol::encode_error(id, "protocol", QString::fromUtf8(e.what()));
  } catch (const RunServiceError& e) {
    return protocol::encode_error(id, "run", QString::fromUtf8(e.what()));
  } catch (const history::HistoryError& e) {
    return protocol::encode_error(id, e.busy() ? "busy" : "history", QString::fromUtf8(e.what()));
  } catch (const std::exception& e) {
    return protocol::encode_error(id, "history", QString::fromUtf8(e.what()));
  }
}

int serve(HistoryServer& server, int in_fd, int out_fd) {
  if (!write_all(out_fd, server.hello())) return 1;
  QByteArray pending;
  char buffer[64 * 1024];
  for (;;) {
    qsizetype newline;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const QByteArray line = pending.left(newline);
      pending.remove(0, newline + 1);
      if (line.trimmed().isEmpty()) continue;
      if (!write_all(out_fd, server.answer(line))) return 1;
    }
    if (pending.size() > kMaxRequest) {
      write_all(out_fd, protocol::encode_error(0, "protocol", "a request line is longer than 1 MiB"));
      return 2;
    }
    const ssize_t n = ::read(in_fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    pending.append(buffer, n);
  }
}

}  // namespace spur::app
