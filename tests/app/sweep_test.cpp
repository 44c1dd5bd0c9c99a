// SPDX-License-Identifier: Apache-2.0
// Sweeps (app/sweep/, `spur sweep`): the expansion against W&B's own controller (tests/fixtures/sweeps, made by
// the `sweeps` library: grid order, Hyperband's decisions), random draws reproducible from a seed and inside their
// distributions, the command line W&B's agent writes, every bad file refused with its file and line, and sweeps run
// headless as a user runs them: every point launched through `spur launch` and recorded with its parameters and
// tags, a failed run counted while the sweep goes on, stop and resume, Hyperband stopping the worse runs of a
// synthetic metric.
#include <signal.h>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>
#include <set>

#include <spur/history/reader.h>
#include <spur/json.h>

#include "../../examples/common/example_flags.h"
#include "rank_group.h"
#include "sweep/hyperband.h"
#include "sweep/sweep_form.h"
#include "sweep/sweep_runner.h"
#include "sweep/sweep_spec.h"
#include "test_main.h"

namespace {

using spur::app::SweepError;
using spur::app::SweepSpec;
namespace json = spur::json;

json::Value fixtures() {
  QFile file(SPUR_FIXTURES_DIR "/sweeps/wandb_sweeps.json");
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read the sweep fixtures");
  return json::parse(file.readAll().toStdString());
}

// The same value and the same kind: an integer is not a float (--q=0 and --q=0.0 are different command lines).
bool same_value(const json::Value& a, const json::Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double() && a.is_int() == b.is_int();
  return json::write(a) == json::write(b);
}

void write_file(const QString& path, const QByteArray& text) {
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
  file.write(text);
}

// A sweep whose runs succeed only when SWEEP_SECRET reached them (matched by a pattern, not the value itself) (outside
// this class: moc misreads some raw strings).
const char* secret_sweep() {
  return "name: secret\n"
         "method: grid\n"
         "command:\n"
         "  - /bin/sh\n"
         "  - -c\n"
         "  - case \"$SWEEP_SECRET\" in hunt?r2) exit 0;; *) exit 1;; esac\n"
         "  - ${args}\n"
         "parameters:\n"
         "  x:\n"
         "    values: [1, 2]\n";
}

}  // namespace

class SweepTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QProcessEnvironment env_;

  spur::test::RankResult spur(const QStringList& arguments, int timeout_ms = 120000) {
    return spur::test::run_process(SPUR_CLI, arguments, env_, timeout_ms);
  }
  QString sweep_file(const QString& name, const QByteArray& body) {
    QString path = dir_.filePath(name);
    write_file(path, "program: " SPUR_SWEEP_RIG "\n" + body);
    return path;
  }
  static QString sweep_id(const QString& output) {
    const auto match = QRegularExpression("spur sweep ([a-z0-9]{8})").match(output);
    return match.hasMatch() ? match.captured(1) : QString();
  }

 private slots:
  // The Studio's Sweep page (app::SweepForm): the lines typed become W&B's parameters, the file it writes is read
  // alike by Spur and by PyYAML (W&B's reader: 1e-05 written as 1.0e-05, a float there), a fault is named by the
  // line typed, and the launch runs the file with the run configuration's flags (not its run name).
  void the_studio_form_writes_a_sweep_file() {
    using Form = spur::app::SweepForm;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Form::parse_parameters("lr 0.1"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Form::parse_parameters("lr: 0.1,,0.2"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Form::parse_parameters("lr: 1 .. 2 lg"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Form::parse_parameters("lr: 1\nlr: 2"));
    try {
      Form::parse_parameters("# a comment\n\nlr: 0.1\n9lives: 1, 2");
      QFAIL("a name starting with a digit was taken");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(QString(e.what()).startsWith("line 4: "), e.what());
    }
    Form form;
    form.name = "lr search";
    form.method = "random";
    form.count = 6;
    form.seed = 3;
    form.parallel = 2;
    form.metric = "loss";
    form.hyperband = true;
    form.min_iter = 2;
    form.parameters = Form::parse_parameters(
        "lr: 1e-5 .. 1e-2 log\nbatch_size: 32, 64\ndropout: 0.1 .. 0.5\nsteps: 3 .. 9\noptimizer: adam, sgd\n"
        "fail: False");
    QCOMPARE(Form::parse_parameters(Form::parameters_text(form.parameters)).size(), size_t{6});
    // A path or a version with ".." is a constant, not a range; a plus sign is a number's.
    const auto constants = Form::parse_parameters("data: ../data\ntag: v1..v2\nwarmup: +0.5, 1");
    QCOMPARE(int(constants[0].kind), int(Form::Parameter::Kind::Constant));
    QCOMPARE(constants[1].values, QStringList{"v1..v2"});
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Form::parse_parameters("lr: 1 .. big"));
    Form plus;
    plus.parameters = constants;
    QVERIFY2(plus.to_yaml("./train", {}).contains("values: [0.5, 1]"), qPrintable(plus.to_yaml("./train", {})));
    const QString yaml = form.to_yaml("/opt/train", {"--data", "my data"});
    const auto spec = SweepSpec::parse(yaml.toStdString(), "sweep.yaml");
    QCOMPARE(spec.name, std::string("lr search"));
    QCOMPARE(spec.method, std::string("random"));
    QCOMPARE(*spec.run_cap, int64_t{6});
    QVERIFY(spec.early_terminate && spec.early_terminate->min_iter == 2);
    std::map<std::string, std::string> kinds;
    for (const auto& p : spec.parameters) kinds[p.name] = p.distribution;
    QCOMPARE(kinds, (std::map<std::string, std::string>{{"batch_size", "categorical"},
                                                        {"dropout", "uniform"},
                                                        {"fail", "constant"},
                                                        {"lr", "log_uniform_values"},
                                                        {"optimizer", "categorical"},
                                                        {"steps", "int_uniform"}}));
    const auto points = spec.points(std::nullopt, 3);
    QCOMPARE(points.size(), size_t{6});
    const auto words = spec.command_for(points.front());
    QCOMPARE(QString::fromStdString(words.at(0)), QString("/opt/train"));
    QCOMPARE(QString::fromStdString(words.at(2)), QString("my data"));
    QVERIFY(QString::fromStdString(words.at(3)).startsWith("--batch_size="));
    QCOMPARE(form.run_count("/opt/train", {}), int64_t{6});
    // PyYAML reads the numbers as numbers and the rest as text.
    QTemporaryDir dir;
    write_file(dir.filePath("sweep.yaml"), yaml.toUtf8());
    const auto read = spur::test::run_process(
        SPUR_PEER_PYTHON,
        {"-c",
         "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); p = d['parameters']; "
         "print(type(p['lr']['min']).__name__, type(p['steps']['max']).__name__, p['fail']['value'], "
         "p['optimizer']['values'], d['command'][3])",
         dir.filePath("sweep.yaml")},
        {}, 30000);
    QCOMPARE(read.output.trimmed(), QString("float int False ['adam', 'sgd'] --data"));

    // Faults, named by the line typed.
    Form grid;
    grid.parameters = Form::parse_parameters("lr: 0.1, 0.01\ndropout: 0.5 .. 0.1");
    QVERIFY2(grid.problem("./train", {}).startsWith("line 2: "), qPrintable(grid.problem("./train", {})));
    grid.parameters = Form::parse_parameters("lr: 0.1, 0.01\nwd: 0 .. 1 log");
    grid.method = "random";
    grid.count = 2;
    QVERIFY2(grid.problem("./train", {}).startsWith("line 2: "), qPrintable(grid.problem("./train", {})));
    grid.parameters = Form::parse_parameters("lr: 0.1, 0.01");
    QVERIFY2(grid.problem("./train", {"--lr", "3"}).contains("both fixed"),
             qPrintable(grid.problem("./train", {"--lr", "3"})));
    grid.count = 0;
    QVERIFY(!grid.problem("./train", {}).isEmpty());  // random needs a count
    grid.method = "grid";
    QCOMPARE(grid.problem("./train", {}), QString());
    QCOMPARE(grid.run_count("./train", {}), int64_t{2});
    QCOMPARE(grid.sweep_name("build/train.py"), QString("train-sweep"));

    // The launch: the file, the parallel count, then the configuration's launch flags.
    spur::app::LaunchRequest request;
    request.working_directory = "/work dir";
    request.config_file = "/cfg/run.yaml";
    request.flags = {"--run_name", "one run", "--env", "TOKEN=secret", "--max_restarts", "1"};
    request.history = "/h/history.db";
    request.program = "./train";
    grid.parallel = 3;
    const auto launch = grid.launch("/cfg/train-sweep.sweep.yaml", request);
    QCOMPARE(launch.arguments,
             (QStringList{"sweep", "run", "/cfg/train-sweep.sweep.yaml", "--parallel", "3", "--", "--config_file",
                          "/cfg/run.yaml", "--env", "TOKEN=secret", "--max_restarts", "1"}));
    QCOMPARE(launch.command_line("spur"),
             QString("cd '/work dir' && SPUR_HISTORY=/h/history.db spur sweep run /cfg/train-sweep.sweep.yaml "
                     "--parallel 3 -- --config_file /cfg/run.yaml --env TOKEN=secret --max_restarts 1"));
  }

  void initTestCase() {
    QVERIFY(dir_.isValid());
    env_ = QProcessEnvironment::systemEnvironment();
    env_.insert("SPUR_HISTORY", dir_.filePath("history.db"));
    env_.insert("XDG_CONFIG_HOME", dir_.filePath("config"));
    env_.insert("HF_HOME", dir_.filePath("hf"));
    qputenv("SPUR_HISTORY", dir_.filePath("history.db").toUtf8());
  }

  void grid_order_is_wandbs_data() {
    QTest::addColumn<int>("which");
    const json::Value all = fixtures();
    const auto& cases = all.at("grids").as_array();
    for (size_t i = 0; i < cases.size(); ++i)
      QTest::newRow(("grid " + std::to_string(i)).c_str()) << static_cast<int>(i);
  }
  void grid_order_is_wandbs() {
    QFETCH(int, which);
    const json::Value all = fixtures();
    const auto& c = all.at("grids").as_array()[static_cast<size_t>(which)];
    const auto spec = SweepSpec::parse("program: train\n" + c.at("file").as_string(), "grid.yaml");
    const auto points = spec.grid();
    const auto& expected = c.at("points").as_array();
    QCOMPARE(points.size(), expected.size());
    for (size_t i = 0; i < points.size(); ++i) {
      const auto& want = expected[i].as_object();
      QCOMPARE(points[i].size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        QCOMPARE(points[i][k].first, want[k].first);
        QVERIFY2(same_value(points[i][k].second, want[k].second),
                 (std::to_string(i) + " " + want[k].first + ": " + json::write(points[i][k].second) + " vs W&B's " +
                  json::write(want[k].second))
                     .c_str());
      }
    }
  }

  void hyperband_stops_what_wandb_stops() {
    int cases = 0, stopped = 0;
    const json::Value all = fixtures();
    for (const auto& c : all.at("hyperband").as_array()) {
      spur::app::Hyperband h;
      const auto& et = c.at("early_terminate");
      if (const auto* v = et.find("min_iter")) h.min_iter = v->as_int();
      if (const auto* v = et.find("max_iter")) h.max_iter = v->as_int();
      if (const auto* v = et.find("s")) h.s = v->as_double();
      if (const auto* v = et.find("eta")) h.eta = v->as_double();
      if (const auto* v = et.find("strict")) h.strict = v->as_bool();
      std::vector<spur::app::HyperbandRun> runs;
      for (const auto& r : c.at("runs").as_array()) {
        spur::app::HyperbandRun run;
        for (const auto& v : r.at("history").as_array()) run.history.push_back(v.as_double());
        run.running = r.at("running").as_bool();
        runs.push_back(run);
      }
      std::vector<size_t> want;
      for (const auto& v : c.at("stopped").as_array()) want.push_back(static_cast<size_t>(v.as_int()));
      const auto got = spur::app::hyperband_stop(runs, h, c.at("goal").as_string() == "maximize");
      QCOMPARE(got, want);
      ++cases;
      stopped += static_cast<int>(want.size());
    }
    QVERIFY(cases >= 40);
    QVERIFY(stopped >= 20);  // the cases do stop runs: a rule that never stops would fail above
  }

  void random_is_reproducible_and_inside_its_distributions() {
    const auto spec = SweepSpec::parse(R"(program: train
method: random
run_cap: 4000
parameters:
  lr: {distribution: log_uniform_values, min: 0.0001, max: 0.1}
  layers: {min: 2, max: 5}
  dropout: {min: 0.0, max: 0.5}
  opt: {values: [adam, sgd], probabilities: [0.75, 0.25]}
  bs: {distribution: q_uniform, min: 16, max: 128, q: 16}
  w: {distribution: normal, mu: 1, sigma: 2}
  seed: {value: 7}
)",
                                       "random.yaml");
    const auto a = spec.points(std::nullopt, 42), b = spec.points(std::nullopt, 42), c = spec.points(100, 43);
    QCOMPARE(a.size(), size_t(4000));
    QCOMPARE(c.size(), size_t(100));
    for (size_t i = 0; i < a.size(); ++i) {
      for (size_t k = 0; k < a[i].size(); ++k) QVERIFY(same_value(a[i][k].second, b[i][k].second));
    }
    std::string first_a, first_c;  // another seed, other draws (the first 100 runs' values, written out)
    for (size_t i = 0; i < 100; ++i) {
      for (size_t k = 0; k < a[i].size(); ++k) {
        first_a += json::write(a[i][k].second) + ",";
        first_c += json::write(c[i][k].second) + ",";
      }
    }
    QVERIFY(first_a != first_c);
    double log_sum = 0, w_sum = 0, w_sq = 0;
    int adam = 0;
    std::set<int64_t> layers, batch;
    for (const auto& p : a) {
      std::map<std::string, json::Value> v(p.begin(), p.end());
      const double lr = v["lr"].as_double(), d = v["dropout"].as_double(), w = v["w"].as_double();
      QVERIFY(lr >= 0.0001 && lr <= 0.1);
      QVERIFY(d >= 0 && d <= 0.5);
      QVERIFY(v["layers"].is_int());
      layers.insert(v["layers"].as_int());
      QVERIFY(v["bs"].is_int() && v["bs"].as_int() % 16 == 0);
      batch.insert(v["bs"].as_int());
      adam += v["opt"].as_string() == "adam";
      QCOMPARE(v["seed"].as_int(), int64_t(7));
      log_sum += std::log(lr);
      w_sum += w;
      w_sq += w * w;
    }
    QCOMPARE(layers, (std::set<int64_t>{2, 3, 4, 5}));
    QVERIFY(batch.size() >= 7 && *batch.begin() == 16 && *batch.rbegin() == 128);
    // log-uniform: the mean of log(lr) is the middle of log(min)..log(max); 75 % adam; normal(1, 2).
    QVERIFY(std::abs(log_sum / 4000 - (std::log(0.0001) + std::log(0.1)) / 2) < 0.1);
    QVERIFY(std::abs(adam / 4000.0 - 0.75) < 0.03);
    QVERIFY(std::abs(w_sum / 4000 - 1) < 0.15);
    QVERIFY(std::abs(std::sqrt(w_sq / 4000 - (w_sum / 4000) * (w_sum / 4000)) - 2) < 0.15);
  }

  void command_is_wandb_agents() {
    const auto spec = SweepSpec::parse(R"(program: train.py
method: grid
command:
  - ${env}
  - ${interpreter}
  - ${program}
  - --fixed
  - "1"
  - ${args}
  - ${args_no_hyphens}
  - ${args_no_boolean_flags}
  - ${args_json}
parameters:
  lr: {values: [0.001, 1.0e-5, 100.0]}
  amp: {values: [true, false]}
  name: {value: "adam w"}
)",
                                       "command.yaml");
    const auto points = spec.grid();
    QCOMPARE(points.size(), size_t(6));
    const auto words = spec.command_for(points[0]);
    const std::vector<std::string> want = {"python3",       "train.py",
                                           "--fixed",       "1",
                                           "--amp=True",    "--lr=0.001",
                                           "--name=adam w", "amp=True",
                                           "lr=0.001",      "name=adam w",
                                           "--amp",         "--lr=0.001",
                                           "--name=adam w", R"({"amp": true, "lr": 0.001, "name": "adam w"})"};
    QCOMPARE(words, want);
    const auto later = spec.command_for(points[4]);  // amp false, lr 1e-05: Python's str()
    QCOMPARE(later[4], std::string("--amp=False"));
    QCOMPARE(later[5], std::string("--lr=1e-05"));
    QVERIFY(std::find(later.begin() + 10, later.begin() + 13, std::string("--amp")) == later.begin() + 13);
    QCOMPARE(spec.command_for(points[5])[5], std::string("--lr=100.0"));

    // W&B's own form without program:, lists and None as Python writes them, a duplicate value run once, "inf" as
    // text.
    const auto own = SweepSpec::parse(R"(method: grid
command:
  - ${env}
  - python3
  - train.py
  - ${args}
parameters:
  layers: {values: [[64, "a"], null]}
  clip: {values: [inf, 1, 1.0]}
)",
                                      "own.yaml");
    const auto grid = own.grid();
    QCOMPARE(grid.size(), size_t(4));  // clip: inf, 1.0 (1 and 1.0 are one point); layers: two
    QCOMPARE(own.command_for(grid[0]),
             (std::vector<std::string>{"python3", "train.py", "--clip=inf", "--layers=[64, 'a']"}));
    QCOMPARE(own.command_for(grid[1])[3], std::string("--layers=None"));
    QCOMPARE(own.command_for(grid[2])[2], std::string("--clip=1.0"));
  }

  void examples_take_name_equals_value() {
    const char* argv[] = {"prog", "--lr=0.5", "--steps", "3", "--fail=False", "--name=a=b"};
    ExampleFlags flags(6, const_cast<char**>(argv), "--lr --steps --fail --name");
    double lr = 0;
    int64_t steps = 0;
    bool fail = true;
    std::string name;
    while (flags.next()) {
      if (flags.is("--lr")) lr = flags.real();
      else if (flags.is("--steps")) steps = flags.integer(1);
      else if (flags.is("--fail")) fail = flags.on();
      else if (flags.is("--name")) name = flags.value();
      else flags.unknown();
    }
    QCOMPARE(lr, 0.5);
    QCOMPARE(steps, int64_t(3));
    QCOMPARE(fail, false);
    QCOMPARE(name, std::string("a=b"));
    const char* bad[] = {"prog", "--verbose=yes"};
    ExampleFlags switches(2, const_cast<char**>(bad), "--verbose");
    bool threw = false;
    try {
      while (switches.next()) {
        if (!switches.is("--verbose")) switches.unknown();
      }
    } catch (const spur::Error& e) {
      threw = std::string(e.what()).find("--verbose takes no value") != std::string::npos;
    }
    QVERIFY(threw);
  }

  void bad_files_name_file_and_line_data() {
    QTest::addColumn<QByteArray>("text");
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("says");
    QTest::newRow("unknown key") << QByteArray("method: grid\nparamters: {}\n") << ":2:"
                                 << "unknown key 'paramters'";
    QTest::newRow("W&B service key") << QByteArray("method: grid\njob: x\nparameters: {a: {value: 1}}\n") << ":2:"
                                     << "W&B's own service";
    QTest::newRow("unknown parameter key") << QByteArray("method: grid\nparameters:\n  a:\n    valuez: [1]\n") << ":4:"
                                           << "unknown key 'valuez'";
    QTest::newRow("empty grid") << QByteArray("method: grid\nparameters:\n  a:\n    values: []\n") << ":4:"
                                << "empty";
    QTest::newRow("fixed and swept") << QByteArray(
                                            "method: grid\nparameters:\n  a:\n    value: 1\n    values: [1, 2]\n")
                                     << ":4:"
                                     << "both fixed (value:) and swept";
    QTest::newRow("fixed in command and swept")
        << QByteArray(
               "method: grid\ncommand:\n  - ${program}\n  - --lr=0.1\n  - ${args}\nparameters:\n  lr: {values: [1]}\n")
        << ":4:"
        << "both fixed in command:";
    QTest::newRow("min above max") << QByteArray("method: random\nparameters:\n  a:\n    min: 5\n    max: 1\n") << ":4:"
                                   << "min 5 is above max 1";
    QTest::newRow("log over non-positive")
        << QByteArray(
               "method: random\nparameters:\n  lr:\n    distribution: log_uniform_values\n    min: 0\n    max: 1\n")
        << ":5:"
        << "must be above 0";
    QTest::newRow("bayes") << QByteArray("parameters: {a: {value: 1}}\nmethod: bayes\n") << ":2:"
                           << "bayes is not supported";
    QTest::newRow("grid over a continuous range")
        << QByteArray("method: grid\nparameters:\n  a: {min: 0.1, max: 0.5}\n") << ":3:"
        << "cannot be a grid's";
    QTest::newRow("unknown distribution")
        << QByteArray("method: random\nparameters:\n  a: {distribution: cauchy, min: 0, max: 1}\n") << ":3:"
        << "unknown distribution 'cauchy'";
    QTest::newRow("nested") << QByteArray("method: grid\nparameters:\n  opt:\n    parameters: {lr: {value: 1}}\n")
                            << ":4:"
                            << "nested parameters";
    QTest::newRow("unknown macro")
        << QByteArray("method: grid\ncommand:\n  - ${program}\n  - ${argz}\nparameters: {a: {value: 1}}\n") << ":4:"
        << "${argz}";
    QTest::newRow("probabilities")
        << QByteArray("method: random\nparameters:\n  a: {values: [1, 2], probabilities: [0.5, 0.6]}\n") << ":3:"
        << "add up to 1.1";
    QTest::newRow("hyperband without metric")
        << QByteArray("method: grid\nearly_terminate: {type: hyperband, min_iter: 3}\nparameters: {a: {value: 1}}\n")
        << ":2:"
        << "needs a metric";
    QTest::newRow("not YAML") << QByteArray("method: grid\nparameters: {a: [1,\n") << ":"
                              << "not valid YAML";
    QTest::newRow("hyperband without a band")
        << QByteArray(
               "method: grid\nmetric: {name: loss}\nearly_terminate: {type: hyperband, max_iter: 2, s: 1}\n"
               "parameters: {a: {value: 1}}\n")
        << ":3:"
        << "no band";
    QTest::newRow("a draw that overflows")
        << QByteArray("method: random\nrun_cap: 3\nparameters:\n  a: {distribution: log_uniform, min: 1, max: 1000}\n")
        << ":4:"
        << "not finite";
    QTest::newRow("no program") << QByteArray(
                                       "method: grid\ncommand:\n  - ${env}\n  - ${args}\nparameters: {a: {value: 1}}\n")
                                << ":4:"
                                << "names no program";
  }
  void bad_files_name_file_and_line() {
    QFETCH(QByteArray, text);
    QFETCH(QString, where);
    QFETCH(QString, says);
    const QString path = dir_.filePath("bad.yaml");
    write_file(path, "program: train\n" + text);
    // The file has "program:" on line 1, so each case's lines move down by one.
    QString expected_where = where;
    if (where.size() > 2) expected_where = ":" + QString::number(where.mid(1, where.size() - 2).toInt() + 1) + ":";
    const auto result = spur({"sweep", "run", path});
    QCOMPARE(result.exit_code, 2);
    QVERIFY2(result.output.contains(path + expected_where), qPrintable(result.output));
    QVERIFY2(result.output.contains(says), qPrintable(result.output));
    // Nothing started: no sweep record (these cases run before any sweep of this test does).
    QVERIFY(!QDir(dir_.filePath("sweeps")).exists());
  }

  // A value given twice is one point in the grid and in grid_values() alike (fuzz_sweep found them disagreeing:
  // tests/fuzz/corpus/sweep/regression-repeated-grid-value, values [0.0, 0.00]).
  void grid_values_count_a_repeated_value_once() {
    const auto spec = SweepSpec::parse(
        "program: train\nmethod: grid\nparameters:\n  wd:\n    values: [0.0, 0.00, 1]\n"
        "  lr:\n    values: [1, 1.0, 2]\n",
        "repeated.yaml");
    size_t product = 1;
    for (const auto& p : spec.parameters) product *= p.grid_values(spec.file).size();
    QCOMPARE(product, size_t{4});
    QCOMPARE(spec.grid().size(), product);
  }

  // A secret given as `-- --env NAME=VALUE` reaches every run's program, but no run's command line, no recorded
  // command and not `spur sweep show`; the record that keeps it for resume is its owner's only.
  void a_secret_reaches_the_runs_and_no_command_line() {
    const QString file = dir_.filePath("secret.yaml");
    write_file(file, secret_sweep());
    const auto result = spur({"sweep", "run", file, "--", "--env", "SWEEP_SECRET=hunter2"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("2 finished, 0 stopped early, 0 failed"), qPrintable(result.output));
    const QString id = sweep_id(result.output);
    spur::history::HistoryReader reader(dir_.filePath("history.db").toStdString());
    spur::history::RunFilter filter;
    filter.tag = "sweep:" + id.toStdString();
    const auto runs = reader.runs(filter);
    QCOMPARE(runs.size(), size_t(2));
    for (const auto& run : runs) {
      QVERIFY2(
          run.command.find("hunter2") == std::string::npos && run.command.find("SWEEP_SECRET") != std::string::npos,
          run.command.c_str());
    }
    const auto show = spur({"sweep", "show", id});
    QVERIFY2(!show.output.contains("hunter2") && show.output.contains("SWEEP_SECRET"), qPrintable(show.output));
    const QString record = dir_.filePath("sweeps/" + id + ".json");
    QVERIFY(QFile::exists(record));
    QCOMPARE(QFile::permissions(record) & (QFileDevice::ReadGroup | QFileDevice::ReadOther),
             QFileDevice::Permissions());
  }

  void headless_grid_runs_every_point() {
    const QString file = sweep_file("grid.yaml", R"(name: lr-grid
method: grid
metric: {name: loss, goal: minimize}
parameters:
  lr: {values: [0.1, 0.01]}
  batch_size: {values: [16, 32]}
  steps: {value: 4}
  interval_ms: {value: 20}
)");
    const auto result = spur({"sweep", "run", file, "--parallel", "2"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    const QString id = sweep_id(result.output);
    QVERIFY2(!id.isEmpty(), qPrintable(result.output));
    QVERIFY2(result.output.contains("4 finished, 0 stopped early, 0 failed"), qPrintable(result.output));
    spur::history::HistoryReader reader(dir_.filePath("history.db").toStdString());
    spur::history::RunFilter filter;
    filter.tag = "sweep:" + id.toStdString();
    const auto runs = reader.runs(filter);
    QCOMPARE(runs.size(), size_t(4));
    std::set<std::string> seen;
    for (const auto& run : runs) {
      QCOMPARE(run.status, std::string("finished"));
      QVERIFY(std::find(run.tags.begin(), run.tags.end(), "sweep_name:lr-grid") != run.tags.end());
      const auto params = json::parse(run.params);
      QVERIFY2(params.find("lr") && params.find("batch_size"), run.params.c_str());
      seen.insert(spur::app::sweep_value_text(*params.find("lr")) + "/" +
                  spur::app::sweep_value_text(*params.find("batch_size")));
      QCOMPARE(reader.series(run.id, "loss").size(), size_t(4));
    }
    QCOMPARE(seen, (std::set<std::string>{"0.1/16", "0.1/32", "0.01/16", "0.01/32"}));
    const auto show = spur({"sweep", "show", id});
    QCOMPARE(show.exit_code, 0);
    // lr 0.01 is best at every step (runs 2 and 4 tie: the first is named).
    QVERIFY2(show.output.count(" finished ") == 4 && show.output.contains("best      run 2 (0.035)"),
             qPrintable(show.output));
    const auto list = spur({"sweep", "list"});
    QVERIFY2(list.output.contains(id) && list.output.contains("lr-grid") && list.output.contains("4/4 done"),
             qPrintable(list.output));
    const auto dry = spur({"sweep", "run", file, "--dry_run"});
    QVERIFY2(dry.output.contains("--batch_size=16 --interval_ms=20 --lr=0.1 --steps=4"), qPrintable(dry.output));
  }

  void a_failed_run_does_not_stop_the_sweep() {
    const QString file = sweep_file("fail.yaml", R"(method: grid
parameters:
  fail: {values: [false, true]}
  lr: {values: [0.1, 0.2]}
  steps: {value: 2}
)");
    const auto result = spur({"sweep", "run", file});
    QCOMPARE(result.exit_code, 0);
    QVERIFY2(result.output.contains("run 3 failed (exit 1); the sweep goes on"), qPrintable(result.output));
    QVERIFY2(result.output.contains("2 finished, 0 stopped early, 2 failed"), qPrintable(result.output));

    const QString all = sweep_file("all-fail.yaml", R"(method: grid
parameters:
  fail: {value: true}
  lr: {values: [0.1, 0.2, 0.3, 0.4, 0.5]}
)");
    const auto failing = spur({"sweep", "run", all});
    QCOMPARE(failing.exit_code, 1);
    QVERIFY2(failing.output.contains("the first 3 runs failed and none finished"), qPrintable(failing.output));
    QVERIFY2(failing.output.contains("0 finished, 0 stopped early, 3 failed, 2 not run"), qPrintable(failing.output));
  }

  void stop_and_resume() {
    const QString file = sweep_file("slow.yaml", R"(method: grid
parameters:
  lr: {values: [0.1, 0.2, 0.3]}
  steps: {value: 40}
  interval_ms: {value: 50}
)");
    QProcess sweep;
    sweep.setProcessEnvironment(env_);
    sweep.setProcessChannelMode(QProcess::MergedChannels);
    sweep.start(SPUR_CLI, {"sweep", "run", file});
    QByteArray output;
    QVERIFY2(spur::test::read_until(sweep, output, "sweep_rig lr=0.1", 60000), output.constData());
    const QString id = sweep_id(QString::fromUtf8(output));
    const auto stop = spur({"sweep", "stop", id});
    QVERIFY2(stop.output.contains("stopping"), qPrintable(stop.output));
    QVERIFY(sweep.waitForFinished(60000));
    output += sweep.readAll();
    QCOMPARE(sweep.exitCode(), 130);
    QVERIFY2(output.contains("0 finished, 0 stopped early, 0 failed, 3 not run"), output.constData());
    const auto state = spur::app::load_sweep(id.toStdString());
    QCOMPARE(state.status, std::string("stopped"));
    QCOMPARE(state.runs[0].status, std::string("stopped"));
    QCOMPARE(state.runs[1].status, std::string("pending"));

    const auto resumed = spur({"sweep", "resume", id});
    QVERIFY2(resumed.exit_code == 0, qPrintable(resumed.output));
    QVERIFY2(resumed.output.contains("resuming 3 run(s)") && resumed.output.contains("3 finished"),
             qPrintable(resumed.output));
    QCOMPARE(spur::app::load_sweep(id.toStdString()).status, std::string("finished"));
    const auto again = spur({"sweep", "resume", id});
    QVERIFY2(again.output.contains("every run has run"), qPrintable(again.output));
    // The stopped run is in the history as stopped; the relaunched point ran again, to the end.
    spur::history::HistoryReader reader(dir_.filePath("history.db").toStdString());
    spur::history::RunFilter filter;
    filter.tag = "sweep:" + id.toStdString();
    const auto runs = reader.runs(filter);
    QCOMPARE(runs.size(), size_t(4));
    QCOMPARE(runs[0].status, std::string("stopped"));
  }

  void hyperband_stops_the_worse_runs() {
    // One run at a time: the best (lr 0.01) first, then worse ones, which W&B's rule stops at the first band
    // (3 values logged) against the finished one. min_iter 3, eta 3: bands at 3, 9, 27 values.
    const QString file = sweep_file("hyperband.yaml", R"(method: grid
metric: {name: loss, goal: minimize}
early_terminate: {type: hyperband, min_iter: 3}
parameters:
  lr: {values: [0.01, 0.5, 0.9]}
  steps: {value: 30}
  interval_ms: {value: 100}
)");
    const auto result = spur({"sweep", "run", file});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    QVERIFY2(result.output.contains("1 finished, 2 stopped early, 0 failed"), qPrintable(result.output));
    QVERIFY2(result.output.contains("run 2 stopped early by Hyperband"), qPrintable(result.output));
    const QString id = sweep_id(result.output);
    const auto state = spur::app::load_sweep(id.toStdString());
    spur::history::HistoryReader reader(dir_.filePath("history.db").toStdString());
    QCOMPARE(reader.series(state.runs[0].run_id, "loss").size(), size_t(30));
    for (const int i : {1, 2}) {
      QCOMPARE(state.runs[static_cast<size_t>(i)].status, std::string("early_terminated"));
      const auto n = reader.series(state.runs[static_cast<size_t>(i)].run_id, "loss").size();
      QVERIFY2(n >= 3 && n < 30, std::to_string(n).c_str());
    }
  }

  void cleanupTestCase() { spur::test::kill_processes_under(dir_.path()); }
};

SPUR_TEST_CLASS(SweepTest)
#include "sweep_test.moc"
