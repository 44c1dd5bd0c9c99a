// SPDX-License-Identifier: Apache-2.0
// What the Studio's dashboard and runs table stand on: the runs model over a live history (checked by
// QAbstractItemModelTester while runs appear, change and go), TensorBoard's smoothing, spike-keeping
// downsampling.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>

#include <spur/history/writer.h>

#include "studio/series_math.h"
#include "studio/console_model.h"
#include "studio/runs_groups.h"
#include "runs/run_status.h"
#include "studio/run_files_model.h"
#include "studio/runs_model.h"
#include "test_main.h"

Q_DECLARE_METATYPE(std::vector<double>)

class RunsModelTest : public QObject {
  Q_OBJECT

 private slots:
  void follows_the_history_in_place() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());  // no file yet: no runs, no error
    QCOMPARE(model.rowCount(), 0);

    spur::history::HistoryWriter writer(path.toStdString());
    spur::history::Run first;
    first.name = "first";
    first.total_steps = 100;
    const int64_t a = writer.create_run(first);
    spur::history::Run second;
    second.name = "second";
    const int64_t b = writer.create_run(second);
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.data(model.index(0, spur::app::RunsModel::Name)).toString(), QString("first"));
    QCOMPARE(model.data(model.index(1, spur::app::RunsModel::Status)).toString(), QString("running"));

    // A change updates its row without a reset: a view's selection stays.
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    writer.append_metrics(a, {{"loss", {{25, 1.0, 0}}}});
    writer.set_status(b, "finished", 0);
    writer.add_tag(b, "best");
    QVERIFY(model.refresh());
    QCOMPARE(reset.count(), 0);
    QVERIFY(changed.count() >= 2);
    QVERIFY2(model.data(model.index(0, spur::app::RunsModel::Progress)).toString().startsWith("25/100 25%"),
             qPrintable(model.data(model.index(0, spur::app::RunsModel::Progress)).toString()));
    QCOMPARE(model.data(model.index(0, spur::app::RunsModel::Progress), spur::app::RunsModel::SortRole).toDouble(),
             0.25);
    QCOMPARE(model.data(model.index(1, spur::app::RunsModel::Status)).toString(), QString("finished"));
    QCOMPARE(model.data(model.index(1, spur::app::RunsModel::ExitCode)).toInt(), 0);
    QCOMPARE(model.data(model.index(1, spur::app::RunsModel::Tags)).toString(), QString("best"));
    QCOMPARE(model.data(model.index(1, 0), spur::app::RunsModel::RunIdRole).toLongLong(), b);

    // A deleted run goes, a new one comes, in id order.
    writer.delete_run(a);
    spur::history::Run third;
    third.name = "third";
    const int64_t c = writer.create_run(third);
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.row_of(a), -1);
    QCOMPARE(model.row_of(b), 0);
    QCOMPARE(model.row_of(c), 1);
  }

  // The runs grouped (by sweep, status, a parameter) as a tree that follows the history in place: a new run joins
  // its group (or makes one), a run whose status changes moves to its new group and a view's persistent index
  // follows it, an emptied group goes, a deleted run leaves; QAbstractItemModelTester watches every step.
  void groups_follow_the_history() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    const auto make = [&](const char* name, std::vector<std::string> tags, const char* params) {
      spur::history::Run run;
      run.name = name;
      run.tags = std::move(tags);
      run.params = params;
      return writer.create_run(run);
    };
    const int64_t a = make("grid-1", {"sweep:aaaa1111", "sweep_name:grid"}, "{\"lr\": 0.1}");
    const int64_t b = make("alone", {}, "{}");
    const int64_t c = make("grid-2", {"sweep:aaaa1111", "sweep_name:grid"}, "{\"lr\": 0.01}");
    spur::app::RunsModel model(path);
    spur::app::RunsGroupModel groups(&model);
    groups.setSourceModel(&model);
    QAbstractItemModelTester tester(&groups, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    // Ungrouped: the runs as they are, one level.
    QCOMPARE(groups.rowCount(), 3);
    QVERIFY(!groups.hasChildren(groups.index(0, 0)));
    QCOMPARE(groups.index(2, 0).data(spur::app::RunsModel::RunIdRole).toLongLong(), c);
    QCOMPARE(groups.headerData(spur::app::RunsModel::Name, Qt::Horizontal).toString(),
             model.headerData(spur::app::RunsModel::Name, Qt::Horizontal).toString());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, groups.set_group_by("colour"));
    QCOMPARE(groups.group_keys(), (QStringList{"sweep", "project", "status", "param:lr"}));

    groups.set_group_by("sweep");
    QCOMPARE(groups.rowCount(), 2);
    const QModelIndex sweep = groups.index(0, 0);
    QCOMPARE(sweep.data(spur::app::RunsGroupModel::GroupRole).toString(), QString("grid (aaaa1111)"));
    QCOMPARE(sweep.data(spur::app::RunsGroupModel::GroupSizeRole).toInt(), 2);
    QVERIFY2(sweep.data().toString().contains("2 runs"), qPrintable(sweep.data().toString()));
    QCOMPARE(sweep.data(spur::app::RunsModel::RunIdRole).toLongLong(), 0);  // a group is not a run
    QCOMPARE(sweep.data(spur::app::RunsModel::SortRole).toLongLong(), c);   // by its newest run
    QCOMPARE(groups.rowCount(sweep), 2);
    QCOMPARE(groups.index(1, spur::app::RunsModel::Name, sweep).data().toString(), QString("grid-2"));
    QCOMPARE(groups.mapToSource(groups.index(1, 0, sweep)).row(), model.row_of(c));
    QCOMPARE(groups.mapFromSource(model.index(model.row_of(b), 3)), groups.index(0, 3, groups.index(1, 0)));
    QCOMPARE(groups.index(1, 0).data(spur::app::RunsGroupModel::GroupRole).toString(), QString("(not in a sweep)"));

    // A new run of the sweep joins its group without a reset.
    QSignalSpy reset(&groups, &QAbstractItemModel::modelReset);
    const int64_t d = make("grid-3", {"sweep:aaaa1111", "sweep_name:grid"}, "{\"lr\": 0.001}");
    QVERIFY(model.refresh());
    QCOMPARE(reset.count(), 0);
    QCOMPARE(groups.rowCount(groups.index(0, 0)), 3);

    // By status: a run that finishes moves to the finished group, followed by a persistent index (a selection).
    groups.set_group_by("status");
    QCOMPARE(groups.rowCount(), 1);  // all running
    const QPersistentModelIndex followed = groups.mapFromSource(model.index(model.row_of(c), 0));
    QCOMPARE(followed.data(spur::app::RunsModel::RunIdRole).toLongLong(), c);
    writer.set_status(c, "finished", 0);
    QVERIFY(model.refresh());
    QCOMPARE(groups.rowCount(), 2);
    QVERIFY(followed.isValid());
    QCOMPARE(followed.data(spur::app::RunsModel::RunIdRole).toLongLong(), c);
    QCOMPARE(followed.parent().data(spur::app::RunsGroupModel::GroupRole).toString(), QString("finished"));
    // Its group emptied, a group goes; deleted runs leave theirs.
    writer.set_status(c, "running");
    QVERIFY(model.refresh());
    QCOMPARE(groups.rowCount(), 1);
    writer.delete_run(a);
    writer.delete_run(d);
    QVERIFY(model.refresh());
    QCOMPARE(groups.rowCount(groups.index(0, 0)), 2);

    // By a parameter: its values, "(none)" for runs without it.
    groups.set_group_by("param:lr");
    QStringList keys;
    for (int g = 0; g < groups.rowCount(); ++g)
      keys << groups.index(g, 0).data(spur::app::RunsGroupModel::GroupRole).toString();
    keys.sort();
    QCOMPARE(keys, (QStringList{"(none)", "0.01"}));
    QCOMPARE(reset.count(), 2);  // only the two changes of grouping
  }

  // Grouped, an older page of runs comes in at the top (the source's rows 0..499): every run keeps its place in
  // its group, none twice, none lost; and metric columns added while grouped reach the groups' runs through a
  // sorting proxy (each of its parents keeps its own columns).
  void groups_follow_older_pages_and_new_columns() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    for (int i = 0; i < 700; ++i) {
      spur::history::Run run;
      run.status = "finished";
      run.tags = {i % 2 ? "sweep:odd00000" : "sweep:even0000"};
      const int64_t id = writer.create_run(run);
      if (i >= 690) writer.append_metrics(id, {{"loss", {{1, 0.5, 0}}}});
    }
    spur::app::RunsModel model(path);
    spur::app::RunsGroupModel groups(&model);
    groups.setSourceModel(&model);
    QSortFilterProxyModel sorted;
    sorted.setSourceModel(&groups);
    QAbstractItemModelTester tester(&groups, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester sorted_tester(&sorted, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 500);
    groups.set_group_by("sweep");
    const auto consistent = [&] {
      int children = 0;
      for (int g = 0; g < groups.rowCount(); ++g) {
        const QModelIndex group = groups.index(g, 0);
        const QString key = group.data(spur::app::RunsGroupModel::GroupRole).toString();
        for (int r = 0; r < groups.rowCount(group); ++r) {
          const QModelIndex run = groups.index(r, 0, group);
          const QModelIndex source = groups.mapToSource(run);
          if (groups.mapFromSource(source) != run || groups.group_of(source.row()) != key) return false;
          ++children;
        }
      }
      return children == model.rowCount();
    };
    QVERIFY(consistent());
    model.fetchMore({});  // runs 1..200 come in at rows 0..199
    QCOMPARE(model.rowCount(), 700);
    QVERIFY(consistent());
    QCOMPARE(groups.rowCount(groups.index(0, 0)) + groups.rowCount(groups.index(1, 0)), 700);

    model.set_metric_columns({"loss"});
    const QModelIndex group = sorted.index(0, 0);
    QCOMPARE(sorted.columnCount(group), model.columnCount());
    bool found = false;
    for (int r = 0; r < sorted.rowCount(group); ++r) {
      found = found || sorted.index(r, spur::app::RunsModel::ColumnCount, group).data().toString() == "0.5";
    }
    QVERIFY(found);
  }

  // Final values of chosen metrics as columns: the latest point of each, across chunks, sortable.
  void metric_columns_show_the_latest_values() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    const int64_t a = writer.create_run({});
    const int64_t b = writer.create_run({});
    std::vector<spur::history::Point> many;
    many.reserve(3000);
    for (int step = 0; step < 3000; ++step) many.push_back({step, 1.0 / (step + 1), 0});  // three chunks
    writer.append_metrics(a, {{"loss", many}, {"accuracy", {{0, 0.5, 0}, {1, 0.75, 0}}}});
    writer.append_metrics(b, {{"loss", {{0, 2.0, 0}}}});
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    QCOMPARE(model.metric_keys(), (QStringList{"accuracy", "loss"}));
    QCOMPARE(model.columnCount(), int(spur::app::RunsModel::ColumnCount));
    model.set_metric_columns({"loss", "accuracy"});
    QCOMPARE(model.columnCount(), spur::app::RunsModel::ColumnCount + 2);
    const int loss = spur::app::RunsModel::ColumnCount, accuracy = loss + 1;
    QCOMPARE(model.headerData(loss, Qt::Horizontal).toString(), QString("loss"));
    QCOMPARE(model.data(model.index(0, loss), spur::app::RunsModel::SortRole).toDouble(), 1.0 / 3000);
    QCOMPARE(model.data(model.index(0, accuracy)).toString(), QString("0.75"));
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("2"));
    QCOMPARE(model.data(model.index(1, accuracy)).toString(), QString("-"));
    // A new point shows at the next refresh.
    writer.append_metrics(b, {{"loss", {{1, 1.5, 0}}}});
    QVERIFY(model.refresh());
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("1.5"));
    model.set_metric_columns({});
    QCOMPARE(model.columnCount(), int(spur::app::RunsModel::ColumnCount));
  }

  // Issue 36, defect 9: a running run that logs nothing for a while (an evaluation pass) says since when, and the
  // clock moves running rows every second (tick) with nothing committed; other rows are left alone.
  void a_quiet_running_run_says_since_when() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    const double now = spur::history::now_seconds();
    spur::history::Run running;
    running.status = "running";
    running.started = now - 100;
    const int64_t a = writer.create_run(running);
    spur::history::Run done;
    done.status = "finished";
    writer.create_run(done);
    writer.set_total_steps(a, 938);
    writer.append_metrics(a, {{"loss", {{360, 0.5, now - 10}}}});
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    const auto progress = [&] { return model.index(0, spur::app::RunsModel::Progress).data().toString(); };
    QVERIFY2(progress().startsWith("360/938 38%") && progress().contains(", last logged 0m1"), qPrintable(progress()));
    writer.append_metrics(a, {{"loss", {{361, 0.4, spur::history::now_seconds()}}}});
    QVERIFY(model.refresh());
    QVERIFY2(!progress().contains("last logged"), qPrintable(progress()));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.tick();
    QCOMPARE(changed.count(), 1);
    QCOMPARE(changed[0][0].toModelIndex(), model.index(0, spur::app::RunsModel::Progress));
    QCOMPARE(changed[0][1].toModelIndex(), model.index(0, spur::app::RunsModel::Duration));
  }

  // Issue 36: a run's files as its overview lists them, newest first, each with its step, size, time and path,
  // whether it is here and still there; and the arguments that resume the run from one of its checkpoints.
  void run_files_list_newest_first() {
    spur::app::RunFilesModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    using spur::app::ComparedFile;
    model.set_files(
        {ComparedFile{{1, 5, "config", "/work/run.yaml", -1, 120, 1000, "here"}, true, true},
         ComparedFile{{2, 5, "checkpoint", "/work/ckpt/checkpoint_0", 100, 2'500'000, 1100, "here"}, true, false},
         ComparedFile{{3, 5, "checkpoint", "/work/ckpt/checkpoint_1", 200, 2'500'000, 1200, "here"}, true, true},
         ComparedFile{{4, 5, "model", "/scratch/model", 250, 999, 1300, "gpu1"}, false, false}});
    QCOMPARE(model.rowCount(), 4);
    using M = spur::app::RunFilesModel;
    const auto cell = [&](int row, int column, int role = Qt::DisplayRole) {
      return model.index(row, column).data(role);
    };
    QCOMPARE(cell(0, M::Kind).toString(), QString("model"));
    QCOMPARE(cell(0, M::Path).toString(), QString("/scratch/model (on gpu1)"));
    QCOMPARE(cell(0, M::Path, M::PresentRole).toBool(), false);
    QCOMPARE(cell(1, M::Kind).toString(), QString("checkpoint"));
    QCOMPARE(cell(1, M::Step).toString(), QString("200"));
    QCOMPARE(cell(1, M::Size).toString(), QString("2.5 MB"));
    QCOMPARE(cell(1, M::Path, M::PathRole).toString(), QString("/work/ckpt/checkpoint_1"));
    QCOMPARE(cell(1, M::Path, M::PresentRole).toBool(), true);
    QCOMPARE(cell(2, M::Path).toString(), QString("/work/ckpt/checkpoint_0 (removed)"));
    QCOMPARE(cell(3, M::Kind).toString(), QString("configuration"));
    QCOMPARE(cell(3, M::Step).toString(), QString("-"));
    QCOMPARE(cell(3, M::Size).toString(), QString("120 B"));
    QCOMPARE(spur::app::size_text(999), QString("999 B"));
    QCOMPARE(spur::app::size_text(1000), QString("1.0 kB"));
    QCOMPARE(spur::app::size_text(75'300'000'000), QString("75 GB"));
    model.set_files({});
    QCOMPARE(model.rowCount(), 0);
    // Resuming: the flag in place of any the run had, both spellings.
    QCOMPARE(spur::app::resume_arguments({"--epochs", "3"}, "/c/checkpoint_1"),
             (QStringList{"--epochs", "3", "--resume_from_checkpoint", "/c/checkpoint_1"}));
    QCOMPARE(spur::app::resume_arguments({"--resume_from_checkpoint", "latest", "--lr", "0.1"}, "/c/x"),
             (QStringList{"--lr", "0.1", "--resume_from_checkpoint", "/c/x"}));
    QCOMPARE(spur::app::resume_arguments({"--resume_from_checkpoint=/old", "a"}, "/c/x"),
             (QStringList{"a", "--resume_from_checkpoint", "/c/x"}));
  }

  void an_unreadable_history_is_an_error_not_a_wipe() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    {
      spur::history::HistoryWriter writer(path.toStdString());
      writer.create_run({});
    }
    spur::app::RunsModel model(path);
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 1);
    {
      spur::history::HistoryWriter writer(path.toStdString());
      writer.database().exec("PRAGMA user_version = 99");  // from a newer Spur
    }
    QVERIFY(!model.refresh());
    QVERIFY2(model.error().contains("newer Spur"), qPrintable(model.error()));
    QCOMPARE(model.rowCount(), 1);
  }

  // A run's console: fetched incrementally, filtered by rank and text, labelled by host for remote runs.
  void console_lines_by_rank_and_search() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    spur::history::Run run;
    run.target = "ssh";
    const int64_t id = writer.create_run(run);
    auto line = [&](int rank, const char* host, const char* text) {
      spur::history::ConsoleLine l;
      l.run_id = id;
      l.rank = rank;
      l.host = host;
      l.text = text;
      return l;
    };
    writer.append_console({line(0, "a", "step 1 loss 0.9"), line(1, "b", "rank 1 ready"), line(-1, "", "launching")});
    spur::app::ConsoleModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_run(id);
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.data(model.index(0)).toString(), QString("[a rank0] step 1 loss 0.9"));
    QCOMPARE(model.data(model.index(2)).toString(), QString("[launcher] launching"));
    // Only new lines come in, appended.
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    writer.append_console({line(1, "b", "step 2 loss 0.5")});
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(inserted.count(), 1);
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 4);
    model.set_rank(1);
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 2);
    model.set_search("LOSS");
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.data(model.index(0)).toString(), QString("[b rank1] step 2 loss 0.5"));
    // By host.
    model.set_rank(std::nullopt);
    model.set_search("");
    model.set_host(QString("a"));
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.data(model.index(0), spur::app::ConsoleModel::HostRole).toString(), QString("a"));
    model.set_host(std::nullopt);
    QVERIFY(model.fetch_new());
    QCOMPARE(model.rowCount(), 4);

    // How the run ended: status, exit code and the launcher's account of the failed rank.
    QSignalSpy changed(&model, &spur::app::ConsoleModel::run_changed);
    QVERIFY(model.cause().isEmpty());
    writer.set_status(id, "failed", 7, "rank1 failed: exit code 7.\nTraceback: boom");
    QVERIFY(model.fetch_new());
    QCOMPARE(changed.count(), 1);
    QCOMPARE(model.run_record()->exit_code, std::optional<int>(7));
    QCOMPARE(model.cause(), QString("rank1 failed: exit code 7.\nTraceback: boom"));
    QVERIFY(model.fetch_new());
    QCOMPARE(changed.count(), 1);  // nothing new

    // Read on another thread: an answer to a query made before the filters changed is dropped, as is a
    // second answer for the same position.
    spur::app::ConsoleSource source(path);
    const auto before_filter = model.next_query();
    model.set_rank(0);
    QVERIFY(model.apply(source.read(before_filter)));
    QCOMPARE(model.rowCount(), 0);
    const auto query = model.next_query();
    const auto answer = source.read(query);
    QVERIFY(model.apply(answer));
    QCOMPARE(model.rowCount(), 1);
    QVERIFY(model.apply(answer));
    QCOMPARE(model.rowCount(), 1);
  }

  // With a baseline, metric columns show each run's delta against it, with a verdict in the metric's direction.
  void metric_columns_measure_against_a_baseline() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    {
      spur::history::HistoryWriter writer(path.toStdString());
      for (const double loss : {0.75, 0.5}) {
        spur::history::Run run;
        run.status = "finished";
        const int64_t id = writer.create_run(run);
        writer.append_metrics(id, {{"loss", {{10, loss, 0}}}, {"accuracy", {{10, 1 - loss, 0}}}});
      }
    }
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    model.set_metric_columns({"loss", "accuracy"});
    const int loss = spur::app::RunsModel::ColumnCount, accuracy = loss + 1;
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("0.5"));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.set_baseline(1);
    QCOMPARE(changed.count(), 1);
    // Absolute and in % of the baseline's value, as the Compare tab says it (studio/baseline.h).
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("0.5 (-0.25, -33.3%)"));
    QCOMPARE(model.data(model.index(1, accuracy)).toString(), QString("0.5 (+0.25, +100.0%)"));
    QCOMPARE(model.data(model.index(1, loss), spur::app::RunsModel::VerdictRole).toInt(), 1);      // lower loss
    QCOMPARE(model.data(model.index(1, accuracy), spur::app::RunsModel::VerdictRole).toInt(), 1);  // higher accuracy
    QCOMPARE(model.data(model.index(0, loss)).toString(), QString("0.75"));  // the baseline itself
    model.set_baseline(1, [](const QString&) { return spur::app::MetricDirection::higher_is_better; });
    QCOMPARE(model.data(model.index(1, loss), spur::app::RunsModel::VerdictRole).toInt(), -1);
    // Neither (a counter, a schedule): the delta is said, uncoloured.
    model.set_baseline(1, [](const QString&) { return spur::app::MetricDirection::neither; });
    QCOMPARE(model.data(model.index(1, loss), spur::app::RunsModel::VerdictRole).toInt(), 0);
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("0.5 (-0.25, -33.3%)"));
    model.set_baseline(0);
    QCOMPARE(model.data(model.index(1, loss)).toString(), QString("0.5"));
  }

  // 1,200 runs come in pages of 500, newest first, as the view asks (fetchMore); new runs join the fetched rows,
  // older pages stay; the model stays valid throughout.
  void runs_come_in_pages() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    for (int i = 0; i < 1200; ++i) {
      spur::history::Run run;
      run.status = "finished";
      writer.create_run(run);
    }
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 500);
    QCOMPARE(model.total_runs(), int64_t{1200});
    QCOMPARE(model.run(0).id, int64_t{701});  // the newest 500: 701..1200
    QCOMPARE(model.run(499).id, int64_t{1200});
    QVERIFY(model.canFetchMore({}));
    model.fetchMore({});
    QCOMPARE(model.rowCount(), 1000);
    QCOMPARE(model.run(0).id, int64_t{201});
    writer.create_run({});  // run 1201, while paged
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 1001);
    QCOMPARE(model.run(1000).id, int64_t{1201});
    model.fetchMore({});
    QCOMPARE(model.rowCount(), 1201);
    QVERIFY(!model.canFetchMore({}));
    QVERIFY(writer.delete_run(5));
    QVERIFY(model.refresh());
    QCOMPARE(model.rowCount(), 1200);
    QCOMPARE(model.row_of(5), -1);
  }

  // A read with nothing committed since the last reads nothing again (the table stays as it is), a commit makes
  // the next read whole, and a status that changes without a commit (a launcher that died) is still seen within
  // 2 s.
  void a_read_with_nothing_committed_reads_nothing_again() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    spur::history::HistoryWriter writer(path.toStdString());
    spur::history::Run run;
    run.status = "finished";
    writer.create_run(run);
    spur::app::RunsReader reader(path);
    const auto first = reader.read();
    QVERIFY(!first.unchanged && first.runs.size() == 1);
    const auto second = reader.read();
    QVERIFY(second.unchanged && second.runs.empty() && second.total_runs == 1);
    spur::app::RunsModel model(path);
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(model.refresh());
    QVERIFY(model.apply(second));  // kept as it is
    QCOMPARE(model.rowCount(), 1);
    writer.create_run(run);
    const auto third = reader.read();
    QVERIFY(!third.unchanged && third.runs.size() == 2);
    QTest::qWait(2100);
    QVERIFY(!reader.read().unchanged);
  }

  // A summarised bucket's mean smooths as its points would (exactly, when they are equal).
  void smoothing_a_bucket_counts_its_points() {
    spur::app::Smoother points(0.9), buckets(0.9);
    double by_point = 0;
    for (int i = 0; i < 64; ++i) by_point = points.push(i < 32 ? 1.0 : 3.0);
    buckets.push(1.0, 32);
    const double by_bucket = buckets.push(3.0, 32);
    QVERIFY2(std::abs(by_point - by_bucket) < 1e-12, qPrintable(QString("%1 vs %2").arg(by_point).arg(by_bucket)));
  }

  void smoothing_follows_tensorboard_data() {
    QTest::addColumn<std::vector<double>>("values");
    QTest::addColumn<double>("weight");
    QTest::addColumn<std::vector<double>>("expected");
    // By hand: w = 0.6 on 1, 2, 3: last 0.4, 1.04, 1.824; debiased by 0.4, 0.64, 0.784.
    QTest::newRow("debiased") << std::vector<double>{1, 2, 3} << 0.6
                              << std::vector<double>{1.0, 1.04 / 0.64, 1.824 / 0.784};
    QTest::newRow("weight 0") << std::vector<double>{5, 1} << 0.0 << std::vector<double>{5, 1};
    QTest::newRow("constant") << std::vector<double>{2, 2, 2} << 0.9 << std::vector<double>{2, 2, 2};
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // NaN passes through and does not count: the next point is the second accumulated one.
    QTest::newRow("nan") << std::vector<double>{1, nan, 2} << 0.6 << std::vector<double>{1, nan, 1.04 / 0.64};
  }

  void smoothing_follows_tensorboard() {
    QFETCH(std::vector<double>, values);
    QFETCH(double, weight);
    QFETCH(std::vector<double>, expected);
    const auto smoothed = spur::app::smooth(values, weight);
    QCOMPARE(smoothed.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      if (std::isnan(expected[i])) {
        QVERIFY(std::isnan(smoothed[i]));
      } else {
        QVERIFY2(std::abs(smoothed[i] - expected[i]) < 1e-12, qPrintable(QString::number(smoothed[i], 'g', 17)));
      }
    }
  }

  // A million points become at most 4 per bucket (plus the edges), every spike survives, order is kept.
  void downsampling_keeps_spikes() {
    std::vector<double> xs(1000000), ys(1000000);
    for (size_t i = 0; i < xs.size(); ++i) {
      xs[i] = static_cast<double>(i);
      ys[i] = std::sin(static_cast<double>(i) * 1e-4);
    }
    ys[123457] = 50;  // one-point spikes, up and down
    ys[876543] = -50;
    const auto keep = spur::app::downsample(xs, ys, 0, 999999, 1000);
    QVERIFY2(keep.size() <= 4000 + 2, qPrintable(QString::number(keep.size())));
    QVERIFY(std::is_sorted(keep.begin(), keep.end()));
    QVERIFY(std::adjacent_find(keep.begin(), keep.end()) == keep.end());
    QVERIFY(std::find(keep.begin(), keep.end(), 123457u) != keep.end());
    QVERIFY(std::find(keep.begin(), keep.end(), 876543u) != keep.end());
    QCOMPARE(keep.front(), size_t{0});
    QCOMPARE(keep.back(), size_t{999999});
    // A zoomed window keeps one neighbour outside on each side, so lines reach the plot's edges.
    const auto window = spur::app::downsample(xs, ys, 1000.5, 2000.5, 1000);
    QCOMPARE(window.front(), size_t{1000});
    QCOMPARE(window.back(), size_t{2001});
    QCOMPARE(window.size(), size_t{1002});
  }
};

SPUR_TEST_CLASS(RunsModelTest)
#include "runs_model_test.moc"
