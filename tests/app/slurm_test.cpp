// SPDX-License-Identifier: Apache-2.0
// `spur launch --slurm` against a real Slurm (Debian's slurmctld, slurmd and munged, started by
// tests/rigs/slurm_rig.sh in a temporary directory and stopped by PID): a 2-task training run whose metrics reach
// the history, a failing task reported with its own exit code, Ctrl-C cancelling the job, --detach with
// `spur slurm follow|describe|stop`, a user's own `srun` of a Spur program, restarts inside the job, and Slurm's
// refusals named. Also the outcome rules (srun's 143 for the survivors is not the cause) without Slurm.
#include <signal.h>
#include <sys/stat.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>
#include <QTextStream>
#include <QThread>

#include "rank_group.h"
#include "setup/setup_answers.h"
#include "slurm/slurm_job.h"
#include "test_main.h"

using NodeCodes = std::map<QString, int>;
Q_DECLARE_METATYPE(NodeCodes)

class SlurmTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir rig_;
  QTemporaryDir work_;
  QString conf_;
  // The run a launch recorded ("recorded as run N"), as text.
  static QString recorded(const QString& output) {
    const auto match = QRegularExpression(R"(recorded as run (\d+))").match(output);
    return match.hasMatch() ? match.captured(1) : QString("none");
  }

  QProcessEnvironment environment() const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SLURM_CONF", conf_);
    env.insert("XDG_CONFIG_HOME", work_.path() + "/config");
    env.insert("SPUR_HISTORY", work_.path() + "/history.db");
    env.remove("OMP_NUM_THREADS");
    return env;
  }
  spur::test::RankResult spur(const QStringList& arguments, int timeout_ms = 180000) const {
    return spur::test::run_process(SPUR_CLI, arguments, environment(), timeout_ms);
  }
  QStringList slurm_launch(const QStringList& rest) const {
    return QStringList{"launch", "--slurm", "--slurm_dir", work_.path() + "/jobs", "--time", "10"} + rest;
  }
  QString squeue() const {
    QProcess process;
    process.setProcessEnvironment(environment());
    process.start("squeue", {"-h", "-o", "%i %T"});
    process.waitForFinished(10000);
    return QString::fromUtf8(process.readAllStandardOutput()).trimmed();
  }

 private slots:
  void initTestCase() {
    QProcess rig;
    rig.start("bash", {SPUR_RIGS_DIR "/slurm_rig.sh", "start", rig_.path()});
    QVERIFY(rig.waitForFinished(60000));
    conf_ = QString::fromUtf8(rig.readAllStandardOutput()).trimmed();
    QVERIFY2(rig.exitCode() == 0,
             qPrintable("no Slurm for the test: " + QString::fromUtf8(rig.readAllStandardError())));
  }
  void cleanupTestCase() {
    QProcess::execute("bash", {SPUR_RIGS_DIR "/slurm_rig.sh", "stop", rig_.path()});
    // A job step's shell can outlive the slurmd that ran it (one that looped for ever did, under a bug since
    // mended): nothing that runs from this test's folders is left behind.
    const int left = spur::test::kill_processes_under(work_.path()) + spur::test::kill_processes_under(rig_.path());
    QVERIFY2(left == 0, qPrintable(QString("%1 process(es) of the test's jobs outlived the cluster").arg(left)));
  }
  void cleanup() {
    // Nothing a case submitted outlives it.
    QElapsedTimer timer;
    timer.start();
    while (!squeue().isEmpty() && timer.elapsed() < 30000) QThread::msleep(200);
    const QString left = squeue();
    if (!left.isEmpty()) {
      // A case that failed leaves its job: cancel it, so that the next cases start clean and fail on their own.
      QStringList jobs;
      for (const auto& job : left.split('\n')) jobs << job.section(' ', 0, 0);
      QProcess scancel;
      scancel.setProcessEnvironment(environment());
      scancel.start("scancel", jobs);
      scancel.waitForFinished(10000);
      timer.restart();
      while (!squeue().isEmpty() && timer.elapsed() < 30000) QThread::msleep(200);
    }
    QVERIFY2(left.isEmpty(), qPrintable("jobs left: " + left));
  }

  void outcome_is_the_failing_ranks_own_code_data() {
    QTest::addColumn<NodeCodes>("codes");
    QTest::addColumn<QString>("state");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("status");
    QTest::newRow("all finished") << NodeCodes{{"a", 0}, {"b", 0}} << "COMPLETED" << 0 << "finished";
    QTest::newRow("survivors stopped by srun")
        << NodeCodes{{"a", 143}, {"b", 7}, {"c", 143}} << "FAILED" << 7 << "failed";
    QTest::newRow("a rank SIGKILLed") << NodeCodes{{"a", 143}, {"b", 137}} << "FAILED" << 137 << "failed";
    QTest::newRow("cancelled") << NodeCodes{{"a", 143}} << "CANCELLED by 0" << 1 << "stopped";
    QTest::newRow("time limit") << NodeCodes{{"a", 143}} << "TIMEOUT" << 143 << "failed";
    QTest::newRow("no node reported") << NodeCodes{} << "NODE_FAIL" << 1 << "failed";
  }
  void outcome_is_the_failing_ranks_own_code() {
    QFETCH(NodeCodes, codes);
    QFETCH(QString, state);
    QFETCH(int, exit_code);
    QFETCH(QString, status);
    const auto outcome = spur::app::job_outcome(codes, state, {{"b", "rank3 (pid 9) failed: exit code 7."}});
    QCOMPARE(outcome.exit_code, exit_code);
    QCOMPARE(outcome.status, status);
    if (exit_code == 7) QCOMPARE(outcome.detail, QString("node b: rank3 (pid 9) failed: exit code 7."));
    if (state == "TIMEOUT") QVERIFY2(outcome.detail.contains("TIMEOUT"), qPrintable(outcome.detail));
  }

  // A job followed after it restarted (spur slurm follow, or the last read of the files) is judged by each node's
  // latest attempt: the node's own marker in its output forgets the failure before it, however much one read
  // takes in. Slurm's commands here are stand-ins (SPUR_SLURM_BIN): the job has left the queue.
  void a_restarted_job_reports_its_latest_failure() {
    QTemporaryDir bin, jobs;
    const auto script = [&](const QString& name, const QByteArray& text) {
      QFile file(bin.filePath(name));
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write("#!/bin/sh\n" + text);
      file.close();
      QVERIFY(file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner));
    };
    script("squeue", "exit 0\n");  // nothing: the job ended
    script("scontrol", "echo 'JobId=41 JobState=FAILED ExitCode=9:0 NodeList=a'\n");
    const auto write = [&](const QString& name, const QByteArray& text) {
      QFile file(jobs.filePath(name));
      QVERIFY(file.open(QIODevice::WriteOnly));
      file.write(text);
    };
    write("batch-41.out", "spur: restart 1 of 1 (attempt 2), after the step's exit code 7\n");
    write("node-a.out",
          "[rank1] first try\nspur launch: rank1 (pid 10) failed: exit code 7; the other ranks were stopped.\n"
          "spur: attempt 2 on this node\n"
          "spur launch: rank0 (pid 20) failed: exit code 9; the other ranks were stopped.\n");
    write("node-a.exit", "9\n");
    const QByteArray was = qgetenv("SPUR_SLURM_BIN");
    qputenv("SPUR_SLURM_BIN", bin.path().toLocal8Bit());
    QString printed, said;
    QTextStream out(&printed), err(&said);
    spur::app::SlurmFollowOptions options;
    options.poll = std::chrono::milliseconds(10);
    const spur::app::SlurmCli slurm;  // (the follower keeps a reference)
    spur::app::SlurmFollower follower(slurm, "41", jobs.path(), options, out, err);
    const int code = follower.run();
    qputenv("SPUR_SLURM_BIN", was);
    QCOMPARE(code, 9);
    QVERIFY2(follower.outcome().detail.contains("rank0 (pid 20) failed: exit code 9"),
             qPrintable(follower.outcome().detail + "\n" + said));
    // The batch's restart line comes before the lines of the attempt it starts.
    QVERIFY2(printed.indexOf("[batch] spur: restart 1") < printed.indexOf("[a] spur: attempt 2"), qPrintable(printed));
  }

  void the_script_asks_for_what_was_given() {
    const auto result = spur(slurm_launch({"--partition", "debug", "--nodes", "2", "--ntasks_per_node", "3", "--gres",
                                           "gpu:3", "--account", "lab", "--qos", "high", "--slurm_args",
                                           "--exclusive --mem=0", "--dry_run", "/opt/train", "it's"}));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    for (const char* line :
         {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=3", "#SBATCH --partition=debug", "#SBATCH --gres=gpu:3",
          "#SBATCH --account=lab", "#SBATCH --qos=high", "#SBATCH --time=10", "#SBATCH --exclusive", "#SBATCH --mem=0",
          "'--num_processes' '6'", "'--machine_rank' \"$SLURM_NODEID\"", "'--main_process_ip' \"$master\"",
          "'--main_process_port' \"$port\"", "'it'\\''s'", "srun --export=ALL --kill-on-bad-exit=1",
          "'--system_metrics_interval' '1' '--system_stream'"}) {
      QVERIFY2(result.output.contains(line), qPrintable(QString(line) + " not in:\n" + result.output));
    }
    QVERIFY2(!QDir(work_.path() + "/jobs").exists(), "a dry run wrote files");
  }

  // Issue 31 (1): --env values are in no argument list, script or dry run: job.sh exports them from a private file
  // in the job's folder and removes it; the node launchers get the names only; the ranks get the values.
  void secrets_reach_the_ranks_through_a_private_file() {
    // (The program checks lengths: its own arguments are the program's business, and would show the values.)
    const QStringList program{"/bin/sh", "-c",
                              "[ ${#HF_TOKEN} = 18 ] && [ \"${#PGPASSWORD}\" = 6 ] && echo secrets arrived"};
    auto env = environment();
    env.insert("HF_TOKEN", "hf_slurm_secret_17");
    const QStringList flags{"--env", "HF_TOKEN", "--env", "PGPASSWORD=it's x", "--env", "SEED=3"};
    const auto dry =
        spur::test::run_process(SPUR_CLI, slurm_launch(flags + QStringList{"--dry_run"} + program), env, 60000);
    QVERIFY2(dry.exit_code == 0 && dry.output.contains("HF_TOKEN=<redacted>") &&
                 dry.output.contains("PGPASSWORD=<redacted>") && dry.output.contains("SEED=3") &&
                 dry.output.contains("'--env' 'HF_TOKEN'") && !dry.output.contains("hf_slurm_secret_17") &&
                 !dry.output.contains("it's x"),
             qPrintable(dry.output));
    const auto result = spur::test::run_process(SPUR_CLI, slurm_launch(flags + program), env, 180000);
    QVERIFY2(result.exit_code == 0 && result.output.contains("secrets arrived"), qPrintable(result.output));
    const auto folder = QRegularExpression(R"(files in (\S+))").match(result.output).captured(1);
    QFile script(folder + "/job.sh");
    QVERIFY(script.open(QIODevice::ReadOnly));
    const QByteArray text = script.readAll();
    QVERIFY2(!text.contains("hf_slurm_secret_17") && !text.contains("it's x"), text.constData());
    QVERIFY2(!QFile::exists(folder + "/env"), "the environment file outlived the job's start");
  }

  // Two tasks on the node train the MLP example; each line comes back as [node] [rankN], the loss reaches the
  // history, and the run is recorded as a finished Slurm run with its job id.
  void two_tasks_train_with_metrics_in_the_history() {
    const mode_t umask_before = ::umask(022);
    const auto result =
        spur(slurm_launch({"--ntasks_per_node", "2", "--job_name", "mlp", SPUR_EXAMPLE_MLP, "--epochs", "16"}));
    ::umask(umask_before);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("submitted Slurm job") && result.output.contains("RUNNING"),
             qPrintable(result.output));
    const QString node = QSysInfo::machineHostName().section('.', 0, 0);
    QVERIFY2(result.output.contains("[" + node + "] [rank0] ") && result.output.contains("2 process(es) on cpu"),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("@spur"), qPrintable(result.output));
    QVERIFY2(result.output.contains("COMPLETED"), qPrintable(result.output));
    // The job's folder holds the script (with the ranks' --env values) and everything the ranks printed: it and
    // the script are the user's only, whatever the umask (022 here).
    const auto folder = QRegularExpression(R"(files in (\S+))").match(result.output).captured(1);
    const auto owner_only = QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner;
    QCOMPARE(QFileInfo(folder).permissions() & QFileDevice::Permissions(0x7077), owner_only);
    QCOMPARE(QFileInfo(folder + "/job.sh").permissions() & QFileDevice::Permissions(0x7077), owner_only);
    const auto show = spur({"runs", "show", recorded(result.output)});
    QVERIFY2(show.output.contains("finished") && show.output.contains("slurm") && show.output.contains("job ") &&
                 show.output.contains("loss"),
             qPrintable(show.output));
    // The node's launcher sampled its ranks and sent the values back through its output file (issue 18); 16 epochs
    // (about 3 s) give it a few of its 1 s samples: 1 epoch ends before the first.
    QVERIFY2(show.output.contains("system/rank0/rss_mib") && show.output.contains("system/rank1/rss_mib"),
             qPrintable(show.output));
    // Both halves of the run's settings come back: Accelerate's configuration and Spur's Slurm settings.
    const auto slurm = spur({"runs", "config", recorded(result.output), "--slurm"});
    QVERIFY2(slurm.exit_code == 0 && slurm.output.contains("job_name: mlp") && slurm.output.contains("nodes: 1") &&
                 slurm.output.contains("ntasks_per_node: 2") && slurm.output.contains("time: 10") &&
                 slurm.output.contains("slurm_dir: " + work_.path() + "/jobs"),
             qPrintable(slurm.output));
    const auto accelerate = spur({"runs", "config", recorded(result.output)});
    QVERIFY2(accelerate.output.contains("num_processes: 2") && accelerate.output.contains("num_machines: 1"),
             qPrintable(accelerate.output));
  }

  // Issue 35: a configuration the wizard saved for Slurm launches headless with nothing but the file and the
  // program: its target file asks Slurm for the nodes, tasks and time, and the job runs as the Studio's Launch.
  void a_saved_slurm_configuration_launches_headless() {
    spur::app::SetupAnswers answers;
    answers.where = spur::app::SetupAnswers::Where::Slurm;
    answers.use_cpu = true;
    answers.num_machines = 1;
    answers.processes_per_machine = 2;
    answers.slurm.time = "10";
    answers.slurm.directory = work_.path() + "/jobs";
    answers.environment = {{"SPUR_RIG_GREETING", "from the file"}};
    answers.working_directory = work_.path();
    answers.program = SPUR_LAUNCH_RIG;
    answers.arguments = {"--env_var", "SPUR_RIG_GREETING"};
    const QString path = work_.path() + "/saved/slurm.yaml";
    QVERIFY(QDir().mkpath(work_.path() + "/saved"));
    answers.target().save_for(path);
    answers.to_config(path.toStdString()).save(path.toStdString());
    const auto request = answers.launch_request(path);
    QCOMPARE(request.flags, QStringList{});
    const auto result = spur(request.spur_arguments());
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("submitted Slurm job") && result.output.contains("COMPLETED"),
             qPrintable(result.output));
    QVERIFY2(
        result.output.contains("hello from rank 1 of 2") && result.output.contains("SPUR_RIG_GREETING=from the file"),
        qPrintable(result.output));
    const auto slurm = spur({"runs", "config", recorded(result.output), "--slurm"});
    QVERIFY2(slurm.exit_code == 0 && slurm.output.contains("ntasks_per_node: 2") && slurm.output.contains("time: 10"),
             qPrintable(slurm.output));
  }

  // Rank 1 fails with code 7 while rank 0 sleeps: the node's launcher stops rank 0, and the job's code is 7.
  void a_failing_task_is_reported_with_its_own_exit_code() {
    const auto result = spur(
        slurm_launch({"--ntasks_per_node", "2", SPUR_LAUNCH_RIG, "--fail_rank", "1", "--code", "7", "--sleep", "60"}));
    QCOMPARE(result.exit_code, 7);
    QVERIFY2(result.output.contains("rank1 (pid") && result.output.contains("failed: exit code 7"),
             qPrintable(result.output));
    const auto show = spur({"runs", "show", recorded(result.output)});
    QVERIFY2(show.output.contains("failed") && show.output.contains("rank1 (pid"), qPrintable(show.output));
  }

  // Ctrl-C cancels the job (scancel): the launcher says so, exits 130 once the job is gone, the run is stopped.
  void ctrl_c_cancels_the_job() {
    QProcess launcher;
    launcher.setProcessEnvironment(environment());
    launcher.setProcessChannelMode(QProcess::MergedChannels);
    launcher.start(SPUR_CLI, slurm_launch({"--ntasks_per_node", "2", SPUR_LAUNCH_RIG, "--sleep", "120"}));
    QVERIFY(launcher.waitForStarted());
    QByteArray output;
    QVERIFY2(spur::test::read_until(launcher, output, "[rank1] hello", 60000), output.constData());
    ::kill(static_cast<pid_t>(launcher.processId()), SIGINT);
    QVERIFY(launcher.waitForFinished(60000));
    output += launcher.readAll();
    QCOMPARE(launcher.exitCode(), 130);
    QVERIFY2(output.contains("cancelling job"), output.constData());
    const auto show = spur({"runs", "show", recorded(QString::fromUtf8(output))});
    QVERIFY2(show.output.contains("stopped"), qPrintable(show.output));
  }

  // --detach prints the job id; describe, follow and stop work on it from another command.
  void detached_jobs_are_followed_described_and_stopped() {
    const auto submitted =
        spur(slurm_launch({"--detach", "--ntasks_per_node", "1", SPUR_LAUNCH_RIG, "--lines", "3", "--sleep", "2"}));
    QVERIFY2(submitted.exit_code == 0, qPrintable(submitted.output));
    const QString job = submitted.output.split('\n').filter(QRegularExpression("^[0-9]+$")).value(0);
    QVERIFY2(!job.isEmpty(), qPrintable(submitted.output));
    const auto described = spur({"slurm", "describe", job});
    QVERIFY2(described.exit_code == 0 && described.output.contains("JobState: "), qPrintable(described.output));
    const auto followed = spur({"slurm", "follow", job});
    QVERIFY2(followed.exit_code == 0 && followed.output.contains("[rank0] rank 0 line 2"), qPrintable(followed.output));

    const auto second = spur(slurm_launch({"--detach", "--ntasks_per_node", "1", SPUR_LAUNCH_RIG, "--sleep", "120"}));
    const QString long_job = second.output.split('\n').filter(QRegularExpression("^[0-9]+$")).value(0);
    QVERIFY2(!long_job.isEmpty(), qPrintable(second.output));
    const auto stopped = spur({"slurm", "stop", long_job});
    QVERIFY2(stopped.exit_code == 0, qPrintable(stopped.output));
    const auto unknown = spur({"slurm", "follow", "999999"});
    QCOMPARE(unknown.exit_code, 1);
    QVERIFY2(unknown.output.contains("job 999999 is not known to Slurm"), qPrintable(unknown.output));
  }

  // A user's own `srun` of a Spur program: identity from SLURM_PROCID and friends, the store on the first node.
  void a_users_own_srun_works_without_spur_launch() {
    QProcess srun;
    auto env = environment();
    env.remove("RANK");
    env.remove("WORLD_SIZE");
    env.remove("MASTER_ADDR");
    env.remove("MASTER_PORT");
    srun.setProcessEnvironment(env);
    srun.setProcessChannelMode(QProcess::MergedChannels);
    srun.start("srun", {"-n", "2", "-l", "--time", "5", SPUR_TEST_WORKER, "collectives", "--out", work_.path()});
    QVERIFY(srun.waitForFinished(120000));
    const QString output = QString::fromUtf8(srun.readAll());
    QVERIFY2(srun.exitCode() == 0, qPrintable(output));
    QVERIFY2(output.contains("0: ") && output.contains("1: "), qPrintable(output));
  }

  // The script's own restarts: rank 1 is SIGKILLed on the first attempt; the step runs again (attempt 1) and
  // resumes from the automatic checkpoint of step 5.
  void a_failed_step_restarts_inside_the_job() {
    const auto result = spur(
        slurm_launch({"--ntasks_per_node", "2", "--max_restarts", "1", SPUR_TEST_WORKER, "restart", "--out",
                      work_.path() + "/restart", "--steps", "12", "--k", "5", "--save_at", "7", "--crash_rank", "1"}));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("killed by SIGKILL") &&
                 result.output.contains("[batch] spur: restart 1 of 1 (attempt 2)") &&
                 result.output.contains("[rank1] attempt 1 joined") && result.output.contains("resuming from"),
             qPrintable(result.output));
  }

  // --hang_timeout in a Slurm job: each node's launcher watches its ranks; rank 1 stays in its own code while rank 0
  // waits for it, so the node names rank 1, stops both, and the job's code is the hang's 124, the report in the run.
  void a_hang_in_a_job_names_the_stuck_rank() {
    QElapsedTimer timer;
    timer.start();
    const auto result = spur(slurm_launch({"--ntasks_per_node", "2", "--hang_timeout", "10", SPUR_TEST_WORKER, "hang",
                                           "--steps", "10", "--save_at", "3", "--crash_rank", "1"}));
    QCOMPARE(result.exit_code, 124);
    QVERIFY2(timer.elapsed() < 150000, "the hang was not stopped");
    QVERIFY2(result.output.contains("no rank made progress for 10 s (--hang_timeout 10)") &&
                 result.output.contains("The ranks in Spur's operations wait for: rank1"),
             qPrintable(result.output));
    const auto show = spur({"runs", "show", recorded(result.output)});
    QVERIFY2(show.output.contains("failed") && show.output.contains("no rank made progress for 10 s"),
             qPrintable(show.output));
  }

  // Spur's own Slurm settings file (Accelerate's loader refuses unknown keys): read from --slurm_config or
  // $XDG_CONFIG_HOME/spur/slurm.yaml, flags win, a bad key or value is named with the file and line.
  void settings_come_from_the_slurm_file() {
    QTemporaryDir dir;
    const QString path = dir.filePath("slurm.yaml");
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("partition: debug\nntasks_per_node: 3\ntime: '7'\ngres: gpu:2\nslurm_args: --exclusive\n");
    file.close();
    const auto result = spur(slurm_launch({"--slurm_config", path, "--dry_run", "/opt/train"}));
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    for (const char* line : {"#SBATCH --partition=debug", "#SBATCH --ntasks-per-node=3", "#SBATCH --time=10",
                             "#SBATCH --gres=gpu:2", "#SBATCH --exclusive", "'--num_processes' '3'"}) {
      QVERIFY2(result.output.contains(line), qPrintable(QString(line) + " not in:\n" + result.output));
    }
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    file.write("partition: debug\npartitoin: gpu\n");
    file.close();
    const auto typo = spur(slurm_launch({"--slurm_config", path, "--dry_run", "/opt/train"}));
    QCOMPARE(typo.exit_code, 1);
    QVERIFY2(typo.output.contains(path + ":2: partitoin: not a Slurm setting Spur knows"), qPrintable(typo.output));
    QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
    file.write("nodes: [1, 2]\n");
    file.close();
    const auto list = spur(slurm_launch({"--slurm_config", path, "--dry_run", "/opt/train"}));
    QVERIFY2(list.exit_code == 1 && list.output.contains(path + ":1: nodes: expected a plain value"),
             qPrintable(list.output));
    const auto missing = spur(slurm_launch({"--slurm_config", dir.filePath("none.yaml"), "--dry_run", "/opt/train"}));
    QVERIFY2(missing.exit_code == 1 && missing.output.contains("none.yaml: no such file"), qPrintable(missing.output));
  }

  void refusals_are_named_data() {
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("bin");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("message");
    QTest::newRow("no such partition") << QStringList{"--partition", "nowhere"} << "" << 1
                                       << "Slurm refused the job: sbatch --parsable";
    QTest::newRow("no sbatch") << QStringList{} << "/nonexistent" << 1
                               << "Slurm's sbatch is not installed here (not in SPUR_SLURM_BIN=/nonexistent)";
    QTest::newRow("not an option") << QStringList{"--slurm_args", "exclusive"} << "" << 1
                                   << "--slurm_args: 'exclusive' is not an sbatch option";
    QTest::newRow("bad time") << QStringList{"--time", "soon"} << "" << 1 << "--time 'soon' is not a Slurm time";
    // Issue 31 (8): sbatch takes prefixes of long options, combined short ones and white space other than spaces.
    QTest::newRow("a prefix of --output") << QStringList{"--slurm_args", "--out=/x/evil-%j.out"} << "" << 1
                                          << "--slurm_args: --out sets --output, which is spur launch's to set";
    QTest::newRow("a prefix of --chdir") << QStringList{"--slurm_args", "--exclusive --chd=/x"} << "" << 1
                                         << "--slurm_args: --chd sets --chdir";
    QTest::newRow("combined short options")
        << QStringList{"--slurm_args", "-vo/x/evil.out"} << "" << 1 << "--slurm_args: -vo/x/evil.out sets -o";
    QTest::newRow("tab-joined words") << QStringList{"--slurm_args", "--exclusive\t--output=/x"} << "" << 1
                                      << "--slurm_args: --output is spur launch's to set";
    QTest::newRow("uneven") << QStringList{"--nodes", "2", "--num_processes", "3"} << "" << 2
                            << "3 processes do not split evenly over 2 nodes";
    QTest::newRow("hosts") << QStringList{"--hosts", "a,b"} << "" << 2 << "--slurm and --hosts do not go together";
  }
  void refusals_are_named() {
    QFETCH(QStringList, flags);
    QFETCH(QString, bin);
    QFETCH(int, exit_code);
    QFETCH(QString, message);
    auto env = environment();
    if (!bin.isEmpty()) env.insert("SPUR_SLURM_BIN", bin);
    const auto result = spur::test::run_process(SPUR_CLI, slurm_launch(flags + QStringList{"/bin/true"}), env, 60000);
    QCOMPARE(result.exit_code, exit_code);
    QVERIFY2(result.output.contains(message), qPrintable(result.output));
    const auto without = spur({"launch", "--partition", "debug", "/bin/true"});
    QCOMPARE(without.exit_code, 2);
    QVERIFY2(without.output.contains("--partition is a Slurm setting: add --slurm"), qPrintable(without.output));
  }
};

SPUR_TEST_CLASS(SlurmTest)
#include "slurm_test.moc"
