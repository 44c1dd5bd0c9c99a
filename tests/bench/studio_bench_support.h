// SPDX-License-Identifier: GPL-3.0-or-later
// What the Studio's benchmarks share (scale_bench, studio_remote_bench): waiting on the event loop as the Studio
// itself runs, and this process's resident memory. Header-only; the GUI thread only.
#pragma once

#include <QAbstractItemModel>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QItemSelection>
#include <QList>
#include <QTimer>

#include <functional>

#include "studio/runs_model.h"

namespace spur::bench {

// Runs the event loop (sleeping between events, as the Studio does: a busy loop here would take a core from the
// reader thread) until `done` or `ms` pass; checked every millisecond.
inline bool wait(const std::function<bool()>& done, int ms) {
  if (done()) return true;
  QElapsedTimer clock;
  clock.start();
  QEventLoop loop;
  QTimer check;
  bool ok = false;
  QObject::connect(&check, &QTimer::timeout, [&] {
    if (done()) ok = true;
    if (ok || clock.elapsed() > ms) loop.quit();
  });
  check.start(1);
  loop.exec();
  return ok;
}

// The first `n` rows of a runs table (as sorted), as a selection of whole rows; their run ids in `ids`.
inline QItemSelection first_rows(const QAbstractItemModel& model, int n, QList<qint64>& ids) {
  QItemSelection selection;
  for (int row = 0; row < n && row < model.rowCount(); ++row) {
    selection.select(model.index(row, 0), model.index(row, 0));
    ids << model.index(row, 0).data(spur::app::RunsModel::RunIdRole).toLongLong();
  }
  return selection;
}

inline qint64 resident_kib() {
  QFile status("/proc/self/status");
  if (!status.open(QIODevice::ReadOnly)) return 0;
  for (const auto& line : status.readAll().split('\n')) {
    if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').front().toLongLong();
  }
  return 0;
}

}  // namespace spur::bench
