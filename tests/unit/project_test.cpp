// SPDX-License-Identifier: Apache-2.0
// Issue 15 in one process: ProjectConfiguration (automatic checkpoint naming, total_limit rotation, the latest
// loaded and counted on from), save/load pre-hooks, get_state_dict, Accelerator::save read back by the real
// safetensors package and torch.load, split_between_processes and the object codec with one process, the logger's
// levels, and the errors each bad setting gives.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <filesystem>

#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <spur/spur.h>

#include "expect_error.h"
#include "test_main.h"

namespace {

using spur::test::expect_error;

namespace fs = std::filesystem;

spur::AcceleratorOptions project(const QString& dir, std::optional<int64_t> limit = std::nullopt) {
  spur::AcceleratorOptions options;
  options.project_config.project_dir = dir.toStdString();
  options.project_config.automatic_checkpoint_naming = true;
  options.project_config.total_limit = limit;
  return options;
}

// The complete checkpoint_<N> folders, sorted by N.
QStringList checkpoints(const QString& project_dir) {
  QStringList names;
  for (const auto& name : QDir(project_dir + "/checkpoints").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    if (name.startsWith("checkpoint_") && !name.contains('.')) names << name;
  }
  std::sort(names.begin(), names.end(),
            [](const QString& a, const QString& b) { return a.mid(11).toInt() < b.mid(11).toInt(); });
  return names;
}

void fill(torch::nn::Module& module, double value) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) p.fill_(value);
}

QString python(const QStringList& arguments) {
  QProcess process;
  process.start(SPUR_PEER_PYTHON, arguments);
  if (!process.waitForFinished(120000) || process.exitCode() != 0) {
    return "python failed: " + QString::fromUtf8(process.readAllStandardError());
  }
  return QString::fromUtf8(process.readAllStandardOutput()).trimmed();
}

}  // namespace

class ProjectTest : public QObject {
  Q_OBJECT

 private slots:
  // save_state() names checkpoint_0, 1, ...; total_limit keeps the newest; load_state() reads the latest and the
  // next save counts on from it (Accelerate would stop with "already exists").
  void automatic_checkpoints_rotate_and_resume() {
    QTemporaryDir dir;
    {
      spur::Accelerator accelerator(project(dir.path(), 2));
      torch::nn::Linear net(3, 2);
      auto model = accelerator.prepare(net);
      for (int i = 0; i < 5; ++i) {
        fill(*net, i);
        const auto saved = accelerator.save_state();
        QCOMPARE(QString::fromStdString(saved), dir.path() + "/checkpoints/checkpoint_" + QString::number(i));
        QCOMPARE(accelerator.save_iteration(), int64_t{i + 1});
      }
    }  // the Accelerator waits for the background removal
    QCOMPARE(checkpoints(dir.path()), QStringList({"checkpoint_3", "checkpoint_4"}));
    QCOMPARE(QDir(dir.path() + "/checkpoints").entryList(QDir::Dirs | QDir::NoDotAndDotDot | QDir::Hidden).size(), 2);

    spur::Accelerator again(project(dir.path(), 2));
    torch::nn::Linear net(3, 2);
    auto model = again.prepare(net);
    QCOMPARE(QString::fromStdString(again.latest_checkpoint()), dir.path() + "/checkpoints/checkpoint_4");
    QCOMPARE(QString::fromStdString(again.load_state()), dir.path() + "/checkpoints/checkpoint_4");
    QCOMPARE(net->weight[0][0].item<double>(), 4.0);
    QCOMPARE(again.save_iteration(), int64_t{5});
    fill(*net, 5);
    QCOMPARE(QString::fromStdString(again.save_state()), dir.path() + "/checkpoints/checkpoint_5");
    // An explicit checkpoint of this project sets the next number too; a save at a number already taken, or below
    // the newest, is refused.
    spur::Accelerator third(project(dir.path(), 2));
    auto third_model = third.prepare(net);
    third.load_state((dir.path() + "/checkpoints/checkpoint_4").toStdString());
    QCOMPARE(net->weight[0][0].item<double>(), 4.0);
    QCOMPARE(third.save_iteration(), int64_t{5});
    QVERIFY(expect_error([&] { third.save_state(); }).contains("checkpoint_5 already exists"));
    third.set_save_iteration(2);
    auto error = expect_error([&] { third.save_state(); });
    QVERIFY2(error.contains("would be older than " + dir.path() + "/checkpoints/checkpoint_5") &&
                 error.contains("set_save_iteration(6)"),
             qPrintable(error));
    QVERIFY(expect_error([&] { third.set_save_iteration(-1); }).contains("set_save_iteration(-1)"));
  }

