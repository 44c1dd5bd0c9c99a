// SPDX-License-Identifier: Apache-2.0
// The run service; see run_service.h.
#include "runs/run_service.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSaveFile>

#include <algorithm>
#include <cmath>

#include <spur/history/reader.h>
#include <spur/history/database.h>
#include <spur/history/writer.h>

#include "config/run_config.h"
#include "runs/history_protocol.h"
#include <spur/core/metrics_csv.h>
#include "runs/run_status.h"

namespace spur::app {
namespace {

QString no_run(int64_t id, const std::string& path) {
  if (!QFileInfo::exists(QString::fromStdString(path))) {
    return QString("no run history at %1 yet (spur launch records runs there)").arg(QString::fromStdString(path));
  }
  return QString("no run %1 in %2").arg(id).arg(QString::fromStdString(path));
}

[[noreturn]] void refuse(const QString& why) { throw RunServiceError(why.toStdString()); }

}  // namespace

QJsonObject run_json(const history::Run& run) {
  QJsonArray tags;
  for (const auto& tag : run.tags) tags.append(QString::fromStdString(tag));
  return QJsonObject{{"id", static_cast<qint64>(run.id)},
                     {"name", QString::fromStdString(run.name)},
                     {"project", QString::fromStdString(run.project)},
                     {"status", effective_status(run)},
                     {"started", run.started > 0 ? QJsonValue(run.started) : QJsonValue()},
                     {"ended", run.ended > 0 ? QJsonValue(run.ended) : QJsonValue()},
                     {"exit_code", run.exit_code ? QJsonValue(*run.exit_code) : QJsonValue()},
                     {"target", QString::fromStdString(run.target)},
                     {"hosts", QString::fromStdString(run.hosts)},
                     {"command", QString::fromStdString(run.command)},
                     {"notes", QString::fromStdString(run.notes)},
                     {"parent", run.parent > 0 ? QJsonValue(static_cast<qint64>(run.parent)) : QJsonValue()},
                     {"tags", tags},
                     {"last_step", static_cast<qint64>(run.last_step)},
                     {"total_steps", static_cast<qint64>(run.total_steps)},
                     {"params", QJsonDocument::fromJson(QByteArray::fromStdString(run.params)).object()}};
}

RunService::RunService(std::string history_path, RemoteOptions remote) : path_(std::move(history_path)) {
  if (auto address = HistoryAddress::parse(QString::fromStdString(path_))) {
    remote_ = std::make_unique<RemoteHistory>(std::move(*address), std::move(remote));
  }
}

RunService::~RunService() = default;

QJsonValue RunService::ask(const QString& call, const QJsonObject& arguments, RemoteHistory::Retry retry) const {
  return remote_->call(call, arguments, retry);
}

bool RunService::exists() const {
  if (remote_) return ask("state").toObject().value("exists").toBool();
  return reader_ || QFileInfo::exists(QString::fromStdString(path_));
}

bool RunService::read_only() const {
  if (remote_) return ask("state").toObject().value("read_only").toBool();
  return exists() && !history::Database::writable(path_);
}

void RunService::refuse_if_read_only() const {
  if (read_only()) {
    refuse("run history " + QString::fromStdString(path_) +
           " is read-only here (read-only storage, or another user's): it can be read, not changed");
  }
}

std::unique_ptr<history::HistoryWriter> RunService::change(int64_t id) const {
  // Never creates a history: a change to a run needs the run.
  if (!exists()) refuse(no_run(id, path_));
  refuse_if_read_only();
  auto writer = std::make_unique<history::HistoryWriter>(path_);
  if (!writer->has_run(id)) refuse(no_run(id, path_));
  return writer;
}

history::HistoryReader& RunService::reader() const {
  if (!reader_) reader_ = std::make_unique<history::HistoryReader>(path_);
  return *reader_;
}

QString RunService::next_name(const QString& name, const QSet<QString>& taken) {
  static const QRegularExpression numbered(R"(^(.*) \((\d{1,9})\)$)");
  QString base = name.trimmed();
  int number = 2;
  if (const auto match = numbered.match(base); match.hasMatch()) {
    base = match.captured(1);
    number = match.captured(2).toInt() + 1;
  }
  QString next = QString("%1 (%2)").arg(base, QString::number(number));
  while (taken.contains(next)) next = QString("%1 (%2)").arg(base, QString::number(++number));
  return next;
}

LaunchRequest RunService::relaunch_request(const history::Run& run, const QString& config_file, QString name) {
  if (run.config.empty() || run.command.empty()) {
    refuse(QString("run %1 was not started by spur launch: there is nothing to launch again").arg(run.id));
  }
  LaunchRequest request;
  try {
    request = LaunchRequest::parse(QString::fromStdString(run.command));
  } catch (const std::exception& e) {
    refuse(QString("run %1's command cannot be launched again: %2").arg(run.id).arg(QString::fromUtf8(e.what())));
  }
  if (request.working_directory.isEmpty()) {
    refuse(QString("run %1 does not say which directory it ran in (an older Spur recorded it): export its "
                   "configuration and launch it from there")
               .arg(run.id));
  }
  // The record's own flags give way to the new run's.
  static const QSet<QString> record_flags{"run_name", "tag", "notes", "parent_run"};
  QStringList flags;
  for (qsizetype i = 0; i < request.flags.size(); ++i) {
    const QString& word = request.flags[i];
    const QString flag = word.startsWith("--") ? word.mid(2).section('=', 0, 0).replace('-', '_') : QString();
    if (!record_flags.contains(flag)) {
      flags << word;
    } else if (!word.contains('=')) {
      ++i;  // and its value
    }
  }
  if (name.trimmed().isEmpty()) name = next_name(QString::fromStdString(run.name));
  flags << "--run_name" << name.trimmed();
  for (const auto& tag : run.tags) flags << "--tag" << QString::fromStdString(tag);
  if (!run.notes.empty()) flags << "--notes" << QString::fromStdString(run.notes);
  flags << "--parent_run" << QString::number(run.id);
  request.flags = flags;
  request.config_file = config_file;
  return request;
}

QString RunService::default_history_path() { return QString::fromStdString(history::default_history_path()); }

std::vector<history::Run> RunService::runs() const { return runs(history::RunFilter{}); }

std::vector<history::Run> RunService::runs(const history::RunFilter& filter) const {
  if (remote_) return protocol::decode_runs(ask("runs", {{"filter", protocol::encode(filter)}}));
  return exists() ? reader().runs(filter) : std::vector<history::Run>();
}

int64_t RunService::count_runs(const history::RunFilter& filter) const {
  if (remote_) return protocol::to_integer(ask("count_runs", {{"filter", protocol::encode(filter)}}), "the count");
  return exists() ? reader().count_runs(filter) : 0;
}

std::optional<history::Run> RunService::find(int64_t id) const {
  if (remote_) {
    const auto run = ask("find", {{"run", static_cast<qint64>(id)}});
    if (run.isNull()) return std::nullopt;
    return protocol::decode_run(run);
  }
  return exists() ? reader().run(id) : std::nullopt;
}

history::Run RunService::run(int64_t id) const {
  auto run = find(id);
  if (!run && remote_) refuse(QString("no run %1 in %2").arg(id).arg(QString::fromStdString(path_)));
  if (!run) refuse(no_run(id, path_));
  return *run;
}

std::vector<MetricBrief> RunService::metric_briefs(int64_t id) const {
  if (remote_) return protocol::decode_briefs(ask("metric_briefs", {{"run", static_cast<qint64>(id)}}));
  if (!exists()) return {};
  auto& history = reader();
  const auto last = history.last_points(id);
  std::vector<MetricBrief> briefs;
  for (const auto& key : history.metric_keys(id)) {
    // The whole series in one or two buckets, from its coarsest summaries.
    history::SeriesRange whole;
    whole.width = 1;
    const auto summary = history.summary(id, key, whole);
    const auto latest = last.find(key);
    if (summary.buckets.empty() || latest == last.end()) continue;
    MetricBrief brief{key,
                      summary.total_points,
                      latest->second.value,
                      latest->second.step,
                      summary.buckets.front().min,
                      summary.buckets.front().max};
    for (const auto& bucket : summary.buckets) {
      brief.min = std::fmin(brief.min, bucket.min);
      brief.max = std::fmax(brief.max, bucket.max);
    }
    briefs.push_back(std::move(brief));
  }
  return briefs;
}

std::vector<history::Event> RunService::events(int64_t id) const {
  if (remote_) return protocol::decode_events(ask("events", {{"run", static_cast<qint64>(id)}}));
  return exists() ? reader().events(id) : std::vector<history::Event>();
}

std::vector<history::RunFile> RunService::files(int64_t id) const {
  if (remote_) {
    try {
      return protocol::decode_files(ask("files", {{"run", static_cast<qint64>(id)}}));
    } catch (const std::exception& e) {
      if (QString::fromUtf8(e.what()).contains("unknown call 'files'")) return {};  // an older Spur there
      throw;
    }
  }
  return exists() ? reader().files(id) : std::vector<history::RunFile>();
}

std::vector<history::ConsoleLine> RunService::console(int64_t id, int64_t after, std::optional<int> rank) const {
  if (remote_) {
    // The serve answers a page at a time; asked again from the last line until a page comes back short.
    std::vector<history::ConsoleLine> lines;
    for (;;) {
      QJsonObject arguments{{"run", static_cast<qint64>(id)}, {"after", static_cast<qint64>(after)}};
      if (rank) arguments.insert("rank", *rank);
      auto page = protocol::decode_console(ask("console", arguments));
      if (page.empty()) return lines;
      for (const auto& line : page) {
        if (line.id <= after) throw history::HistoryError(path_ + ": the console's lines came back out of order");
        after = line.id;
      }
      const bool short_page = page.size() < 5000;
      lines.insert(lines.end(), std::make_move_iterator(page.begin()), std::make_move_iterator(page.end()));
      if (short_page) return lines;
    }
  }
  return exists() ? reader().console(id, after, rank) : std::vector<history::ConsoleLine>();
}

int64_t RunService::data_version() const {
  if (remote_) {
    // A new connection is a new reader there: its versions start again, so the connection's number goes in front.
    return (remote_->connections() << 40) + protocol::to_integer(ask("data_version"), "the data version");
  }
  return reader().data_version();
}

void RunService::check_schema() const {
  if (remote_) return;  // the serve checks its own at every data_version
  reader().check_schema();
}

namespace {

QJsonObject run_argument(int64_t id) { return {{"run", static_cast<qint64>(id)}}; }

// One call's arguments for each item of a batch.
template <typename Item, typename Arguments>
std::vector<QJsonObject> each(const std::vector<Item>& items, Arguments arguments) {
  std::vector<QJsonObject> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(arguments(item));
  return out;
}

QJsonObject series_arguments(int64_t id, const std::string& key, const history::SeriesCursor* cursor) {
  QJsonObject arguments{{"run", static_cast<qint64>(id)}, {"key", QString::fromStdString(key)}};
  if (cursor) arguments.insert("cursor", protocol::encode(*cursor));
  return arguments;
}

QJsonObject summary_arguments(int64_t id, const std::string& key, const history::SeriesRange& range) {
  return {{"run", static_cast<qint64>(id)}, {"key", QString::fromStdString(key)}, {"range", protocol::encode(range)}};
}

std::vector<std::string> decode_keys(const QJsonValue& value, const std::string& path) {
  if (!value.isArray()) throw history::HistoryError(path + ": the metric keys came back as something else");
  std::vector<std::string> keys;
  for (const auto& key : value.toArray()) keys.push_back(key.toString().toStdString());
  return keys;
}

}  // namespace

std::vector<std::string> RunService::metric_keys(int64_t id) const {
  if (remote_) return decode_keys(ask("metric_keys", run_argument(id)), path_);
  return reader().metric_keys(id);
}

std::map<std::string, history::Point> RunService::last_points(int64_t id) const {
  if (remote_) return protocol::decode_last_points(ask("last_points", run_argument(id)));
  return reader().last_points(id);
}

std::vector<history::Point> RunService::series(int64_t id, const std::string& key,
                                               history::SeriesCursor* cursor) const {
  if (remote_) {
    const auto answer = ask("series", series_arguments(id, key, cursor));
    if (cursor) *cursor = protocol::decode_cursor(answer.toObject().value("cursor"));
    return protocol::decode_points(answer.toObject().value("points"));
  }
  return reader().series(id, key, cursor);
}

history::SeriesSummary RunService::summary(int64_t id, const std::string& key,
                                           const history::SeriesRange& range) const {
  if (remote_) return protocol::decode_summary(ask("summary", summary_arguments(id, key, range)));
  return reader().summary(id, key, range);
}

std::vector<std::vector<std::string>> RunService::metric_keys(const std::vector<int64_t>& ids) const {
  std::vector<std::vector<std::string>> out;
  out.reserve(ids.size());
  if (remote_) {
    for (const auto& answer : remote_->call_all("metric_keys", each(ids, run_argument))) {
      out.push_back(decode_keys(answer, path_));
    }
    return out;
  }
  for (const int64_t id : ids) out.push_back(reader().metric_keys(id));
  return out;
}

std::vector<std::map<std::string, history::Point>> RunService::last_points(const std::vector<int64_t>& ids) const {
  std::vector<std::map<std::string, history::Point>> out;
  out.reserve(ids.size());
  if (remote_) {
    for (const auto& answer : remote_->call_all("last_points", each(ids, run_argument))) {
      out.push_back(protocol::decode_last_points(answer));
    }
    return out;
  }
  for (const int64_t id : ids) out.push_back(reader().last_points(id));
  return out;
}

std::vector<std::vector<history::Point>> RunService::series(std::vector<SeriesRead>& reads) const {
  std::vector<std::vector<history::Point>> out;
  out.reserve(reads.size());
  if (remote_) {
    const auto answers = remote_->call_all("series", each(reads, [](const SeriesRead& read) {
                                             return series_arguments(read.run, read.key, &read.cursor);
                                           }));
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].cursor = protocol::decode_cursor(answers[i].toObject().value("cursor"));
      out.push_back(protocol::decode_points(answers[i].toObject().value("points")));
    }
    return out;
  }
  for (auto& read : reads) out.push_back(reader().series(read.run, read.key, &read.cursor));
  return out;
}

