// SPDX-License-Identifier: GPL-3.0-or-later
// Launching from the Studio, through app/ (a detached `spur launch`): the run goes on when the window closes and
// is picked up by the next one, Stop stops every rank, a failed rank is shown as the cause with its last lines,
// a past run relaunches with its saved configuration, and a launch that cannot start says why.
#include <signal.h>
#include <sys/stat.h>

#include <QDir>
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QLineEdit>
#include <QTreeView>
#include <QTimer>
#include <QFile>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

#include "setup/setup_answers.h"
#include "console/console_view.h"
#include "launch/detached_launch.h"
#include "main/main_window.h"
#include "rank_group.h"
#include "sshd_rig.h"
#include "studio/console_model.h"
#include "studio/runs_model.h"
#include "future_result.h"
#include "test_main.h"

namespace {

// A configuration for two CPU processes, and a launch of launch_rig with `arguments`.
spur::app::LaunchRequest rig_launch(const QTemporaryDir& dir, const QStringList& arguments) {
  spur::app::SetupAnswers answers;
  answers.distributed_type = "MULTI_CPU";
  answers.processes_per_machine = 2;
  answers.working_directory = dir.path();
  answers.program = SPUR_LAUNCH_RIG;
  answers.arguments = arguments;
  const QString file = dir.filePath("two.yaml");
  answers.to_config(file.toStdString()).save(file.toStdString());
  auto request = answers.launch_request(file);
  request.flags << "--grace_period"
                << "2";
  return request;
}

QString status_of(spur::studio::MainWindow& window, qint64 run) {
  const int row = window.runs()->row_of(run);
  return row < 0 ? QString() : window.runs()->data(window.runs()->index(row, spur::app::RunsModel::Status)).toString();
}

// Launches from the window and waits for its run to appear; 0 when it did not.
qint64 launch_and_wait(spur::studio::MainWindow& window, const spur::app::LaunchRequest& request) {
  QSignalSpy launched(&window, &spur::studio::MainWindow::launched);
  const QString error = window.launch(request);
  if (!error.isEmpty()) {
    qWarning() << error;
    return 0;
  }
  if (!launched.wait(20000)) return 0;
  return launched.front().front().toLongLong();
}

// Kills the processes it was given when the test ends, passing or failing: no launcher or rank is left behind.
struct KillOnExit {
  std::vector<qint64> pids;
  ~KillOnExit() {
    for (const auto pid : pids) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
};

}  // namespace

class LaunchPanelTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { qputenv("SPUR_PROGRAM", SPUR_CLI); }  // the test binary is not next to spur

  void a_run_outlives_the_window_and_stops_from_the_next_one() {
    QTemporaryDir dir;
    const QString path = dir.filePath("history.db");
    const QString pids = dir.filePath("pids");
    QDir().mkpath(pids);
    qint64 run = 0, launcher = 0;
    KillOnExit cleanup;
    {
      spur::studio::MainWindow window(path);
      window.show();
      run = launch_and_wait(window, rig_launch(dir, {"--pids", pids, "--sleep", "120"}));
      QVERIFY2(run > 0, qPrintable(window.last_error()));
      launcher = window.runs()->run(window.runs()->row_of(run)).pid;
      cleanup.pids.push_back(launcher);  // its ranks die with it (PDEATHSIG)
      QTRY_COMPARE_WITH_TIMEOUT(status_of(window, run), QString("running"), 10000);
      QCOMPARE(window.runs()->run(window.runs()->row_of(run)).command.rfind("cd ", 0), 0u);
    }  // the Studio closes
    auto ranks = spur::test::rank_pids(pids, 2);
    QTRY_COMPARE_WITH_TIMEOUT(static_cast<int>((ranks = spur::test::rank_pids(pids, 2)).size()), 2, 10000);
    cleanup.pids.insert(cleanup.pids.end(), ranks.begin(), ranks.end());
    QTest::qWait(500);
    QVERIFY(spur::test::alive(launcher));
    QVERIFY(spur::test::alive(ranks[0]) && spur::test::alive(ranks[1]));

    spur::studio::MainWindow reopened(path);
    reopened.show();
    QTRY_COMPARE_WITH_TIMEOUT(status_of(reopened, run), QString("running"), 10000);
    QCOMPARE(reopened.stop_run(run), QString());
    QTRY_COMPARE_WITH_TIMEOUT(status_of(reopened, run), QString("stopped"), 15000);
    QVERIFY(spur::test::all_dead({launcher, ranks[0], ranks[1]}, 10000));
    QVERIFY(reopened.stop_run(run).contains("not running"));
  }