  // A save interrupted between its two renames (file systems without an atomic exchange) leaves checkpoint_N under
  // checkpoint_N.spur-new: it still counts as the latest, and load_state() puts it back.
  void an_interrupted_automatic_save_is_still_the_latest() {
    QTemporaryDir dir;
    spur::Accelerator accelerator(project(dir.path()));
    torch::nn::Linear net(2, 2);
    auto model = accelerator.prepare(net);
    fill(*net, 1);
    accelerator.save_state();
    fill(*net, 2);
    accelerator.save_state();
    QVERIFY(QDir().rename(dir.path() + "/checkpoints/checkpoint_1", dir.path() + "/checkpoints/checkpoint_1.spur-new"));
    QCOMPARE(QString::fromStdString(accelerator.latest_checkpoint()), dir.path() + "/checkpoints/checkpoint_1");
    fill(*net, 0);
    accelerator.load_state();
    QCOMPARE(net->weight[0][0].item<double>(), 2.0);
    QVERIFY(QFile::exists(dir.path() + "/checkpoints/checkpoint_1/spur_state.json"));
  }

  // Numbers compare as numbers (checkpoint_10 is newer than checkpoint_9), and other folders are ignored.
  void the_latest_checkpoint_is_the_highest_number() {
    QTemporaryDir dir;
    spur::Accelerator accelerator(project(dir.path()));
    torch::nn::Linear net(2, 2);
    auto model = accelerator.prepare(net);
    QVERIFY(accelerator.latest_checkpoint().empty());
    auto options = project(dir.path());
    options.project_config.iteration = 9;
    spur::Accelerator nine(options);
    auto nine_model = nine.prepare(net);
    fill(*net, 9);
    nine.save_state();
    fill(*net, 10);
    nine.save_state();
    QDir(dir.path()).mkpath("checkpoints/checkpoint_99.spur-tmp");  // a save that crashed
    QDir(dir.path()).mkpath("checkpoints/notes");
    QCOMPARE(QString::fromStdString(accelerator.latest_checkpoint()), dir.path() + "/checkpoints/checkpoint_10");
  }

  void bad_project_settings_are_named() {
    QTemporaryDir dir;
    QVERIFY(expect_error([&] { spur::Accelerator a(project(dir.path(), 0)); }).contains("total_limit is 0"));
    QVERIFY(expect_error([&] { spur::Accelerator a(project(dir.path(), -2)); }).contains("total_limit is -2"));
    auto negative = project(dir.path());
    negative.project_config.iteration = -1;
    QVERIFY(expect_error([&] { spur::Accelerator a(negative); }).contains("iteration is -1"));

    spur::Accelerator accelerator(project(dir.path()));
    torch::nn::Linear net(2, 2);
    auto model = accelerator.prepare(net);
    auto error = expect_error([&] { accelerator.load_state(); });
    QVERIFY2(error.contains("no checkpoint to load in " + dir.path() + "/checkpoints"), qPrintable(error));
    accelerator.save_state();  // checkpoint_0

    // An iteration that would overwrite checkpoint_0: refused, and checkpoint_0 is untouched.
    spur::Accelerator overwriting(project(dir.path()));
    auto overwriting_model = overwriting.prepare(net);
    fill(*net, 7);
    error = expect_error([&] { overwriting.save_state(); });
    QVERIFY2(error.contains(dir.path() + "/checkpoints/checkpoint_0 already exists") && error.contains("iteration 0"),
             qPrintable(error));
    overwriting.load_state();
    QVERIFY(net->weight[0][0].item<double>() != 7.0);

    spur::Accelerator plain;
    auto plain_model = plain.prepare(net);
    QVERIFY(expect_error([&] { plain.save_state(); }).contains("automatic_checkpoint_naming"));
    QVERIFY(expect_error([&] { plain.load_state(); }).contains("automatic_checkpoint_naming"));
  }

