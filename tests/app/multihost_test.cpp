// SPDX-License-Identifier: Apache-2.0
// Real multi-host launches (issue 16): two hosts built from network namespaces joined by veth pairs and a bridge,
// each with its own address and its own sshd (tests/rigs/netns_rig.sh, named per run, deleted at the end, also
// after a failure). `spur launch --hosts` runs from the first host and trains across both on Gloo over the veth
// links; cutting the second host's link mid-run stops every rank within the collective timeout, and the
// launcher exits non-zero naming the host that no longer answers. A two-node Slurm cluster over the same hosts
// (slurmctld and a slurmd per namespace, tests/rigs/slurm_rig.sh) runs `spur launch --slurm` across them: the
// example trains, and a rank failing on the second node is reported with its own exit code while srun stops
// the first node's launcher (143). A third host without Slurm is the desktop (issue 35): it launches a saved Slurm
// configuration whose target file names the login node h0 (on: h0, as `spur launch --on h0`), the Studio's readers on
// it watch the run in h0's history live over SSH, the desktop's cable is pulled and its launcher killed (a laptop
// closed) while the job goes on, and with the cable back the desktop reattaches and follows the run to its end.
#include <signal.h>

#include <cmath>
#include <cstring>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QScopeGuard>
#include <QThread>

#include "rank_group.h"
#include "runs/run_service.h"
#include "setup/setup_answers.h"
#include "studio/runs_model.h"
#include "studio/series_loader.h"
#include "test_main.h"

class MultiHostTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir rig_;
  QStringList addresses_;
  QStringList namespaces_;  // the bridge's, then h0, h1 and h2 (the desktop: no Slurm, not in --hosts)
  bool started_ = false;

  QString rig() const { return QStringLiteral(SPUR_RIGS_DIR "/netns_rig.sh"); }
  // `spur launch` on host h0, over SSH to h0 and h1, the rendezvous on h0's address across the veth links.
  QStringList launch(const QStringList& rest) const {
    return QStringList{"exec",
                       rig_.path(),
                       "0",
                       SPUR_CLI,
                       "launch",
                       "--ssh_config",
                       rig_.path() + "/ssh_config",
                       "--hosts",
                       "h0,h1",
                       "--connect_timeout",
                       "5",
                       "--main_process_ip",
                       addresses_.value(0),
                       "--env",
                       "GLOO_SOCKET_IFNAME=eth0"} +
           rest;
  }
  QProcessEnvironment environment() const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", rig_.path() + "/config");
    env.insert("SPUR_HISTORY", rig_.path() + "/history.db");
    env.remove("OMP_NUM_THREADS");
    return env;
  }
  // The PIDs of Spur's processes (launchers and ranks) still in host `index`'s namespace.
  QStringList spur_processes(int index) const {
    QProcess pids;
    pids.start("ip", {"netns", "pids", namespaces_.value(index + 1)});
    pids.waitForFinished(10000);
    QStringList left;
    for (const auto& pid : QString::fromUtf8(pids.readAll()).split('\n', Qt::SkipEmptyParts)) {
      QFile comm("/proc/" + pid.trimmed() + "/comm");
      if (!comm.open(QIODevice::ReadOnly)) continue;
      const QString name = QString::fromUtf8(comm.readAll()).trimmed();
      if (name != "sshd") left << pid.trimmed() + " " + name;
    }
    return left;
  }

  // A Slurm cluster of both hosts, up for one test, stopped by PID at its end (also on failure).
  struct Slurm {
    QTemporaryDir dir;
    QString conf;
    QString problem;
    explicit Slurm(const QString& netns) {
      QProcess start;
      const QString rig = SPUR_RIGS_DIR "/slurm_rig.sh";
      start.start("bash", {rig, "start", dir.path(), netns, "2"});  // h0 and h1
      if (!start.waitForFinished(90000)) {
        start.terminate();  // the rig stops what it started when signalled
        start.waitForFinished(30000);
        problem = "slurm_rig.sh start did not finish within 90 s";
        return;
      }
      conf = QString::fromUtf8(start.readAllStandardOutput()).trimmed();
      if (start.exitCode() != 0) problem = QString::fromUtf8(start.readAllStandardError());
    }
    ~Slurm() { QProcess::execute("bash", {SPUR_RIGS_DIR "/slurm_rig.sh", "stop", dir.path()}); }
  };
  // `spur launch --slurm` submitted from host h0, the jobs' files in the rig's directory (one file system).
  QStringList slurm_launch(const Slurm& slurm, const QStringList& rest) const {
    return QStringList{"exec",
                       rig_.path(),
                       "0",
                       "env",
                       "SLURM_CONF=" + slurm.conf,
                       SPUR_CLI,
                       "launch",
                       "--slurm",
                       "--nodes",
                       "2",
                       "--ntasks_per_node",
                       "1",
                       "--time",
                       "10",
                       "--slurm_dir",
                       rig_.path() + "/jobs",
                       "--env",
                       "GLOO_SOCKET_IFNAME=eth0"} +
           rest;
  }

 private slots:
  void initTestCase() {
    QProcess start;
    started_ = true;  // whatever happens next, cleanupTestCase deletes what the rig made
    start.start("bash", {rig(), "start", rig_.path(), "3"});
    QVERIFY(start.waitForFinished(120000));
    QVERIFY2(start.exitCode() == 0,
             qPrintable("no network namespaces for the test: " + QString::fromUtf8(start.readAllStandardError())));
    QFile addresses(rig_.path() + "/addresses");
    QFile namespaces(rig_.path() + "/namespaces");
    QVERIFY(addresses.open(QIODevice::ReadOnly) && namespaces.open(QIODevice::ReadOnly));
    addresses_ = QString::fromUtf8(addresses.readAll()).split('\n', Qt::SkipEmptyParts);
    namespaces_ = QString::fromUtf8(namespaces.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(addresses_.size(), 3);
  }
  void cleanupTestCase() {
    if (started_) QProcess::execute("bash", {rig(), "stop", rig_.path()});
    QProcess list;
    list.start("ip", {"netns", "list"});
    list.waitForFinished(10000);
    const QString left = QString::fromUtf8(list.readAll());
    for (const auto& ns : namespaces_) QVERIFY2(!left.contains(ns), qPrintable("namespace left: " + ns));
  }

  void two_slurm_nodes_train_and_report_the_failing_rank() {
    const Slurm slurm(rig_.path());
    QVERIFY2(slurm.problem.isEmpty(), qPrintable("no two-node Slurm: " + slurm.problem));
    const auto trained = spur::test::run_process(
        "bash", QStringList{rig()} + slurm_launch(slurm, {SPUR_EXAMPLE_MLP, "--epochs", "1"}), environment(), 240000);
    QVERIFY2(trained.exit_code == 0, qPrintable(trained.output));
    QVERIFY2(trained.output.contains("[h0] [rank0] ") && trained.output.contains("2 process(es) on cpu") &&
                 trained.output.contains("gradients via gloo") && trained.output.contains("epoch 1 accuracy"),
             qPrintable(trained.output));
    // Rank 1 (node h1) fails with code 7; srun then stops h0's launcher, which reports 143: the job's code is 7.
    const auto failed = spur::test::run_process(
        "bash",
        QStringList{rig()} + slurm_launch(slurm, {SPUR_LAUNCH_RIG, "--fail_rank", "1", "--code", "7", "--sleep", "60"}),
        environment(), 240000);
    QCOMPARE(failed.exit_code, 7);
    QVERIFY2(failed.output.contains("[h1] spur launch: rank1 (pid") && failed.output.contains("failed: exit code 7"),
             qPrintable(failed.output));
    QVERIFY2(failed.output.contains("node h1: rank1 (pid"), qPrintable(failed.output));
    QFile h0_code(
        QDir(rig_.path() + "/jobs").entryInfoList({"spur-spur_launch_rig-*"}, QDir::Dirs).value(0).filePath() +
        "/node-h0.exit");
    QVERIFY2(h0_code.open(QIODevice::ReadOnly), qPrintable(h0_code.fileName()));
    QCOMPARE(h0_code.readAll().trimmed(), QByteArray("143"));  // srun's SIGTERM to the survivor: not the cause
  }

  void a_desktop_launches_through_the_login_node_and_reattaches() {
    const Slurm slurm(rig_.path());
    QVERIFY2(slurm.problem.isEmpty(), qPrintable("no two-node Slurm: " + slurm.problem));
    // The login node's spur finds its Slurm as a cluster's module would set it up.
    const QString login_spur = rig_.path() + "/login-spur";
    QFile wrapper(login_spur);
    QVERIFY(wrapper.open(QIODevice::WriteOnly));
    wrapper.write(QString("#!/bin/sh\nexport SLURM_CONF='%1'\nexec '%2' \"$@\"\n").arg(slurm.conf, SPUR_CLI).toUtf8());
    wrapper.close();
    wrapper.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
    // The desktop's configuration, saved as the Studio's wizard saves it: a Slurm job of 2 nodes x 1 task.
    spur::app::SetupAnswers answers;
    answers.where = spur::app::SetupAnswers::Where::Slurm;
    answers.use_cpu = true;
    answers.num_machines = 2;
    answers.processes_per_machine = 1;
    answers.slurm.time = "10";
    answers.slurm.directory = rig_.path() + "/jobs";
    answers.environment = {{"GLOO_SOCKET_IFNAME", "eth0"}};
    answers.launch_on = "h0";  // launched from the login node: the file says so
    const QString config = rig_.path() + "/desktop/slurm.yaml";
    QVERIFY(QDir().mkpath(rig_.path() + "/desktop"));
    answers.target().save_for(config);
    answers.to_config(config.toStdString()).save(config.toStdString());
    const QString history = rig_.path() + "/login/history.db";  // h0's history
    QVERIFY(QDir().mkpath(rig_.path() + "/login"));

    // The desktop (h2) launches; nothing on it knows Slurm.
    QProcess desktop;
    desktop.setProcessChannelMode(QProcess::MergedChannels);
    desktop.start("bash", {rig(),
                           "exec",
                           rig_.path(),
                           "2",
                           SPUR_CLI,
                           "launch",
                           "--ssh_config",
                           rig_.path() + "/ssh_config",
                           "--remote_spur",
                           login_spur,
                           "--history",
                           history,
                           "--config_file",
                           config,
                           "--run_name",
                           "from the desktop",
                           SPUR_EXAMPLE_MLP,
                           "--epochs",
                           "60",
                           "--log_every",
                           "2"});
    QVERIFY(desktop.waitForStarted());
    auto stop_desktop = qScopeGuard([&] {
      if (desktop.state() != QProcess::NotRunning) {
        desktop.kill();
        desktop.waitForFinished();
      }
    });
    QByteArray said;
    QVERIFY2(spur::test::read_until(desktop, said, "[rank0] step 4/", 180000), said.constData());
    QVERIFY2(said.contains("runs on h0, detached"), said.constData());

    // The Studio's readers on the desktop (this process, its SSH through h2's link) watch h0's history.
    QFile rig_ssh(rig_.path() + "/ssh_config");
    QFile desktop_ssh(rig_.path() + "/desktop/ssh_config");
    QVERIFY(rig_ssh.open(QIODevice::ReadOnly) && desktop_ssh.open(QIODevice::WriteOnly));
    desktop_ssh.write(QString("Host h0\n  ProxyCommand ip netns exec %1 python3 %2/delay_relay.py %h %p 0 /dev/null\n")
                          .arg(namespaces_.value(3), SPUR_RIGS_DIR)
                          .toUtf8() +
                      rig_ssh.readAll());
    desktop_ssh.close();
    qputenv("SPUR_SSH_CONFIG", desktop_ssh.fileName().toUtf8());
    qputenv("SPUR_REMOTE_SPUR", login_spur.toUtf8());
    auto restore = qScopeGuard([] {
      qunsetenv("SPUR_SSH_CONFIG");
      qunsetenv("SPUR_REMOTE_SPUR");
    });
    const QString address = "ssh://h0" + history;
    spur::app::RunsReader runs(address);
    spur::app::SeriesLoader loader(address);
    qint64 loss_points = 0;
    connect(&loader, &spur::app::SeriesLoader::loaded, this, [&](const QVector<spur::app::SeriesDelta>& deltas) {
      for (const auto& delta : deltas) {
        if (delta.key == "loss") loss_points = delta.total_points;
      }
    });
    auto watch = [&] {
      const auto snapshot = runs.read();
      if (!snapshot.error.isEmpty() || snapshot.runs.empty()) return QString("error: " + snapshot.error);
      loader.set_runs({snapshot.runs.back().id});
      loader.poll();
      return snapshot.statuses.back();
    };
    QString status = watch();
    QCOMPARE(status, QString("running"));
    const qint64 first_seen = loss_points;
    QElapsedTimer timer;
    timer.start();
    while (loss_points == first_seen && timer.elapsed() < 60000) {
      QThread::msleep(500);
      status = watch();
    }
    QVERIFY2(loss_points > first_seen && status == "running",
             qPrintable(QString("%1 loss points, then %2 (%3)").arg(first_seen).arg(loss_points).arg(status)));

    // The laptop closes: its cable pulled, its launcher gone. The job goes on at the login node's Slurm.
    QProcess::execute("bash", {rig(), "cut", rig_.path(), "2"});
    ::kill(static_cast<pid_t>(desktop.processId()), SIGKILL);
    desktop.waitForFinished();
    QThread::sleep(3);
    const auto queue = spur::test::run_process(
        "bash", {rig(), "exec", rig_.path(), "0", "env", "SLURM_CONF=" + slurm.conf, "squeue", "-h", "-o", "%T"},
        QProcessEnvironment::systemEnvironment(), 30000);
    QVERIFY2(queue.output.contains("RUNNING"), qPrintable(queue.output));
    QProcess::execute("bash", {rig(), "join", rig_.path(), "2"});

    // Back: the desktop follows the run again to its end, and the readers see it finished with every point.
    const auto followed = spur::test::run_process(
        "bash",
        {rig(), "exec", rig_.path(), "2", SPUR_CLI, "runs", "logs", "1", "--follow", "--history", address,
         "--ssh_config", rig_.path() + "/ssh_config", "--remote_spur", login_spur},
        QProcessEnvironment::systemEnvironment(), 240000);
    QVERIFY2(followed.exit_code == 0 && followed.output.contains("epoch 60 accuracy"), qPrintable(followed.output));
    timer.restart();
    while ((status = watch()) != "finished" && timer.elapsed() < 60000) QThread::msleep(500);
    QCOMPARE(status, QString("finished"));
    spur::app::RunService login(history.toStdString());
    QCOMPARE(loss_points, login.summary(1, "loss").total_points);
    QCOMPARE(login.run(1).name, std::string("from the desktop"));
    QVERIFY2(QString::fromStdString(login.run(1).config).contains("num_machines: 2"), login.run(1).config.c_str());
  }

  // The example trains over both hosts: rank 1 on h1 reaches the store and rank 0's Gloo pair only through the
  // veth links (h1 has no other interface but its loopback).
  void training_crosses_the_hosts() {
    const auto result = spur::test::run_process(
        "bash", QStringList{rig()} + launch({"--num_processes", "2", SPUR_EXAMPLE_MLP, "--epochs", "1"}), environment(),
        180000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("[h0] [rank0] ") && result.output.contains("2 process(es) on cpu") &&
                 result.output.contains("gradients via gloo"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("epoch 1 accuracy"), qPrintable(result.output));
  }

  // Issue 38: 2 machines x 2 ranks sum gradients hierarchically (shared memory within each host, Gloo between the
  // two leaders), chosen from where the ranks are; SPUR_HIERARCHICAL_ALLREDUCE=0 keeps Gloo's flat ring. With each
  // communication hook, the hook oracle's weights agree between the two sums (float rounding apart).
  void hierarchy_and_hooks_match_the_flat_sum_data() {
    QTest::addColumn<QString>("hook");
    QTest::newRow("no hook") << "no";
    QTest::newRow("fp16") << "fp16";
    QTest::newRow("bf16") << "bf16";
  }
  void hierarchy_and_hooks_match_the_flat_sum() {
    QFETCH(QString, hook);
    auto run = [&](bool hierarchical, const QStringList& program) {
      return spur::test::run_process(
          "bash",
          QStringList{rig()} +
              launch(QStringList{"--num_processes", "4", "--ddp_comm_hook", hook, "--env",
                                 QString("SPUR_HIERARCHICAL_ALLREDUCE=") + (hierarchical ? "1" : "0")} +
                     program),
          environment(), 240000);
    };
    QMap<bool, QVector<float>> weights;
    for (const bool hierarchical : {true, false}) {
      const auto oracle = run(hierarchical, {SPUR_TEST_WORKER, "hook_oracle", "--steps", "5"});
      QVERIFY2(oracle.exit_code == 0, qPrintable(oracle.output));
      QVERIFY2(oracle.output.contains(hierarchical ? "gradients via shared memory + gloo" : "gradients via gloo"),
               qPrintable(oracle.output));
      for (const auto& line : oracle.output.split('\n')) {
        const auto at = line.indexOf("param ");
        if (at < 0) continue;
        for (const auto& bits : line.mid(line.indexOf(':', at) + 1).split(' ', Qt::SkipEmptyParts)) {
          const qint32 value = bits.toInt();
          float f = 0;
          std::memcpy(&f, &value, sizeof f);
          weights[hierarchical] << f;
        }
      }
    }
    QCOMPARE(weights[true].size(), 53);  // 6x5 + 5 + 5x3 + 3
    QCOMPARE(weights[false].size(), 53);
    double worst = 0;
    for (int i = 0; i < 53; ++i) worst = std::max(worst, double(std::abs(weights[true][i] - weights[false][i])));
    QVERIFY2(worst <= (hook == "no" ? 1e-6 : 1e-3), qPrintable(QString("largest difference %1").arg(worst)));
  }

  // Both sums train the differential test's drawn set-ups (each draws its own hook and ZeRO stage) to its
  // reference, on 2 machines x 2 ranks (Gloo's tolerance: the order of the sum is not the reference's).
  void drawn_setups_train_alike_across_machines_data() {
    QTest::addColumn<bool>("hierarchical");
    QTest::newRow("hierarchical") << true;
    QTest::newRow("flat") << false;
  }
  void drawn_setups_train_alike_across_machines() {
    QFETCH(bool, hierarchical);
    const auto drawn = spur::test::run_process(
        "bash",
        QStringList{rig()} + launch({"--num_processes", "4", "--env",
                                     QString("SPUR_HIERARCHICAL_ALLREDUCE=") + (hierarchical ? "1" : "0"),
                                     SPUR_TEST_WORKER, "differential", "--seed", "38", "--cases", "16"}),
        environment(), 240000);
    QVERIFY2(drawn.exit_code == 0 && drawn.output.contains("16 passed"), qPrintable(drawn.output));
    QVERIFY2(drawn.output.contains(hierarchical ? "rank(s), shared memory + gloo" : "rank(s), gloo"),
             qPrintable(drawn.output));
  }

  // h1's cable is pulled while every rank all-reduces every step: rank 0 gives up within the collective timeout
  // (8 s here), the launcher stops, names h1 as no longer answering and exits non-zero; the ranks cut off on h1
  // stop by themselves within their own timeout, leaving nothing running there. Also with 2 ranks per host, whose
  // gradients are summed hierarchically (issue 38): the leaders' leg between the hosts is what the cut breaks, and
  // the other rank of each host, waiting for its leader in shared memory, stops with it.
  void a_cut_link_stops_every_rank_and_names_the_host_data() {
    QTest::addColumn<int>("per_host");
    QTest::newRow("1 rank per host (Gloo)") << 1;
    QTest::newRow("2 ranks per host (hierarchical)") << 2;
  }
  void a_cut_link_stops_every_rank_and_names_the_host() {
    QFETCH(int, per_host);
    QProcess::execute("bash", {rig(), "join", rig_.path(), "1"});  // the row before cut it
    auto rejoin = qScopeGuard([&] { QProcess::execute("bash", {rig(), "join", rig_.path(), "1"}); });
    QProcess launcher;
    launcher.setProcessEnvironment(environment());
    launcher.setProcessChannelMode(QProcess::MergedChannels);
    launcher.start("bash", QStringList{rig()} +
                               launch({"--num_processes", QString::number(2 * per_host), "--env",
                                       "SPUR_COLLECTIVE_TIMEOUT=8", SPUR_TEST_WORKER, "hang", "--steps", "100000000"}));
    QVERIFY(launcher.waitForStarted());
    QByteArray output;
    QElapsedTimer timer;
    timer.start();
    const QByteArray last = QString("[h1] [rank%1] rank %1 is training").arg(2 * per_host - 1).toUtf8();
    while (!(output.contains("[h0] [rank0] rank 0 is training") && output.contains(last)) && timer.elapsed() < 120000 &&
           launcher.state() == QProcess::Running) {
      launcher.waitForReadyRead(200);
      output += launcher.readAll();
    }
    QVERIFY2(output.contains(last), output.constData());
    QProcess::execute("bash", {rig(), "cut", rig_.path(), "1"});
    QElapsedTimer since_cut;
    since_cut.start();
    const bool ended = launcher.waitForFinished(90000);
    output += launcher.readAll();
    if (!ended) {
      launcher.kill();
      launcher.waitForFinished(5000);
    }
    QVERIFY2(ended, output.constData());
    qInfo("the launcher exited %.1f s after the cut (collective timeout 8 s, grace 5 s, SSH probe up to 10 s)",
          since_cut.elapsed() / 1000.0);
    QVERIFY(launcher.exitCode() != 0);
    const QString text = QString::fromUtf8(output);
    QVERIFY2(text.contains("rank0") && text.contains("failed"), qPrintable(text));
    QVERIFY2(text.contains("after the failure these machines no longer answer over SSH") && text.contains("  h1: "),
             qPrintable(text));
    QVERIFY2(!text.contains("  h0: "), qPrintable(text));
    // Rank 1 and its launcher, cut off on h1, stop by themselves.
    QElapsedTimer drain;
    drain.start();
    while (!spur_processes(1).isEmpty() && drain.elapsed() < 30000) QThread::msleep(200);
    QVERIFY2(spur_processes(1).isEmpty(), qPrintable("left on h1: " + spur_processes(1).join(", ")));
    QVERIFY2(spur_processes(0).isEmpty(), qPrintable("left on h0: " + spur_processes(0).join(", ")));
    const auto run = QRegularExpression(R"(recorded as run (\d+))").match(text).captured(1);
    const auto show = spur::test::run_process(SPUR_CLI, {"runs", "show", run}, environment(), 30000);
    QVERIFY2(show.output.contains("failed  machines unreachable:"), qPrintable(show.output));
  }
};

SPUR_TEST_CLASS(MultiHostTest)
#include "multihost_test.moc"