  // Over SSH (a real sshd on a loopback port, two "machines"): the console tells the hosts apart, and Stop
  // reaches the ranks on both.
  void an_ssh_launch_shows_hosts_and_stops_every_machine() {
    spur::test::ThrowawaySshd sshd;
    if (!sshd.problem().isEmpty()) QFAIL(qPrintable(sshd.problem()));
    QTemporaryDir dir;
    const QString pids = dir.filePath("pids");
    QDir().mkpath(pids);
    spur::studio::MainWindow window(dir.filePath("history.db"));
    window.show();
    auto request = rig_launch(dir, {"--pids", pids, "--lines", "2", "--sleep", "120"});
    request.flags << "--hosts"
                  << "machine1,machine2"
                  << "--ssh_config" << sshd.client_config() << "--num_processes"
                  << "2"
                  << "--main_process_ip"
                  << "127.0.0.1"
                  << "--main_process_port" << QString::number(spur::test::free_port()) << "--connect_timeout"
                  << "5";
    const qint64 run = launch_and_wait(window, request);
    QVERIFY2(run > 0, qPrintable(window.last_error()));
    KillOnExit cleanup;
    auto& ranks = cleanup.pids;
    ranks.push_back(window.runs()->run(window.runs()->row_of(run)).pid);
    QTRY_COMPARE_WITH_TIMEOUT(spur::test::rank_pids(pids, 2).size(), size_t(2), 30000);
    for (const auto pid : spur::test::rank_pids(pids, 2)) ranks.push_back(pid);
    QCOMPARE(QString::fromStdString(window.runs()->run(window.runs()->row_of(run)).target), QString("ssh"));
    auto* hosts = window.console()->findChild<QComboBox*>("hosts");
    QTRY_VERIFY_WITH_TIMEOUT(hosts->findText("machine1") >= 0 && hosts->findText("machine2") >= 0, 20000);
    QVERIFY(hosts->isVisibleTo(window.console()));
    hosts->setCurrentIndex(hosts->findText("machine2"));
    auto* lines = window.console()->model();
    QTRY_VERIFY_WITH_TIMEOUT(lines->rowCount() > 0, 10000);
    for (int row = 0; row < lines->rowCount(); ++row) {
      QVERIFY2(lines->data(lines->index(row)).toString().startsWith("[machine2"),
               qPrintable(lines->data(lines->index(row)).toString()));
    }
    QCOMPARE(window.stop_run(run), QString());
    QTRY_COMPARE_WITH_TIMEOUT(status_of(window, run), QString("stopped"), 30000);
    QVERIFY(spur::test::all_dead(ranks, 15000));
  }

