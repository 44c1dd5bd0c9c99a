// SPDX-License-Identifier: Apache-2.0
// Issue 32 (7): the shared-memory gradient all-reduce on real ranks when things go wrong. A rank that dies before it
// attaches is seen at once (it cost the whole 30-minute collective timeout); rank 0 dying before it unlinks leaves
// nothing in /dev/shm (the others unlink too), and segments abandoned that way are removed by the next run; ranks in
// separate PID namespaces (sharing /dev/shm) are not taken for dead while they work; ranks that reduce different
// sizes stop with an error naming both (their values were summed together silently). The faults come from
// rigs/shm_fault.cpp, preloaded into one rank.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "rank_group.h"
#include "test_main.h"

using spur::test::RankGroup;

namespace {

// /dev/shm entries of the shared-memory all-reduce made by process `pid`.
QStringList segments_of(qint64 pid) {
  return QDir("/dev/shm").entryList({QString("spur-%1-*").arg(pid)}, QDir::Files | QDir::System | QDir::Hidden);
}

// The fault library in one rank (ASan wants to come first among preloaded libraries; here it need not).
void preload_fault(RankGroup& ranks, const QString& fault) {
  ranks.set_env("LD_PRELOAD", SPUR_SHM_FAULT_LIBRARY);
  ranks.set_env("SPUR_SHM_FAULT", fault);
  const QString asan = qEnvironmentVariable("ASAN_OPTIONS");
  ranks.set_env("ASAN_OPTIONS", (asan.isEmpty() ? QString() : asan + ":") + "verify_asan_link_order=0");
}

void clear_fault(RankGroup& ranks) {
  ranks.set_env("LD_PRELOAD", "");
  ranks.set_env("SPUR_SHM_FAULT", "");
}

}  // namespace

class SharedMemoryTest : public QObject {
  Q_OBJECT

