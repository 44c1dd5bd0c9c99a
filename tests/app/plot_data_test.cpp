// SPDX-License-Identifier: Apache-2.0
// What a Studio plot draws, without a widget (app::PlotData): the data's extent as points arrive and runs go, the
// x of each point on the three axes (relative time from each run's own first point), TensorBoard's debiased
// smoothing (worked by hand), the hover read-out of two runs and against a baseline, the nearest point, summarised
// buckets from a SeriesLoader's delta (envelope, counts, read-out), and the CSV export in metrics_csv.h's plot
// layout.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>

#include <spur/core/metrics_csv.h>

#include "studio/plot_data.h"
#include "studio/series_loader.h"
#include "studio/series_math.h"
#include "test_main.h"

namespace {

using spur::app::MetricDirection;
using spur::app::PlotData;
using spur::app::XAxis;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Two buckets of 10 points each (steps 0-9 and 10-19), wall times from 100, the series starting at wall time 90.
spur::app::SeriesDelta two_buckets(qint64 run) {
  spur::app::SeriesDelta delta;
  delta.run = run;
  delta.key = "loss";
  delta.replace = true;
  delta.points_per_bucket = 10;
  delta.steps = {0, 10};
  delta.last_steps = {9, 19};
  delta.walls = {100, 110};
  delta.last_walls = {109, 119};
  delta.values = {5, 3};
  delta.mins = {4, 2};
  delta.maxs = {7, 3.5};
  delta.counts = {10, 10};
  delta.total_points = 20;
  delta.first_wall = 90;
  return delta;
}

QString extent_text(const PlotData::Extent& e) {
  return e.valid ? QString("x %1..%2, y %3..%4").arg(e.key_lo).arg(e.key_hi).arg(e.value_lo).arg(e.value_hi)
                 : QString("none");
}

// The read-out's row of a raw point, as the Studio's tooltip shows it.
// A read-out row; the smoothed value is left out where it is the value.
QString row(const QString& colour, const QString& name, const QString& value, const QString& smoothed, int step) {
  return QString("<span style='color:%1'>&#9632;</span> %2: <b>%3</b>%4 @ step %5")
      .arg(colour, name, value, smoothed == value ? QString() : " (smoothed " + smoothed + ")")
      .arg(step);
}

}  // namespace

class PlotDataTest : public QObject {
  Q_OBJECT

 private slots:
  void runs_keep_their_colours() {
    QCOMPARE(spur::app::run_colour_name(0), QString("#1f77b4"));
    QCOMPARE(spur::app::run_colour_name(1), QString("#ff7f0e"));
    QCOMPARE(spur::app::run_colour_name(3), QString("#d62728"));
    QCOMPARE(spur::app::run_colour_name(13), QString("#d62728"));  // ten colours, in turn
  }

  void extents_grow_with_appends() {
    PlotData data("loss");
    QVERIFY(!data.extent().valid);
    auto expect = [&](double key_lo, double key_hi, double value_lo, double value_hi) {
      const PlotData::Extent e = data.extent();
      const QString want = extent_text({key_lo, key_hi, value_lo, value_hi, true});
      return e.valid && e.key_lo == key_lo && e.key_hi == key_hi && e.value_lo == value_lo && e.value_hi == value_hi
                 ? QString()
                 : QString("extent %1, expected %2").arg(extent_text(e), want);
    };
    data.append(1, "a", {0, 1, 2}, {1.0, 0.5, 0.25}, {100, 110, 120});
    QString wrong = expect(0, 2, 0.25, 1);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    data.append(2, "b", {10}, {5.0}, {200});
    wrong = expect(0, 10, 0.25, 5);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    // Points that are not finite stay out of the extent.
    data.append(1, "a", {30, 40}, {kNaN, std::numeric_limits<double>::infinity()}, {130, 140});
    wrong = expect(0, 10, 0.25, 5);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    // Another axis: the extent in its units.
    data.set_x_axis(XAxis::wall_time);
    wrong = expect(100, 200, 0.25, 5);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    // A run gone: its points no longer count.
    QVERIFY(data.remove_run(2));
    QVERIFY(!data.remove_run(2));
    wrong = expect(100, 120, 0.25, 1);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    // A summarised line counts by its envelope: every bucket's extremes at its first and last wall time.
    data.load(two_buckets(3), "c");
    wrong = expect(100, 120, 0.25, 7);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    data.append(1, "a", {50}, {-3.0}, {150});
    wrong = expect(100, 150, -3, 7);
    QVERIFY2(wrong.isEmpty(), qPrintable(wrong));
    QVERIFY(data.remove_run(1));
    QVERIFY(data.remove_run(3));
    QVERIFY(data.empty());
    QVERIFY(!data.extent().valid);
  }