  void a_failed_rank_is_the_cause_and_the_run_relaunches() {
    QTemporaryDir dir;
    spur::studio::MainWindow window(dir.filePath("history.db"));
    window.show();
    const qint64 run =
        launch_and_wait(window, rig_launch(dir, {"--lines", "3", "--fail_rank", "1", "--code", "7", "--sleep", "30"}));
    QVERIFY2(run > 0, qPrintable(window.last_error()));
    QTRY_COMPARE_WITH_TIMEOUT(status_of(window, run), QString("failed"), 20000);
    // The console shows the run's ranks, and above them which rank failed, how, with its last lines.
    auto* console = window.console();
    QTRY_VERIFY_WITH_TIMEOUT(console->banner().contains("rank1 failed: exit code 7"), 10000);
    QVERIFY2(console->banner().contains("rank 1 line 2"), qPrintable(console->banner()));
    QVERIFY(console->banner().contains("exit code 7"));
    QVERIFY(console->findChild<QLabel*>("banner")->isVisibleTo(console));

    // Relaunch: the same program, arguments and directory, with the configuration saved in the history, under
    // the name with " (2)", with its tags and notes, and the run it came from recorded (issue 18).
    QCOMPARE(spur::test::done(window.tag_run(run, "sweep-a")), QString());
    QCOMPARE(spur::test::done(window.set_notes(run, "lr 0.1, fails on rank 1")), QString());
    QTRY_COMPARE(window.runs()->run(window.runs()->row_of(run)).notes, std::string("lr 0.1, fails on rank 1"));
    const std::string name = window.runs()->run(window.runs()->row_of(run)).name;
    QSignalSpy launched(&window, &spur::studio::MainWindow::launched);
    const mode_t umask_before = ::umask(022);
    QCOMPARE(spur::test::done(window.relaunch(run)), QString());
    ::umask(umask_before);
    QVERIFY(launched.wait(20000));
    const qint64 again = launched.front().front().toLongLong();
    QVERIFY(again != run);
    QTRY_COMPARE_WITH_TIMEOUT(status_of(window, again), QString("failed"), 20000);
    const auto before =
        spur::app::LaunchRequest::parse(QString::fromStdString(window.runs()->run(window.runs()->row_of(run)).command));
    const auto after = spur::app::LaunchRequest::parse(
        QString::fromStdString(window.runs()->run(window.runs()->row_of(again)).command));
    QCOMPARE(after.program, before.program);
    QCOMPARE(after.arguments, before.arguments);
    QCOMPARE(after.working_directory, before.working_directory);
    // The record's flags are the new run's; the rest are the old run's.
    QStringList record_flags{"--run_name", name.c_str() + QString(" (2)"), "--tag",        "sweep-a",
                             "--notes",    "lr 0.1, fails on rank 1",      "--parent_run", QString::number(run)};
    QCOMPARE(after.flags, before.flags + record_flags);
    const auto& relaunched = window.runs()->run(window.runs()->row_of(again));
    QCOMPARE(relaunched.name, name + " (2)");
    QCOMPARE(relaunched.parent, run);
    QCOMPARE(relaunched.tags, std::vector<std::string>{"sweep-a"});
    QCOMPARE(relaunched.notes, std::string("lr 0.1, fails on rank 1"));
    QVERIFY(after.config_file.endsWith(QString("configs/run-%1.yaml").arg(run)));
    // Saved as every configuration Spur writes: its owner's only (issue 12), whatever the umask (022 above).
    QCOMPARE(QFileInfo(after.config_file).permissions() & QFileDevice::Permissions(0x7077),
             QFileDevice::ReadOwner | QFileDevice::WriteOwner);
    QCOMPARE(window.runs()->run(window.runs()->row_of(again)).config,
             window.runs()->run(window.runs()->row_of(run)).config);

    // The Relaunch action asks first: the command it will run and the name, the next free " (N)", to edit.
    auto* view = window.runs_view();
    for (int row = 0; row < view->model()->rowCount(); ++row) {
      if (view->model()->index(row, 0).data(spur::app::RunsModel::RunIdRole).toLongLong() == run) {
        view->selectionModel()->setCurrentIndex(view->model()->index(row, 0),
                                                QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
      }
    }
    auto* action = window.findChild<QAction*>("relaunch");
    QVERIFY(action);
    QTRY_VERIFY(action->isEnabled());
    QString offered, shown;
    QTimer::singleShot(0, [&] {
      auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget());
      if (!dialog || dialog->objectName() != "relaunch_dialog") return;
      offered = dialog->findChild<QLineEdit*>("relaunch_name")->text();
      shown = dialog->findChild<QLineEdit*>("relaunch_command")->text();
      dialog->findChild<QLineEdit*>("relaunch_name")->setText("retry by hand");
      dialog->accept();
    });
    launched.clear();
    action->trigger();
    QCOMPARE(offered, QString::fromStdString(name) + " (3)");
    QVERIFY2(shown.contains(before.program), qPrintable(shown));
    QVERIFY(launched.wait(20000));
    const qint64 third = launched.front().front().toLongLong();
    QTRY_COMPARE_WITH_TIMEOUT(status_of(window, third), QString("failed"), 20000);
    QCOMPARE(window.runs()->run(window.runs()->row_of(third)).name, std::string("retry by hand"));
    QCOMPARE(window.runs()->run(window.runs()->row_of(third)).parent, run);
  }

  void a_launch_that_cannot_start_says_why() {
    QTemporaryDir dir;
    spur::studio::MainWindow window(dir.filePath("history.db"));
    auto request = rig_launch(dir, {});
    request.config_file = dir.filePath("missing.yaml");
    QCOMPARE(window.launch(request), QString());
    QTRY_VERIFY_WITH_TIMEOUT(window.last_error().contains("missing.yaml"), 20000);
    request.working_directory = dir.filePath("nowhere");
    QVERIFY(window.launch(request).contains("does not exist"));
  }
};

SPUR_TEST_CLASS(LaunchPanelTest)
#include "launch_panel_test.moc"
