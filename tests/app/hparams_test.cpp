// SPDX-License-Identifier: Apache-2.0
// The hyperparameter view's model (app/studio/hparams_model.h) under QAbstractItemModelTester: a column per
// varying parameter and per chosen metric, axes (linear, logarithmic over more than two decades, categories in
// order), each run's place on each axis, brushing (inside every brush; brushes kept across reads by key), the best
// run in the first metric's direction, runs that lack a value, and a real history read by CompareReader.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <spur/history/writer.h>

#include "studio/hparams_model.h"
#include "test_main.h"

namespace {

using spur::app::ComparedRun;
using spur::app::CompareSnapshot;
using spur::app::HParamsModel;

ComparedRun run(qint64 id, const char* name, std::map<QString, QString> params,
                const std::map<QString, double>& metrics) {
  ComparedRun r;
  r.run.id = id;
  r.run.name = name;
  r.params = std::move(params);
  for (const auto& [key, value] : metrics) r.metrics[key] = {value, 10, value, value, 11};
  return r;
}

// Four runs of a sweep: lr over three decades, an optimizer, a constant, loss and accuracy.
CompareSnapshot sweep() {
  CompareSnapshot s;
  s.runs.push_back(run(1, "a", {{"lr", "0.0001"}, {"opt", "\"sgd\""}, {"epochs", "5"}},
                       {{"loss", 0.9}, {"accuracy", 0.70}, {"system/cpu", 50}}));
  s.runs.push_back(run(2, "b", {{"lr", "0.001"}, {"opt", "\"adam\""}, {"epochs", "5"}},
                       {{"loss", 0.5}, {"accuracy", 0.80}, {"system/cpu", 50}}));
  s.runs.push_back(run(3, "c", {{"lr", "0.01"}, {"opt", "\"adam\""}, {"epochs", "5"}},
                       {{"loss", 0.3}, {"accuracy", 0.85}, {"system/cpu", 50}}));
  s.runs.push_back(run(4, "d", {{"lr", "0.1"}, {"opt", "\"sgd\""}, {"epochs", "5"}}, {{"loss", 0.7}}));
  return s;
}

// Run i's recorded parameters (outside the test class: moc loses a class holding a raw string with braces).
std::string sweep_params(int i) {
  return R"({"lr": )" + std::to_string(0.001 * (i + 1)) + R"(, "optimizer": {"name": ")" + (i % 2 ? "adam" : "sgd") +
         R"("}})";
}

QStringList headers(const HParamsModel& model) {
  QStringList out;
  for (int c = 0; c < model.columnCount(); ++c) out << model.headerData(c, Qt::Horizontal).toString();
  return out;
}

}  // namespace

class HParamsTest : public QObject {
  Q_OBJECT

 private slots:
  void columns_are_varying_parameters_then_metrics() {
    HParamsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_snapshot(sweep());
    // epochs is the same in every run: left out; system metrics are not chosen by default.
    QCOMPARE(headers(model), (QStringList{"Run", "lr", "opt", "accuracy", "loss"}));
    model.set_varying_only(false);
    QCOMPARE(headers(model), (QStringList{"Run", "epochs", "lr", "opt", "accuracy", "loss"}));
    model.set_varying_only(true);
    model.set_metrics({"loss"});
    QCOMPARE(headers(model), (QStringList{"Run", "lr", "opt", "loss"}));
    QCOMPARE(model.metric_keys(), (QStringList{"accuracy", "loss", "system/cpu"}));
    QCOMPARE(model.data(model.index(1, 2)).toString(), QString("adam"));  // a string without its JSON quotes
    QCOMPARE(model.data(model.index(1, 3)).toString(), QString("0.5"));
    QCOMPARE(model.data(model.index(1, 0), HParamsModel::RunIdRole).toLongLong(), 2);
  }

  void positions_on_each_axis_data() {
    QTest::addColumn<int>("axis");
    QTest::addColumn<QList<double>>("expected");  // per run; -1: no value
    // lr: 1e-4..1e-1, three decades: logarithmic, evenly spaced.
    QTest::newRow("log lr") << 0 << QList<double>{0, 1.0 / 3, 2.0 / 3, 1};
    // opt: categories sorted (adam below sgd).
    QTest::newRow("categories") << 1 << QList<double>{1, 0, 0, 1};
    // accuracy 0.70..0.85, linear; run d has none.
    QTest::newRow("linear, one missing") << 2 << QList<double>{0, 2.0 / 3, 1, -1};
  }
  void positions_on_each_axis() {
    QFETCH(int, axis);
    QFETCH(QList<double>, expected);
    HParamsModel model;
    model.set_snapshot(sweep());
    QCOMPARE(model.axes()[0].log, true);
    QCOMPARE(model.axes()[1].numeric, false);
    QCOMPARE(model.axes()[2].log, false);
    for (int row = 0; row < 4; ++row) {
      const auto p = model.position(row, axis);
      if (expected[row] < 0) {
        QVERIFY(!p);
      } else {
        QVERIFY(p);
        QVERIFY2(std::abs(*p - expected[row]) < 1e-12, qPrintable(QString("row %1: %2").arg(row).arg(*p)));
      }
    }
  }