  void x_keys_follow_the_axis_data() {
    QTest::addColumn<int>("axis");
    QTest::addColumn<QVector<double>>("keys");        // run 7's
    QTest::addColumn<QVector<double>>("other_keys");  // run 8's, which started later
    QTest::addColumn<QString>("label");
    QTest::newRow("step") << static_cast<int>(XAxis::step) << QVector<double>{5, 6, 7, 8} << QVector<double>{0, 1}
                          << "step";
    // Relative time counts from each run's own first point.
    QTest::newRow("relative time") << static_cast<int>(XAxis::relative_time) << QVector<double>{0, 1.5, 3, 4}
                                   << QVector<double>{0, 2} << "seconds since the start";
    QTest::newRow("wall time") << static_cast<int>(XAxis::wall_time) << QVector<double>{100, 101.5, 103, 104}
                               << QVector<double>{500, 502} << "time";
  }
  void x_keys_follow_the_axis() {
    QFETCH(int, axis);
    QFETCH(QVector<double>, keys);
    QFETCH(QVector<double>, other_keys);
    QFETCH(QString, label);
    PlotData data("loss");
    data.append(7, "run", {5, 6, 7}, {1.0, 0.5, 0.25}, {100, 101.5, 103});
    data.append(8, "later", {0, 1}, {2.0, 1.0}, {500, 502});
    data.set_x_axis(static_cast<XAxis>(axis));
    QCOMPARE(data.x_axis(), static_cast<XAxis>(axis));
    // Appended in the axis shown now, as the widget adds them to its graphs.
    const PlotData::Change change = data.append(7, "run", {8}, {0.125}, {104});
    QVERIFY(!change.new_run && !change.replaced);
    QCOMPARE(change.keys, QVector<double>{keys.back()});
    QCOMPARE(change.values, QVector<double>{0.125});
    QCOMPARE(data.keys(7), keys);
    QCOMPARE(data.keys(8), other_keys);
    QCOMPARE(data.envelope(7).keys, keys);  // a raw line's faint line is its points
    QCOMPARE(data.envelope(7).values, (QVector<double>{1.0, 0.5, 0.25, 0.125}));
    QCOMPARE(data.first_x(7), keys.front());
    QCOMPARE(data.point_count(7), 4);
    QCOMPARE(data.x_label(), label);
    // The launcher's system/ samples count seconds in their steps: the step axis says so.
    data.set_steps_are_seconds(true);
    QCOMPARE(data.x_label(),
             axis == static_cast<int>(XAxis::wall_time) ? QString("time") : QString("seconds since the start"));
    QCOMPARE(data.keys(7), keys);
    QVERIFY(data.keys(99).isEmpty());
  }