std::vector<history::SeriesSummary> RunService::summaries(const std::vector<SummaryRead>& reads) const {
  std::vector<history::SeriesSummary> out;
  out.reserve(reads.size());
  if (remote_) {
    const auto arguments =
        each(reads, [](const SummaryRead& read) { return summary_arguments(read.run, read.key, read.range); });
    for (const auto& answer : remote_->call_all("summary", arguments)) out.push_back(protocol::decode_summary(answer));
    return out;
  }
  for (const auto& read : reads) out.push_back(reader().summary(read.run, read.key, read.range));
  return out;
}

bool RunService::rebuild_summaries(int64_t id, const std::string& key) {
  if (remote_) {
    return ask("rebuild_summaries", {{"run", static_cast<qint64>(id)}, {"key", QString::fromStdString(key)}}).toBool();
  }
  refuse_if_read_only();
  return history::HistoryWriter(path_).rebuild_summaries(id, key);
}

int64_t RunService::summarise(const std::function<bool(int64_t, int64_t)>& progress, bool check_all) {
  if (remote_) return protocol::to_integer(ask("summarise", {{"check", check_all}}), "the count");
  if (!exists()) refuse("no run history at " + QString::fromStdString(path_) + " yet (nothing to summarise)");
  refuse_if_read_only();
  return history::HistoryWriter(path_).build_summaries(progress, check_all);
}

