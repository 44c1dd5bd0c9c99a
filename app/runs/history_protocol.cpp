// SPDX-License-Identifier: Apache-2.0
// The remote history's wire format; see history_protocol.h.
#include "runs/history_protocol.h"

#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runs/run_service.h"
#include "runs/run_status.h"

namespace spur::app::protocol {
namespace {

[[noreturn]] void bad(const QString& why) { throw ProtocolError(why.toStdString()); }

// What arrived, for a message: at most 80 characters of it, control characters shown as '?'.
QString shown(const QByteArray& line) {
  QString text = QString::fromUtf8(line.left(80));
  for (auto& c : text) {
    if (c.category() == QChar::Other_Control || c.category() == QChar::Other_Format) c = '?';
  }
  return line.size() > 80 ? text + "..." : text;
}

QJsonObject object_of(const QByteArray& line, const char* what) {
  QJsonParseError error{};
  const auto document = QJsonDocument::fromJson(line, &error);
  if (error.error != QJsonParseError::NoError || !document.isObject()) {
    bad(QString("%1 is not a JSON object: '%2'").arg(what, shown(line)));
  }
  return document.object();
}

QJsonObject object_of(const QJsonValue& value, const char* what) {
  if (!value.isObject()) bad(QString("%1 is not an object").arg(what));
  return value.toObject();
}

QJsonArray array_of(const QJsonValue& value, const char* what) {
  if (!value.isArray()) bad(QString("%1 is not a list").arg(what));
  return value.toArray();
}

std::string text(const QJsonValue& value, const char* what) {
  if (!value.isString()) bad(QString("%1 is not text").arg(what));
  return value.toString().toStdString();
}

std::string text_or_empty(const QJsonValue& value, const char* what) {
  return value.isUndefined() || value.isNull() ? std::string() : text(value, what);
}

QByteArray line_of(const QJsonObject& object) { return QJsonDocument(object).toJson(QJsonDocument::Compact) + '\n'; }

}  // namespace

QJsonValue number(double value) {
  if (std::isnan(value)) return QString("nan");
  if (std::isinf(value)) return QString(value > 0 ? "inf" : "-inf");
  return value;
}

double to_double(const QJsonValue& value, const char* what) {
  if (value.isDouble()) return value.toDouble();
  if (value.isString()) {
    const QString s = value.toString();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  bad(QString("%1 is not a number").arg(what));
}

qint64 to_integer(const QJsonValue& value, const char* what) {
  if (!value.isDouble()) bad(QString("%1 is not a number").arg(what));
  const double d = value.toDouble();
  // Whole, and inside the range a double holds exactly (ids, steps and counts are far below 2^53).
  if (!(std::fabs(d) <= 9007199254740992.0) || std::trunc(d) != d) bad(QString("%1 is not a whole number").arg(what));
  return static_cast<qint64>(d);
}

QByteArray encode_hello(const Hello& hello) {
  return line_of(QJsonObject{{"spur", "serve"},
                             {"protocol", hello.protocol},
                             {"version", hello.version},
                             {"history", hello.history},
                             {"exists", hello.exists},
                             {"read_only", hello.read_only}});
}

Hello decode_hello(const QByteArray& line) {
  QJsonParseError error{};
  const auto document = QJsonDocument::fromJson(line, &error);
  if (error.error != QJsonParseError::NoError || !document.isObject() ||
      document.object().value("spur").toString() != "serve") {
    bad(QString("it answered '%1', not spur runs serve's greeting").arg(shown(line.trimmed())));
  }
  const auto object = document.object();
  Hello hello;
  hello.protocol = static_cast<int>(std::clamp<qint64>(to_integer(object.value("protocol"), "protocol"), -1, 1 << 20));
  hello.version = object.value("version").toString();
  hello.history = object.value("history").toString();
  hello.exists = object.value("exists").toBool();
  hello.read_only = object.value("read_only").toBool();
  return hello;
}

QByteArray encode_request(qint64 id, const QString& call, QJsonObject arguments) {
  arguments.insert("id", id);
  arguments.insert("call", call);
  return line_of(arguments);
}

QByteArray encode_result(qint64 id, const QJsonValue& result) {
  return line_of(QJsonObject{{"id", id}, {"result", result}});
}

QByteArray encode_error(qint64 id, const QString& kind, const QString& message) {
  return line_of(QJsonObject{{"id", id}, {"error", QJsonObject{{"kind", kind}, {"message", message}}}});
}

Answer decode_answer(const QByteArray& line) {
  const auto object = object_of(line, "the answer");
  Answer answer;
  answer.id = to_integer(object.value("id"), "the answer's id");
  if (object.contains("error")) {
    const auto error = object_of(object.value("error"), "the error");
    answer.error_kind = QString::fromStdString(text(error.value("kind"), "the error's kind"));
    answer.error_message = QString::fromStdString(text(error.value("message"), "the error's message"));
    if (answer.error_kind.isEmpty()) bad("the error has no kind");
  } else if (object.contains("result")) {
    answer.result = object.value("result");
  } else {
    bad("the answer has neither a result nor an error");
  }
  return answer;
}

QJsonObject encode(const history::RunFilter& filter) {
  QJsonArray statuses;
  for (const auto& status : filter.statuses) statuses.append(QString::fromStdString(status));
  return QJsonObject{{"statuses", statuses},
                     {"tag", QString::fromStdString(filter.tag)},
                     {"project", QString::fromStdString(filter.project)},
                     {"since", filter.since},
                     {"limit", static_cast<qint64>(filter.limit)},
                     {"offset", static_cast<qint64>(filter.offset)},
                     {"from_id", static_cast<qint64>(filter.from_id)},
                     {"before_id", static_cast<qint64>(filter.before_id)},
                     {"newest_first", filter.newest_first}};
}

history::RunFilter decode_filter(const QJsonValue& value) {
  const auto object = object_of(value, "the filter");
  history::RunFilter filter;
  for (const auto& status : array_of(object.value("statuses"), "the filter's statuses")) {
    filter.statuses.push_back(text(status, "a status"));
  }
  filter.tag = text_or_empty(object.value("tag"), "the filter's tag");
  filter.project = text_or_empty(object.value("project"), "the filter's project");
  filter.since = to_double(object.value("since"), "the filter's since");
  filter.limit = to_integer(object.value("limit"), "the filter's limit");
  filter.offset = to_integer(object.value("offset"), "the filter's offset");
  filter.from_id = to_integer(object.value("from_id"), "the filter's from_id");
  filter.before_id = to_integer(object.value("before_id"), "the filter's before_id");
  filter.newest_first = object.value("newest_first").toBool();
  if (filter.limit < -1 || filter.offset < 0) bad("the filter's limit or offset is negative");
  return filter;
}

QJsonObject encode(const history::Run& run) {
  QJsonArray tags;
  for (const auto& tag : run.tags) tags.append(QString::fromStdString(tag));
  return QJsonObject{{"id", static_cast<qint64>(run.id)},
                     {"name", QString::fromStdString(run.name)},
                     {"project", QString::fromStdString(run.project)},
                     {"status", effective_status(run)},  // as its own machine sees it
                     {"created", number(run.created)},
                     {"started", number(run.started)},
                     {"ended", number(run.ended)},
                     {"exit_code", run.exit_code ? QJsonValue(*run.exit_code) : QJsonValue()},
                     {"target", QString::fromStdString(run.target)},
                     {"hosts", QString::fromStdString(run.hosts)},
                     {"config", QString::fromStdString(run.config)},
                     {"command", QString::fromStdString(run.command)},
                     {"notes", QString::fromStdString(run.notes)},
                     {"params", QString::fromStdString(run.params)},
                     {"tags", tags},
                     {"total_steps", static_cast<qint64>(run.total_steps)},
                     {"last_step", static_cast<qint64>(run.last_step)},
                     {"pid", static_cast<qint64>(run.pid)},
                     {"host", QString::fromStdString(run.host)},
                     {"parent", static_cast<qint64>(run.parent)}};
}

history::Run decode_run(const QJsonValue& value) {
  const auto object = object_of(value, "a run");
  history::Run run;
  run.id = to_integer(object.value("id"), "a run's id");
  run.name = text(object.value("name"), "a run's name");
  run.project = text_or_empty(object.value("project"), "a run's project");
  run.status = text(object.value("status"), "a run's status");
  if (!history::valid_status(run.status))
    bad("a run's status is not one of queued, running, finished, failed, stopped");
  run.created = to_double(object.value("created"), "a run's created");
  run.started = to_double(object.value("started"), "a run's started");
  run.ended = to_double(object.value("ended"), "a run's ended");
  if (const auto code = object.value("exit_code"); !code.isNull() && !code.isUndefined()) {
    run.exit_code = static_cast<int>(std::clamp<qint64>(to_integer(code, "a run's exit code"), -1000000, 1000000));
  }
  run.target = text_or_empty(object.value("target"), "a run's target");
  run.hosts = text_or_empty(object.value("hosts"), "a run's hosts");
  run.config = text_or_empty(object.value("config"), "a run's config");
  run.command = text_or_empty(object.value("command"), "a run's command");
  run.notes = text_or_empty(object.value("notes"), "a run's notes");
  run.params = text_or_empty(object.value("params"), "a run's params");
  if (run.params.empty()) run.params = "{}";
  for (const auto& tag : array_of(object.value("tags"), "a run's tags")) run.tags.push_back(text(tag, "a tag"));
  run.total_steps = to_integer(object.value("total_steps"), "a run's total_steps");
  run.last_step = to_integer(object.value("last_step"), "a run's last_step");
  run.pid = to_integer(object.value("pid"), "a run's pid");
  run.host = text_or_empty(object.value("host"), "a run's host");
  run.parent = to_integer(object.value("parent"), "a run's parent");
  if (run.id <= 0) bad("a run's id is not positive");
  return run;
}

QJsonArray encode(const std::vector<history::Run>& runs) {
  QJsonArray array;
  for (const auto& run : runs) {
    QJsonObject object = encode(run);
    object.remove("config");  // a list's runs go without it (1-2 KB each); find gives it
    array.append(object);
  }
  return array;
}

std::vector<history::Run> decode_runs(const QJsonValue& value) {
  std::vector<history::Run> runs;
  for (const auto& run : array_of(value, "the runs")) runs.push_back(decode_run(run));
  return runs;
}

QJsonArray encode(const std::vector<MetricBrief>& briefs) {
  QJsonArray array;
  for (const auto& brief : briefs) {
    array.append(QJsonObject{{"key", QString::fromStdString(brief.key)},
                             {"points", static_cast<qint64>(brief.points)},
                             {"last", number(brief.last)},
                             {"last_step", static_cast<qint64>(brief.last_step)},
                             {"min", number(brief.min)},
                             {"max", number(brief.max)}});
  }
  return array;
}

std::vector<MetricBrief> decode_briefs(const QJsonValue& value) {
  std::vector<MetricBrief> briefs;
  for (const auto& item : array_of(value, "the metrics")) {
    const auto object = object_of(item, "a metric");
    briefs.push_back(MetricBrief{
        text(object.value("key"), "a metric's key"), to_integer(object.value("points"), "a metric's points"),
        to_double(object.value("last"), "a metric's last"),
        to_integer(object.value("last_step"), "a metric's last_step"), to_double(object.value("min"), "a metric's min"),
        to_double(object.value("max"), "a metric's max")});
  }
  return briefs;
}

QJsonArray encode(const std::vector<history::Event>& events) {
  QJsonArray array;
  for (const auto& event : events) {
    array.append(QJsonObject{{"id", static_cast<qint64>(event.id)},
                             {"run", static_cast<qint64>(event.run_id)},
                             {"wall", number(event.wall)},
                             {"status", QString::fromStdString(event.status)},
                             {"detail", QString::fromStdString(event.detail)}});
  }
  return array;
}

QJsonArray encode(const std::vector<history::RunFile>& files) {
  QJsonArray array;
  for (const auto& file : files) {
    array.append(QJsonObject{{"id", static_cast<qint64>(file.id)},
                             {"run", static_cast<qint64>(file.run_id)},
                             {"kind", QString::fromStdString(file.kind)},
                             {"path", QString::fromStdString(file.path)},
                             {"step", static_cast<qint64>(file.step)},
                             {"bytes", static_cast<qint64>(file.bytes)},
                             {"wall", number(file.wall)},
                             {"host", QString::fromStdString(file.host)}});
  }
  return array;
}

std::vector<history::RunFile> decode_files(const QJsonValue& value) {
  std::vector<history::RunFile> files;
  for (const auto& item : array_of(value, "the files")) {
    const auto object = object_of(item, "a file");
    files.push_back(history::RunFile{
        to_integer(object.value("id"), "a file's id"), to_integer(object.value("run"), "a file's run"),
        text(object.value("kind"), "a file's kind"), text(object.value("path"), "a file's path"),
        to_integer(object.value("step"), "a file's step"), to_integer(object.value("bytes"), "a file's bytes"),
        to_double(object.value("wall"), "a file's wall"), text_or_empty(object.value("host"), "a file's host")});
  }
  return files;
}

std::vector<history::Event> decode_events(const QJsonValue& value) {
  std::vector<history::Event> events;
  for (const auto& item : array_of(value, "the events")) {
    const auto object = object_of(item, "an event");
    events.push_back(history::Event{
        to_integer(object.value("id"), "an event's id"), to_integer(object.value("run"), "an event's run"),
        to_double(object.value("wall"), "an event's wall"), text(object.value("status"), "an event's status"),
        text_or_empty(object.value("detail"), "an event's detail")});
  }
  return events;
}

QJsonArray encode(const std::vector<history::ConsoleLine>& lines) {
  QJsonArray array;
  for (const auto& line : lines) {
    array.append(QJsonObject{{"id", static_cast<qint64>(line.id)},
                             {"host", QString::fromStdString(line.host)},
                             {"rank", line.rank},
                             {"stream", QString::fromStdString(line.stream)},
                             {"wall", number(line.wall)},
                             {"text", QString::fromStdString(line.text)}});
  }
  return array;
}

std::vector<history::ConsoleLine> decode_console(const QJsonValue& value) {
  std::vector<history::ConsoleLine> lines;
  for (const auto& item : array_of(value, "the console")) {
    const auto object = object_of(item, "a console line");
    history::ConsoleLine line;
    line.id = to_integer(object.value("id"), "a console line's id");
    line.host = text_or_empty(object.value("host"), "a console line's host");
    line.rank = static_cast<int>(std::clamp<qint64>(to_integer(object.value("rank"), "a console line's rank"), -1,
                                                    std::numeric_limits<int>::max()));
    line.stream = text_or_empty(object.value("stream"), "a console line's stream");
    line.wall = to_double(object.value("wall"), "a console line's wall");
    line.text = text(object.value("text"), "a console line's text");
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

QJsonArray encode_point(const history::Point& point) {
  return QJsonArray{static_cast<qint64>(point.step), number(point.value), number(point.wall)};
}

history::Point decode_point(const QJsonValue& value) {
  const auto array = array_of(value, "a point");
  if (array.size() != 3) bad("a point is not [step, value, wall]");
  return {to_integer(array[0], "a point's step"), to_double(array[1], "a point's value"),
          to_double(array[2], "a point's wall")};
}

}  // namespace

QJsonArray encode(const std::vector<history::Point>& points) {
  QJsonArray array;
  for (const auto& point : points) array.append(encode_point(point));
  return array;
}

std::vector<history::Point> decode_points(const QJsonValue& value) {
  std::vector<history::Point> points;
  const auto array = array_of(value, "the points");
  points.reserve(static_cast<size_t>(array.size()));
  for (const auto& point : array) points.push_back(decode_point(point));
  return points;
}

QJsonObject encode(const std::map<std::string, history::Point>& last_points) {
  QJsonObject object;
  for (const auto& [key, point] : last_points) object.insert(QString::fromStdString(key), encode_point(point));
  return object;
}

std::map<std::string, history::Point> decode_last_points(const QJsonValue& value) {
  std::map<std::string, history::Point> points;
  const auto object = object_of(value, "the last points");
  for (auto it = object.begin(); it != object.end(); ++it) points[it.key().toStdString()] = decode_point(it.value());
  return points;
}

QJsonObject encode(const history::SeriesCursor& cursor) {
  return QJsonObject{{"chunk", static_cast<qint64>(cursor.chunk_id)},
                     {"points", static_cast<qint64>(cursor.points_in_chunk)}};
}

history::SeriesCursor decode_cursor(const QJsonValue& value) {
  const auto object = object_of(value, "the cursor");
  return {to_integer(object.value("chunk"), "the cursor's chunk"),
          to_integer(object.value("points"), "the cursor's points")};
}

QJsonObject encode(const history::SeriesRange& range) {
  return QJsonObject{{"lo", number(range.lo)},
                     {"hi", number(range.hi)},
                     {"by_wall", range.by_wall},
                     {"width", static_cast<qint64>(range.width)}};
}

history::SeriesRange decode_range(const QJsonValue& value) {
  const auto object = object_of(value, "the range");
  history::SeriesRange range;
  range.lo = to_double(object.value("lo"), "the range's lo");
  range.hi = to_double(object.value("hi"), "the range's hi");
  range.by_wall = object.value("by_wall").toBool();
  range.width = to_integer(object.value("width"), "the range's width");
  if (range.width < 1 || range.width > 1'000'000) bad("the range's width is not between 1 and 1,000,000");
  return range;
}

QJsonObject encode(const history::SeriesSummary& summary) {
  QJsonArray buckets;
  for (const auto& b : summary.buckets) {
    if (b.count == 1) {  // a point: its 3 numbers say the bucket's 11 (history::Bucket::of)
      buckets.append(QJsonArray{static_cast<qint64>(b.step_lo), number(b.first), number(b.wall_lo)});
      continue;
    }
    buckets.append(QJsonArray{static_cast<qint64>(b.count), static_cast<qint64>(b.step_lo),
                              static_cast<qint64>(b.step_hi), number(b.wall_lo), number(b.wall_hi), number(b.min),
                              number(b.max), number(b.first), number(b.last), number(b.sum),
                              static_cast<qint64>(b.finite)});
  }
  return QJsonObject{{"buckets", buckets},
                     {"points_per_bucket", static_cast<qint64>(summary.points_per_bucket)},
                     {"level", summary.level},
                     {"summarised", summary.summarised},
                     {"total_points", static_cast<qint64>(summary.total_points)},
                     {"first_wall", number(summary.first_wall)},
                     {"end_chunk", static_cast<qint64>(summary.end_chunk_id)},
                     {"end_points", static_cast<qint64>(summary.end_chunk_points)}};
}

history::SeriesSummary decode_summary(const QJsonValue& value) {
  const auto object = object_of(value, "the summary");
  history::SeriesSummary summary;
  for (const auto& item : array_of(object.value("buckets"), "the buckets")) {
    const auto b = array_of(item, "a bucket");
    if (b.size() == 3) {
      summary.buckets.push_back(
          history::Bucket::of({to_integer(b[0], "a point's step"), to_double(b[1], "a point's value"),
                               to_double(b[2], "a point's wall time")}));
      continue;
    }
    if (b.size() != 11) bad("a bucket has neither 3 fields (a point) nor 11");
    history::Bucket bucket;
    bucket.count = to_integer(b[0], "a bucket's count");
    bucket.step_lo = to_integer(b[1], "a bucket's step_lo");
    bucket.step_hi = to_integer(b[2], "a bucket's step_hi");
    bucket.wall_lo = to_double(b[3], "a bucket's wall_lo");
    bucket.wall_hi = to_double(b[4], "a bucket's wall_hi");
    bucket.min = to_double(b[5], "a bucket's min");
    bucket.max = to_double(b[6], "a bucket's max");
    bucket.first = to_double(b[7], "a bucket's first");
    bucket.last = to_double(b[8], "a bucket's last");
    bucket.sum = to_double(b[9], "a bucket's sum");
    bucket.finite = to_integer(b[10], "a bucket's finite");
    if (bucket.count < 1 || bucket.finite < 0 || bucket.finite > bucket.count) bad("a bucket's counts do not add up");
    summary.buckets.push_back(bucket);
  }
  summary.points_per_bucket = to_integer(object.value("points_per_bucket"), "points_per_bucket");
  summary.level = static_cast<int>(std::clamp<qint64>(to_integer(object.value("level"), "level"), 0, 64));
  summary.summarised = object.value("summarised").toBool();
  summary.total_points = to_integer(object.value("total_points"), "total_points");
  summary.first_wall = to_double(object.value("first_wall"), "first_wall");
  summary.end_chunk_id = to_integer(object.value("end_chunk"), "end_chunk");
  summary.end_chunk_points = to_integer(object.value("end_points"), "end_points");
  if (summary.points_per_bucket < 1) bad("points_per_bucket is not positive");
  return summary;
}

}  // namespace spur::app::protocol
