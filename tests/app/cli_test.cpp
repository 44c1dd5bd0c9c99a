// SPDX-License-Identifier: Apache-2.0
// The `spur` command as a user runs it: --version, env (text and JSON), the permissions of what it writes, and a
// clear error for a wrong command.
#include <sys/stat.h>

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QJsonObject>
#include <QTest>

#include "rank_group.h"
#include "test_main.h"

namespace {

spur::test::RankResult spur_cli(const QStringList& arguments) {
  return spur::test::run_process(SPUR_CLI, arguments, QProcessEnvironment::systemEnvironment(), 30000);
}

void write_file(const QString& path, const QByteArray& text) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(text);
}

}  // namespace

class CliTest : public QObject {
  Q_OBJECT

 private slots:
  void version() {
    const auto result = spur_cli({"--version"});
    QCOMPARE(result.exit_code, 0);
    QCOMPARE(result.output.trimmed(), QString("spur " SPUR_VERSION_STRING));
  }

  void env_names_versions_and_blas() {
    const auto result = spur_cli({"env"});
    QCOMPARE(result.exit_code, 0);
    for (const char* key :
         {"Spur: ", "LibTorch (built against): ", "Qt: ", "Compiler: ", "OS: ", "CPU: ", "GPUs: ", "BLAS: "}) {
      QVERIFY2(result.output.contains(key), qPrintable(result.output));
    }
    // Debian's LibTorch runs on the OpenBLAS the set-up installs, the wheel on the MKL inside libtorch_cpu: never
    // on the reference BLAS.
    QVERIFY2(result.output.contains("BLAS: OpenBLAS") || result.output.contains("BLAS: MKL"),
             qPrintable(result.output));
    QVERIFY2(!result.output.contains("reference BLAS"), qPrintable(result.output));
  }