void RunService::rename(int64_t id, const QString& name) {
  if (name.trimmed().isEmpty()) refuse("a run needs a name");
  if (remote_) {
    ask("rename", {{"run", static_cast<qint64>(id)}, {"name", name}});
    return;
  }
  auto writer = change(id);
  writer->set_names(id, "", name.trimmed().toStdString());
}

void RunService::tag(int64_t id, const QString& tag, bool remove) {
  if (tag.trimmed().isEmpty()) refuse("a tag cannot be empty");
  if (remote_) {
    ask("tag", {{"run", static_cast<qint64>(id)}, {"tag", tag}, {"remove", remove}});
    return;
  }
  auto writer = change(id);
  remove ? writer->remove_tag(id, tag.trimmed().toStdString()) : writer->add_tag(id, tag.trimmed().toStdString());
}

void RunService::set_notes(int64_t id, const QString& notes) {
  if (remote_) {
    ask("notes", {{"run", static_cast<qint64>(id)}, {"notes", notes}});
    return;
  }
  auto writer = change(id);
  writer->set_notes(id, notes.toStdString());
}

void RunService::stop(int64_t id) {
  if (remote_) {
    ask("stop", {{"run", static_cast<qint64>(id)}}, RemoteHistory::Retry::yes);  // a second SIGTERM is harmless
    return;
  }
  if (const QString why = stop_run(run(id)); !why.isEmpty()) refuse(why);
}

