// SPDX-License-Identifier: Apache-2.0
// The remote history's wire format, written once for both of its ends: `spur runs serve --stdio` on the machine
// that holds a history (history_server.h) and the client that reaches it over SSH (remote_history.h). JSON lines,
// UTF-8, one object per line:
//   serve -> client, first:  {"spur":"serve","protocol":1,"version":"0.3.0","history":PATH,"exists":B,"read_only":B}
//   client -> serve:         {"id":N,"call":NAME,...its arguments}
//   serve -> client:         {"id":N,"result":VALUE}   or   {"id":N,"error":{"kind":K,"message":TEXT}}
// The serve answers in the order asked, so a client may write many requests before reading (RemoteHistory::
// call_all: the Studio's poll of hundreds of runs is one round trip).
// Error kinds: "run" (what was asked is wrong: no such run, a running run's delete; RunServiceError), "history"
// (the history cannot be read or written), "busy" (another process held it past the busy timeout: the same call
// may succeed later), "protocol" (a request this serve cannot read, or a call it does not know).
// Calls of protocol 1, with their arguments and results:
//   state                                  {exists, read_only}
//   runs {filter}                          [run...] (without their config)   count_runs {filter}   integer
//   find {run}                             run or null       metric_briefs {run}         [brief...]
//   events {run}                           [event...]        console {run, after, rank?, limit}  [line...]
//   files {run}                            [file...] (a Spur before it answers "unknown call": no files)
//   config {run}                           YAML text         export {run, format: csv|json, keys}  text
//   summarise {check}                      integer           rename {run, name}, tag {run, tag, remove},
//   notes {run, notes}, remove {run, force}, stop {run}      null
// and the Studio's periodic reads:
//   data_version                           integer           metric_keys {run}           [key...]
//   last_points {run}                      {key: point}      series {run, key, cursor?}  {points, cursor}
//   summary {run, key, range}              summary           rebuild_summaries {run, key}  bool
// A point is [step, value, wall]; a cursor {chunk, points}; a range {lo, hi, by_wall, width}; a summary
// {buckets: [[count, step_lo, step_hi, wall_lo, wall_hi, min, max, first, last, sum, finite]...],
// points_per_bucket, level, summarised, total_points, first_wall, end_chunk, end_points}, where a bucket of one point
// is that point, [step, value, wall] (history::Bucket::of: a summary at raw resolution costs a point's bytes).
// A run's status is the one its own machine sees (effective_status there: a run whose launcher died there is
// "failed"). Numbers: integers as JSON integers; a double that is not finite as the string "nan", "inf" or "-inf".
// The decoders throw ProtocolError naming what was wrong: whatever a broken or hostile serve sends, the client
// says so and goes no further (fuzzed: tests/fuzz/fuzz_history_answer.cpp).
#pragma once

#include <QByteArray>
#include <QJsonArray>
#include <QJsonObject>
#include <QJsonValue>
#include <QString>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <spur/history/reader.h>
#include <spur/history/records.h>

namespace spur::app {

struct MetricBrief;

namespace protocol {

/// The version this Spur speaks; a serve that says another is refused with both versions named.
inline constexpr int kVersion = 1;
/// The longest line either end reads (a whole export can be large; a line past this is an error, not memory
/// without end).
inline constexpr qsizetype kMaxLine = 512 * 1024 * 1024;

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The serve's first line.
struct Hello {
  int protocol = 0;
  QString version;  // the serving Spur's
  QString history;  // the history's path on that machine
  bool exists = false, read_only = false;
};

/// One answer: the id it answers and its result, or an error.
struct Answer {
  qint64 id = 0;
  QJsonValue result;
  QString error_kind, error_message;  // empty kind: no error
};

QByteArray encode_hello(const Hello& hello);
/// ProtocolError when `line` is not a hello (what it is instead is named, cut short).
Hello decode_hello(const QByteArray& line);

QByteArray encode_request(qint64 id, const QString& call, QJsonObject arguments);
QByteArray encode_result(qint64 id, const QJsonValue& result);
QByteArray encode_error(qint64 id, const QString& kind, const QString& message);
Answer decode_answer(const QByteArray& line);

/// A double as JSON (a string for NaN and the infinities) and back; ProtocolError when it is neither.
QJsonValue number(double value);
double to_double(const QJsonValue& value, const char* what);
/// An integer field; ProtocolError when it is missing, not a number or not whole.
qint64 to_integer(const QJsonValue& value, const char* what);

QJsonObject encode(const history::RunFilter& filter);
history::RunFilter decode_filter(const QJsonValue& value);
QJsonObject encode(const history::Run& run);
history::Run decode_run(const QJsonValue& value);
QJsonArray encode(const std::vector<history::Run>& runs);
std::vector<history::Run> decode_runs(const QJsonValue& value);
QJsonArray encode(const std::vector<MetricBrief>& briefs);
std::vector<MetricBrief> decode_briefs(const QJsonValue& value);
QJsonArray encode(const std::vector<history::Event>& events);
std::vector<history::Event> decode_events(const QJsonValue& value);
QJsonArray encode(const std::vector<history::RunFile>& files);
std::vector<history::RunFile> decode_files(const QJsonValue& value);
QJsonArray encode(const std::vector<history::ConsoleLine>& lines);
std::vector<history::ConsoleLine> decode_console(const QJsonValue& value);

QJsonArray encode(const std::vector<history::Point>& points);
std::vector<history::Point> decode_points(const QJsonValue& value);
QJsonObject encode(const std::map<std::string, history::Point>& last_points);
std::map<std::string, history::Point> decode_last_points(const QJsonValue& value);
QJsonObject encode(const history::SeriesCursor& cursor);
history::SeriesCursor decode_cursor(const QJsonValue& value);
QJsonObject encode(const history::SeriesRange& range);
history::SeriesRange decode_range(const QJsonValue& value);
QJsonObject encode(const history::SeriesSummary& summary);
history::SeriesSummary decode_summary(const QJsonValue& value);

}  // namespace protocol
}  // namespace spur::app
