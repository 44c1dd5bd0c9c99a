// SPDX-License-Identifier: GPL-3.0-or-later
// Spur Studio offscreen: another process writes a run into the history; the runs table shows it, the newest run
// is selected, and its metric's plot fills with every point, live. The smoothing slider re-smooths the lines.
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QLineEdit>
#include <QPixmap>
#include <QProcess>
#include <QScopeGuard>
#include <QDBusConnection>
#include <QSignalSpy>

#include <spur/history/reader.h>
#include <spur/history/writer.h>
#include <QSlider>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QLabel>
#include <QTest>
#include <qcustomplot.h>

#include <cmath>
#include <limits>
#include <random>

#include "console/console_view.h"
#include "dashboard/dashboard.h"
#include "runs/console_model.h"
#include "dashboard/metric_plot.h"
#include "main/demo_workspace.h"
#include "compare/compare_view.h"
#include "main/main_window.h"
#include "main/run_notifier.h"
#include "metrics/series_math.h"
#include "rank_group.h"
#include "runs/runs_model.h"
#include "test_main.h"

// The freedesktop notification service, on a private session bus: what the Studio would show.
class FakeNotifications : public QObject {
  Q_OBJECT
  Q_CLASSINFO("D-Bus Interface", "org.freedesktop.Notifications")

 public:
  QStringList summaries, bodies;
  QList<int> urgencies;

 public slots:
  uint Notify(const QString& app, uint replaces, const QString& icon, const QString& summary, const QString& body,
              const QStringList& actions, const QVariantMap& hints, int timeout) {
    Q_UNUSED(app);
    Q_UNUSED(replaces);
    Q_UNUSED(icon);
    Q_UNUSED(actions);
    Q_UNUSED(timeout);
    summaries << summary;
    bodies << body;
    urgencies << hints.value("urgency").toInt();
    return static_cast<uint>(summaries.size());
  }
};

class StudioTest : public QObject {
  Q_OBJECT

 private slots:
  // Issue 14: `spur-studio --demo` trains the Fashion-MNIST example, so a newcomer sees real curves. The
  // workspace is made with one short finished run (150 steps, 2 ranks): loss, learning rate and test accuracy.
  void the_demo_workspace_trains_fashion_mnist() {
    QTemporaryDir dir;
    qputenv("SPUR_PROGRAM", SPUR_CLI);
    const auto demo = spur::studio::prepare_demo(dir.filePath("demo"));
    QVERIFY2(demo.error.isEmpty(), qPrintable(demo.error));
    QVERIFY2(demo.program.endsWith("train_fashion_mnist"), qPrintable(demo.program));
    spur::history::HistoryReader reader(demo.history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(runs[0].status), QString("finished"));
    QCOMPARE(QString::fromStdString(runs[0].project), QString("fashion-mnist"));
    QCOMPARE(reader.series(runs[0].id, "loss").size(), size_t{15});
    QCOMPARE(reader.series(runs[0].id, "lr").size(), size_t{15});
    const auto accuracy = reader.series(runs[0].id, "accuracy");
    QCOMPARE(accuracy.size(), size_t{1});
    QVERIFY2(accuracy[0].value > 0.5, "150 steps should already beat chance by far");
  }