void RunService::remove(int64_t id, bool force) {
  if (remote_) {
    // Decided there (whether its launcher is alive is that machine's to see); never asked twice.
    ask("remove", {{"run", static_cast<qint64>(id)}, {"force", force}}, RemoteHistory::Retry::no);
    return;
  }
  const auto existing = run(id);
  refuse_if_read_only();
  const auto status = effective_status(existing);
  if ((status == "running" || status == "queued") && owns_run(existing)) {
    // Its launcher is alive on this machine: removing the run under it would have it retry writing to a run that
    // is gone (--force is for a launcher that died on another machine).
    refuse(QString("run %1 is %2 and its launcher (pid %3) is alive on this machine: stop it first (Ctrl-C in its "
                   "terminal, or kill -INT %3), then remove it")
               .arg(id)
               .arg(status)
               .arg(existing.pid));
  }
  if ((status == "running" || status == "queued") && !force) {
    // A running run's recorder would write it back without its config (issue 12): stop it first.
    refuse(QString("run %1 is %2 (launcher pid %3 on %4); stop it first (Ctrl-C in its terminal, or kill -INT %3), "
                   "then remove it; --force removes a run whose launcher died on another machine")
               .arg(id)
               .arg(status)
               .arg(existing.pid)
               .arg(QString::fromStdString(existing.host)));
  }
  history::HistoryWriter writer(path_);
  if (!writer.delete_run(id)) refuse(no_run(id, path_));
}