  // Issue 13: what LibTorch this build runs (asked of spur-check, which links it): its version and build, the
  // CUDA devices, and for a CUDA build the CUDA runtime and NCCL actually loaded: the wheel's own files, also
  // with the machine's toolkit first on LD_LIBRARY_PATH (Spur's binaries carry an RPATH, not a RUNPATH).
  void env_names_the_libtorch_it_runs() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("LD_LIBRARY_PATH", "/usr/local/cuda/lib64:/usr/local/cuda/lib");
    env.insert("SPUR_LOAD_CUDA", "1");  // the CUDA half even without a GPU: its libraries are what is checked
    const auto result = spur::test::run_process(SPUR_CLI, {"env"}, env, 60000);
    QCOMPARE(result.exit_code, 0);
    QVERIFY2(result.output.contains("LibTorch: " SPUR_TORCH_VERSION_STRING ", "), qPrintable(result.output));
    QVERIFY2(result.output.contains("CUDA devices: "), qPrintable(result.output));
    if (!result.output.contains("CUDA build")) {
      QVERIFY2(result.output.contains("CPU build"), qPrintable(result.output));
      return;
    }
    QVERIFY2(result.output.contains("compiled against CUDA " SPUR_TORCH_CUDA_VERSION_STRING),
             qPrintable(result.output));
    const QString wheel = QFileInfo(SPUR_TORCHRUN_PYTHON).absolutePath() + "/..";
    for (const char* row : {"CUDA runtime (loaded): ", "NCCL (loaded): "}) {
      const auto line = result.output.section(row, 1, 1).section('\n', 0, 0);
      QVERIFY2(!line.isEmpty(), qPrintable(result.output));
      const QString file = line.section(" from ", 1);
      QVERIFY2(QFileInfo(file).canonicalFilePath().startsWith(QFileInfo(wheel).canonicalFilePath() + "/lib"),
               qPrintable(QString("%1 came from %2, not from the wheel's environment %3").arg(row, file, wheel)));
    }
  }

  // A CUDA build on a machine without an NVIDIA GPU maps none of LibTorch's CUDA libraries (libspur_cuda is
  // loaded only where there is a GPU): ~130 MiB less private memory per rank.
  void no_cuda_libraries_without_a_gpu() {
    if (QFileInfo::exists("/proc/driver/nvidia/gpus") || QFileInfo::exists("/dev/nvidia0")) {
      QSKIP("this machine has an NVIDIA GPU");
    }
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("SPUR_LOAD_CUDA");
    const auto result = spur::test::run_process(SPUR_CLI, {"env"}, env, 60000);
    QCOMPARE(result.exit_code, 0);
    QVERIFY2(result.output.contains("LibTorch CUDA library: not loaded"), qPrintable(result.output));
    if (result.output.contains("CUDA build")) {
      QVERIFY2(result.output.contains("CUDA support: not loaded: no NVIDIA GPU on this machine"),
               qPrintable(result.output));
    }
  }

  void env_json() {
    const auto result = spur_cli({"env", "--json"});
    QCOMPARE(result.exit_code, 0);
    const auto object = QJsonDocument::fromJson(result.output.toUtf8()).object();
    QCOMPARE(object.value("Spur").toString(), QString(SPUR_VERSION_STRING));
    QVERIFY(!object.value("BLAS").toString().isEmpty());
  }

  // The report names the configuration a launch would use (XDG default here), what it says, and a broken
  // file's error instead of failing.
  // Issue 12: a history readable by others (made by an older Spur, or loosened by hand) is named with a warning.
  void env_warns_of_a_history_others_can_read() {
    QTemporaryDir home;
    auto environment = QProcessEnvironment::systemEnvironment();
    const QString path = home.filePath("history.db");
    environment.insert("SPUR_HISTORY", path);
    auto missing = spur::test::run_process(SPUR_CLI, {"env"}, environment, 30000);
    QVERIFY2(missing.output.contains("History: " + path + " (not created yet)"), qPrintable(missing.output));
    write_file(path, "");
    QVERIFY(QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner));
    auto private_one = spur::test::run_process(SPUR_CLI, {"env"}, environment, 30000);
    QVERIFY2(private_one.output.contains("History: " + path + "\n"), qPrintable(private_one.output));
    QVERIFY(QFile::setPermissions(path, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ReadOther));
    auto open_one = spur::test::run_process(SPUR_CLI, {"env"}, environment, 30000);
    QVERIFY2(open_one.output.contains("History: " + path + "  <- WARNING: mode 0604, readable by others") &&
                 open_one.output.contains("chmod 600 " + path),
             qPrintable(open_one.output));
  }

  // Issue 12, private files: under the usual umask 022, every file and folder `spur config` and `spur launch`
  // leave behind (configurations, the history, the folders made for them) is its owner's only. Elsewhere: the
  // history's WAL and shared-memory files while it is open (HistoryTest::a_new_history_is_private), a Slurm job's
  // folder and script (SlurmTest), the Studio's relaunch configurations (LaunchPanelTest). Checkpoints and
  // TensorBoard files follow the umask on purpose (docs/tracking.md, "Private files").
  void every_file_spur_writes_is_its_owners_only() {
    QTemporaryDir dir;
    const mode_t before = ::umask(022);
    auto environment = QProcessEnvironment::systemEnvironment();
    environment.insert("SPUR_HISTORY", dir.filePath("data/spur/history.db"));
    environment.insert("XDG_CONFIG_HOME", dir.filePath("config"));
    const auto config = spur::test::run_process(SPUR_CLI, {"config", "default"}, environment, 30000);
    const auto saved = spur::test::run_process(
        SPUR_CLI, {"config", "default", "--config_file", dir.filePath("mine/sub/run.json")}, environment, 30000);
    const auto launch = spur::test::run_process(
        SPUR_CLI, {"launch", "--num_processes", "2", "--hang_timeout", "60", SPUR_LAUNCH_RIG, "--lines", "2"},
        environment, 60000);
    ::umask(before);
    QVERIFY2(config.exit_code == 0 && saved.exit_code == 0, qPrintable(config.output + saved.output));
    QVERIFY2(launch.exit_code == 0, qPrintable(launch.output));
    QStringList seen;
    QDirIterator walk(dir.path(), QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot,
                      QDirIterator::Subdirectories);
    while (walk.hasNext()) {
      const QFileInfo entry(walk.next());
      seen << QDir(dir.path()).relativeFilePath(entry.filePath());
      const auto open = QFileDevice::ReadGroup | QFileDevice::WriteGroup | QFileDevice::ExeGroup |
                        QFileDevice::ReadOther | QFileDevice::WriteOther | QFileDevice::ExeOther;
      QVERIFY2(!(entry.permissions() & open),
               qPrintable(QString("%1 is mode %2").arg(entry.filePath()).arg(int(entry.permissions()), 0, 16)));
    }
    for (const char* expected : {"config/spur/default_config.yaml", "mine/sub/run.json", "data/spur/history.db"})
      QVERIFY2(seen.contains(expected), qPrintable(seen.join(", ")));
  }

  void env_names_the_config_in_effect() {
    QTemporaryDir home;
    auto environment = QProcessEnvironment::systemEnvironment();
    environment.insert("XDG_CONFIG_HOME", home.path());
    environment.insert("HF_HOME", home.filePath("hf"));
    auto none = spur::test::run_process(SPUR_CLI, {"env"}, environment, 30000);
    QVERIFY2(none.output.contains("Config: none"), qPrintable(none.output));

    QDir(home.path()).mkpath("spur");
    const QString path = home.filePath("spur/default_config.yaml");
    write_file(path,
               "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 3\n"
               "num_machines: 1\nmixed_precision: bf16\nuse_cpu: true\n");
    auto good = spur::test::run_process(SPUR_CLI, {"env"}, environment, 30000);
    QVERIFY2(good.output.contains("Config: " + path), qPrintable(good.output));
    QVERIFY2(good.output.contains("Config values: LOCAL_MACHINE, MULTI_CPU, 3 process(es) over 1 machine(s), "
                                  "mixed precision bf16, CPU only"),
             qPrintable(good.output));

    const QString bad = home.filePath("bad.yaml");
    write_file(bad, "distributed_type: MULTI_CPU\nnum_processes: 0\n");
    auto broken = spur::test::run_process(SPUR_CLI, {"env", "--config_file", bad}, environment, 30000);
    QCOMPARE(broken.exit_code, 0);
    QVERIFY2(broken.output.contains("Config values: INVALID: " + bad + ":2"), qPrintable(broken.output));
    QVERIFY2(broken.output.contains("num_processes"), qPrintable(broken.output));
  }

  void shard_plan_prints_one_line_per_rank() {
    const auto result = spur_cli({"shard-plan", "--dataset_len", "10", "--batch_size", "3", "--num_processes", "2"});
    QCOMPARE(result.exit_code, 0);
    QCOMPARE(result.output, QString("{\"rank\": 0, \"batches\": [[0, 1, 2], [6, 7, 8]]}\n"
                                    "{\"rank\": 1, \"batches\": [[3, 4, 5], [9, 0, 1]]}\n"));
    const auto split = spur_cli({"shard-plan", "--dataset-len=10", "--batch-size=4", "--num-processes=2",
                                 "--split_batches", "--even_batches", "false"});
    QCOMPARE(split.output, QString("{\"rank\": 0, \"batches\": [[0, 1], [4, 5], [8, 9]]}\n"
                                   "{\"rank\": 1, \"batches\": [[2, 3], [6, 7]]}\n"));
  }

  void shard_plan_rejects_bad_combinations_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("message");
    const QStringList base{"shard-plan", "--dataset_len", "10", "--num_processes", "3"};
    QTest::newRow("split not divisible") << (base + QStringList{"--batch_size", "4", "--split_batches"})
                                         << "a multiple of num_processes (3)";
    QTest::newRow("missing batch size") << base << "--batch_size is required";
    QTest::newRow("bad even_batches") << (base + QStringList{"--batch_size", "2", "--even_batches", "maybe"})
                                      << "--even_batches needs true or false";
    QTest::newRow("zero processes") << QStringList{"shard-plan", "--dataset_len",   "3", "--batch_size",
                                                   "1",          "--num_processes", "0"}
                                    << "--num_processes must be between 1";
    QTest::newRow("unknown flag") << (base + QStringList{"--batch_size", "2", "--shuffle"}) << "unknown flag --shuffle";
    // Issue 12, defect 8: this took 1.4 GB and aborted on bad_alloc.
    QTest::newRow("too much to list") << QStringList{"shard-plan", "--dataset_len",   "1",     "--batch_size",
                                                     "1000000",    "--num_processes", "100000"}
                                      << "would list up to 100000000001 indices";
  }

  // Issue 12, defect 8: the work grew with the square of the process count (each rank built the whole padding
  // round); 100,000 processes of one sample now take as long as listing them.
  void shard_plan_scales_with_what_it_lists() {
    const auto result =
        spur_cli({"shard-plan", "--dataset_len", "1", "--batch_size", "1", "--num_processes", "100000"});
    QCOMPARE(result.exit_code, 0);
    QCOMPARE(result.output.count('\n'), 100000);
    QVERIFY(result.output.startsWith("{\"rank\": 0, \"batches\": [[0]]}\n"));
    QVERIFY(result.output.endsWith("{\"rank\": 99999, \"batches\": [[0]]}\n"));
  }

  void shard_plan_rejects_bad_combinations() {
    QFETCH(QStringList, arguments);
    QFETCH(QString, message);
    const auto result = spur_cli(arguments);
    QVERIFY(result.exit_code != 0);
    QCOMPARE(result.output.count('\n'), 1);  // one clear line
    QVERIFY2(result.output.contains(message), qPrintable(result.output));
  }

  // Issue 31 (8): hostile or unlucky command lines get a clear refusal, not an abort or a surprise.
  // Issue 33: every command answers --help with its usage on standard output and exits 0 (`spur config` and
  // `spur env` said "unknown").
  void every_command_answers_help_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("usage");
    QTest::newRow("spur") << QStringList{"--help"} << "usage: spur <command>";
    QTest::newRow("launch") << QStringList{"launch", "--help"} << "usage: spur launch";
    QTest::newRow("config") << QStringList{"config", "--help"} << "usage: spur config";
    QTest::newRow("config validate") << QStringList{"config", "validate", "--help"} << "spur config validate FILE";
    QTest::newRow("env") << QStringList{"env", "--help"} << "usage: spur env";
    QTest::newRow("runs") << QStringList{"runs", "--help"} << "usage: spur runs";
    QTest::newRow("slurm") << QStringList{"slurm", "--help"} << "usage: spur slurm";
    QTest::newRow("sagemaker") << QStringList{"sagemaker", "--help"} << "usage: spur sagemaker";
    QTest::newRow("test") << QStringList{"test", "--help"} << "usage: spur test";
    QTest::newRow("shard-plan") << QStringList{"shard-plan", "--help"} << "usage: spur shard-plan";
    QTest::newRow("merge-weights") << QStringList{"merge-weights", "--help"} << "usage: spur merge-weights";
  }
  void every_command_answers_help() {
    QFETCH(QStringList, arguments);
    QFETCH(QString, usage);
    QProcess process;
    process.start(SPUR_CLI, arguments);
    QVERIFY(process.waitForFinished(30000));
    const QString out = QString::fromUtf8(process.readAllStandardOutput());
    QVERIFY2(process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0,
             qPrintable(out + process.readAllStandardError()));
    QVERIFY2(out.contains(usage), qPrintable(out));
  }

  void odd_command_lines_are_refused_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("message");
    // scancel --me would cancel every job of the user's.
    QTest::newRow("an option as a job id")
        << QStringList{"slurm", "stop", "--", "--me"} << 2 << "'--me' is not a Slurm job id";
    // It took all memory and aborted on std::bad_alloc.
    QTest::newRow("a million processes on one machine")
        << QStringList{"launch", "--num_processes", "1000000", "--dry_run", "/bin/true"} << 2
        << "num_processes 1000000 over 1 machine(s) is 1000000 processes on each: one machine runs at most 4096";
  }
  void odd_command_lines_are_refused() {
    QFETCH(QStringList, arguments);
    QFETCH(int, exit_code);
    QFETCH(QString, message);
    const auto result = spur_cli(arguments);
    QVERIFY2(result.exit_code == exit_code && result.output.contains(message), qPrintable(result.output));
  }

  // Issue 31 (8): a user without HOME (a service, env -i) gets the home folder of the password database, never the
  // current folder (where the history used to go) or / (where `spur config default` used to write). As nobody,
  // whose home (/nonexistent) does not exist: the run goes on unrecorded, the config is refused by its path.
  void no_home_means_the_password_databases_home() {
    QTemporaryDir dir;
    QVERIFY(QFile::setPermissions(dir.path(), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner |
                                                  QFileDevice::ReadOther | QFileDevice::WriteOther |
                                                  QFileDevice::ExeOther));
    QProcessEnvironment env;
    env.insert("PATH", qEnvironmentVariable("PATH"));
    auto as_nobody = [&](const QStringList& arguments) {
      QProcess process;
      process.setProcessEnvironment(env);
      process.setWorkingDirectory(dir.path());
      process.setProcessChannelMode(QProcess::MergedChannels);
      process.start("setpriv", QStringList{"--reuid=65534", "--regid=65534", "--clear-groups", SPUR_CLI} + arguments);
      process.waitForFinished(60000);
      return std::make_pair(process.exitCode(), QString::fromUtf8(process.readAll()));
    };
    const auto [launched, launch_output] = as_nobody({"launch", "/bin/true"});
    QVERIFY2(launched == 0 && launch_output.contains("/nonexistent/.local/share/spur/history.db"),
             qPrintable(launch_output));
    const auto [configured, config_output] = as_nobody({"config", "default"});
    QVERIFY2(configured != 0 && config_output.contains("/nonexistent/.config/spur"), qPrintable(config_output));
    QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden), QStringList());
  }

  // Issue 37: a checkpoint of a stage-3 run saved with SHARDED_STATE_DICT (one file per rank) merged into the
  // model.safetensors a FULL_STATE_DICT save writes, as `accelerate merge-weights` does: the same bytes as the DDP
  // run's, read by the safetensors library; what cannot be merged is named.
  void merge_weights_writes_the_whole_model() {
    QTemporaryDir sharded, ddp, out;
    const QStringList args{"--steps", "2", "--save_at", "1", "--blocks", "2"};
    for (const auto& [dir, stage] : {std::make_pair(sharded.path(), 3), std::make_pair(ddp.path(), 0)}) {
      spur::test::RankGroup ranks(SPUR_TEST_WORKER, QStringList{"shard", "--out", dir} + args, 2);
      ranks.set_env("SPUR_ZERO_STAGE", QString::number(stage));
      ranks.set_env("FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT");  // stage 0: whole weights all the same
      QVERIFY(ranks.start());
      QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
      for (int rank = 0; rank < 2; ++rank) QVERIFY2(ranks.result(rank).exit_code == 0, qPrintable(ranks.transcript()));
    }
    const QString checkpoint = sharded.filePath("checkpoint");
    QVERIFY(QFile::exists(checkpoint + "/model_rank1.safetensors"));
    QVERIFY(!QFile::exists(checkpoint + "/model.safetensors"));

    auto result = spur_cli({"merge-weights", checkpoint, out.path()});
    QVERIFY2(result.exit_code == 0 && result.output.contains(out.filePath("model.safetensors")),
             qPrintable(result.output));
    QFile merged(out.filePath("model.safetensors")), whole(ddp.filePath("checkpoint/model.safetensors"));
    QVERIFY(merged.open(QIODevice::ReadOnly) && whole.open(QIODevice::ReadOnly));
    QVERIFY(merged.readAll() == whole.readAll());
    QProcess python;
    python.start(SPUR_PEER_PYTHON,
                 {"-c",
                  "import sys, numpy; from safetensors import safe_open\n"
                  "with safe_open(sys.argv[1], 'np') as a, safe_open(sys.argv[2], 'np') as b:\n"
                  "  assert sorted(a.keys()) == sorted(b.keys())\n"
                  "  assert all(numpy.array_equal(a.get_tensor(k), b.get_tensor(k)) for k in a.keys())\n"
                  "  print('same', len(list(a.keys())))",
                  out.filePath("model.safetensors"), ddp.filePath("checkpoint/model.safetensors")});
    QVERIFY(python.waitForFinished(60000));
    const QString read = QString::fromUtf8(python.readAllStandardOutput()).trimmed();
    QVERIFY2(python.exitCode() == 0 && read == "same 16", qPrintable(read + python.readAllStandardError()));

    result = spur_cli({"merge-weights", ddp.filePath("checkpoint"), out.filePath("again")});
    QVERIFY2(result.exit_code == 1 && result.output.contains("holds its weights whole already"),
             qPrintable(result.output));
    result = spur_cli({"merge-weights", out.filePath("nothing"), out.filePath("again")});
    QVERIFY2(result.exit_code == 1 && result.output.contains("is not a directory"), qPrintable(result.output));
    result = spur_cli({"merge-weights", checkpoint});
    QVERIFY2(result.exit_code == 2 && result.output.contains("needs CHECKPOINT_DIR and OUTPUT_DIR"),
             qPrintable(result.output));
    result = spur_cli({"merge-weights", checkpoint, checkpoint});
    QVERIFY2(result.exit_code == 2 && result.output.contains("OUTPUT_DIR is the checkpoint itself"),
             qPrintable(result.output));
    result = spur_cli({"merge-weights", checkpoint, checkpoint + "/merged", "--remove_checkpoint_dir"});
    QVERIFY2(result.exit_code == 2 && result.output.contains("--remove_checkpoint_dir would remove OUTPUT_DIR too"),
             qPrintable(result.output));
    QVERIFY(QFile::exists(checkpoint + "/spur_state.json"));
    QVERIFY(QFile::remove(checkpoint + "/model_rank0.safetensors"));
    result = spur_cli({"merge-weights", checkpoint, out.filePath("again")});
    QVERIFY2(result.exit_code == 1 && result.output.contains("model_rank0.safetensors is missing"),
             qPrintable(result.output));
  }

  void unknown_command_is_named() {
    const auto result = spur_cli({"lanch"});
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains("unknown command 'lanch'"), qPrintable(result.output));
  }
};

SPUR_TEST_CLASS(CliTest)
#include "cli_test.moc"
