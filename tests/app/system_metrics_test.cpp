// SPDX-License-Identifier: Apache-2.0
// System metrics (issue 18), from real 2-rank runs of `spur launch`: every second the launcher records each rank's
// CPU use and resident memory as system/ series; ranks that spin show about a core each and ranks that sleep show
// nearly none; only the GPUs the run may use are read (a stand-in NVIDIA driver library); --system_metrics_interval
// 0 records none; a bad interval is refused by name.
#include <QTemporaryDir>
#include <QTest>

#include <QCoreApplication>
#include <QScopeGuard>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include <spur/history/reader.h>

#include "launch/system_sampler.h"
#include "rank_group.h"
#include "test_main.h"

namespace {

spur::test::RankResult launch(const QString& history, const QStringList& arguments) {
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("SPUR_HISTORY", history);
  return spur::test::run_process(SPUR_CLI, QStringList{"launch", "--num_processes", "2"} + arguments, env, 120000);
}

// The largest value of a run's series; -1 when it has no points.
double peak(spur::history::HistoryReader& reader, int64_t run, const std::string& key) {
  double most = -1;
  for (const auto& point : reader.series(run, key)) most = std::max(most, point.value);
  return most;
}

// A stand-in GPU driver: its first two readings (the load, the first sample's) answer at once with 100 W, the
// later ones wait until the test opens it (a wedged driver), then answer 200 W.
struct StuckDriver {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  int calls = 0;
  std::vector<spur::app::SystemValue> read() {
    std::unique_lock lock(mutex);
    const int call = ++calls;
    if (call > 2) opened.wait(lock, [this] { return open; });
    return {{"system/gpu0/power_w", call <= 2 ? 100.0 : 200.0}};
  }
  int count() {
    std::lock_guard lock(mutex);
    return calls;
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    opened.notify_all();
  }
};

// The value of `key` in a sample, or -1.
double value_of(const std::vector<spur::app::SystemValue>& values, const QString& key) {
  for (const auto& value : values) {
    if (value.key == key) return value.value;
  }
  return -1;
}

}  // namespace

class SystemMetricsTest : public QObject {
  Q_OBJECT