QByteArray RunService::export_metrics(int64_t id, ExportFormat format, const QStringList& keys) const {
  if (remote_) {
    const auto text = ask("export", {{"run", static_cast<qint64>(id)},
                                     {"format", format == ExportFormat::csv ? "csv" : "json"},
                                     {"keys", QJsonArray::fromStringList(keys)}});
    if (!text.isString()) throw history::HistoryError(path_ + ": the export came back as something else than text");
    return text.toString().toUtf8();
  }
  const auto found = run(id);
  auto& reader = this->reader();
  const auto known = reader.metric_keys(id);
  QStringList chosen = keys;
  if (chosen.isEmpty()) {
    for (const auto& key : known) chosen << QString::fromStdString(key);
  }
  for (const auto& key : chosen) {
    if (std::find(known.begin(), known.end(), key.toStdString()) == known.end()) {
      refuse(QString("run %1 has no metric '%2'").arg(id).arg(key));
    }
  }
  if (format == ExportFormat::csv) {
    std::string text(metrics_csv::kHeader);
    for (const auto& key : chosen) {
      const std::string name = metrics_csv::field(key.toStdString());
      for (const auto& p : reader.series(id, key.toStdString())) {
        metrics_csv::append_line(text, name, p.step, p.value, p.wall);
      }
    }
    return QByteArray::fromStdString(text);
  }
  QJsonObject metrics;
  for (const auto& key : chosen) {
    QJsonArray points;
    for (const auto& p : reader.series(id, key.toStdString())) {
      points.append(QJsonArray{static_cast<qint64>(p.step), p.value, p.wall});
    }
    metrics.insert(key, points);
  }
  return QJsonDocument(QJsonObject{{"run", run_json(found)}, {"metrics", metrics}}).toJson(QJsonDocument::Indented);
}