  // Accelerate's hooks: the save hook sees every model's weights on the CPU and can change or drop them; the load
  // hook can take a model out of what load_state restores. A removed hook runs no more.
  void save_and_load_pre_hooks() {
    QTemporaryDir dir;
    spur::Accelerator accelerator;
    torch::nn::Linear first(2, 2), second(3, 3);
    auto [a, b] = accelerator.prepare(first, second);
    fill(*first, 1);
    fill(*second, 2);
    int saves = 0;
    auto handle = accelerator.register_save_state_pre_hook(
        [&](spur::ModelList& models, std::vector<spur::NamedTensors>& weights, const std::string& out) {
          ++saves;
          QCOMPARE(models.size(), size_t{2});
          QCOMPARE(weights.size(), size_t{2});
          QVERIFY(weights[0][0].second.device().is_cpu());
          QVERIFY(!out.empty());
          // The second model is saved "elsewhere": dropped from both lists.
          models.pop_back();
          weights.pop_back();
          for (auto& [name, tensor] : weights[0]) tensor.mul_(10);  // in place: on copies, not the model
        });
    const std::string checkpoint = (dir.path() + "/state").toStdString();
    accelerator.save_state(checkpoint);
    QCOMPARE(saves, 1);
    QVERIFY(QFile::exists(dir.path() + "/state/model.safetensors"));
    QVERIFY(!QFile::exists(dir.path() + "/state/model_1.safetensors"));
    QCOMPARE(first->weight[0][0].item<double>(), 1.0);  // the hook changed what was saved, not the model

    // Loading without the same hook: the checkpoint holds one model, this run prepared two.
    QVERIFY(expect_error([&] { accelerator.load_state(checkpoint); }).contains("1 model(s), this run prepared 2"));
    int loads = 0;
    auto load_handle = accelerator.register_load_state_pre_hook([&](spur::ModelList& models, const std::string& in) {
      ++loads;
      QCOMPARE(in, checkpoint);
      models.pop_back();
    });
    fill(*second, 5);
    accelerator.load_state(checkpoint);
    QCOMPARE(loads, 1);
    QCOMPARE(first->weight[0][0].item<double>(), 10.0);
    QCOMPARE(second->weight[0][0].item<double>(), 5.0);  // left to the hook

    handle.remove();
    load_handle.remove();
    accelerator.save_state(checkpoint);
    QCOMPARE(saves, 1);
    QVERIFY(QFile::exists(dir.path() + "/state/model_1.safetensors"));
  }

  // get_state_dict: every name (tied ones too), detached, on the CPU; save() writes what safetensors and torch.load
  // read back, on the main process, replacing the file atomically.
  void get_state_dict_and_save() {
    QTemporaryDir dir;
    spur::Accelerator accelerator;
    auto net = std::make_shared<torch::nn::Module>();
    auto linear = net->register_module("fc", torch::nn::Linear(2, 3));
    net->register_module("tied", linear);
    auto model = accelerator.prepare(net);
    const auto dict = accelerator.get_state_dict(model);
    QCOMPARE(dict.size(), size_t{4});
    QCOMPARE(dict[0].first, std::string("fc.weight"));
    QCOMPARE(dict[2].first, std::string("tied.weight"));
    QVERIFY(!dict[0].second.requires_grad() && dict[0].second.device().is_cpu());

    const QString safe = dir.path() + "/sub/weights.safetensors";
    accelerator.save(dict, safe.toStdString());
    const auto read = python({"-c",
                              "import sys; from safetensors import safe_open\n"
                              "f = safe_open(sys.argv[1], framework='pt')\n"
                              "print(sorted(f.keys()), f.get_tensor('fc.weight').shape[0])",
                              safe});
    QCOMPARE(read, QString("['fc.bias', 'fc.weight', 'tied.bias', 'tied.weight'] 3"));

    const QString pickled = dir.path() + "/weights.pt";
    accelerator.save(std::map<std::string, torch::Tensor>{{"w", torch::arange(4.0)}}, pickled.toStdString(),
                     {.safe_serialization = false});
    QCOMPARE(
        python({"-c", "import sys, torch; d = torch.load(sys.argv[1]); print(list(d), d['w'].sum().item())", pickled}),
        QString("['w'] 6.0"));
    QVERIFY(!QFile::exists(pickled + ".spur-tmp"));
  }

