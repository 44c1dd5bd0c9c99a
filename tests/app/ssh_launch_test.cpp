// SPDX-License-Identifier: Apache-2.0
// `spur launch --hosts` through a real sshd on a loopback port: two "machines" on 127.0.0.1 run a run's ranks,
// arguments arrive literally, a failure or Ctrl-C tears everything down, unreachable hosts and refused keys are
// named within the connect timeout.
#include <signal.h>

#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <algorithm>

#include <spur/history/reader.h>

#include "config/run_config.h"
#include "rank_group.h"
#include "setup/setup_answers.h"
#include "sshd_rig.h"
#include "test_main.h"

class SshLaunchTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<spur::test::ThrowawaySshd> sshd_;

  QStringList hosts_launch(const QStringList& extra) const {
    return QStringList{"launch",
                       "--ssh_config",
                       sshd_->client_config(),
                       "--main_process_ip",
                       "127.0.0.1",
                       "--main_process_port",
                       QString::number(spur::test::free_port()),
                       "--connect_timeout",
                       "5"} +
           extra;
  }
  spur::test::RankResult run(const QStringList& arguments, int timeout_ms = 120000) const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    return spur::test::run_process(SPUR_CLI, arguments, env, timeout_ms);
  }

 private slots:
  void initTestCase() {
    sshd_ = std::make_unique<spur::test::ThrowawaySshd>();
    if (!sshd_->problem().isEmpty()) QFAIL(qPrintable("no sshd for the test: " + sshd_->problem()));
  }
  void cleanupTestCase() { sshd_.reset(); }

  // A sweep whose runs go to two machines over SSH (issue 39: any target): each run is a 2-machine launch, recorded
  // with its parameters and tags, its ranks on both machines; the history path reaches the ranks as --env NAME.
  void a_sweep_runs_over_ssh() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    QFile file(dir.filePath("sweep.yaml"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("name: over-ssh\nprogram: " SPUR_SWEEP_RIG
               "\nmethod: grid\nparameters:\n  lr:\n    values: [0.1, 0.01]\n"
               "  steps:\n    value: 3\n  interval_ms:\n    value: 0\n");
    file.close();
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", history);
    const auto result = spur::test::run_process(
        SPUR_CLI,
        QStringList{"sweep", "run", file.fileName(), "--"} +
            hosts_launch({"--hosts", "machine1,machine2", "--env", "SPUR_HISTORY=" + history}).mid(1),
        env, 120000);
    QVERIFY2(result.exit_code == 0 && result.output.contains("2 finished, 0 stopped early, 0 failed"),
             qPrintable(result.output));
    spur::history::HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t(2));
    for (const auto& run : runs) {
      QCOMPARE(run.status, std::string("finished"));
      QCOMPARE(run.target, std::string("ssh"));
      QCOMPARE(run.hosts, std::string("machine1,machine2"));
      QVERIFY(std::find(run.tags.begin(), run.tags.end(), "sweep_name:over-ssh") != run.tags.end());
      QVERIFY2(run.params.find("\"lr\"") != std::string::npos, run.params.c_str());
      QVERIFY2(run.command.find("--env SPUR_HISTORY ") != std::string::npos, run.command.c_str());
    }
  }

  void two_machines_run_every_rank_with_literal_arguments() {
    QTemporaryDir dir;
    const auto result = run(hosts_launch({"--hosts", "machine1,machine2", "--num_processes", "4", SPUR_LAUNCH_RIG,
                                          "--pids", dir.path(), "; rm -rf ~", "it's $HOME"}));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    for (int rank = 0; rank < 4; ++rank) {
      const QString host = rank < 2 ? "machine1" : "machine2";
      QVERIFY2(result.output.contains(QString("[%1] [rank%2] hello from rank %2 of 4 (local %3 of 2, machine %4)")
                                          .arg(host)
                                          .arg(rank)
                                          .arg(rank % 2)
                                          .arg(rank / 2)),
               qPrintable(result.output));
    }
    QVERIFY2(result.output.contains("argument: ; rm -rf ~") && result.output.contains("argument: it's $HOME"),
             qPrintable(result.output));
  }

  // Issue 12, defect 10 over SSH: an argument and an --env value that are not UTF-8 reach the remote rank, and
  // its output the terminal, byte for byte (ssh is found on PATH for the byte-exact start, as QProcess finds it).
  void bytes_that_are_not_utf8_reach_remote_ranks() {
    QTemporaryDir dir;
    const QString program = dir.filePath("prog");
    QFile file(program);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("#!/bin/sh\nprintf '%s|%s|\\377\\n' \"$1\" \"$X\"\n");
    file.close();
    QVERIFY(file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", dir.filePath("history.db"));
    QStringList words;
    for (const auto& word : hosts_launch({"--hosts", "machine1", "--num_processes", "1"})) words << "'" + word + "'";
    const QString script =
        "exec \"$0\" " + words.join(' ') + " --env X=\"$(printf 'v\\375')\" \"$1\" \"$(printf 'a\\374b')\"";
    QProcess shell;
    shell.setProcessEnvironment(env);
    shell.setProcessChannelMode(QProcess::MergedChannels);
    shell.start("/bin/sh", {"-c", script, SPUR_CLI, program});
    QVERIFY(shell.waitForFinished(120000));
    const QByteArray output = shell.readAll();
    QVERIFY2(shell.exitCode() == 0, output.constData());
    QVERIFY2(output.contains("[machine1] [rank0] a\xfc"
                             "b|v\xfd|\xff\n"),
             output.toHex(' ').constData());
  }

  void a_hostfile_gives_the_slots() {
    QTemporaryDir dir;
    QFile hostfile(dir.path() + "/hostfile");
    hostfile.open(QIODevice::WriteOnly);
    hostfile.write("# two machines\nmachine1 slots=2\nmachine2 slots=2\n");
    hostfile.close();
    auto result = run(hosts_launch({"--hostfile", dir.path() + "/hostfile", SPUR_LAUNCH_RIG}));
    QVERIFY2(result.exit_code == 0 && result.output.contains("[machine2] [rank3] hello from rank 3 of 4"),
             qPrintable(result.output));
    QFile twice(dir.path() + "/twice");
    twice.open(QIODevice::WriteOnly);
    twice.write("machine1 slots=1\nmachine1 slots=1\n");
    twice.close();
    result = run(hosts_launch({"--hostfile", dir.path() + "/twice", SPUR_LAUNCH_RIG}));
    QVERIFY2(result.exit_code != 0 && result.output.contains(dir.path() + "/twice:2: host machine1 is listed twice"),
             qPrintable(result.output));
  }

  // The remote ranks stream their metrics ("@spur" lines) back through ssh; this machine's history records
  // them, with every rank's console lines under its host.
  void training_over_ssh() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", history);
    const auto result = spur::test::run_process(
        SPUR_CLI,
        hosts_launch({"--hosts", "machine1,machine2", "--num_processes", "4", SPUR_EXAMPLE_MLP, "--epochs", "8"}), env,
        120000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("[machine1] [rank0] spur") && result.output.contains("4 process(es)") &&
                 result.output.contains("accuracy"),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("@spur"), qPrintable(result.output));
    spur::history::HistoryReader reader(history.toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(runs[0].target), QString("ssh"));
    QCOMPARE(QString::fromStdString(runs[0].hosts), QString("machine1,machine2"));
    QCOMPARE(QString::fromStdString(runs[0].project), QString("mlp"));
    QCOMPARE(QString::fromStdString(runs[0].status), QString("finished"));
    QVERIFY(!reader.series(runs[0].id, "loss").empty());
    QCOMPARE(reader.series(runs[0].id, "accuracy").size(), size_t{8});  // one per epoch
    // Each machine's launcher samples its own ranks and sends the values back (issue 18): ranks 0-1 ran on
    // machine1, 2-3 on machine2 (8 epochs, a few seconds: 1 epoch could end before the first 1 s sample).
    const auto keys = reader.metric_keys(runs[0].id);
    for (const char* key : {"system/rank0/rss_mib", "system/rank3/rss_mib"}) {
      QVERIFY2(std::find(keys.begin(), keys.end(), key) != keys.end(), key);
    }
    QVERIFY(reader.series(runs[0].id, "system/rank3/rss_mib").front().value > 0);
    const auto console = reader.console(runs[0].id, 0, 0);
    QVERIFY(!console.empty());
    QCOMPARE(QString::fromStdString(console.front().host), QString("machine1"));
  }

  // Issue 35: a configuration the wizard saved for SSH launches headless, with nothing but the file and the
  // program on the command line (the hosts and the environment come from its target file), as the Studio's Launch.
  void a_saved_ssh_configuration_launches_headless() {
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.where = spur::app::SetupAnswers::Where::Ssh;
    answers.distributed_type = "MULTI_CPU";
    answers.use_cpu = true;
    answers.hosts = {"machine1", "machine2"};
    answers.processes_per_machine = 2;
    answers.main_process_port = spur::test::free_port();
    answers.environment = {{"SPUR_RIG_GREETING", "from the file"}};
    answers.working_directory = dir.path();
    answers.program = SPUR_LAUNCH_RIG;
    const QString path = dir.filePath("ssh.yaml");
    auto config = answers.to_config(path.toStdString());
    // The rig's machines are ssh_config aliases of 127.0.0.1, which the ranks cannot resolve: the user's edit of
    // the rendezvous address, and of the target file for the rig's ssh settings.
    config.set("main_process_ip", spur::app::yaml_string("127.0.0.1"));
    auto target = answers.target();
    target.flags << "--ssh_config" << sshd_->client_config() << "--connect_timeout"
                 << "5";
    target.save_for(path);
    config.save(path.toStdString());
    const auto request = answers.launch_request(path);
    QCOMPARE(request.flags, QStringList{});
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", dir.filePath("history.db"));
    const auto result = spur::test::run_process(
        SPUR_CLI, request.spur_arguments() + QStringList{"--env_var", "SPUR_RIG_GREETING"}, env, 120000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("[machine2] [rank3] hello from rank 3 of 4"), qPrintable(result.output));
    QVERIFY2(result.output.contains("SPUR_RIG_GREETING=from the file"), qPrintable(result.output));
    spur::history::HistoryReader reader(dir.filePath("history.db").toStdString());
    const auto runs = reader.runs();
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(runs[0].target), QString("ssh"));
    QCOMPARE(QString::fromStdString(runs[0].hosts), QString("machine1,machine2"));
    // The record says what ran: the file's hosts with the command line (a relaunch does the same).
    QVERIFY2(QString::fromStdString(runs[0].command).contains("--hosts machine1,machine2"), runs[0].command.c_str());
  }

  void a_failing_rank_on_one_machine_stops_every_machine() {
    QTemporaryDir dir;
    QElapsedTimer timer;
    timer.start();
    const auto result = run(hosts_launch({"--hosts", "machine1,machine2", "--num_processes", "4", SPUR_LAUNCH_RIG,
                                          "--pids", dir.path(), "--fail_rank", "3", "--code", "7", "--sleep", "60"}));
    QCOMPARE(result.exit_code, 7);
    QVERIFY2(timer.elapsed() < 40000, "the other machine's ranks were not stopped");
    QVERIFY2(result.output.contains("spur launch: machine2 (pid") && result.output.contains("exit code 7"),
             qPrintable(result.output));
    QVERIFY(spur::test::all_dead(spur::test::rank_pids(dir.path(), 4), 10000));
  }

  void ctrl_c_stops_every_machine() {
    QTemporaryDir dir;
    QProcess spur;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    spur.setProcessEnvironment(env);
    spur.setProcessChannelMode(QProcess::MergedChannels);
    spur.start(SPUR_CLI, hosts_launch({"--hosts", "machine1,machine2", "--num_processes", "2", SPUR_LAUNCH_RIG,
                                       "--pids", dir.path(), "--sleep", "60"}));
    QVERIFY(spur.waitForStarted());
    QElapsedTimer timer;
    timer.start();
    while (spur::test::rank_pids(dir.path(), 2).size() < 2 && timer.elapsed() < 30000) QThread::msleep(50);
    QCOMPARE(spur::test::rank_pids(dir.path(), 2).size(), size_t(2));
    ::kill(static_cast<pid_t>(spur.processId()), SIGINT);
    QVERIFY(spur.waitForFinished(30000));
    QCOMPARE(spur.exitCode(), 130);
    QVERIFY2(spur::test::all_dead(spur::test::rank_pids(dir.path(), 2), 10000),
             qPrintable(QString::fromUtf8(spur.readAll())));
  }

  void unreachable_and_refused_hosts_are_named() {
    QElapsedTimer timer;
    timer.start();
    const auto result = run(hosts_launch({"--hosts", "machine1,closed,locked", SPUR_LAUNCH_RIG}), 60000);
    QVERIFY(result.exit_code != 0);
    QVERIFY2(timer.elapsed() < 20000, "the pre-flight took longer than the connect timeout");
    QVERIFY2(result.output.contains("closed: ") && result.output.contains("Connection refused"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("locked: ") && result.output.contains("Permission denied"),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("machine1: "), qPrintable(result.output));
  }

  // A host that ssh would read as an option ran its ProxyCommand before the fix (issue 12, defect 1). Every way
  // a host reaches ssh is refused before ssh runs, with the host named; nothing is executed.
  void hosts_that_look_like_options_are_refused_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("host");
    QTest::newRow("--hosts ProxyCommand") << "hosts"
                                          << "-oProxyCommand=touch MARK";
    QTest::newRow("--hosts in a list") << "hosts"
                                       << "machine1,-oProxyCommand=touch MARK";
    QTest::newRow("--hosts user@ option") << "hosts"
                                          << "-oProxyCommand=touch@MARK";
    QTest::newRow("--hosts shell word") << "hosts"
                                        << "machine1;touch MARK";
    QTest::newRow("hostfile ProxyCommand") << "hostfile"
                                           << "-oProxyCommand=touch${IFS}MARK slots=1";
    QTest::newRow("hostfile -F") << "hostfile"
                                 << "-FMARK";
  }
  void hosts_that_look_like_options_are_refused() {
    QFETCH(QString, kind);
    QFETCH(QString, host);
    QTemporaryDir dir;
    const QString mark = dir.filePath("executed");
    host.replace("MARK", mark);
    QStringList flags;
    if (kind == "hosts") {
      flags << "--hosts" << host;
    } else {
      QFile file(dir.filePath("hostfile"));
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write(("machine1 slots=1\n" + host + "\n").toUtf8());
      file.close();
      flags << "--hostfile" << file.fileName();
    }
    for (const bool dry : {true, false}) {
      const auto result =
          run(hosts_launch(flags + (dry ? QStringList{"--dry_run"} : QStringList{}) + QStringList{"/bin/true"}), 30000);
      QCOMPARE(result.exit_code, 2);
      QVERIFY2(
          result.output.contains("is not a host name or address") || result.output.contains("not a user name before @"),
          qPrintable(result.output));
      if (kind == "hostfile") QVERIFY2(result.output.contains(":2: "), qPrintable(result.output));
      QVERIFY2(!QFile::exists(mark), "a host name ran a command");
    }
  }

  // Issue 16: over SSH the remote launchers stream their ranks' progress; the launching side judges the whole
  // run. Rank 3 (machine2) stays in its own code while the others wait in wait_for_everyone: it is named, the
  // ranks of both machines are placed, everything stops with exit code 124. With --max_restarts 1 the second
  // attempt (it hangs on the first only) finishes on both machines.
  void a_hang_over_ssh_names_the_stuck_rank_data() {
    QTest::addColumn<bool>("restart");
    QTest::newRow("stopped") << false;
    QTest::newRow("restarted") << true;
  }
  void a_hang_over_ssh_names_the_stuck_rank() {
    QFETCH(bool, restart);
    QStringList flags{"--hosts", "machine1,machine2", "--num_processes", "4", "--hang_timeout", "12"};
    if (restart)
      flags << "--max_restarts"
            << "1";
    flags << SPUR_TEST_WORKER << "hang"
          << "--steps"
          << "10"
          << "--save_at"
          << "3"
          << "--crash_rank"
          << "3";
    if (restart)
      flags << "--load"
            << "1";
    const auto result = run(hosts_launch(flags));
    QVERIFY2(result.output.contains("no rank made progress for 12 s"), qPrintable(result.output));
    QVERIFY2(result.output.contains("The ranks in Spur's operations wait for: machine2 rank3"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("machine1 rank0 (pid ") && result.output.contains("machine2 rank2 (pid "),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("@spur"), qPrintable(result.output));  // progress records stay off the console
    if (!restart) {
      QCOMPARE(result.exit_code, 124);
      return;
    }
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("restart 1 of 1 (attempt 2)"), qPrintable(result.output));
    QVERIFY2(result.output.contains("[machine2] [rank3] rank 3 done after attempt 1"), qPrintable(result.output));
  }

  void dry_run_shows_the_quoted_ssh_commands() {
    const auto result = run(hosts_launch({"--hosts", "machine1,machine2", "--env", "SEED=1; id", "--env",
                                          "HFTOKEN=hf_dry_secret", "--dry_run", "/bin/echo", "a b"}));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("[machine2] ssh") && result.output.contains("-- machine2 cd ") &&
                 result.output.contains("'--machine_rank' '1'") && result.output.contains("'a b'") &&
                 result.output.contains("'--env_on_stdin'") && result.output.contains("standard input: SEED=1; id") &&
                 result.output.contains("standard input: HFTOKEN=<redacted>") &&
                 !result.output.contains("hf_dry_secret"),
             qPrintable(result.output));
  }

  // Issue 31 (4): over SSH too, a rank's output that looks like a record (without the launch's key) is console
  // text: it neither renames the run nor adds a metric.
  void a_remote_rank_cannot_forge_the_runs_record() {
    QTemporaryDir dir;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", dir.filePath("history.db"));
    const QString forged = R"(@spur {"type":"metric","key":"system/rank0/rss_mib","step":1,"value":1e308,"wall":1})";
    const auto result = spur::test::run_process(
        SPUR_CLI,
        hosts_launch({"--run_name", "honest", "--hosts", "machine1", "/bin/sh", "-c",
                      "printf '%s\\n' '" + forged + R"(' '@spur {"type":"run","name":"forged-name"}')"}),
        env, 120000);
    QVERIFY2(result.exit_code == 0 && result.output.contains("[machine1] [rank0] " + forged),
             qPrintable(result.output));
    spur::history::HistoryReader history(dir.filePath("history.db").toStdString());
    const auto run = history.runs().back();
    QCOMPARE(QString::fromStdString(run.name), QString("honest"));
    // (The machine's own samples of rank 0 are there, from its launcher: none is the forged 1e308.)
    for (const auto& point : history.series(run.id, "system/rank0/rss_mib")) QVERIFY(point.value < 1e300);
  }

  // Issue 31 (1): --env values never travel in an argument list over SSH (they go on each ssh's standard input to
  // the remote launcher), so another user on the machines, looking with ps while the run is on, sees none of them;
  // the ranks get them, byte for byte.
  void secrets_are_in_no_argument_list() {
    QString problem;
    if (spur::test::arguments_seen_by_another_user(&problem).isEmpty()) QSKIP(qPrintable(problem));
    QTemporaryDir dir;
    const QString program = dir.filePath("prog");
    QFile file(program);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(
        "#!/bin/sh\n"
        "[ \"$HF_TOKEN\" = hf_spur_secret_4711 ] && echo token arrived\n"
        "[ \"$DATABASE_URL\" = 'postgres://u:pw-spur-secret@db/x' ] && echo url arrived\n"
        "echo started; sleep 4\n");
    file.close();
    QVERIFY(file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CONFIG_HOME", "/nonexistent");
    env.insert("SPUR_HISTORY", dir.filePath("history.db"));
    env.insert("HF_TOKEN", "hf_spur_secret_4711");
    env.insert("DATABASE_URL", "postgres://u:pw-spur-secret@db/x");  // a secret by its value
    QProcess launch;
    launch.setProcessEnvironment(env);
    launch.setProcessChannelMode(QProcess::MergedChannels);
    // `--env NAME`: the values come from this environment (given as NAME=VALUE, they would be in spur's own
    // argument list, which is the user's choice).
    launch.start(SPUR_CLI,
                 hosts_launch({"--hosts", "machine1,machine2", "--env", "HF_TOKEN", "--env", "DATABASE_URL", program}));
    QVERIFY(launch.waitForStarted());
    QByteArray output;
    int looks = 0, while_running = 0;
    while (launch.state() != QProcess::NotRunning) {
      launch.waitForReadyRead(200);
      output += launch.readAll();
      const auto seen = spur::test::arguments_seen_by_another_user();
      ++looks;
      if (output.count("started") == 2) ++while_running;
      for (const auto& line : seen) {
        QVERIFY2(!line.contains("hf_spur_secret_4711") && !line.contains("pw-spur-secret"), qPrintable(line));
      }
    }
    output += launch.readAll();
    QVERIFY2(launch.exitCode() == 0, output.constData());
    QVERIFY2(output.count("token arrived") == 2 && output.count("url arrived") == 2, output.constData());
    QVERIFY2(while_running >= 3,
             qPrintable(QString("only %1 of %2 looks while both ranks ran").arg(while_running).arg(looks)));
  }
};

SPUR_TEST_CLASS(SshLaunchTest)
#include "ssh_launch_test.moc"