void RunService::refuse_history_file(const QString& file) const {
  if (remote_) return;  // it is on another machine
  // Never over the history itself or its journal files (issue 12: `--output "$SPUR_HISTORY"` replaced a 16-run
  // history with 523 bytes), whatever name or link leads there.
  const QFileInfo target(file);
  const QString history = QFileInfo(QString::fromStdString(path_)).canonicalFilePath();
  const QString resolved = target.exists() ? target.canonicalFilePath() : QString();
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    if (!resolved.isEmpty() && !history.isEmpty() && resolved == history + suffix) {
      refuse(file + " is the run history (" + history + suffix + "); export to another file");
    }
  }
}

void RunService::export_metrics(int64_t id, ExportFormat format, const QString& file, const QStringList& keys) const {
  refuse_history_file(file);
  const QFileInfo target(file);
  const QByteArray text = export_metrics(id, format, keys);
  if (target.exists() && !target.isFile()) {
    // /dev/stdout, a pipe (>(...)): written straight through.
    QFile out(file);
    if (!out.open(QIODevice::WriteOnly) || out.write(text) != text.size()) {
      refuse("cannot write " + file + ": " + out.errorString());
    }
    return;
  }
  QSaveFile out(file);  // a file: whole or not at all
  if (!out.open(QIODevice::WriteOnly) || out.write(text) != text.size() || !out.commit()) {
    refuse("cannot write " + file + ": " + out.errorString());
  }
}

QString RunService::config(int64_t id) const {
  if (remote_) {
    const auto text = ask("config", {{"run", static_cast<qint64>(id)}});
    if (!text.isString())
      throw history::HistoryError(path_ + ": the configuration came back as something else than text");
    return text.toString();
  }
  const auto found = run(id);
  if (found.config.empty()) refuse(QString("run %1 was not started by spur launch: it has no configuration").arg(id));
  return QString::fromStdString(found.config);
}

void RunService::export_config(int64_t id, const QString& file) const {
  refuse_history_file(file);
  const QString yaml = config(id);
  try {
    write_private_file(file.toStdString(), yaml.toStdString());  // a new file is its owner's only, as spur config's
  } catch (const ConfigError& e) {
    refuse(QString::fromUtf8(e.what()));
  }
}

std::vector<ImportedRun> RunService::import_tensorboard(const QString& path, const TensorBoardImportOptions& options,
                                                        const std::function<void(const ImportedRun&)>& done) {
  if (remote_) {
    refuse(QString("%1 is on another machine: import there (ssh %2 spur runs import PATH)")
               .arg(QString::fromStdString(path_), remote_->address().destination()));
  }
  refuse_if_read_only();
  try {
    return app::import_tensorboard(path_, path, options, done);
  } catch (const std::invalid_argument& e) {
    throw RunServiceError(e.what());
  }
}

std::vector<ImportedRun> RunService::import_mlflow(const QString& address, const MlflowImportOptions& options,
                                                   const std::function<void(const ImportedRun&)>& done) {
  if (remote_) {
    refuse(QString("%1 is on another machine: import there (ssh %2 spur runs import %3)")
               .arg(QString::fromStdString(path_), remote_->address().destination(), address));
  }
  refuse_if_read_only();
  try {
    return app::import_mlflow(path_, address, options, done);
  } catch (const std::invalid_argument& e) {
    throw RunServiceError(e.what());
  }
}

}  // namespace spur::app