  void brushing_keeps_runs_inside_every_brush() {
    HParamsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_snapshot(sweep());
    QSignalSpy changed(&model, &HParamsModel::brushed_changed);
    QCOMPARE(model.brushed_runs(), (QList<qint64>{1, 2, 3, 4}));
    model.set_brush(0, 0.5, 1.0);  // lr 1e-2.5 and above: c, d
    QCOMPARE(model.brushed_runs(), (QList<qint64>{3, 4}));
    QCOMPARE(changed.last().first().value<QList<qint64>>(), (QList<qint64>{3, 4}));
    model.set_brush(1, 0.0, 0.2);  // and adam: c
    QCOMPARE(model.brushed_runs(), (QList<qint64>{3}));
    QCOMPARE(model.data(model.index(2, 0), HParamsModel::BrushedRole).toBool(), true);
    QCOMPARE(model.data(model.index(3, 0), HParamsModel::BrushedRole).toBool(), false);
    model.set_brush(2, 0.9, 0.1);  // either order; accuracy: run d has none, so it is outside
    QCOMPARE(model.brushed_runs(), QList<qint64>{});
    model.clear_brush(2);
    QCOMPARE(model.brushed_runs(), (QList<qint64>{3}));
    // A new read keeps the brushes by axis key, even when the columns move.
    auto again = sweep();
    again.runs[0].params["zeta"] = "1";
    model.set_snapshot(again);
    QCOMPARE(headers(model), (QStringList{"Run", "lr", "opt", "zeta", "accuracy", "loss"}));
    QCOMPARE(model.brushed_runs(), (QList<qint64>{3}));
    model.clear_brushes();
    QCOMPARE(model.brushed_runs().size(), 4);
  }

  void best_run_in_the_first_metrics_direction_data() {
    QTest::addColumn<QStringList>("metrics");
    QTest::addColumn<int>("best");
    QTest::newRow("accuracy: higher") << QStringList{"accuracy", "loss"} << 2;
    QTest::newRow("loss: lower") << QStringList{"loss"} << 2;
    QTest::newRow("loss, where d is best") << QStringList{"loss"} << 3;
    QTest::newRow("no metric") << QStringList{} << -1;
  }
  void best_run_in_the_first_metrics_direction() {
    QFETCH(QStringList, metrics);
    QFETCH(int, best);
    auto snapshot = sweep();
    if (QTest::currentDataTag() == QString("loss, where d is best")) snapshot.runs[3].metrics["loss"].final_value = 0.1;
    HParamsModel model;
    model.set_snapshot(snapshot);
    model.set_metrics(metrics);
    QCOMPARE(model.best_row(), best);
    for (int row = 0; row < model.rowCount(); ++row) {
      QCOMPARE(model.data(model.index(row, 0), HParamsModel::BestRole).toBool(), row == best);
    }
  }

  void a_real_history_read_by_compare_reader() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("history.db").toStdString();
    QList<qint64> ids;
    {
      spur::history::HistoryWriter writer(path);
      for (int i = 0; i < 6; ++i) {
        spur::history::Run r;
        r.name = "sweep-" + std::to_string(i + 1);
        r.status = "finished";
        r.params = sweep_params(i);
        const int64_t id = writer.create_run(r);
        writer.append_metrics(id, {{"loss", {{0, 1.0, 1.0}, {1, 1.0 / (i + 1), 2.0}}}});
        ids << id;
      }
    }
    const auto snapshot = spur::app::CompareReader(path).read(ids);
    QVERIFY(snapshot.error.isEmpty());
    HParamsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_snapshot(snapshot);
    QCOMPARE(headers(model), (QStringList{"Run", "lr", "optimizer/name", "loss"}));
    QCOMPARE(model.best_row(), 5);  // the final loss, lowest for the last run
    QCOMPARE(model.data(model.index(5, 3)).toString(), QString("0.166667"));
    QCOMPARE(*model.position(5, 0), 1.0);
    QCOMPARE(model.data(model.index(5, 1)).toString(), QString("0.006"));  // "0.006000" as written, as a number
  }
};

SPUR_TEST_CLASS(HParamsTest)
#include "hparams_test.moc"