  // Issue 12: a history others can read is pointed out in the status bar; a private one is not.
  void a_history_others_can_read_is_pointed_out() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    { spur::history::HistoryWriter writer(path.toStdString()); }
    {
      spur::studio::MainWindow window(path);
      QVERIFY(!window.findChild<QLabel*>("history_permission_warning"));
    }
    QVERIFY(QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadGroup));
    spur::studio::MainWindow window(path);
    window.show();
    auto* label = window.findChild<QLabel*>("history_permission_warning");
    QVERIFY(label && label->isVisible());
    QVERIFY2(label->text().contains("mode 0640, readable by others") && label->text().contains("chmod 600 " + path),
             qPrintable(label->text()));
  }

  void a_run_written_elsewhere_appears_live() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::studio::MainWindow window(path);
    window.show();
    QCOMPARE(window.runs()->rowCount(), 0);

    QProcess writer;
    // 20,000 points of "x" in commits of 500, 20 ms apart: about a second of "training".
    writer.start(SPUR_HISTORY_RIG, {path, "from-elsewhere", "20000", "500", "20000"});
    QVERIFY(writer.waitForStarted());
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 1, 10000);
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plot("x") != nullptr, 10000);
    auto* plot = window.dashboard()->plot("x");
    const qint64 run = window.runs()->run(0).id;
    // Points arrive while the writer is still writing, then all of them.
    QTRY_VERIFY_WITH_TIMEOUT(plot->point_count(run) > 0, 10000);
    QVERIFY(writer.waitForFinished(30000));
    // All 20,000 points are in the line, drawn from summaries: a bounded number of buckets, not 20,000 points.
    QTRY_COMPARE_WITH_TIMEOUT(plot->represented_points(run), qint64{20000}, 10000);
    QVERIFY(plot->summarised(run));
    QVERIFY2(plot->point_count(run) <= 4 * 1000, qPrintable(QString::number(plot->point_count(run))));
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->data(window.runs()->index(0, spur::app::RunsModel::Status)).toString(),
                              QString("finished"), 5000);

    // The console tab shows the run's lines as they are written, filtered by rank from the combo box.
    {
      spur::history::HistoryWriter history(path.toStdString());
      std::vector<spur::history::ConsoleLine> lines;
      for (int rank : {0, 1}) {
        spur::history::ConsoleLine line;
        line.run_id = run;
        line.rank = rank;
        line.text = "hello from rank " + std::to_string(rank);
        lines.push_back(line);
      }
      history.append_console(lines);
    }
    auto* console = window.console()->model();
    QTRY_COMPARE_WITH_TIMEOUT(console->rowCount(), 2, 5000);
    auto* ranks = window.console()->findChild<QComboBox*>("ranks");
    QTRY_COMPARE_WITH_TIMEOUT(ranks->count(), 4, 5000);  // all, launcher, rank 0, rank 1
    ranks->setCurrentIndex(ranks->findData(1));
    QTRY_COMPARE_WITH_TIMEOUT(console->rowCount(), 1, 5000);
    QCOMPARE(console->data(console->index(0)).toString(), QString("[rank1] hello from rank 1"));

    // Deselecting the run clears its lines; the smoothing slider works on what is shown.
    window.findChild<QSlider*>("smoothing")->setValue(900);
    window.runs_view()->clearSelection();
    QTRY_COMPARE_WITH_TIMEOUT(plot->point_count(run), 0, 5000);
  }

  // `spur launch` of the 2-rank example from outside the Studio: the run appears running, its loss plot fills,
  // and it turns finished with exit code 0.
  void a_launched_run_goes_from_running_to_finished() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::studio::MainWindow window(path);
    window.show();
    QProcess launch;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", path);
    launch.setProcessEnvironment(env);
    launch.setProcessChannelMode(QProcess::MergedChannels);
    launch.start(SPUR_CLI, {"launch", "--num_processes", "2", SPUR_EXAMPLE_MLP, "--epochs", "6", "--log_every", "4"});
    QVERIFY(launch.waitForStarted());
    auto status = [&] {
      return window.runs()->rowCount()
                 ? window.runs()->data(window.runs()->index(0, spur::app::RunsModel::Status)).toString()
                 : QString();
    };
    QTRY_COMPARE_WITH_TIMEOUT(status(), QString("running"), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plot("loss") != nullptr, 30000);
    // (It may have finished already while the plot filled: waitForFinished is then false at once.)
    QVERIFY2(launch.state() == QProcess::NotRunning || launch.waitForFinished(120000), launch.readAll().constData());
    QCOMPARE(launch.exitCode(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(status(), QString("finished"), 10000);
    QCOMPARE(window.runs()->data(window.runs()->index(0, spur::app::RunsModel::ExitCode)).toInt(), 0);
    const qint64 run = window.runs()->run(0).id;
    QTRY_COMPARE_WITH_TIMEOUT(window.dashboard()->plot("loss")->point_count(run), 6 * 32 / 4, 10000);
  }

  // A plot's x axis (step, time since the start, wall time), log y, and exports.
  // A metric logged once per epoch (accuracy) is visible from its first point: sparse series get dots, since a
  // line through one point draws nothing (the demo's accuracy plot was empty).
  // A series of 300,000 points with 40 planted single-point spikes: drawn from summaries (a bounded number of
  // points), every spike on screen as an extreme of its bucket, whole and after a zoom into 1% (read again, finer).
  void long_series_keep_their_spikes_at_every_zoom() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    constexpr int64_t n = 300000;
    std::vector<int64_t> spikes;
    {
      spur::history::HistoryWriter writer(path.toStdString());
      std::vector<spur::history::Point> points(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) points[static_cast<size_t>(i)] = {i, 1.0, 100.0 + static_cast<double>(i)};
      std::mt19937 random(3);
      for (int k = 0; k < 40; ++k) {
        const int64_t at = random() % n;
        points[static_cast<size_t>(at)].value = 50.0;
        spikes.push_back(at);
      }
      writer.append_metrics(writer.create_run({}), {{"grad_norm", points}});
    }
    spur::studio::MainWindow window(path);
    window.resize(1200, 800);
    window.show();
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 1, 10000);
    window.runs_view()->selectRow(0);
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plot("grad_norm") != nullptr, 10000);
    auto* plot = window.dashboard()->plot("grad_norm");
    QTRY_COMPARE_WITH_TIMEOUT(plot->represented_points(1), n, 10000);
    QVERIFY(plot->summarised(1));
    QVERIFY2(plot->point_count(1) <= 4000, qPrintable(QString::number(plot->point_count(1))));
    // The faint line draws each bucket as (first x, extreme) and (last x, other extreme).
    const auto drawn = [&](int64_t at) {
      const auto data = plot->plot()->graph(0)->data();
      for (int i = 0; i + 1 < data->size(); i += 2) {
        const auto a = data->at(i), b = data->at(i + 1);
        if (a->key <= static_cast<double>(at) && static_cast<double>(at) <= b->key &&
            (a->value == 50 || b->value == 50))
          return true;
      }
      for (auto it = data->constBegin(); it != data->constEnd(); ++it) {
        if (it->key == static_cast<double>(at) && it->value == 50) return true;  // raw points
      }
      return false;
    };
    for (const int64_t at : spikes) QVERIFY2(drawn(at), qPrintable(QString("spike at step %1").arg(at)));
    // Zoom into 1% around a spike: the line is read again for the range, still every spike in it shown.
    const double lo = std::max<double>(0, static_cast<double>(spikes.front()) - 1500), hi = lo + n / 100.0;
    spur::app::SeriesView view;
    view.lo = lo;
    view.hi = hi;
    view.width = 600;
    emit plot->view_changed(view);
    QTRY_VERIFY_WITH_TIMEOUT(plot->first_x(1) >= lo - 1, 10000);
    QVERIFY(plot->point_count(1) <= 2 * 2 * 600);
    QVERIFY(plot->represented_points(1) < n / 50);
    int inside = 0;
    for (const int64_t at : spikes) {
      if (at < lo || at > hi) continue;
      ++inside;
      QVERIFY2(drawn(at), qPrintable(QString("zoomed: spike at step %1").arg(at)));
    }
    QVERIFY(inside >= 1);
  }

  // A history from an older Spur (series without summaries) plots right away from its raw points, and the Studio
  // summarises it in the background, once, saying so in the status bar.
  void an_older_history_is_summarised_in_the_background() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    {
      spur::history::HistoryWriter writer(path.toStdString());
      for (int r = 0; r < 3; ++r) {
        std::vector<spur::history::Point> points;
        for (int64_t i = 0; i < 50000; ++i) points.push_back({i, 1.0 / static_cast<double>(i + 1), 0});
        writer.append_metrics(writer.create_run({}), {{"loss", points}});
      }
      // As a Spur before summaries left it: no summaries, series marked never summarised.
      writer.database().exec("DELETE FROM summaries; UPDATE series SET summarised = -1");
    }
    spur::history::HistoryReader reader(path.toStdString());
    QVERIFY(!reader.summary(1, "loss").summarised);
    QStringList messages;
    spur::studio::MainWindow window(path);
    connect(window.statusBar(), &QStatusBar::messageChanged, this, [&](const QString& text) { messages << text; });
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(reader.summary(3, "loss").summarised, 20000);
    QVERIFY(reader.summary(1, "loss").summarised);
    QTRY_VERIFY_WITH_TIMEOUT(messages.filter("History summarised: 3 series").size() == 1, 5000);
    window.runs_view()->selectAll();
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plot("loss") != nullptr, 10000);
    QTRY_COMPARE_WITH_TIMEOUT(window.dashboard()->plot("loss")->represented_points(2), qint64{50000}, 10000);
    spur::history::HistoryWriter writer(path.toStdString());
    QCOMPARE(writer.series_needing_summaries(), int64_t{0});
  }

  // `spur-studio --runs 3` on a history of 600 runs: run 3 is older than the table's first page (the newest 500),
  // and is fetched and selected all the same.
  void runs_asked_for_are_found_beyond_the_first_page() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    {
      spur::history::HistoryWriter writer(path.toStdString());
      for (int i = 0; i < 600; ++i) writer.create_run({});
    }
    spur::studio::MainWindow window(path);
    window.show_runs({3});
    window.show();
    const auto selected = [&] {
      QList<qint64> ids;
      for (const auto& index : window.runs_view()->selectionModel()->selectedRows())
        ids << index.data(spur::app::RunsModel::RunIdRole).toLongLong();
      return ids;
    };
    QTRY_COMPARE_WITH_TIMEOUT(selected(), QList<qint64>{3}, 10000);
    QVERIFY(window.runs()->rowCount() >= 598);
    QCOMPARE(window.runs()->total_runs(), int64_t{600});
  }

  // With many runs the legend names the first 8 and counts the rest; the runs table's swatches name every line.
  void a_crowded_legend_says_how_many_more() {
    spur::studio::MetricPlot plot("loss");
    for (qint64 run = 1; run <= 12; ++run) plot.append(run, QString("run-%1").arg(run), {0, 1}, {1.0, 0.5});
    auto names = plot.legend_names();
    QCOMPARE(names.size(), spur::studio::MetricPlot::kLegendRuns + 1);
    QCOMPARE(names.front(), QString("run-1"));
    QCOMPARE(names.back(), QString("and 4 more"));
    for (qint64 run = 1; run <= 4; ++run) plot.remove_run(run);
    names = plot.legend_names();
    QCOMPARE(names.size(), spur::studio::MetricPlot::kLegendRuns);
    QCOMPARE(names.front(), QString("run-5"));
  }

  void a_single_point_is_drawn() {
    spur::studio::MetricPlot plot("accuracy");
    plot.resize(400, 300);
    plot.show();
    plot.append(3, "run", {300}, {0.85}, {100.0});
    plot.plot()->replot();
    const QImage image = plot.grab().toImage();
    const QColor colour = spur::studio::run_colour(3);
    // Inside the plot's axes, outside its legend (whose sample line has the colour anyway).
    const QRect area = plot.plot()->axisRect()->rect();
    const QRect legend = plot.plot()->legend->outerRect();
    const double scale = image.width() / static_cast<double>(plot.width());
    int hits = 0;
    for (int y = static_cast<int>(area.top() * scale); y < static_cast<int>(area.bottom() * scale); ++y) {
      for (int x = static_cast<int>(area.left() * scale); x < static_cast<int>(area.right() * scale); ++x) {
        if (legend.contains(QPoint(static_cast<int>(x / scale), static_cast<int>(y / scale)))) continue;
        const QColor pixel = image.pixelColor(x, y);
        if (std::abs(pixel.red() - colour.red()) < 12 && std::abs(pixel.green() - colour.green()) < 12 &&
            std::abs(pixel.blue() - colour.blue()) < 12) {
          ++hits;
        }
      }
    }
    QVERIFY2(hits >= 9, qPrintable(QString("%1 pixels of the run's colour in the plot").arg(hits)));
  }

  void plot_axes_and_exports() {
    QTemporaryDir dir;
    spur::studio::MetricPlot plot("loss");
    plot.resize(600, 400);
    plot.show();
    plot.append(7, "run", {5, 6, 7}, {1.0, 0.5, 0.25}, {100.0, 101.5, 103.0});
    QCOMPARE(plot.first_x(7), 5.0);
    plot.set_x_axis(spur::studio::XAxis::relative_time);
    QCOMPARE(plot.first_x(7), 0.0);
    plot.append(7, "run", {8}, {0.125}, {104.0});  // appended in the current axis
    plot.set_x_axis(spur::studio::XAxis::wall_time);
    QCOMPARE(plot.first_x(7), 100.0);
    QCOMPARE(plot.point_count(7), 4);
    plot.set_log_y(true);
    QVERIFY(plot.save_image(dir.filePath("loss.png")));
    QVERIFY(QFileInfo(dir.filePath("loss.png")).size() > 1000);
    QVERIFY(plot.save_image(dir.filePath("loss.svg")));
    QFile svg(dir.filePath("loss.svg"));
    QVERIFY(svg.open(QIODevice::ReadOnly));
    const QByteArray svg_text = svg.readAll();
    QVERIFY2(svg_text.contains("<svg") && svg_text.contains("<polyline") && svg_text.contains(">loss<"),
             svg_text.left(300));
    QVERIFY(plot.save_image(dir.filePath("loss.pdf")));
    QVERIFY(QFileInfo(dir.filePath("loss.pdf")).size() > 1000);
    QVERIFY(plot.save_csv(dir.filePath("loss.csv")));
    QFile csv(dir.filePath("loss.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const auto lines = QString::fromUtf8(csv.readAll()).trimmed().split('\n');
    QCOMPARE(lines.size(), 5);
    QCOMPARE(lines[0], QString("run,step,wall_time,value,smoothed"));
    QVERIFY2(lines[4].startsWith("7,8,104.000000,0.125,"), qPrintable(lines[4]));
  }

  // The dashboard's smoothing and x axis, and the metric columns, come back in the next window (QSettings).
  void settings_outlive_the_window() {
    QTemporaryDir dir;
    {
      spur::studio::MainWindow window(dir.filePath("history.db"));
      window.findChild<QSlider*>("smoothing")->setValue(850);
      window.findChild<QComboBox*>("x_axis")->setCurrentIndex(2);
      window.runs()->set_metric_columns({"loss"});
      window.close();
    }
    spur::studio::MainWindow again(dir.filePath("history.db"));
    QCOMPARE(again.findChild<QSlider*>("smoothing")->value(), 850);
    QCOMPARE(again.findChild<QComboBox*>("x_axis")->currentIndex(), 2);
    QCOMPARE(again.runs()->metric_columns(), QStringList{"loss"});
    again.findChild<QSlider*>("smoothing")->setValue(600);
    again.findChild<QComboBox*>("x_axis")->setCurrentIndex(0);
    again.runs()->set_metric_columns({});
    again.close();
  }

  // The hover read-out names every run's nearest point to the cursor's x.
  void hover_reads_out_every_run() {
    spur::studio::MetricPlot plot("loss");
    plot.append(1, "first", {0, 10, 20}, {3.0, 2.0, 1.0});
    plot.append(2, "second", {0, 5}, {9.0, 8.0});
    plot.set_smoothing(0);
    const QString at_12 = plot.readout(12);
    QVERIFY2(at_12.contains("first: <b>2</b>") && at_12.contains("@ step 10"), qPrintable(at_12));
    QVERIFY2(at_12.contains("second: <b>8</b>") && at_12.contains("@ step 5"), qPrintable(at_12));
    QVERIFY2(plot.readout(16).contains("first: <b>1</b>"), qPrintable(plot.readout(16)));
    QVERIFY2(plot.readout(-100).contains("first: <b>3</b>"), qPrintable(plot.readout(-100)));
  }

  // The live plot extends its smoothed line point by point with the one smoothing implementation
  // (app::Smoother): whatever the chunks the points arrive in, the line equals app::smooth over the whole series,
  // also after the weight changes and more points come.
  void the_live_plot_smooths_as_the_series_is_smoothed() {
    spur::studio::MetricPlot plot("loss");
    plot.set_smoothing(0.3);  // not the default weight: a line must start from the plot's
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> all;
    auto add = [&](std::vector<double> values) {
      QVector<double> steps;
      for (std::size_t i = 0; i < values.size(); ++i) steps << static_cast<double>(all.size() + i);
      plot.append(7, "run", steps, QVector<double>(values.begin(), values.end()));
      all.insert(all.end(), values.begin(), values.end());
    };
    auto check = [&](double weight) {
      const auto expected = spur::app::smooth(all, weight);
      auto* line = plot.plot()->graph(1);  // the run's smoothed line (the raw one is graph 0)
      QCOMPARE(line->dataCount(), static_cast<int>(expected.size()));
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const double got = line->data()->at(static_cast<int>(i))->value;
        if (std::isnan(expected[i])) QVERIFY(std::isnan(got));
        else
          QVERIFY2(std::abs(got - expected[i]) < 1e-12,
                   qPrintable(QString("%1: %2 vs %3").arg(i).arg(got).arg(expected[i])));
      }
    };
    add({2, 2});  // a constant start is shown as it is
    add({3, nan, 1, 4});
    add({0.5});
    check(0.3);
    plot.set_smoothing(0.9);
    check(0.9);
    add({8, 9, nan, 10});
    check(0.9);
  }

  // The dashboard's empty state says which: nothing selected, or selected runs that have logged nothing yet.
  void the_empty_dashboard_says_why() {
    spur::studio::Dashboard dashboard;
    QVERIFY(dashboard.empty_text().startsWith("Select runs"));
    dashboard.set_runs({{1, "a"}});
    QVERIFY2(dashboard.empty_text().startsWith("No data yet"), qPrintable(dashboard.empty_text()));
    dashboard.set_runs({});
    QVERIFY(dashboard.empty_text().startsWith("Select runs"));
  }

  // The Run menu's actions (the dialogs only collect what these take) change the history and the table.
  void run_actions() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    int64_t id = 0;
    {
      spur::history::HistoryWriter history(path.toStdString());
      spur::history::Run run;
      run.name = "before";
      run.status = "finished";
      run.config = "distributed_type: MULTI_CPU\nnum_processes: 2\n";
      id = history.create_run(run);
      history.append_metrics(id, {{"loss", {{1, 0.5, 1000.25}, {2, 0.25, 1001.5}}}, {"a,b", {{1, 3.0, 1002.0}}}});
    }
    spur::studio::MainWindow window(path);
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 1, 5000);
    auto cell = [&](int column) { return window.runs()->data(window.runs()->index(0, column)).toString(); };
    QTRY_VERIFY_WITH_TIMEOUT(window.dashboard()->plot("loss") != nullptr, 5000);  // the newest run is shown
    QCOMPARE(window.dashboard()->empty_text(), QString());
    QCOMPARE(window.dashboard()->plot("loss")->run_name(id), QString("before"));
    // Actions are written at once; the table and legends follow with the next read (on the reader thread).
    QCOMPARE(window.rename_run(id, "  after "), QString());
    QTRY_COMPARE_WITH_TIMEOUT(cell(spur::app::RunsModel::Name), QString("after"), 5000);
    QCOMPARE(window.dashboard()->plot("loss")->run_name(id), QString("after"));  // with the table's name
    QVERIFY(!window.rename_run(id, " ").isEmpty());
    QCOMPARE(window.tag_run(id, "baseline"), QString());
    QTRY_COMPARE_WITH_TIMEOUT(cell(spur::app::RunsModel::Tags), QString("baseline"), 5000);
    // The search box filters on any column, tags included.
    window.filter_runs("BASE");
    QCOMPARE(window.runs_view()->model()->rowCount(), 1);
    window.filter_runs("nothing like it");
    QCOMPARE(window.runs_view()->model()->rowCount(), 0);
    window.filter_runs("");
    QCOMPARE(window.runs_view()->model()->rowCount(), 1);
    QCOMPARE(window.set_notes(id, "lr too high"), QString());
    QTRY_COMPARE_WITH_TIMEOUT(QString::fromStdString(window.runs()->run(0).notes), QString("lr too high"), 5000);
    const QString file = dir.filePath("again.yaml");
    QCOMPARE(window.export_config(id, file), QString());
    QFile exported(file);
    QVERIFY(exported.open(QIODevice::ReadOnly));
    QCOMPARE(exported.readAll(), QByteArray("distributed_type: MULTI_CPU\nnum_processes: 2\n"));
    QVERIFY(window.export_config(id + 1, file).contains("No run"));
    // Metrics in the one CSV layout: the Studio's export is byte for byte `spur runs export --format csv`'s.
    const QString csv = dir.filePath("metrics.csv");
    QCOMPARE(window.export_metrics(id, csv), QString());
    QFile studio_csv(csv);
    QVERIFY(studio_csv.open(QIODevice::ReadOnly));
    const QByteArray studio_bytes = studio_csv.readAll();
    QVERIFY2(studio_bytes.startsWith("key,step,value,wall_time\nloss,1,0.5,1000.250000\n"), studio_bytes.constData());
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", path);
    QProcess cli;
    cli.setProcessEnvironment(env);
    cli.start(SPUR_CLI, {"runs", "export", QString::number(id), "--format", "csv"});
    QVERIFY(cli.waitForFinished(30000));
    QCOMPARE(cli.readAllStandardOutput(), studio_bytes);
    QVERIFY(window.export_metrics(id, path).contains("is the run history"));  // never over the history
    QCOMPARE(window.delete_run(id), QString());
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 0, 5000);
  }

  // The Compare tab: the selected runs side by side, read on the reader thread when the tab is shown, with a
  // baseline chosen (also before the runs are read, as --baseline does) and "Differences only".
  void the_compare_tab_shows_the_selected_runs() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    {
      spur::history::HistoryWriter history(path.toStdString());
      for (int i = 0; i < 3; ++i) {
        spur::history::Run run;
        run.status = "finished";
        run.params = i == 2 ? "{\"lr\": 0.5}" : "{\"lr\": 0.1}";
        const int64_t id = history.create_run(run);
        history.append_metrics(id, {{"loss", {{1, 1.0 - 0.1 * i, 0}}}});
      }
    }
    spur::studio::MainWindow window(path);
    window.show_runs({1, 3});
    window.compare()->set_baseline(1);
    window.show_compare();
    auto* model = window.compare()->model();
    QTRY_COMPARE_WITH_TIMEOUT(model->columnCount(), 2, 5000);
    QCOMPARE(model->baseline(), qint64(1));
    const int loss = model->row_of("metric/loss/final");
    QVERIFY(loss >= 0);
    QCOMPARE(model->data(model->index(loss, 1), spur::app::CompareModel::VerdictRole).toInt(), 1);  // 0.8 < 1
    // The view colours it: green for better.
    const auto colour = window.compare()->table()->model()->data(window.compare()->table()->model()->index(loss, 1),
                                                                 Qt::ForegroundRole);
    QCOMPARE(colour.value<QBrush>().color(), QColor(0x1b, 0x87, 0x3f));
    window.compare()->differences_only()->setChecked(true);
    QVERIFY(model->row_of("params/lr") >= 0);
    QCOMPARE(model->row_of("run/status"), -1);
    window.compare()->differences_only()->setChecked(false);
    // The runs table follows the baseline: its metric columns show deltas, coloured; each row has its line's colour.
    window.runs()->set_metric_columns({"loss"});
    auto* table = window.runs_view()->model();
    int row3 = -1;
    for (int row = 0; row < table->rowCount(); ++row) {
      if (table->index(row, spur::app::RunsModel::Id).data().toLongLong() == 3) row3 = row;
    }
    QVERIFY(row3 >= 0);
    const auto delta = table->index(row3, spur::app::RunsModel::ColumnCount);
    QTRY_COMPARE_WITH_TIMEOUT(delta.data().toString(), QString("0.8 (-0.2)"), 5000);
    QCOMPARE(delta.data(Qt::ForegroundRole).value<QBrush>().color(), QColor(0x1b, 0x87, 0x3f));
    QCOMPARE(table->index(row3, spur::app::RunsModel::Name)
                 .data(Qt::DecorationRole)
                 .value<QPixmap>()
                 .toImage()
                 .pixelColor(5, 5),
             spur::studio::run_colour(3));
    // A third run selected: read again.
    window.runs_view()->selectAll();
    QTRY_COMPARE_WITH_TIMEOUT(model->columnCount(), 3, 5000);
  }

  // A run that fails or finishes while the window is not focused is announced over D-Bus (a private session bus
  // with a stand-in notification service); one that ended before it was seen running, a focused window, or the
  // setting off: nothing.
  void a_run_that_ends_unfocused_is_announced() {
    QProcess bus;
    bus.start("dbus-daemon", {"--session", "--nofork", "--nopidfile", "--print-address=1"});
    QVERIFY2(bus.waitForStarted(10000), "dbus-daemon (installer/setup.sh installs it) did not start");
    QVERIFY(bus.waitForReadyRead(10000));
    const QString address = QString::fromUtf8(bus.readLine()).trimmed();
    auto cleanup = qScopeGuard([&] {
      QDBusConnection::disconnectFromBus("studio-test-service");
      QDBusConnection::disconnectFromBus("studio-test-client");
      bus.kill();
      bus.waitForFinished(5000);
    });
    auto service = QDBusConnection::connectToBus(address, "studio-test-service");
    FakeNotifications fake;
    QVERIFY(service.registerService("org.freedesktop.Notifications"));
    QVERIFY(service.registerObject("/org/freedesktop/Notifications", &fake, QDBusConnection::ExportAllSlots));
    spur::studio::RunNotifier notifier(QDBusConnection::connectToBus(address, "studio-test-client"));
    QCOMPARE(notifier.update({{1, "a", "running", {}}, {2, "b", "finished", 0}}, false), 0);  // first look
    QCOMPARE(notifier.update({{1, "a", "failed", 1}, {2, "b", "finished", 0}, {3, "c", "running", {}}}, false), 1);
    QTRY_COMPARE_WITH_TIMEOUT(fake.summaries.size(), 1, 5000);
    QCOMPARE(fake.summaries[0], QString("Run 1 failed"));
    QCOMPARE(fake.bodies[0], QString("a: exit code 1"));
    QCOMPARE(fake.urgencies[0], 2);                                                          // critical
    QCOMPARE(notifier.update({{3, "c", "finished", 0}, {4, "d", "running", {}}}, true), 0);  // focused
    notifier.set_enabled(false);
    QCOMPARE(notifier.update({{4, "d", "finished", 0}, {5, "e", "running", {}}}, false), 0);  // off
    notifier.set_enabled(true);
    QCOMPARE(notifier.update({{5, "e", "finished", 0}}, false), 1);
    QTRY_COMPARE_WITH_TIMEOUT(fake.summaries.size(), 2, 5000);
    QCOMPARE(fake.summaries[1], QString("Run 5 finished"));
    QCOMPARE(fake.urgencies[1], 1);
  }

  // File > Import: TensorBoard's own writers' runs come in on a worker thread and are selected; a damaged file
  // is reported by name, and its run is not imported.
  void importing_tensorboard_runs() {
    QTemporaryDir dir;
    const auto written =
        spur::test::run_process(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/write_tensorboard.py", dir.filePath("logs")},
                                QProcessEnvironment::systemEnvironment(), 120000);
    QVERIFY2(written.exit_code == 0, qPrintable(written.output));
    spur::studio::MainWindow window(dir.filePath("history.db"));
    QSignalSpy imported(&window, &spur::studio::MainWindow::imported);
    QCOMPARE(window.import_tensorboard(dir.filePath("logs")), QString());
    QVERIFY(window.importing());
    QVERIFY(!window.import_tensorboard(dir.filePath("logs")).isEmpty());  // one at a time
    QVERIFY(imported.wait(30000));
    QVERIFY(!window.importing());
    QCOMPARE(imported[0][2].toBool(), false);
    QCOMPARE(imported[0][1].value<QList<qint64>>(), (QList<qint64>{1, 2}));
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 2, 5000);
    QTRY_COMPARE_WITH_TIMEOUT(window.runs_view()->selectionModel()->selectedRows().size(), 2, 5000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.dashboard()->keys().isEmpty(), 5000);

    // The same again: skipped, nothing new. A damaged file: named, with its record.
    QCOMPARE(window.import_tensorboard(dir.filePath("logs/tb")), QString());
    QVERIFY(imported.wait(30000));
    QVERIFY2(imported[1][0].toStringList().join('\n').contains("already imported as run 1"),
             qPrintable(imported[1][0].toStringList().join('\n')));
    QFile events(QDir(dir.filePath("logs/torch")).entryInfoList({"*tfevents*"}, QDir::Files, QDir::Name)[0].filePath());
    QVERIFY(events.open(QIODevice::ReadWrite));
    events.resize(events.size() - 3);
    events.close();
    QCOMPARE(window.import_tensorboard(dir.filePath("logs/torch")), QString());
    QVERIFY(imported.wait(30000));
    QCOMPARE(imported[2][2].toBool(), true);
    QVERIFY2(window.last_error().contains(events.fileName() + ": record"), qPrintable(window.last_error()));
    QCOMPARE(window.runs()->rowCount(), 2);
  }
};

SPUR_TEST_CLASS(StudioTest)
#include "studio_test.moc"
