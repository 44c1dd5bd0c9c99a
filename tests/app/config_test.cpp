// SPDX-License-Identifier: Apache-2.0
// `spur config` as a user runs it: the files Accelerate wrote (fixtures) get Accelerate's verdicts, errors name
// file, line and key, what Spur writes is accepted by Accelerate's loader rules and round-trips unchanged.
#include <sys/stat.h>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QTest>

#include "config/run_config.h"
#include "rank_group.h"
#include "setup/launch_target.h"
#include "setup/setup_answers.h"
#include "test_main.h"

namespace {

spur::test::RankResult spur_cli(const QStringList& arguments,
                                const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  return spur::test::run_process(SPUR_CLI, arguments, env, 30000);
}

QString write(const QTemporaryDir& dir, const QString& name, const QString& text) {
  QString path = dir.path() + "/" + name;
  QFile file(path);
  file.open(QIODevice::WriteOnly);
  file.write(text.toUtf8());
  return path;
}

// `spur launch --dry_run /bin/true` with `yaml` as the configuration file and `flags` before the program.
spur::test::RankResult dry_run(const QString& yaml, const QStringList& flags) {
  QTemporaryDir dir;
  const QString path = write(dir, "config.yaml", yaml);
  return spur_cli(QStringList{"launch", "--config_file", path, "--dry_run"} + flags + QStringList{"/bin/true"});
}

// A dry run's plan against `expected`: a variable the ranks get ("NAME=value"), one they do not ("!NAME"), or a
// refusal's text; `launches`: whether the plan is accepted.
void check_plan(const spur::test::RankResult& result, const QString& expected, bool launches) {
  QCOMPARE(result.exit_code == 0, launches);
  if (expected.startsWith('!')) {
    QVERIFY2(result.output.contains("RANK=1") && !result.output.contains(expected.mid(1)), qPrintable(result.output));
    return;
  }
  QVERIFY2(result.output.contains(expected), qPrintable(result.output));
}

QString read(const QString& path) {
  QFile file(path);
  file.open(QIODevice::ReadOnly);
  return QString::fromUtf8(file.readAll());
}

// Accelerate's own loader and launch checks, from the installed package (tests/rigs/accelerate_loader.py), asked
// of one Python process that the suite starts once (initTestCase) and ends (cleanupTestCase): each new Python
// pays about 3 s importing Accelerate, and the suite asks some twenty times.
QProcess* judge = nullptr;

// The loader not answering fails the test (QTest::qFail), whatever the caller expected: a rejection expected
// would otherwise pass on a loader that died.
bool accelerate_accepts(const QString& path) {
  const auto broken = [&](const QString& why) {
    QTest::qFail(qPrintable("the Accelerate loader, asked about " + path + ": " + why), __FILE__, __LINE__);
    return false;
  };
  if (judge == nullptr || judge->state() != QProcess::Running) return broken("not running");
  judge->write((path + "\n").toUtf8());
  QByteArray answer;
  while (!answer.endsWith('\n')) {
    if (!judge->waitForReadyRead(30000)) return broken("no verdict within 30 s");
    answer += judge->readAllStandardOutput();
  }
  const QString line = QString::fromUtf8(answer).trimmed();
  if (!line.startsWith(path + "\t")) return broken("an answer about another file: " + line);
  return line.section('\t', 1) == "accepted";
}

QProcessEnvironment isolated(const QTemporaryDir& dir) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("XDG_CONFIG_HOME", dir.path() + "/config");
  env.insert("HF_HOME", dir.path() + "/hf");
  env.insert("HOME", dir.path());
  return env;
}

}  // namespace

class ConfigTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    judge = new QProcess(this);
    // Its verdict lines carry the reasons; Accelerate's launch warnings on standard error are left out.
    judge->setStandardErrorFile(QProcess::nullDevice());
    judge->start(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/accelerate_loader.py", "--serve"});
    QVERIFY2(judge->waitForStarted(), qPrintable(judge->errorString()));
  }

  void cleanupTestCase() {
    judge->closeWriteChannel();  // the loader ends with its input
    if (!judge->waitForFinished(10000)) judge->kill();
    judge->waitForFinished(1000);
  }

  void accelerate_fixtures_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<bool>("accepted");
    QFile expected(SPUR_FIXTURES_DIR "/configs/EXPECTED.tsv");
    QVERIFY(expected.open(QIODevice::ReadOnly));
    for (const auto& line : QString::fromUtf8(expected.readAll()).split('\n', Qt::SkipEmptyParts)) {
      const auto fields = line.split('\t');
      QTest::newRow(qPrintable(fields[0])) << fields[0] << (fields[1].trimmed() == "true");
    }
  }

  // Every fixture: Accelerate itself (the installed, pinned package) and `spur config validate` give the verdict
  // recorded from Accelerate in EXPECTED.tsv.
  void accelerate_fixtures() {
    QFETCH(QString, file);
    QFETCH(bool, accepted);
    const QString path = SPUR_FIXTURES_DIR "/configs/" + file;
    QCOMPARE(accelerate_accepts(path), accepted);
    const auto result = spur_cli({"config", "validate", path});
    QVERIFY2((result.exit_code == 0) == accepted, qPrintable(result.output));
    if (!accepted) QVERIFY2(result.output.contains(path), qPrintable(result.output));  // names the file
    if (!accepted) return;
    // Round trip: what Spur writes back still passes Accelerate's rules and reads back the same.
    QTemporaryDir dir;
    const auto shown = spur_cli({"config", "show", "--config_file", path});
    QCOMPARE(shown.exit_code, 0);
    const QString copy = write(dir, "copy.yaml", shown.output.section('\n', 1));
    QVERIFY2(accelerate_accepts(copy), qPrintable(read(copy)));
    const auto again = spur_cli({"config", "show", "--config_file", copy});
    QCOMPARE(again.output.section('\n', 1), shown.output.section('\n', 1));
  }

  // Spur accepts exactly the top-level keys the pinned Accelerate's loader accepts (its config dataclasses), and a
  // key Accelerate has dropped is an error naming the version.
  void the_keys_are_accelerates() {
    const auto result = spur::test::run_process(
        SPUR_PEER_PYTHON,
        {"-c",
         "import dataclasses, json; from accelerate.commands.config.config_args import ClusterConfig, "
         "SageMakerConfig; print(json.dumps([sorted(f.name for f in dataclasses.fields(c)) for c in "
         "(ClusterConfig, SageMakerConfig)]))"},
        QProcessEnvironment::systemEnvironment(), 60000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    const auto lists = QJsonDocument::fromJson(result.output.trimmed().toUtf8()).array();
    QCOMPARE(lists.size(), 2);
    for (const bool sagemaker : {false, true}) {
      QStringList theirs;
      for (const auto& key : lists[sagemaker ? 1 : 0].toArray()) theirs << key.toString();
      QStringList ours;
      for (const auto& key : spur::app::RunConfig::known_keys(sagemaker)) ours << QString::fromStdString(key);
      ours.sort();
      QCOMPARE(ours, theirs);
    }
    QTemporaryDir dir;
    const QString path = write(dir, "old.yaml", "distributed_type: MULTI_CPU\nnum_processes: 2\nipex_config: {}\n");
    const auto old = spur_cli({"config", "validate", path});
    QVERIFY(old.exit_code != 0);
    QVERIFY2(old.output.contains(path + ":3: ipex_config: Accelerate 1.15 no longer accepts this key"),
             qPrintable(old.output));
    QVERIFY(!accelerate_accepts(path));
  }

  void errors_name_file_line_and_key_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    QTest::newRow("port out of range") << "distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: 70000\n"
                                       << ":3: main_process_port: 70000 is out of range";
    QTest::newRow("no processes") << "distributed_type: MULTI_CPU\nnum_processes: 0\n"
                                  << ":2: num_processes: 0 processes";
    QTest::newRow("unknown precision") << "distributed_type: 'NO'\nmixed_precision: fp64\n"
                                       << ":2: mixed_precision: 'fp64' is not one of no, fp16, bf16, fp8";
    QTest::newRow("unquoted no precision") << "distributed_type: 'NO'\nmixed_precision: no\n"
                                           << ":2: mixed_precision: unquoted no is the boolean false";
    QTest::newRow("not a number") << "distributed_type: MULTI_CPU\nnum_processes: two\n"
                                  << ":2: num_processes: must be an integer, not 'two'";
    QTest::newRow("machine rank") << "distributed_type: MULTI_CPU\nnum_machines: 2\nmachine_rank: 2\n"
                                  << ":3: machine_rank: 2 is out of range";
    QTest::newRow("malformed yaml") << "distributed_type: [MULTI_CPU\n"
                                    << ":2: not valid YAML";
    QTest::newRow("unknown key") << "distributed_type: MULTI_CPU\nhosts: a,b\n"
                                 << ":2: hosts: unknown key";
    QTest::newRow("sagemaker role") << "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\n"
                                       "ec2_instance_type: ml.m5.large\nmixed_precision: 'no'\n"
                                    << ": iam_role_name is missing";
    // Issue 12, defect 3: a self-referencing alias passed validate, then crashed launch; a billion-laughs file
    // grew without bound. validate judges what launch reads: both refuse them.
    QTest::newRow("recursive alias") << "distributed_type: MULTI_CPU\ndeepspeed_config: &x {y: *x}\n"
                                     << ":2: anchors (&name) are not accepted";
    QString laughs = "distributed_type: MULTI_CPU\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
    for (char c = 'b'; c <= 'j'; ++c) {
      laughs += QString("%1: &%1 [*%2, *%2, *%2, *%2, *%2, *%2, *%2, *%2, *%2]\n").arg(QChar(c)).arg(QChar(c - 1));
    }
    QTest::newRow("billion laughs") << laughs << ":2: anchors (&name) are not accepted";
    // Found by tests/fuzz/fuzz_config: yaml-cpp yields documents for ever from a lone comma; validate hung.
    QTest::newRow("a mapping as a key") << "{{}}"
                                        << ":1: a key must be a name";
    QTest::newRow("a nested mapping as a key") << "distributed_type: MULTI_CPU\nfsdp_config:\n  ? {a: 1}\n  : 2\n"
                                               << ":3: a key must be a name";
    QTest::newRow("a custom tag") << "distributed_type: 'NO'\ndowncast_bf16: !false\n"
                                  << ":2: the tag !false is not one of YAML's own";
    QTest::newRow("a control character") << QString("distributed_type: 'NO'\nnum_processes: 8") + QChar(0) + "\n"
                                         << ":2: control character 0x00";
    QTest::newRow("an empty key in a flow mapping")
        << "{\"distributed_type\": \"NO\",\n\"downcast_bf16\": \n\n:\n,\n}\n"
        << ":4: a key must be a name, not empty";
    QTest::newRow("an empty key") << "distributed_type: 'NO'\n\"\": 1\n"
                                  << ":2: a key must be a name, not empty";
    QTest::newRow("a lone comma") << ","
                                  << ": a configuration is a mapping of keys to values";
    QTest::newRow("deep nesting") << "distributed_type: MULTI_CPU\ndeepspeed_config: " + QString(100, '[') +
                                         QString(100, ']') + "\n"
                                  << ":2: nested deeper than 64 levels";
  }

  // Issue 12, defects 3 and 12: launch refuses what validate refuses, and files that are not configurations are
  // named for what they are instead of hanging (a FIFO) or reading without end (/dev/zero).
  void launch_and_validate_agree_on_odd_files() {
    QTemporaryDir dir;
    const QString alias =
        write(dir, "alias.yaml", "distributed_type: MULTI_CPU\nnum_processes: 2\ndeepspeed_config: &x {y: *x}\n");
    for (const QStringList& command :
         {QStringList{"config", "validate", alias}, QStringList{"config", "show", "--config_file", alias},
          QStringList{"launch", "--config_file", alias, "/bin/true"}}) {
      const auto result = spur_cli(command);
      QVERIFY2(result.exit_code != 0 && !result.crashed && result.output.contains(alias + ":3: anchors"),
               qPrintable(command.join(' ') + ": " + result.output));
    }
    QVERIFY(::mkfifo(dir.filePath("fifo").toLocal8Bit().constData(), 0600) == 0);
    const QList<QPair<QString, QString>> odd{{dir.path(), "is a directory"},
                                             {dir.filePath("fifo"), "is not a regular file"},
                                             {"/dev/zero", "is not a regular file"},
                                             {dir.filePath("missing.yaml"), "No such file or directory"}};
    for (const auto& [path, message] : odd) {
      const auto result = spur_cli({"config", "validate", path});
      QVERIFY2(result.exit_code != 0 && result.output.contains(path + ": ") && result.output.contains(message),
               qPrintable(path + ": " + result.output));
    }
    const QString big = write(dir, "big.yaml", "distributed_type: MULTI_CPU\n# " + QString(2 << 20, 'x') + "\n");
    const auto result = spur_cli({"config", "validate", big});
    QVERIFY2(result.exit_code != 0 && result.output.contains("a run configuration is at most 1048576 bytes"),
             qPrintable(result.output));
  }

  void errors_name_file_line_and_key() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QString path = write(dir, "bad.yaml", text);
    const auto result = spur_cli({"config", "validate", path});
    QVERIFY(result.exit_code != 0);
    QVERIFY2(result.output.contains(path + expected), qPrintable(result.output));
  }

  void default_config_is_what_accelerate_writes() {
    QTemporaryDir dir;
    const auto env = isolated(dir);
    auto result = spur_cli({"config", "default", "--mixed_precision", "bf16"}, env);
    QCOMPARE(result.exit_code, 0);
    const QString path = dir.path() + "/config/spur/default_config.yaml";
    QVERIFY2(result.output.contains(path), qPrintable(result.output));
    // Issue 12, private files: a new configuration and the folders made for it are the owner's only.
    QCOMPARE(QFileInfo(path).permissions() & QFileDevice::Permissions(0x7077),
             QFileDevice::ReadOwner | QFileDevice::WriteOwner);
    QCOMPARE(QFileInfo(dir.path() + "/config/spur").permissions() & QFileDevice::Permissions(0x7077),
             QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    QVERIFY2(accelerate_accepts(path), qPrintable(read(path)));
    QVERIFY(read(path).contains("mixed_precision: bf16"));
    QVERIFY(read(path).contains("distributed_type: 'NO'"));  // quoted, as Accelerate's writer does
    // JSON as `accelerate config default` writes it.
    result = spur_cli({"config", "default", "--config_file", dir.path() + "/c.json"}, env);
    QVERIFY2(accelerate_accepts(dir.path() + "/c.json"), qPrintable(read(dir.path() + "/c.json")));
    // `show` finds the default file by itself.
    result = spur_cli({"config", "show"}, env);
    QVERIFY2(result.output.startsWith("# " + path), qPrintable(result.output));
    // Issue 12, defect 9: an existing file is kept without --force (as `accelerate config default`), and no
    // configuration is written through a symbolic link.
    const QByteArray before = read(path).toUtf8();
    result = spur_cli({"config", "default", "--mixed_precision", "no"}, env);
    QVERIFY2(result.exit_code != 0 && result.output.contains("a configuration already exists at " + path) &&
                 result.output.contains("--force"),
             qPrintable(result.output));
    QCOMPARE(read(path).toUtf8(), before);
    result = spur_cli({"config", "default", "--mixed_precision", "no", "--force"}, env);
    QCOMPARE(result.exit_code, 0);
    QVERIFY(read(path).contains("mixed_precision: 'no'") || read(path).contains("mixed_precision: no"));
    const QString victim = dir.filePath("victim.txt");
    QFile file(victim);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("precious\n");
    file.close();
    QVERIFY(QFile::link(victim, dir.filePath("link.yaml")));
    result = spur_cli({"config", "default", "--force", "--config_file", dir.filePath("link.yaml")}, env);
    QVERIFY2(result.exit_code != 0 && result.output.contains("is a symbolic link"), qPrintable(result.output));
    QCOMPARE(read(victim), QString("precious\n"));
  }

  void accelerates_default_file_is_used_when_spur_has_none() {
    QTemporaryDir dir;
    const auto env = isolated(dir);
    QVERIFY(QDir().mkpath(dir.path() + "/hf/accelerate"));
    QVERIFY(QFile::copy(SPUR_FIXTURES_DIR "/configs/multi_cpu_1node_4proc.yaml",
                        dir.path() + "/hf/accelerate/default_config.yaml"));
    const auto result = spur_cli({"config", "show"}, env);
    QVERIFY2(result.output.startsWith("# " + dir.path() + "/hf/accelerate/default_config.yaml"),
             qPrintable(result.output));
    QVERIFY(result.output.contains("num_processes: 4"));
  }

  void keys_spur_does_not_act_on_survive_and_are_reported() {
    QTemporaryDir dir;
    const QString path = write(dir, "fsdp.yaml",
                               "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: "
                               "HYBRID_SHARD\n  nested:\n    list: [1, 2]\n");
    const auto result = spur_cli({"config", "show", "--config_file", path});
    QCOMPARE(result.exit_code, 0);
    QVERIFY(result.output.contains("fsdp_sharding_strategy: HYBRID_SHARD"));
    QVERIFY(result.output.contains("- 1"));
    QVERIFY2(result.output.contains("note: distributed_type FSDP with this fsdp_sharding_strategy: Spur's ZeRO runs "
                                    "stages 1 to 3"),
             qPrintable(result.output));
    QVERIFY2(result.output.contains("note: fsdp_config.nested ...: not acted on by Spur"), qPrintable(result.output));
    QVERIFY2(!result.output.contains("fsdp_config.fsdp_sharding_strategy"), qPrintable(result.output));
  }

  // Issue 17: DeepSpeed's and FSDP's settings, in the file or as flags, become the ranks' SPUR_ZERO_STAGE; what
  // Spur does not run is refused before anything starts, by name.
  void sharding_settings_reach_the_ranks_data() {
    QTest::addColumn<QString>("yaml");
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("expected");
    const QString two = "num_processes: 2\n";
    QTest::newRow("deepspeed stage 1") << "distributed_type: DEEPSPEED\n" + two + "deepspeed_config:\n  zero_stage: 1\n"
                                       << QStringList{} << "SPUR_ZERO_STAGE=1";
    QTest::newRow("deepspeed default") << "distributed_type: DEEPSPEED\n" + two << QStringList{} << "SPUR_ZERO_STAGE=2";
    QTest::newRow("fsdp shard_grad_op") << "distributed_type: FSDP\n" + two +
                                               "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
                                        << QStringList{} << "SPUR_ZERO_STAGE=2";
    QTest::newRow("plain: not set") << "distributed_type: MULTI_CPU\n" + two << QStringList{} << "!SPUR_ZERO_STAGE";
    QTest::newRow("fsdp2 keeping parameters")
        << "distributed_type: FSDP\n" + two + "fsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n"
        << QStringList{} << "SPUR_ZERO_STAGE=2";
    QTest::newRow("fsdp2 flag") << "distributed_type: MULTI_CPU\n" + two
                                << QStringList{"--use_fsdp", "--fsdp_reshard_after_forward", "false"}
                                << "SPUR_ZERO_STAGE=2";
    QTest::newRow("flags") << "distributed_type: MULTI_CPU\n" + two
                           << QStringList{"--use_deepspeed", "--zero_stage", "1"} << "SPUR_ZERO_STAGE=1";
    QTest::newRow("fsdp flag") << "distributed_type: MULTI_CPU\n" + two
                               << QStringList{"--use_fsdp", "--fsdp_sharding_strategy", "shard_grad_op"}
                               << "SPUR_ZERO_STAGE=2";
    // Issue 37: stage 3 runs (FSDP's default strategy, FULL_SHARD; FSDP2's resharding; DeepSpeed's zero_stage 3).
    QTest::newRow("fsdp default is stage 3")
        << "distributed_type: FSDP\n" + two << QStringList{} << "SPUR_ZERO_STAGE=3";
    QTest::newRow("fsdp2 resharding") << "distributed_type: FSDP\n" + two +
                                             "fsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: true\n"
                                      << QStringList{} << "SPUR_ZERO_STAGE=3";
    QTest::newRow("deepspeed stage 3") << "distributed_type: DEEPSPEED\n" + two + "deepspeed_config:\n  zero_stage: 3\n"
                                       << QStringList{} << "SPUR_ZERO_STAGE=3";
    QTest::newRow("zero_stage 3 flag") << "distributed_type: MULTI_CPU\n" + two << QStringList{"--zero_stage", "3"}
                                       << "SPUR_ZERO_STAGE=3";
    QTest::newRow("full_shard flag") << "distributed_type: MULTI_CPU\n" + two
                                     << QStringList{"--use_fsdp", "--fsdp_sharding_strategy", "FULL_SHARD"}
                                     << "SPUR_ZERO_STAGE=3";
    QTest::newRow("hybrid flag") << "distributed_type: MULTI_CPU\n" + two
                                 << QStringList{"--use_fsdp", "--fsdp_sharding_strategy", "HYBRID_SHARD"}
                                 << "--fsdp_sharding_strategy HYBRID_SHARD: Spur runs FULL_SHARD";
    QTest::newRow("both") << "distributed_type: MULTI_CPU\n" + two << QStringList{"--use_deepspeed", "--use_fsdp"}
                          << "give --use_deepspeed (--zero_stage) or --use_fsdp, not both";
  }
  void sharding_settings_reach_the_ranks() {
    QFETCH(QString, yaml);
    QFETCH(QStringList, flags);
    QFETCH(QString, expected);
    const auto result = dry_run(yaml, flags);
    if (expected.startsWith('!')) {
      QCOMPARE(result.exit_code, 0);
      QVERIFY2(result.output.contains("RANK=1") && !result.output.contains(expected.mid(1)), qPrintable(result.output));
      return;
    }
    QVERIFY2(result.output.contains(expected), qPrintable(result.output));
    QCOMPARE(result.exit_code == 0, expected.startsWith("SPUR_ZERO_STAGE="));
  }

  // FSDP's state_dict_type (how stage 3 checkpoints the weights) reaches the ranks as FSDP_STATE_DICT_TYPE, as
  // `accelerate launch` sets it: from fsdp_config.fsdp_state_dict_type, from the flag, or FSDP2's default
  // (SHARDED_STATE_DICT); LOCAL_STATE_DICT and unknown names are refused by name before anything starts.
  void state_dict_type_reaches_the_ranks_data() {
    QTest::addColumn<QString>("yaml");
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("expected");
    QTest::addColumn<bool>("launches");
    const QString fsdp = "distributed_type: FSDP\nnum_processes: 2\n";
    QTest::newRow("fsdp1: none set") << fsdp << QStringList{} << "!FSDP_STATE_DICT_TYPE" << true;
    QTest::newRow("sharded in the file") << fsdp + "fsdp_config:\n  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
                                         << QStringList{} << "FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT" << true;
    QTest::newRow("fsdp2's default") << fsdp + "fsdp_config:\n  fsdp_version: 2\n"
                                     << QStringList{} << "FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT" << true;
    QTest::newRow("fsdp2, full in the file")
        << fsdp + "fsdp_config:\n  fsdp_version: 2\n  fsdp_state_dict_type: FULL_STATE_DICT\n"
        << QStringList{} << "FSDP_STATE_DICT_TYPE=FULL_STATE_DICT" << true;
    QTest::newRow("the flag, by number") << fsdp << QStringList{"--fsdp_state_dict_type", "3"}
                                         << "FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT" << true;
    QTest::newRow("local refused") << fsdp + "fsdp_config:\n  fsdp_state_dict_type: LOCAL_STATE_DICT\n"
                                   << QStringList{}
                                   << "fsdp_config.fsdp_state_dict_type LOCAL_STATE_DICT: Spur writes FULL_STATE_DICT "
                                      "or SHARDED_STATE_DICT"
                                   << false;
    QTest::newRow("unknown flag value") << fsdp << QStringList{"--fsdp_state_dict_type", "HALF"}
                                        << "--fsdp_state_dict_type HALF: Spur writes" << false;
  }
  void state_dict_type_reaches_the_ranks() {
    QFETCH(QString, yaml);
    QFETCH(QStringList, flags);
    QFETCH(QString, expected);
    QFETCH(bool, launches);
    const auto result = dry_run(yaml, flags);
    check_plan(result, expected, launches);
    if (QTest::currentTestFailed() || expected.startsWith('!')) return;
    QVERIFY2(!result.output.contains("fsdp_state_dict_type") || !launches, qPrintable(result.output));  // no note
  }

  // Issue 38: `--ddp_comm_hook` reaches every rank as SPUR_DDP_COMM_HOOK; unknown names, PowerSGD and a hook with
  // ZeRO stage 2 or 3 are refused by name before anything starts.
  void comm_hook_reaches_the_ranks_data() {
    QTest::addColumn<QString>("yaml");
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("expected");
    QTest::addColumn<bool>("launches");
    const QString multi = "distributed_type: MULTI_CPU\nnum_processes: 2\n";
    QTest::newRow("none") << multi << QStringList{} << "!SPUR_DDP_COMM_HOOK" << true;
    QTest::newRow("fp16") << multi << QStringList{"--ddp_comm_hook", "fp16"} << "SPUR_DDP_COMM_HOOK=fp16" << true;
    QTest::newRow("bf16, any case") << multi << QStringList{"--ddp-comm-hook", "BF16"} << "SPUR_DDP_COMM_HOOK=bf16"
                                    << true;
    QTest::newRow("no, over the environment's")
        << multi << QStringList{"--ddp_comm_hook", "no"} << "SPUR_DDP_COMM_HOOK=no" << true;
    QTest::newRow("with ZeRO stage 1") << multi
                                       << QStringList{"--use_deepspeed", "--zero_stage", "1", "--ddp_comm_hook", "fp16"}
                                       << "SPUR_DDP_COMM_HOOK=fp16" << true;
    QTest::newRow("unknown") << multi << QStringList{"--ddp_comm_hook", "fp8"}
                             << "--ddp_comm_hook 'fp8' is not a communication hook: no, fp16, bf16" << false;
    QTest::newRow("PowerSGD") << multi << QStringList{"--ddp_comm_hook", "power_sgd"}
                              << "--ddp_comm_hook 'power_sgd' (PowerSGD) is Accelerate's but Spur does not run it yet"
                              << false;
    QTest::newRow("with ZeRO stage 2")
        << multi << QStringList{"--use_deepspeed", "--zero_stage", "2", "--ddp_comm_hook", "bf16"}
        << "--ddp_comm_hook bf16: the bf16 communication hook compresses DDP's gradient buckets, and ZeRO stage 2"
        << false;
  }
  void comm_hook_reaches_the_ranks() {
    QFETCH(QString, yaml);
    QFETCH(QStringList, flags);
    QFETCH(QString, expected);
    QFETCH(bool, launches);
    check_plan(dry_run(yaml, flags), expected, launches);
  }

  // Found by fuzz_config in CI: a CR before a comma in a flow mapping stayed in the plain value ("static\r"), which
  // then read back without it. CR LF, CR and LF are each one line break, as YAML (and PyYAML) read them.
  void carriage_returns_are_line_breaks() {
    for (const std::string& text :
         {std::string("{\"distributed_type\": \"NO\",\n \"rdzv_backend\": nt\"static\r,\n \"num_processes\": 1}\n"),
          std::string("distributed_type: 'NO'\r\nrdzv_backend: nt\"static\r\nnum_processes: 1\r\n"),
          std::string("distributed_type: 'NO'\rrdzv_backend: nt\"static\rnum_processes: 1\r")}) {
      const auto config = spur::app::RunConfig::parse(text, "cr.yaml");
      QCOMPARE(QString::fromStdString(config.text("rdzv_backend", "")), QString("nt\"static"));
      QCOMPARE(config.num_processes(), 1);
      const std::string yaml = config.to_yaml();
      QCOMPARE(spur::app::RunConfig::parse(yaml, "written.yaml").to_yaml(), yaml);
    }
  }

  // Found by fuzz_config in CI (corpus regression-nested-null-map): a mapping holding only empty values
  // (`downcast_bf16:\n  on:`) was written as `{}` and read back as nothing, so the written file changed when written
  // again. Such mappings are left out, as empty values are.
  void mappings_of_nothing_are_left_out() {
    for (const std::string& text :
         {std::string("distributed_type: 'NO'\ndowncast_bf16: \n  on: \n"),
          std::string("distributed_type: 'NO'\ndeepspeed_config:\n  a:\n    b: ~\n  c: {}\n")}) {
      const auto config = spur::app::RunConfig::parse(text, "nested.yaml");
      const std::string yaml = config.to_yaml();
      QVERIFY2(yaml.find("{}") == std::string::npos, yaml.c_str());
      QCOMPARE(spur::app::RunConfig::parse(yaml, "written.yaml").to_yaml(), yaml);
    }
  }

  void sagemaker_no_round_trips() {
    // Accelerate cannot load back the SageMaker file its own questionnaire writes with distributed_type NO.
    QTemporaryDir dir;
    const QString path = write(dir, "sm.yaml",
                               "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\nec2_instance_type: "
                               "ml.m5.large\niam_role_name: role\nmixed_precision: 'no'\n");
    const auto shown = spur_cli({"config", "show", "--config_file", path});
    QCOMPARE(shown.exit_code, 0);
    const QString copy = write(dir, "copy.yaml", shown.output.section('\n', 1));
    QCOMPARE(spur_cli({"config", "validate", copy}).exit_code, 0);
    QVERIFY(!read(copy).contains("num_processes"));
  }

  void the_questionnaire_writes_the_answers() {
    QTemporaryDir dir;
    QProcess spur;
    spur.setProcessEnvironment(isolated(dir));
    spur.setProcessChannelMode(QProcess::MergedChannels);
    const QString path = dir.path() + "/asked.yaml";
    spur.start(SPUR_CLI, {"config", "--config_file", path});
    QVERIFY(spur.waitForStarted());
    // this machine, multi-CPU, 2 machines, rank 1, main at 10.0.0.5, port 29600, same network, 3 per machine,
    // a wrong precision first (asked again), then bf16.
    spur.write("this_machine\nMULTI_CPU\n2\n1\n10.0.0.5\n29600\nyes\n3\nfp64\nbf16\n");
    spur.closeWriteChannel();
    QVERIFY(spur.waitForFinished(30000));
    const QString output = QString::fromUtf8(spur.readAll());
    QVERIFY2(spur.exitCode() == 0, qPrintable(output));
    QVERIFY2(output.contains("answer one of no/fp16/bf16"), qPrintable(output));
    const QString text = read(path);
    for (const char* expected : {"distributed_type: MULTI_CPU", "num_machines: 2", "machine_rank: 1",
                                 "main_process_ip: 10.0.0.5", "main_process_port: 29600", "num_processes: 6",
                                 "mixed_precision: bf16", "use_cpu: true", "same_network: true"}) {
      QVERIFY2(text.contains(expected), qPrintable(expected + QString(" missing in:\n") + text));
    }
    QVERIFY(accelerate_accepts(path));
  }

  void the_questionnaire_writes_a_sagemaker_config() {
    QTemporaryDir dir;
    QProcess spur;
    spur.setProcessEnvironment(isolated(dir));
    spur.setProcessChannelMode(QProcess::MergedChannels);
    const QString path = dir.path() + "/sagemaker.yaml";
    spur.start(SPUR_CLI, {"config", "--config_file", path});
    QVERIFY(spur.waitForStarted());
    // SageMaker, data parallel, region, role, profile, no input channels, a metrics file, the image, a wrong
    // instance type first, 2 instances, bf16.
    spur.write(
        "sagemaker\nDATA_PARALLEL\neu-west-1\nspur-role\nresearch\n\nmetrics.tsv\n"
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/spur:1\nc5.xlarge\nml.c5.xlarge\n2\nbf16\n");
    spur.closeWriteChannel();
    QVERIFY(spur.waitForFinished(30000));
    const QString output = QString::fromUtf8(spur.readAll());
    QVERIFY2(spur.exitCode() == 0, qPrintable(output));
    QVERIFY2(output.contains("not a SageMaker instance type (ml.*)"), qPrintable(output));
    const QString text = read(path);
    for (const char* expected :
         {"compute_environment: AMAZON_SAGEMAKER", "distributed_type: DATA_PARALLEL", "region: eu-west-1",
          "iam_role_name: spur-role", "profile: research", "sagemaker_metrics_file: metrics.tsv",
          "ec2_instance_type: ml.c5.xlarge", "num_machines: 2", "mixed_precision: bf16",
          "image_uri: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/spur:1"}) {
      QVERIFY2(text.contains(expected), qPrintable(expected + QString(" missing in:\n") + text));
    }
    QVERIFY(!text.contains("sagemaker_inputs_file"));
    QVERIFY(accelerate_accepts(path));
  }

  void the_questionnaire_writes_a_slurm_target() {
    QTemporaryDir dir;
    QProcess spur;
    spur.setProcessEnvironment(isolated(dir));
    spur.setProcessChannelMode(QProcess::MergedChannels);
    const QString path = dir.path() + "/slurm.yaml";
    spur.start(SPUR_CLI, {"config", "--config_file", path});
    QVERIFY(spur.waitForStarted());
    // Slurm, GPUs, 2 nodes, 4 tasks, partition gpu, a time limit Slurm does not take first (asked again), then
    // 2:00:00, no account, no QOS, gpu:4, --exclusive, the default folder, a login node like an option (asked
    // again), then this machine, all GPUs, bf16, 1 restart.
    spur.write("slurm\nyes\n2\n4\ngpu\nsoon\n2:00:00\n\n\ngpu:4\n--exclusive\n\n-oProxyCommand=x\n\n\nbf16\n1\n");
    spur.closeWriteChannel();
    QVERIFY(spur.waitForFinished(30000));
    const QString output = QString::fromUtf8(spur.readAll());
    QVERIFY2(spur.exitCode() == 0, qPrintable(output));
    QVERIFY2(output.contains("Launch settings (a Slurm job of 2 node(s) x 4 task(s) in partition gpu) saved at " +
                             dir.path() + "/slurm.spur.yaml"),
             qPrintable(output));
    QVERIFY(accelerate_accepts(path));
    const QString text = read(path);
    for (const char* expected : {"distributed_type: MULTI_GPU", "num_machines: 2", "num_processes: 8"}) {
      QVERIFY2(text.contains(expected), qPrintable(expected + QString(" missing in:\n") + text));
    }
    // The file alone launches the job the answers describe.
    const auto dry = spur_cli({"launch", "--config_file", path, "--dry_run", "/opt/train"}, isolated(dir));
    QVERIFY2(dry.exit_code == 0, qPrintable(dry.output));
    for (const char* line : {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --partition=gpu",
                             "#SBATCH --time=2:00:00", "#SBATCH --gres=gpu:4", "#SBATCH --exclusive"}) {
      QVERIFY2(dry.output.contains(line), qPrintable(line + QString(" missing in:\n") + dry.output));
    }
    QVERIFY2(dry.output.contains("[ \"$attempt\" -ge 1 ]"), qPrintable(dry.output));  // one restart
  }

  // Spur's target file is judged as the configuration is: bad input names the file, the line and the key, and
  // `spur config validate` and `spur launch` say the same.
  void target_file_errors_name_file_line_and_key_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    QTest::newRow("unknown key") << "target: ssh\nhosts: [a]\nport: 22\n"
                                 << ":3: port: not a launch setting Spur knows";
    QTest::newRow("another target's key") << "target: ssh\nhosts: [a]\npartition: gpu\n"
                                          << ":3: partition: not a setting of a ssh target";
    QTest::newRow("unknown target") << "target: cloud\n"
                                    << ":1: target: 'cloud' is not a target";
    QTest::newRow("not a count") << "target: slurm\nnodes: two\n"
                                 << ":2: nodes: 'two' is not a whole number";
    QTest::newRow("a host like an option") << "target: ssh\nhosts: [a, -oProxyCommand=x]\n"
                                           << ":2: hosts: ";
    QTest::newRow("ssh without hosts") << "target: ssh\nmax_restarts: 1\n"
                                       << "an ssh target needs hosts";
    QTest::newRow("a time Slurm refuses") << "target: slurm\ntime: soon\n"
                                          << ":2: time: ";
    QTest::newRow("a bad variable name") << "env:\n  1X: y\n"
                                         << ":2: env: 1X: ";
    QTest::newRow("not YAML") << "target: [\n"
                              << "not YAML";
    QTest::newRow("a switch that is not") << "target: slurm\ndetach: maybe\n"
                                          << ":2: detach: 'maybe' is not";
    QTest::newRow("a machine to launch on like an option") << "target: slurm\non: -oProxyCommand=x\n"
                                                           << ":2: on: ";
    QTest::newRow("launching SageMaker from elsewhere") << "target: sagemaker\non: login1\n"
                                                        << ":2: on: not a setting of a sagemaker target";
  }
  void target_file_errors_name_file_line_and_key() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QString config = write(dir, "run.yaml", QString::fromStdString(spur::app::RunConfig::defaults().to_yaml()));
    const QString target = write(dir, "run.spur.yaml", text);
    const auto validate = spur_cli({"config", "validate", config}, isolated(dir));
    QVERIFY2(validate.exit_code != 0 && validate.output.contains(target) && validate.output.contains(expected),
             qPrintable(validate.output));
    QVERIFY2(!validate.output.contains(": valid"), qPrintable(validate.output));
    const auto launch = spur_cli({"launch", "--config_file", config, "--dry_run", "/bin/true"}, isolated(dir));
    QVERIFY2(launch.exit_code == 2 && launch.output.contains(target + ":") && launch.output.contains(expected),
             qPrintable(launch.output));
  }

  // The command line's flags win over the file's: the same flag, the same variable, or another target.
  void command_line_flags_win_over_the_target_file_data() {
    using W = spur::app::LaunchTarget::Where;
    QTest::addColumn<int>("where");
    QTest::addColumn<QStringList>("file");
    QTest::addColumn<QStringList>("given");
    QTest::addColumn<QStringList>("expected");
    QTest::newRow("the file alone") << int(W::Ssh) << QStringList{"--hosts", "a,b"} << QStringList{}
                                    << QStringList{"--hosts", "a,b"};
    QTest::newRow("the same flag") << int(W::Slurm) << QStringList{"--nodes", "2", "--partition", "gpu"}
                                   << QStringList{"--partition", "debug"}
                                   << QStringList{"--slurm", "--nodes", "2", "--partition", "debug"};
    QTest::newRow("with dashes and =") << int(W::Local) << QStringList{"--max_restarts", "2", "--hang_timeout", "60"}
                                       << QStringList{"--max-restarts=0"}
                                       << QStringList{"--hang_timeout", "60", "--max-restarts=0"};
    QTest::newRow("hosts replace a Slurm target")
        << int(W::Slurm) << QStringList{"--nodes", "2", "--time", "10", "--env", "A=1"} << QStringList{"--hosts", "x"}
        << QStringList{"--env", "A=1", "--hosts", "x"};
    QTest::newRow("--slurm replaces hosts")
        << int(W::Ssh) << QStringList{"--hosts", "a", "--ssh_config", "/c", "--max_restarts", "1"}
        << QStringList{"--slurm"} << QStringList{"--max_restarts", "1", "--slurm"};
    QTest::newRow("a variable by its name") << int(W::Local) << QStringList{"--env", "A=1", "--env", "B=2"}
                                            << QStringList{"--env=A=3"} << QStringList{"--env", "B=2", "--env=A=3"};
  }
  void command_line_flags_win_over_the_target_file() {
    QFETCH(int, where);
    QFETCH(QStringList, file);
    QFETCH(QStringList, given);
    QFETCH(QStringList, expected);
    spur::app::LaunchTarget target;
    target.where = static_cast<spur::app::LaunchTarget::Where>(where);
    target.flags = file;
    QCOMPARE(spur::app::merge_launch_flags(target, given), expected);
  }

  // What the wizard saves for SSH and Slurm (a configuration and its target file) launches headless as the Studio
  // launches it: `spur launch --config_file F PROGRAM` plans the same as the flags the Studio used to add, the file
  // reads back into the same answers, and Accelerate's loader still accepts the configuration.
  void saved_targets_launch_headless_data() {
    using Where = spur::app::SetupAnswers::Where;
    QTest::addColumn<int>("where");
    QTest::addColumn<QStringList>("expected");
    QTest::newRow("ssh") << int(Where::Ssh)
                         << QStringList{"8 process(es) over 2 machine(s) over SSH; rendezvous at gpu1:29600", "[gpu1]",
                                        "[alice@gpu2]", "NCCL_DEBUG=INFO"};
    QTest::newRow("slurm") << int(Where::Slurm) << QStringList{"#SBATCH --nodes=2",       "#SBATCH --ntasks-per-node=4",
                                                               "#SBATCH --partition=gpu", "#SBATCH --time=2:00:00",
                                                               "#SBATCH --gres=gpu:4",    "NCCL_DEBUG=INFO"};
  }
  void saved_targets_launch_headless() {
    QFETCH(int, where);
    QFETCH(QStringList, expected);
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.where = static_cast<spur::app::SetupAnswers::Where>(where);
    answers.distributed_type = "MULTI_GPU";
    answers.use_cpu = false;
    answers.hosts = {"gpu1", "alice@gpu2"};
    answers.num_machines = 2;
    answers.processes_per_machine = 4;
    answers.main_process_port = 29600;
    answers.slurm.partition = "gpu";
    answers.slurm.time = "2:00:00";
    answers.slurm.gres = "gpu:4";
    answers.environment = {{"NCCL_DEBUG", "INFO"}};
    answers.max_restarts = 1;
    answers.working_directory = dir.path();
    answers.program = "/opt/train";
    const QString path = dir.filePath("saved.yaml");
    // As the wizard's Finish saves.
    answers.target().save_for(path);
    answers.to_config(path.toStdString()).save(path.toStdString());
    QVERIFY(QFileInfo::exists(dir.filePath("saved.spur.yaml")));
    QCOMPARE(QFileInfo(dir.filePath("saved.spur.yaml")).permissions() & QFileDevice::Permissions(0x0077),
             QFileDevice::Permissions());
    QVERIFY2(accelerate_accepts(path), qPrintable(read(path)));
    // The Studio's Launch is this request: the file and the program, nothing else.
    const auto request = answers.launch_request(path);
    QCOMPARE(request.flags, QStringList{});
    auto dry = request;
    dry.flags << "--dry_run";
    const auto from_file = spur_cli(dry.spur_arguments(), isolated(dir));
    QVERIFY2(from_file.exit_code == 0, qPrintable(from_file.output));
    for (const auto& line : expected) {
      QVERIFY2(from_file.output.contains(line), qPrintable(line + " missing in:\n" + from_file.output));
    }
    // The same plan as the settings given as flags (the Studio's launches before target files), but for the
    // job's folder stamp and the stream key, which each launch draws anew.
    auto flags = answers.launch_request(path, /*with_target=*/true);
    flags.flags << "--dry_run";
    QFile::rename(dir.filePath("saved.spur.yaml"), dir.filePath("away.yaml"));
    const auto from_flags = spur_cli(flags.spur_arguments(), isolated(dir));
    QFile::rename(dir.filePath("away.yaml"), dir.filePath("saved.spur.yaml"));
    const auto normal = [](QString text) {
      text.replace(QRegularExpression(R"(-\d{8}-\d{6}-\d{3})"), "-STAMP");
      text.replace(QRegularExpression(R"(SPUR_STREAM_KEY=\S+)"), "SPUR_STREAM_KEY=KEY");
      text.remove(QRegularExpression(R"(launch settings: [^\n]*\n)"));
      return text;
    };
    QCOMPARE(normal(from_file.output), normal(from_flags.output));
    // Opened again (the Studio's Open, Launch), the file gives back the answers.
    const auto target = spur::app::LaunchTarget::load_for(path);
    QVERIFY(target);
    const auto again = spur::app::SetupAnswers::from_config(spur::app::RunConfig::load(path.toStdString()),
                                                            spur::app::SetupAnswers{}, &*target);
    QCOMPARE(int(again.where), where);
    QCOMPARE(again.target().launch_flags(), answers.target().launch_flags());
    QCOMPARE(again.num_machines, 2);
    QCOMPARE(again.processes_per_machine, 4);
    QVERIFY(!again.use_cpu);
  }
};

SPUR_TEST_CLASS(ConfigTest)
#include "config_test.moc"