  // TensorBoard's debiased EMA (last = last*w + (1-w)*y; shown = last / (1 - w^n)) with w = 0.5 over 1, NaN, 2, 3:
  // 1 (a constant start shows as it is); NaN passes and does not count; 1.25 / 0.75 = 5/3; 2.125 / 0.875 = 17/7.
  void smoothing_is_tensorboards_debiased_ema() {
    PlotData data("loss");
    QCOMPARE(data.smoothing(), 0.6);  // the default, TensorBoard's
    data.set_smoothing(0.5);          // before the line: it starts with the plot's weight
    const PlotData::Change first = data.append(1, "run", {0, 1}, {1.0, kNaN});
    QVERIFY(first.new_run);
    QCOMPARE(first.smoothed.size(), 2);
    QCOMPARE(first.smoothed[0], 1.0);
    QVERIFY(std::isnan(first.smoothed[1]));
    // The next chunk goes on from where the smoothed line is up to.
    const PlotData::Change second = data.append(1, "run", {2, 3}, {2.0, 3.0});
    QVERIFY(!second.new_run);
    QCOMPARE(second.smoothed.size(), 2);
    QVERIFY2(std::abs(second.smoothed[0] - 5.0 / 3) < 1e-12, qPrintable(QString::number(second.smoothed[0], 'g', 17)));
    QVERIFY2(std::abs(second.smoothed[1] - 17.0 / 7) < 1e-12, qPrintable(QString::number(second.smoothed[1], 'g', 17)));
    const std::vector<double> expected{1.0, kNaN, 5.0 / 3, 17.0 / 7};
    auto check = [&](const std::vector<double>& want) {
      const QVector<double> got = data.smoothed(1);
      QCOMPARE(got.size(), static_cast<qsizetype>(want.size()));
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double g = got[static_cast<qsizetype>(i)];
        if (std::isnan(want[i])) QVERIFY2(std::isnan(g), qPrintable(QString("%1: %2").arg(i).arg(g)));
        else QVERIFY2(std::abs(g - want[i]) < 1e-12, qPrintable(QString("%1: %2 vs %3").arg(i).arg(g).arg(want[i])));
      }
    };
    check(expected);
    // The one implementation: the same as app::smooth over the whole series.
    check(spur::app::smooth({1.0, kNaN, 2.0, 3.0}, 0.5));
    // Weight 0 shows the values; back to 0.5, smoothed again from the start.
    data.set_smoothing(0);
    check({1.0, kNaN, 2.0, 3.0});
    data.set_smoothing(0.5);
    check(expected);
    data.set_smoothing(2);
    QCOMPARE(data.smoothing(), 0.999);
    data.set_smoothing(-1);
    QCOMPARE(data.smoothing(), 0.0);
  }

  // Issue 36, defect 8: an accuracy logged twice (0.85, 0.902) was drawn at 0.8825 at its last point: a line of
  // fewer points than the smoothing's window (1 / (1 - w): 2.5 at 0.6) is shown as logged, and smoothed from its
  // start once it has grown past it.
  void short_lines_are_shown_as_logged() {
    PlotData data("eval/accuracy");
    QCOMPARE(data.append(1, "run", {0, 1}, {0.85, 0.902}).smoothed, (QVector<double>{0.85, 0.902}));
    QCOMPARE(data.smoothed(1), (QVector<double>{0.85, 0.902}));
    // The third point passes the window: the whole line is drawn again, smoothed.
    const PlotData::Change third = data.append(1, "run", {2}, {0.91});
    QVERIFY(third.replaced);
    const auto expected = spur::app::smooth({0.85, 0.902, 0.91}, 0.6);
    QCOMPARE(data.smoothed(1), QVector<double>(expected.begin(), expected.end()));
    QVERIFY(std::abs(data.smoothed(1)[1] - 0.8825) < 1e-12);  // (0.24 * 0.85 + 0.4 * 0.902) / 0.64
    // A heavier smoothing has a longer window: 10 points at 0.9.
    data.set_smoothing(0.9);
    QCOMPARE(data.smoothed(1), data.values(1));
    data.set_smoothing(0);
    QCOMPARE(data.smoothed(1), data.values(1));
  }

  // Issue 36, defect 5: relative time counts from the run's start, the same origin on every plot of the run (it
  // counted from each series' own first point: an eval metric logged after a minute started at 0).
  void relative_time_counts_from_the_runs_start() {
    PlotData loss("loss"), eval("eval/accuracy");
    for (auto* data : {&loss, &eval}) data->set_x_axis(XAxis::relative_time);
    loss.append(1, "run", {0, 1}, {2.0, 1.5}, {1010, 1020});
    eval.append(1, "run", {100}, {0.8}, {1070});
    QCOMPARE(loss.keys(1), (QVector<double>{0, 10}));  // no start known: the line's first point
    QCOMPARE(eval.keys(1), (QVector<double>{0}));
    for (auto* data : {&loss, &eval}) QVERIFY(data->set_run_start(1, 1000));
    QVERIFY(!loss.set_run_start(1, 1000));
    QCOMPARE(loss.keys(1), (QVector<double>{10, 20}));
    QCOMPARE(eval.keys(1), (QVector<double>{70}));
    QCOMPARE(eval.extent().key_lo, 70.0);
    // A start set before the line comes; a start after the first point (another machine's clock) gives way to it.
    PlotData later("lr");
    later.set_x_axis(XAxis::relative_time);
    later.set_run_start(2, 2000);
    later.set_run_start(3, 3050);
    later.append(2, "two", {0}, {0.1}, {2030});
    later.append(3, "three", {0}, {0.1}, {3000});
    QCOMPARE(later.keys(2), (QVector<double>{30}));
    QCOMPARE(later.keys(3), (QVector<double>{0}));
    // The read-out says the time since the start beside the step; the heading says where x is.
    loss.set_smoothing(0);
    QVERIFY2(loss.readout(19).contains("@ step 1, 0m20s"), qPrintable(loss.readout(19)));
    QCOMPARE(loss.x_text(75), QString("1m15s since the start"));
    // The box's compact form: the step said once when every run is at it, each row its value and time.
    loss.set_x_axis(XAxis::step);
    QCOMPARE(loss.common_step(0.9), std::optional<qint64>(1));
    QVERIFY2(loss.readout(1, 4, false).endsWith("run: <b>1.5</b>, 0m20s"), qPrintable(loss.readout(1, 4, false)));
    loss.append(2, "other", {5}, {2.0}, {1030});
    QCOMPARE(loss.common_step(1), std::nullopt);  // run 2's nearest is step 5
    loss.set_x_axis(XAxis::step);
    QCOMPARE(loss.x_text(149.6), QString("step 150"));
  }

  // Issue 36, defect 14: "train/loss" was offered as "loss.png" (the slash read as a folder).
  void export_names_keep_the_whole_key() {
    QCOMPARE(PlotData("train/loss").file_stem(), QString("train-loss"));
    QCOMPARE(PlotData("a:b*c?\\d").file_stem(), QString("a-b-c--d"));
    QCOMPARE(PlotData("").file_stem(), QString("plot"));
  }

  void readout_names_every_run() {
    PlotData data("loss");
    QCOMPARE(data.readout(0), QString());
    data.append(1, "first", {0, 10, 20}, {3.0, 2.0, 1.0});
    data.append(2, "second", {0, 5}, {9.0, 8.0});
    data.set_smoothing(0);
    const QString first_at_10 = row("#ff7f0e", "first", "2", "2", 10);
    const QString second_at_5 = row("#2ca02c", "second", "8", "8", 5);
    QCOMPARE(data.readout(12), first_at_10 + "<br>" + second_at_5);
    QCOMPARE(data.readout(16), row("#ff7f0e", "first", "1", "1", 20) + "<br>" + second_at_5);
    QCOMPARE(data.readout(-100), row("#ff7f0e", "first", "3", "3", 0) + "<br>" + row("#2ca02c", "second", "9", "9", 0));
    // Smoothed values with 6 significant digits; names are HTML.
    data.set_smoothing(0.5);
    data.rename_run(2, "<lr>");
    QCOMPARE(data.readout(12),
             row("#ff7f0e", "first", "2", "2.33333", 10) + "<br>" + row("#2ca02c", "&lt;lr&gt;", "8", "8.33333", 5));
  }

  // The Compare tab's baseline: the others' difference to its value at x, absolute and in % of it, green when
  // better in the metric's direction, red when worse.
  void readout_against_a_baseline() {
    PlotData data("loss");
    data.set_smoothing(0);
    data.append(1, "first", {0, 10, 20}, {3.0, 2.0, 1.0});
    data.append(2, "second", {0, 5}, {9.0, 8.0});
    QVERIFY(data.set_baseline(1, MetricDirection::lower_is_better));
    QVERIFY(!data.set_baseline(1, MetricDirection::lower_is_better));
    QCOMPARE(data.baseline(), qint64{1});
    QCOMPARE(data.legend_name(1), QString("first (baseline)"));
    QCOMPARE(data.legend_name(2), QString("second"));
    QCOMPARE(data.legend_name(3), QString());
    const QString first_at_10 = row("#ff7f0e", "first", "2", "2", 10);
    const QString second_at_5 = row("#2ca02c", "second", "8", "8", 5);
    // 8 against 2, lower is better: worse by 6, 300% of the baseline.
    QCOMPARE(data.readout(12), first_at_10 + "<br>" + second_at_5 +
                                   " <span style='color:#c62828'>&Delta; +6, +300.0% vs baseline</span>");
    QVERIFY(data.set_baseline(1, MetricDirection::higher_is_better));
    QCOMPARE(data.readout(12), first_at_10 + "<br>" + second_at_5 +
                                   " <span style='color:#1b873f'>&Delta; +6, +300.0% vs baseline</span>");
    // At another x, against the baseline's value there (9 against 3).
    QCOMPARE(data.readout(-1), row("#ff7f0e", "first", "3", "3", 0) + "<br>" + row("#2ca02c", "second", "9", "9", 0) +
                                   " <span style='color:#1b873f'>&Delta; +6, +200.0% vs baseline</span>");
    // Run 2 as the baseline: run 1 is lower, better when lower is better.
    QVERIFY(data.set_baseline(2, MetricDirection::lower_is_better));
    QCOMPARE(data.legend_name(1), QString("first"));
    QCOMPARE(data.legend_name(2), QString("second (baseline)"));
    QCOMPARE(data.readout(12),
             first_at_10 + " <span style='color:#1b873f'>&Delta; -6, -75.0% vs baseline</span>" + "<br>" + second_at_5);
    // No baseline: no differences.
    QVERIFY(data.set_baseline(0, MetricDirection::lower_is_better));
    QCOMPARE(data.readout(12), first_at_10 + "<br>" + second_at_5);
  }

  void nearest_point() {
    PlotData data("loss");
    data.append(1, "run", {0, 10, 20}, {3.0, 2.0, 1.0}, {100, 200, 300});
    QCOMPARE(data.nearest(1, 12), qsizetype{1});
    QCOMPARE(data.nearest(1, 16), qsizetype{2});
    QCOMPARE(data.nearest(1, -100), qsizetype{0});
    QCOMPARE(data.nearest(1, 1e9), qsizetype{2});
    QCOMPARE(data.nearest(1, 15), qsizetype{1});  // halfway: the first
    QCOMPARE(data.nearest(2, 0), qsizetype{-1});  // no such line
    data.set_x_axis(XAxis::wall_time);
    QCOMPARE(data.nearest(1, 12), qsizetype{0});
    QCOMPARE(data.nearest(1, 190), qsizetype{1});
    data.set_x_axis(XAxis::relative_time);
    QCOMPARE(data.nearest(1, 190), qsizetype{2});
  }

  void summarised_buckets_from_a_delta() {
    PlotData data("loss");
    const PlotData::Change change = data.load(two_buckets(4), "run");
    QVERIFY(change.new_run);
    QVERIFY(change.replaced);
    QVERIFY(data.summarised(4));
    QCOMPARE(data.represented_points(4), qint64{20});
    QCOMPARE(data.point_count(4), 4);  // each bucket's two extremes
    // A bucket's x is the middle of its span.
    QCOMPARE(data.keys(4), (QVector<double>{4.5, 14.5}));
    QCOMPARE(data.values(4), (QVector<double>{5, 3}));
    // Falling into the next bucket: the maximum first; the last bucket rises: minimum first.
    const PlotData::Points envelope = data.envelope(4);
    QCOMPARE(envelope.keys, (QVector<double>{0, 9, 10, 19}));
    QCOMPARE(envelope.values, (QVector<double>{7, 4, 2, 3.5}));
    QCOMPARE(data.first_x(4), 0.0);
    // A bucket's mean counts as its 10 points: with d = 0.6^10, 5 (a constant start), then
    // (1-d)(5d+3) / (1 - d^2) = (5d+3) / (1+d).
    const double d = std::pow(0.6, 10);
    const double second = (5 * d + 3) / (1 + d);
    const QVector<double> smoothed = data.smoothed(4);
    QCOMPARE(smoothed.size(), 2);
    QCOMPARE(smoothed[0], 5.0);
    QVERIFY2(std::abs(smoothed[1] - second) < 1e-12, qPrintable(QString::number(smoothed[1], 'g', 17)));
    QCOMPARE(data.readout(15), QString("<span style='color:#9467bd'>&#9632;</span> run: <b>3</b> (mean of 10 points, "
                                       "2 to 3.5; smoothed %1) @ steps 10-19, 0m20s")
                                   .arg(QString::number(second, 'g', 6)));
    // Relative time from the series' first point (the delta's first_wall, before the first bucket).
    data.set_x_axis(XAxis::relative_time);
    QCOMPARE(data.keys(4), (QVector<double>{14.5, 24.5}));
    QCOMPARE(data.first_x(4), 10.0);
    data.set_x_axis(XAxis::wall_time);
    QCOMPARE(data.keys(4), (QVector<double>{104.5, 114.5}));
    QCOMPARE(data.envelope(4).keys, (QVector<double>{100, 109, 110, 119}));

    // Read again as raw points (a zoom): no longer summarised; relative time from the first wall time when the
    // delta has no first_wall.
    spur::app::SeriesDelta raw;
    raw.run = 4;
    raw.replace = true;
    raw.steps = {10, 11, 12};
    raw.values = {3.0, 2.5, 2.0};
    raw.walls = {200, 201, 203};
    const PlotData::Change again = data.load(raw, "run");
    QVERIFY(!again.new_run);
    QVERIFY(again.replaced);
    QVERIFY(!data.summarised(4));
    QCOMPARE(data.represented_points(4), qint64{3});
    QCOMPARE(data.point_count(4), 3);
    data.set_x_axis(XAxis::relative_time);
    QCOMPARE(data.keys(4), (QVector<double>{0, 1, 3}));
    // Appended points (not a replacement) go on from there.
    spur::app::SeriesDelta more;
    more.run = 4;
    more.steps = {13};
    more.values = {1.5};
    more.walls = {204};
    const PlotData::Change appended = data.load(more, "run");
    QVERIFY(!appended.replaced);
    QCOMPARE(appended.keys, QVector<double>{4});
    QCOMPARE(data.represented_points(4), qint64{4});
  }

  void runs_names_and_legend() {
    PlotData data("loss");
    QVERIFY(data.empty());
    data.append(5, "five", {0}, {1.0});
    data.append(2, "two", {0}, {1.0});
    QCOMPARE(data.runs(), (std::vector<qint64>{2, 5}));
    QVERIFY(data.contains(5));
    QVERIFY(!data.contains(3));
    QCOMPARE(data.name(5), QString("five"));
    QCOMPARE(data.name(3), QString());
    QVERIFY(data.rename_run(5, "renamed"));
    QVERIFY(!data.rename_run(5, "renamed"));
    QVERIFY(!data.rename_run(3, "nobody"));
    QCOMPARE(data.legend_name(5), QString("renamed"));
    QCOMPARE(data.represented_points(3), qint64{0});
    QCOMPARE(data.point_count(3), 0);
    QVERIFY(!data.summarised(3));
  }

  // metrics_csv.h's plot layout: run,name,key,step,value,wall_time,smoothed; runs in id order, a name with a comma
  // or quote quoted as RFC 4180 says, values with 17 significant digits, wall times with 6 decimals.
  void csv_is_the_plot_layout() {
    PlotData data("loss");
    data.set_smoothing(0);
    data.append(7, "run", {5, 6, 7}, {1.0, 0.5, 0.25}, {100, 101.5, 103});
    data.append(3, "lr=0.1, \"wide\"", {1}, {2.5}, {50});
    const QByteArray expected =
        "run,name,key,step,value,wall_time,smoothed\n"
        "3,\"lr=0.1, \"\"wide\"\"\",loss,1,2.5,50.000000,2.5\n"
        "7,run,loss,5,1,100.000000,1\n"
        "7,run,loss,6,0.5,101.500000,0.5\n"
        "7,run,loss,7,0.25,103.000000,0.25\n";
    QCOMPARE(data.csv(), expected);
    QVERIFY(data.csv().startsWith(QByteArray(spur::metrics_csv::kPlotHeader.data(),
                                             static_cast<qsizetype>(spur::metrics_csv::kPlotHeader.size()))));
    // A summarised line: one row per bucket, its first step and wall time and its mean.
    data.remove_run(3);
    data.load(two_buckets(4), "buckets");
    QCOMPARE(data.csv(), QByteArray("run,name,key,step,value,wall_time,smoothed\n"
                                    "4,buckets,loss,0,5,100.000000,5\n"
                                    "4,buckets,loss,10,3,110.000000,3\n"
                                    "7,run,loss,5,1,100.000000,1\n"
                                    "7,run,loss,6,0.5,101.500000,0.5\n"
                                    "7,run,loss,7,0.25,103.000000,0.25\n"));
    // The key is a field too; saved whole to a file.
    PlotData quoted("eval,loss");
    quoted.set_smoothing(0);
    quoted.append(1, "a", {2}, {0.5}, {10});
    QCOMPARE(quoted.csv(),
             QByteArray("run,name,key,step,value,wall_time,smoothed\n1,a,\"eval,loss\",2,0.5,10.000000,0.5\n"));
    QTemporaryDir dir;
    QVERIFY(data.save_csv(dir.filePath("loss.csv")));
    QFile file(dir.filePath("loss.csv"));
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), data.csv());
    QVERIFY(!data.save_csv(dir.filePath("no/such/folder/loss.csv")));
  }
};

SPUR_TEST_CLASS(PlotDataTest)
#include "plot_data_test.moc"