 private slots:
  void ranks_are_sampled_every_second() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    // Two ranks that spin for about 4 s (4 million turns of a shell loop with no command in it: the rank's own
    // process burns the CPU), then two that sleep.
    auto spin = launch(history, {"/bin/sh", "-c", "i=0; while [ $i -lt 4000000 ]; do i=$((i+1)); done"});
    QVERIFY2(spin.exit_code == 0, qPrintable(spin.output));
    auto sleep = launch(history, {"/bin/sh", "-c", "sleep 4"});
    QVERIFY2(sleep.exit_code == 0, qPrintable(sleep.output));
    spur::history::HistoryReader reader(history.toStdString());
    for (const int64_t run : {1, 2}) {
      // The samples' steps are seconds: they are not the run's steps (a shell logs none), nor its progress.
      QCOMPARE(reader.run(run)->last_step, int64_t(-1));
      for (const int rank : {0, 1}) {
        const std::string prefix = "system/rank" + std::to_string(rank) + "/";
        const auto memory = reader.series(run, prefix + "rss_mib");
        QVERIFY2(memory.size() >= 2,
                 qPrintable(QString("run %1 rank %2: %3 memory samples").arg(run).arg(rank).arg(memory.size())));
        for (const auto& point : memory) QVERIFY(point.value > 0.1 && point.value < 1024);  // a shell: a few MiB
        // Steps count the seconds since the start, one sample a second.
        QVERIFY2(memory.back().step >= 2 && memory.back().step <= 30, qPrintable(QString::number(memory.back().step)));
        QVERIFY(reader.series(run, prefix + "cpu_percent").size() >= 2);
      }
    }
    for (const int rank : {0, 1}) {
      const std::string key = "system/rank" + std::to_string(rank) + "/cpu_percent";
      QVERIFY2(peak(reader, 1, key) > 40, qPrintable(QString::number(peak(reader, 1, key))));  // spinning
      QVERIFY2(peak(reader, 2, key) < 10, qPrintable(QString::number(peak(reader, 2, key))));  // asleep
    }
  }

  // The GPUs are read on the sampler's own thread: a driver call that does not come back leaves the GPU series a
  // gap while the ranks' values go on, and the sampler can still be destroyed (a launcher must not hang on it).
  // A regression to reading on the caller's thread hangs here until CTest's timeout fails the suite.
  void a_stuck_gpu_driver_does_not_hold_up_sampling() {
    auto driver = std::make_shared<StuckDriver>();
    const auto release = qScopeGuard([driver] { driver->release(); });  // lets the left thread end
    const std::vector<std::pair<int, qint64>> me{{0, QCoreApplication::applicationPid()}};
    // Samples until one has `watts` for gpu0; true from then on (QTRY_VERIFY evaluates its condition once more, and
    // each sample asks the driver again).
    auto until = [&me](spur::app::SystemSampler& sampler, double watts) {
      return [&sampler, &me, watts, seen = false]() mutable {
        return seen = seen || value_of(sampler.sample(me), "system/gpu0/power_w") == watts;
      };
    };
    {
      spur::app::SystemSampler sampler([driver] { return driver->read(); });
      QVERIFY(sampler.has_gpus());
      // Once the first reading (made at once: it loads the driver) is back, a sample asks for a fresh one and has it.
      auto first = until(sampler, 100.0);
      QTRY_VERIFY(first());
      // The next reading does not come back: that sample and the ones after it have no GPU values (they would hang
      // here if they waited for the driver), and no further reading is asked for while it is out.
      for (int i = 0; i < 5; ++i) {
        const auto values = sampler.sample(me);
        QCOMPARE(value_of(values, "system/gpu0/power_w"), -1.0);
        QVERIFY(value_of(values, "system/rank0/rss_mib") > 0);
      }
      QTRY_COMPARE(driver->count(), 3);
      QVERIFY(sampler.has_gpus());
      driver->release();
      auto after = until(sampler, 200.0);
      QTRY_VERIFY(after());
    }
    // Destroyed while its GPU thread is inside the driver: it waits a second, then leaves the thread.
    auto wedged = std::make_shared<StuckDriver>();
    const auto unwedge = qScopeGuard([wedged] { wedged->release(); });
    {
      spur::app::SystemSampler sampler([wedged] { return wedged->read(); });
      auto first = until(sampler, 100.0);
      QTRY_VERIFY(first());
      sampler.sample(me);
      QTRY_COMPARE(wedged->count(), 3);
    }
    // And a driver with no GPUs: no thread left, no GPU values.
    spur::app::SystemSampler none(spur::app::GpuReader([] { return std::vector<spur::app::SystemValue>(); }));
    QTRY_VERIFY(!none.has_gpus());
    QCOMPARE(value_of(none.sample(me), "system/gpu0/power_w"), -1.0);
  }

  // Only the GPUs a run may use are read, through the driver's own library (a stand-in libnvidia-ml.so.1 here,
  // loaded by the launcher as it loads the real one): every GPU when nothing says otherwise, those --gpu_ids or an
  // inherited CUDA_VISIBLE_DEVICES list (indices or UUIDs, in its order), none on CPUs or with an empty list.
  void only_the_runs_gpus_are_read_data() {
    QTest::addColumn<QStringList>("flags");
    QTest::addColumn<QString>("visible");  // CUDA_VISIBLE_DEVICES in the launcher's environment; "unset": none
    QTest::addColumn<QStringList>("gpus");
    QTest::newRow("every GPU") << QStringList() << "unset" << QStringList{"gpu0", "gpu1", "gpu2", "gpu3"};
    QTest::newRow("--gpu_ids") << QStringList{"--gpu_ids", "1,3"} << "0" << QStringList{"gpu1", "gpu3"};
    QTest::newRow("inherited UUIDs") << QStringList() << "GPU-fake-2,0" << QStringList{"gpu0", "gpu2"};
    QTest::newRow("up to a bad entry") << QStringList() << "3,none,1" << QStringList{"gpu3"};
    QTest::newRow("up to a device not there") << QStringList() << "1,7,2" << QStringList{"gpu1"};
    QTest::newRow("up to an unknown UUID") << QStringList() << "2,GPU-other-1,1" << QStringList{"gpu2"};
    QTest::newRow("--cpu") << QStringList{"--cpu"} << "unset" << QStringList();
    QTest::newRow("an empty list") << QStringList() << "" << QStringList();
  }
  void only_the_runs_gpus_are_read() {
    QFETCH(QStringList, flags);
    QFETCH(QString, visible);
    QFETCH(QStringList, gpus);
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("SPUR_HISTORY", history);
    env.insert("LD_LIBRARY_PATH",
               SPUR_FAKE_NVML_DIR + (env.contains("LD_LIBRARY_PATH") ? ":" + env.value("LD_LIBRARY_PATH") : QString()));
    env.remove("CUDA_VISIBLE_DEVICES");
    if (visible != "unset") env.insert("CUDA_VISIBLE_DEVICES", visible);
    const auto result = spur::test::run_process(
        SPUR_CLI, QStringList{"launch", "--num_processes", "2"} + flags + QStringList{"/bin/sh", "-c", "sleep 1"}, env,
        120000);
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    spur::history::HistoryReader reader(history.toStdString());
    QStringList read;
    for (const auto& key : reader.metric_keys(1)) {
      const QString name = QString::fromStdString(key);
      if (name.startsWith("system/gpu")) read << name.section('/', 1, 1);
    }
    read.removeDuplicates();
    read.sort();
    QCOMPARE(read, gpus);
    // The values are the device's own (gpu i draws 100 + i W), by its index as nvidia-smi gives it.
    for (const auto& gpu : gpus) {
      const auto power = reader.series(1, ("system/" + gpu + "/power_w").toStdString());
      QVERIFY(!power.empty());
      QCOMPARE(power.front().value, 100.0 + gpu.mid(3).toInt());
    }
  }

  void sampling_can_be_turned_off() {
    QTemporaryDir dir;
    const QString history = dir.filePath("history.db");
    const auto result = launch(history, {"--system_metrics_interval", "0", "/bin/sh", "-c", "sleep 2"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.output));
    spur::history::HistoryReader reader(history.toStdString());
    QVERIFY(reader.metric_keys(1).empty());
    const auto bad = launch(history, {"--system_metrics_interval", "-1", "/bin/true"});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.output.contains("--system_metrics_interval"), qPrintable(bad.output));
  }
};

SPUR_TEST_CLASS(SystemMetricsTest)
#include "system_metrics_test.moc"