  // With one process, split_between_processes hands back the input; objects round-trip through the codec.
  void one_process_helpers() {
    spur::Accelerator accelerator;
    const std::vector<int> items{1, 2, 3};
    QVERIFY(accelerator.split_between_processes(items, true) == items);
    QCOMPARE(accelerator.gather_object(std::string("x")), std::vector<std::string>{"x"});
    std::vector<std::pair<std::string, std::optional<int>>> list{{"a", 1}, {"b", std::nullopt}};
    auto copy = list;
    accelerator.broadcast_object_list(copy);
    QVERIFY(copy == list);
    const auto inf = accelerator.gather_object(-std::numeric_limits<double>::infinity());
    QVERIFY(std::isinf(inf[0]) && inf[0] < 0);
    const auto big = accelerator.gather_object(std::numeric_limits<uint64_t>::max());
    QCOMPARE(big[0], std::numeric_limits<uint64_t>::max());
    QVERIFY(accelerator.is_last_process());
    QVERIFY(!accelerator.check_trigger());
    accelerator.set_trigger();
    QVERIFY(accelerator.check_trigger());
    QVERIFY(!accelerator.check_trigger());
    // Batch-size search: halves until it fits; other errors pass through; 0 is an error.
    std::vector<int64_t> tried;
    const auto fits = accelerator.find_executable_batch_size(100, [&](int64_t size) {
      tried.push_back(size);
      if (size > 20) throw std::bad_alloc();
      return size * 2;
    });
    QCOMPARE(fits, int64_t{24});
    QVERIFY((tried == std::vector<int64_t>{100, 50, 25, 12}));
    QVERIFY(expect_error([&] {
              accelerator.find_executable_batch_size(2, [](int64_t) { throw std::bad_alloc(); });
            }).contains("no batch size fits in memory"));
    int custom_calls = 0;
    accelerator.find_executable_batch_size(
        10,
        [&](int64_t size) {
          ++custom_calls;
          if (size > 8) throw std::bad_alloc();
        },
        [](int64_t size) { return size * 9 / 10; });
    QCOMPARE(custom_calls, 3);  // 10, 9, 8
  }

  void log_levels() {
    QCOMPARE(spur::parse_log_level("warn"), std::optional<spur::LogLevel>(spur::LogLevel::warning));
    QCOMPARE(spur::parse_log_level("DEBUG"), std::optional<spur::LogLevel>(spur::LogLevel::debug));
    QCOMPARE(spur::parse_log_level("40"), std::optional<spur::LogLevel>(spur::LogLevel::error));
    QVERIFY(!spur::parse_log_level("loud"));
    auto& logger = spur::get_logger("unit-levels", spur::LogLevel::error);
    QVERIFY(!logger.is_enabled_for(spur::LogLevel::warning));
    QVERIFY(logger.is_enabled_for(spur::LogLevel::critical));
    QCOMPARE(&spur::get_logger("unit-levels"), &logger);
    QCOMPARE(spur::get_logger("unit-levels").level(), spur::LogLevel::error);
  }

  // A new logger's level: SPUR_LOG_LEVEL, else Accelerate's ACCELERATE_LOG_LEVEL, else info; a value that is not
  // a level is an error naming the variable and the value.
  void log_levels_come_from_the_environment() {
    qunsetenv("SPUR_LOG_LEVEL");
    qunsetenv("ACCELERATE_LOG_LEVEL");
    QCOMPARE(spur::get_logger("unit-env-none").level(), spur::LogLevel::info);
    qputenv("ACCELERATE_LOG_LEVEL", "WARNING");
    QCOMPARE(spur::get_logger("unit-env-accelerate").level(), spur::LogLevel::warning);
    qputenv("SPUR_LOG_LEVEL", "debug");
    QCOMPARE(spur::get_logger("unit-env-spur").level(), spur::LogLevel::debug);
    QCOMPARE(spur::get_logger("unit-env-given", spur::LogLevel::critical).level(), spur::LogLevel::critical);
    qputenv("SPUR_LOG_LEVEL", "loud");
    const QString error = expect_error([] { spur::get_logger("unit-env-bad"); });
    QVERIFY2(error.contains("SPUR_LOG_LEVEL=loud is not a log level"), qPrintable(error));
    qunsetenv("SPUR_LOG_LEVEL");
    qunsetenv("ACCELERATE_LOG_LEVEL");
  }
};

SPUR_TEST_CLASS(ProjectTest)
#include "project_test.moc"
