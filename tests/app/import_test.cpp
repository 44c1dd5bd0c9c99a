// SPDX-License-Identifier: Apache-2.0
// `spur runs import` (issue 18), run as a user runs it: event files written by TensorBoard's own writers
// (tensorboard.summary.Writer, PyTorch's SummaryWriter with add_hparams) come into the history with the same
// scalars, steps, wall times and hyperparameters; files from Spur's own TensorBoard tracker give back the
// history's run; a run is not imported twice unless asked; truncated and corrupt files are named with their record
// and leave nothing of their run behind.
#include <unistd.h>

#include <cmath>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <spur/history/reader.h>

#include "rank_group.h"
#include "runs/run_service.h"
#include <spur/core/tensorboard_events.h>
#include "test_main.h"

namespace {

using spur::history::HistoryReader;

spur::test::RankResult spur_runs(const QStringList& arguments, const QString& history) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  return spur::test::run_process(SPUR_CLI, QStringList{"runs"} + arguments, env, 120000);
}

// tests/rigs/write_tensorboard.py DIR: two runs by TensorBoard's and PyTorch's writers; what they wrote.
QJsonObject write_runs(const QString& dir) {
  const auto result = spur::test::run_process(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/write_tensorboard.py", dir},
                                              QProcessEnvironment::systemEnvironment(), 120000);
  if (result.exit_code != 0) qFatal("write_tensorboard.py failed: %s", qPrintable(result.output));
  const QString output = result.output.trimmed();
  return QJsonDocument::fromJson(output.mid(output.lastIndexOf('\n') + 1).toUtf8()).object();
}

QStringList event_files(const QString& dir) {
  QStringList files;
  for (const auto& name : QDir(dir).entryList({"*tfevents*"}, QDir::Files, QDir::Name)) files << dir + "/" + name;
  return files;
}

QByteArray read_all(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
  return file.readAll();
}

void write_all(const QString& path, const QByteArray& bytes) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(bytes) != bytes.size())
    qFatal("cannot write %s", qPrintable(path));
}

// The byte offset where each record of an event file starts (its framing: 8-byte length, 4-byte CRC, data, CRC).
std::vector<qint64> record_offsets(const QByteArray& bytes) {
  std::vector<qint64> offsets;
  qint64 at = 0;
  while (at + 12 <= bytes.size()) {
    offsets.push_back(at);
    quint64 length = 0;
    for (int i = 0; i < 8; ++i) length |= static_cast<quint64>(static_cast<uchar>(bytes[at + i])) << (8 * i);
    at += 12 + static_cast<qint64>(length) + 4;
  }
  return offsets;
}

qint64 run_count(const QString& history) {
  if (!QFile::exists(history)) return 0;
  return static_cast<qint64>(HistoryReader(history.toStdString()).runs().size());
}

// Every imported series equals what the writer wrote: steps, float32 values, walls (where given).
void compare_series(HistoryReader& reader, int64_t run, const QJsonObject& written) {
  const auto scalars = written["scalars"].toObject();
  QCOMPARE(static_cast<qsizetype>(reader.metric_keys(run).size()), scalars.size());
  for (auto it = scalars.begin(); it != scalars.end(); ++it) {
    const auto points = reader.series(run, it.key().toStdString());
    const auto expected = it.value().toArray();
    QCOMPARE(static_cast<qsizetype>(points.size()), expected.size());
    for (qsizetype i = 0; i < expected.size(); ++i) {
      const auto want = expected[i].toArray();
      QCOMPARE(points[static_cast<std::size_t>(i)].step, want[0].toInteger());
      QCOMPARE(points[static_cast<std::size_t>(i)].value, want[1].toDouble());
      if (!want[2].isNull()) QCOMPARE(points[static_cast<std::size_t>(i)].wall, want[2].toDouble());
    }
  }
}

}  // namespace

class ImportTest : public QObject {
  Q_OBJECT

 private slots:
  // Both writers' runs, one per folder, with their scalars, steps, walls, hyperparameters and span.
  void tensorboards_own_files_are_imported() {
    QTemporaryDir dir;
    const auto written = write_runs(dir.filePath("logs"));
    const QString history = dir.filePath("history.db");
    const auto result = spur_runs({"import", dir.filePath("logs")}, history);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains(QRegularExpression("imported \\S+/logs/tb as run 1 \"tb\" \\(2 series, 55 points")),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("1 value of other kinds"), qPrintable(result.output));  // the add_text

    HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), std::size_t(2));
    const auto tb = *reader.run(1);
    const auto torch = *reader.run(2);
    QCOMPARE(QString::fromStdString(tb.name), QString("tb"));
    QCOMPARE(QString::fromStdString(torch.name), QString("torch"));
    QCOMPARE(QString::fromStdString(tb.project), QString("logs"));  // the folder imported
    QCOMPARE(QString::fromStdString(tb.status), QString("finished"));
    QCOMPARE(QString::fromStdString(tb.target), QString("tensorboard"));
    compare_series(reader, 1, written["tb"].toObject());
    compare_series(reader, 2, written["torch"].toObject());
    // The span is the scalars' (not the time the writer opened its file).
    const auto loss = written["tb"].toObject()["scalars"].toObject()["loss"].toArray();
    QCOMPARE(tb.started, loss.first().toArray()[2].toDouble());
    const auto accuracy = written["tb"].toObject()["scalars"].toObject()["eval/accuracy"].toArray();
    QCOMPARE(tb.ended, accuracy.last().toArray()[2].toDouble());
    QCOMPARE(tb.last_step, int64_t(49));
    // add_hparams' session start: PyTorch writes bools and ints as numbers, as TensorBoard then shows them.
    const auto params = QJsonDocument::fromJson(QByteArray::fromStdString(torch.params)).object();
    QCOMPARE(params, (QJsonObject{{"lr", 0.125}, {"optimizer", "adamw"}, {"shuffle", 1}, {"layers", 3}}));
    QCOMPARE(QString::fromStdString(tb.params), QString("{}"));

    // And `spur runs` shows them as any run.
    const auto list = spur_runs({"list", "--json"}, history);
    QVERIFY2(list.exit_code == 0, qPrintable(list.output));
    QVERIFY2(list.output.contains("\"target\": \"tensorboard\""), qPrintable(list.output));
    const auto csv = spur_runs({"export", "2", "--format", "csv", "--metrics", "train/loss"}, history);
    QVERIFY2(csv.output.contains("train/loss,39,0.78125,"), qPrintable(csv.output));
  }

  // The same files again are named as imported, and skipped; --again imports them once more; moved, they are
  // still the same files.
  void a_run_is_imported_once_unless_asked() {
    QTemporaryDir dir;
    write_runs(dir.filePath("logs"));
    const QString history = dir.filePath("history.db");
    QCOMPARE(spur_runs({"import", dir.filePath("logs")}, history).exit_code, 0);
    QVERIFY(QDir().rename(dir.filePath("logs"), dir.filePath("moved")));
    const auto again = spur_runs({"import", dir.filePath("moved/torch")}, history);
    QCOMPARE(again.exit_code, 0);
    QVERIFY2(again.output.contains("moved/torch: already imported as run 2 (--again imports it again)"),
             qPrintable(again.output));
    QCOMPARE(run_count(history), qint64(2));
    const auto forced = spur_runs({"import", dir.filePath("moved/torch"), "--again", "--project", "p"}, history);
    QVERIFY2(forced.exit_code == 0 && forced.output.contains("as run 3 \"torch\""), qPrintable(forced.output));
    HistoryReader reader(history.toStdString());
    QCOMPARE(QString::fromStdString(reader.run(3)->project), QString("p"));
    QCOMPARE(reader.series(3, "train/loss").size(), reader.series(2, "train/loss").size());
  }

  // A folder imported while its run was still writing, imported again once it has grown: named as imported before
  // with files changed since, nothing written; --again imports the whole run as a new one. (A folder named with
  // a '%2' keeps its name in every line.)
  void a_run_that_grew_since_its_import_is_named() {
    QTemporaryDir dir;
    write_runs(dir.filePath("logs"));
    QVERIFY(QDir().rename(dir.filePath("logs/tb"), dir.filePath("logs/tb %2 live")));
    const QString folder = dir.filePath("logs/tb %2 live");
    const QString file = event_files(folder).at(0);
    const QByteArray whole = read_all(file);
    const auto offsets = record_offsets(whole);
    QVERIFY(offsets.size() > 10);
    write_all(file, whole.left(offsets[offsets.size() / 2]));  // what a live run had written at the first import
    const QString history = dir.filePath("history.db");
    const auto first = spur_runs({"import", folder}, history);
    QVERIFY2(first.exit_code == 0 && first.output.contains("imported " + folder + " as run 1 \"tb %2 live\""),
             qPrintable(first.output));
    const auto points_then = HistoryReader(history.toStdString()).series(1, "loss").size();
    write_all(file, whole);  // the run went on
    const auto grown = spur_runs({"import", folder}, history);
    QVERIFY2(grown.exit_code == 0 &&
                 grown.output.contains(folder + ": imported as run 1 before, and its event files have changed since "
                                                "(a run still being written?) (--again imports it again)"),
             qPrintable(grown.output));
    QCOMPARE(run_count(history), qint64(1));
    const auto again = spur_runs({"import", folder, "--again"}, history);
    QVERIFY2(again.exit_code == 0 && again.output.contains("as run 2"), qPrintable(again.output));
    HistoryReader reader(history.toStdString());
    QVERIFY(reader.series(2, "loss").size() > points_then);
    QCOMPARE(reader.series(1, "loss").size(), points_then);  // the first import is left as it was
  }

  // An import asked to stop (the Studio's window closing) stops before its next run folder: the runs done stay,
  // each whole, and nothing of the rest is written.
  void a_cancelled_import_stops_between_runs() {
    QTemporaryDir dir;
    write_runs(dir.filePath("logs"));
    const QString history = dir.filePath("history.db");
    spur::app::RunService service(history.toStdString());
    spur::app::TensorBoardImportOptions options;
    int asked = 0;
    options.cancelled = [&] { return ++asked > 1; };
    const auto results = service.import_tensorboard(dir.filePath("logs"), options);
    QCOMPARE(results.size(), std::size_t(1));
    QCOMPARE(asked, 2);
    QCOMPARE(run_count(history), qint64(1));
    HistoryReader reader(history.toStdString());
    QCOMPARE(QString::fromStdString(reader.run(1)->name), QString("tb"));
    // Not cancelled: the rest comes in; the first is already there.
    const auto rest = service.import_tensorboard(dir.filePath("logs"));
    QCOMPARE(rest.size(), std::size_t(2));
    QCOMPARE(run_count(history), qint64(2));
  }

  // Spur's own tracker's files give back the run the history recorded beside them: the same keys, steps and
  // walls, values as float32 (TensorBoard's scalars), and the hyperparameters.
  void spurs_tensorboard_files_round_trip() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", history);
    const auto worker = spur::test::run_process(
        SPUR_TEST_WORKER, {"tensorboard_history", "--out", dir.filePath("tb"), "--steps", "300"}, env, 120000);
    QVERIFY2(worker.exit_code == 0, qPrintable(worker.output));
    QCOMPARE(run_count(history), qint64(1));
    const auto result = spur_runs({"import", dir.filePath("tb")}, history);
    QVERIFY2(result.exit_code == 0 && result.output.contains("as run 2 \"both\" (2 series, 600 points, 3 hyper"),
             qPrintable(result.output));
    HistoryReader reader(history.toStdString());
    auto keys = reader.metric_keys(1);
    auto imported_keys = reader.metric_keys(2);
    std::sort(keys.begin(), keys.end());
    std::sort(imported_keys.begin(), imported_keys.end());
    QCOMPARE(imported_keys, keys);
    for (const auto& key : keys) {
      const auto original = reader.series(1, key);
      const auto imported = reader.series(2, key);
      QCOMPARE(imported.size(), original.size());
      for (std::size_t i = 0; i < original.size(); ++i) {
        QCOMPARE(imported[i].step, original[i].step);
        QCOMPARE(imported[i].value, static_cast<double>(static_cast<float>(original[i].value)));
        QCOMPARE(imported[i].wall, original[i].wall);
      }
    }
    const auto params = QJsonDocument::fromJson(QByteArray::fromStdString(reader.run(2)->params)).object();
    QCOMPARE(params, (QJsonObject{{"lr", 0.25}, {"model", "mlp"}, {"amp", false}}));
    QCOMPARE(QString::fromStdString(reader.run(2)->status), QString("finished"));  // the session end's success
  }

  // A damaged file is named with its record and byte offset, and nothing of its run is written, even when the
  // damage is in the run's second file; the other runs are imported; the exit code says something failed.
  void damaged_files_are_named_and_leave_nothing_data() {
    QTest::addColumn<QString>("run");  // which run folder is damaged: tb (one file) or torch (two)
    QTest::addColumn<int>("file");     // which of its event files
    QTest::addColumn<QString>("damage");
    QTest::addColumn<QString>("message");  // a regular expression after "FILE: "
    QTest::newRow("cut in a record's data") << "tb" << 0 << "cut 5"
                                            << R"(record \d+ at byte \d+ is cut short: it declares \d+ bytes of data)";
    QTest::newRow("cut in a header") << "tb" << 0 << "header"
                                     << R"(record 2 at byte (\d+) is cut short: its 12-byte header has only 6 bytes)";
    QTest::newRow("bad data CRC") << "tb" << 0 << "flip data"
                                  << R"(record 3 at byte \d+: the CRC of its \d+ bytes of data does not match)";
    QTest::newRow("bad length CRC") << "tb" << 0 << "flip length"
                                    << R"(record 3 at byte \d+: the CRC of its length does not match)";
    QTest::newRow("not an event file")
        << "tb" << 0 << "text"
        << R"(record 1 at byte 0: the CRC of its length does not match \(not an event file)";
    QTest::newRow("second file bad") << "torch" << 1 << "flip data"
                                     << R"(record 3 at byte \d+: the CRC of its)";
  }
  void damaged_files_are_named_and_leave_nothing() {
    QFETCH(QString, run);
    QFETCH(int, file);
    QFETCH(QString, damage);
    QFETCH(QString, message);
    QTemporaryDir dir;
    write_runs(dir.filePath("logs"));
    const QString victim = event_files(dir.filePath("logs/" + run)).at(file);
    QByteArray bytes = read_all(victim);
    const auto offsets = record_offsets(bytes);
    QVERIFY(offsets.size() >= 4);
    if (damage == "cut 5") {
      bytes.chop(5);
    } else if (damage == "header") {
      bytes.truncate(offsets[1] + 6);
    } else if (damage == "flip data") {
      bytes[offsets[2] + 14] = static_cast<char>(bytes[offsets[2] + 14] ^ 0x40);
    } else if (damage == "flip length") {
      bytes[offsets[2] + 1] = static_cast<char>(bytes[offsets[2] + 1] ^ 0x01);
    } else {
      bytes = "not an event file, but its name says tfevents\n";
    }
    write_all(victim, bytes);
    const QString history = dir.filePath("history.db");
    const auto result = spur_runs({"import", dir.filePath("logs")}, history);
    QCOMPARE(result.exit_code, 1);
    const QRegularExpression expected(QRegularExpression::escape(victim) + ": " + message);
    const auto match = expected.match(result.output);
    QVERIFY2(match.hasMatch(), qPrintable(result.output));
    if (damage == "header") QCOMPARE(match.captured(1).toLongLong(), offsets[1]);
    QVERIFY2(result.output.contains("nothing of this run was imported"), qPrintable(result.output));
    // The other run came in whole; the damaged one left no run, series or points.
    HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(runs[0].name), run == "tb" ? QString("torch") : QString("tb"));
    QCOMPARE(reader.metric_keys(runs[0].id).size(), std::size_t(2));
  }

  // Issue 31 (6): an event file that shrinks while it is imported (a writer truncating it, a full disk) is named,
  // never the end of the process (a mapped file that shrinks under its reader is SIGBUS, exit 135). A 64 MB file
  // (text summaries, left out by the import, and one scalar) is cut to 1 KB at 12 moments from the import's start.
  void a_file_cut_while_it_is_read_is_named() {
    QTemporaryDir dir;
    QVERIFY(QDir().mkpath(dir.filePath("live")));
    std::string bytes = spur::tensorboard::record(spur::tensorboard::file_version_event(1.0));
    const std::string text(1 << 20, 'x');
    for (int i = 0; i < 64; ++i) bytes += spur::tensorboard::record(spur::tensorboard::text_event("notes", text, i, 2));
    bytes += spur::tensorboard::record(spur::tensorboard::scalars_event({{"loss", 0.5}}, 64, 3));
    const QString file = dir.filePath("live/events.out.tfevents.1.host.1.0");
    const QString history = dir.filePath("history.db");
    int named = 0;
    for (int attempt = 0; attempt < 12; ++attempt) {
      write_all(file, QByteArray::fromStdString(bytes));
      auto env = QProcessEnvironment::systemEnvironment();
      env.insert("SPUR_HISTORY", history);
      QProcess spur;
      spur.setProcessEnvironment(env);
      spur.setProcessChannelMode(QProcess::MergedChannels);
      spur.start(SPUR_CLI, {"runs", "import", "--again", dir.filePath("live")});
      QVERIFY(spur.waitForStarted());
      QThread::msleep(25UL * static_cast<unsigned long>(attempt));
      QVERIFY(::truncate(file.toLocal8Bit().constData(), 1024) == 0);
      QVERIFY(spur.waitForFinished(60000));
      const QString output = QString::fromUtf8(spur.readAll());
      QVERIFY2(spur.exitStatus() == QProcess::NormalExit,
               qPrintable(QString("died (attempt %1): ").arg(attempt) + output));
      QVERIFY2(spur.exitCode() == 0 || spur.exitCode() == 1, qPrintable(output));
      if (spur.exitCode() == 1) {
        QVERIFY2(output.contains(file + ": "), qPrintable(output));
        ++named;
      }
    }
    qInfo("%d of 12 imports saw the file cut and named it", named);
  }

  // Issue 31 (8): what an imported file or a name holds reaches the terminal as text: escape sequences in a folder's
  // name, a run's name or a metric's tag are shown as \x1b, and wall times that are no time (1e300, NaN) as "-",
  // never as negative durations or dates.
  void hostile_names_and_times_are_shown_as_text() {
    QTemporaryDir dir;
    const QString folder = dir.filePath("logs/\x1b]0;owned\x07\x1b[2Jrun");
    QVERIFY(QDir().mkpath(folder));
    std::string bytes = spur::tensorboard::record(spur::tensorboard::file_version_event(1e300));
    bytes += spur::tensorboard::record(spur::tensorboard::scalars_event({{"loss\x1b[31m", 0.5}}, 1, 1e300));
    bytes += spur::tensorboard::record(
        spur::tensorboard::scalars_event({{"loss\x1b[31m", 0.25}}, 9'000'000'000'000'000'000, std::nan("")));
    write_all(folder + "/events.out.tfevents.1.host.1.0", QByteArray::fromStdString(bytes));
    const QString history = dir.filePath("history.db");
    const auto imported = spur_runs({"import", dir.filePath("logs")}, history);
    QVERIFY2(imported.exit_code == 0 && !imported.output.contains('\x1b') && imported.output.contains("\\x1b]0;owned"),
             qPrintable(imported.output));
    QCOMPARE(spur_runs({"rename", "1", "\x1b[2Jrenamed\u202e"}, history).exit_code, 0);
    for (const QStringList& command : {QStringList{"list"}, QStringList{"show", "1"}}) {
      const auto shown = spur_runs(command, history);
      QVERIFY2(shown.exit_code == 0 && !shown.output.contains('\x1b') && !shown.output.contains(QChar(0x202e)) &&
                   shown.output.contains("\\x1b[2Jrenamed\\u{202e}"),
               qPrintable(shown.output));
      QVERIFY2(!QRegularExpression(R"((^|\s)-\d)").match(shown.output).hasMatch(), qPrintable(shown.output));
    }
    QVERIFY(spur_runs({"show", "1"}, history).output.contains("loss\\x1b[31m"));
  }

  // Paths that hold no run are refused by name before the history is touched.
  void paths_without_event_files_are_refused() {
    QTemporaryDir dir;
    QVERIFY(QDir().mkpath(dir.filePath("empty/sub")));
    write_all(dir.filePath("empty/sub/notes.txt"), "not events");
    const QString history = dir.filePath("history.db");
    auto result = spur_runs({"import", dir.filePath("empty")}, history);
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains(dir.filePath("empty") + ": no TensorBoard event files"), qPrintable(result.output));
    result = spur_runs({"import", dir.filePath("missing")}, history);
    QVERIFY2(result.exit_code == 2 && result.output.contains(dir.filePath("missing") + ": no such file or directory"),
             qPrintable(result.output));
    result = spur_runs({"import", dir.filePath("empty/sub/notes.txt")}, history);
    QVERIFY2(result.exit_code == 2 && result.output.contains("not a TensorBoard event file"),
             qPrintable(result.output));
    QVERIFY(!QFile::exists(history));  // nothing above touched the history
    // A folder whose event files are still empty (writers that have just opened them): said, nothing imported.
    QVERIFY(QDir().mkpath(dir.filePath("fresh")));
    write_all(dir.filePath("fresh/events.out.tfevents.1.host.1.0"), "");
    result = spur_runs({"import", dir.filePath("fresh")}, history);
    QVERIFY2(result.exit_code == 0 && result.output.contains("no records yet"), qPrintable(result.output));
    QVERIFY(run_count(history) == 0);
    result = spur_runs({"import"}, history);
    QVERIFY2(result.exit_code == 2 && result.output.contains("spur runs import PATH"), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(ImportTest)
#include "import_test.moc"