 private slots:
  void a_rank_dying_before_it_attaches_is_seen_at_once() {
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"ddp", "--out", out.path(), "--steps", "4"}, 2);
    QVERIFY(ranks.start({0}));
    preload_fault(ranks, "die_opening");
    QVERIFY(ranks.start({1}));
    QElapsedTimer clock;
    clock.start();
    // Before: rank 0 waited for the attach for the collective timeout (1800 s).
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    qInfo("rank 0 ended %lld ms after its peer died", static_cast<long long>(clock.elapsed()));
    QCOMPARE(ranks.result(1).exit_code, 9);
    QVERIFY2(ranks.result(0).exit_code != 0, qPrintable(ranks.transcript()));
    QVERIFY2(segments_of(ranks.pid(0)).isEmpty(), qPrintable(segments_of(ranks.pid(0)).join(", ")));
  }

  void rank_0_dying_before_it_unlinks_leaves_nothing() {
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"ddp", "--out", out.path(), "--steps", "4"}, 2);
    preload_fault(ranks, "die_unlinking");
    QVERIFY(ranks.start({0}));
    clear_fault(ranks);
    QVERIFY(ranks.start({1}));
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    QCOMPARE(ranks.result(0).exit_code, 9);
    // Before: the segment stayed in /dev/shm (only rank 0 unlinked it).
    QVERIFY2(segments_of(ranks.pid(0)).isEmpty(), qPrintable(segments_of(ranks.pid(0)).join(", ")));
  }

  void abandoned_segments_are_removed_by_the_next_run() {
    // Three segments of processes that do not exist: one abandoned long ago (nothing locks it), one as old but
    // still locked (a live rank holds it), one just made. Only the first may go.
    const QStringList names = {"spur-4000000001-7", "spur-4000000002-7", "spur-4000000003-7"};
    int locked_fd = -1;
    for (int i = 0; i < 3; ++i) {
      const QByteArray path = ("/dev/shm/" + names[i]).toUtf8();
      const int fd = ::open(path.constData(), O_CREAT | O_RDWR, 0600);
      QVERIFY(fd >= 0);
      QVERIFY(::ftruncate(fd, 4096) == 0);
      if (i < 2) {
        struct utimbuf old {};
        old.actime = old.modtime = ::time(nullptr) - 600;
        QVERIFY(::utime(path.constData(), &old) == 0);
      }
      if (i == 1) {
        struct flock lock {};
        lock.l_type = F_WRLCK;
        lock.l_whence = SEEK_SET;
        lock.l_start = 0;
        lock.l_len = 1;
        QVERIFY(::fcntl(fd, F_OFD_SETLK, &lock) == 0);
        locked_fd = fd;
      } else {
        ::close(fd);
      }
    }
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"ddp", "--out", out.path(), "--steps", "2"}, 2);
    QVERIFY(ranks.start());
    const bool finished = ranks.wait(120000);
    const bool first = QFile::exists("/dev/shm/" + names[0]), second = QFile::exists("/dev/shm/" + names[1]),
               third = QFile::exists("/dev/shm/" + names[2]);
    ::close(locked_fd);
    for (const auto& name : names) QFile::remove("/dev/shm/" + name);
    QVERIFY2(finished && ranks.result(0).exit_code == 0 && ranks.result(1).exit_code == 0,
             qPrintable(ranks.transcript()));
    QVERIFY2(!first, "the abandoned segment is still there");
    QVERIFY2(second, "a segment a live process locks was removed");
    QVERIFY2(third, "a segment just made was removed");
  }

  void ranks_in_other_pid_namespaces_are_not_taken_for_dead() {
    QProcess probe;
    probe.start("unshare", {"--pid", "--fork", "true"});
    if (!probe.waitForFinished(10000) || probe.exitStatus() != QProcess::NormalExit || probe.exitCode() != 0) {
      QSKIP("unshare --pid needs root (CAP_SYS_ADMIN) here");
    }
    // Rank 0 in a PID namespace of its own, rank 1 in this one, both sharing /dev/shm; rank 1 lags, so rank 0
    // waits and checks that its peer is alive. Before: rank 1's pid meant nothing in rank 0's namespace, so it was
    // "gone". (Under ASan the namespaced rank runs without LeakSanitizer: as its namespace's pid 1 it cannot stop
    // its own threads to scan them, and reports LibTorch's live allocations as leaks.)
    QTemporaryDir out;
    const QString script =
        R"(if [ "$RANK" = 0 ]; then ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" exec unshare --pid --fork "$0" "$@"; )"
        R"(else exec "$0" "$@"; fi)";
    RankGroup ranks(
        "/bin/sh", {"-c", script, SPUR_TEST_WORKER, "ddp", "--out", out.path(), "--steps", "6", "--slow_rank", "1"}, 2);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < 2; ++rank) {
      QVERIFY2(ranks.result(rank).exit_code == 0 && ranks.result(rank).output.contains("gradients via shared memory"),
               qPrintable(ranks.transcript()));
    }
  }

  void ranks_reducing_different_sizes_stop_with_an_error() {
    // Rank 1 cuts DDP's buckets smaller than rank 0: their first all-reduces have different sizes.
    QTemporaryDir out;
    RankGroup ranks(SPUR_TEST_WORKER, {"ddp", "--out", out.path(), "--steps", "2", "--odd_bucket_bytes", "300"}, 2);
    QVERIFY(ranks.start());
    QVERIFY2(ranks.wait(120000), qPrintable(ranks.transcript()));
    for (int rank = 0; rank < 2; ++rank) {
      const auto result = ranks.result(rank);
      QVERIFY2(result.exit_code != 0 && result.output.contains("shared-memory gradient all-reduce: rank ") &&
                   result.output.contains("would mix unrelated values"),
               qPrintable(ranks.transcript()));
    }
  }
};

SPUR_TEST_CLASS(SharedMemoryTest)
#include "shared_memory_test.moc"
