// SPDX-License-Identifier: GPL-3.0-or-later
// The history's plot summaries, built in the background; see history_summaries.h. The builder runs on its own
// thread; its progress and end come back as queued signals, turned into messages here on the GUI thread.
#include "main/history_summaries.h"

#include <QTimer>

#include "studio/series_loader.h"
#include "studio/summary_builder.h"

namespace spur::studio {

HistorySummaries::HistorySummaries(const QString& history_path, QObject* parent)
    : QObject(parent), builder_(new app::SummaryBuilder(history_path)) {
  builder_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, builder_, &QObject::deleteLater);
  connect(builder_, &app::SummaryBuilder::progress, this, [this](qint64 done, qint64 total) {
    if (done < total) {
      emit message(tr("Summarising the history for fast plots: %1 of %2 series").arg(done).arg(total), 0);
    } else {
      emit message(tr("History summarised: %n series", nullptr, int(total)), 5000);
    }
  });
  connect(builder_, &app::SummaryBuilder::finished, this, [this](qint64, const QString& error) {
    if (error.isEmpty()) return;
    // Plots still draw (from the raw points); say why it is slow, and try again later (another process may have
    // held the history's write lock). A history this user may only read is said once and left.
    emit message(tr("The history's plot summaries could not be built: %1").arg(error), 15000);
    if (attempts_++ < 3 && !error.contains("cannot be written") && !error.contains("readonly")) {
      QTimer::singleShot(60000, this, [this] {
        if (builder_) QMetaObject::invokeMethod(builder_, &app::SummaryBuilder::build, Qt::QueuedConnection);
      });
    }
  });
}

HistorySummaries::~HistorySummaries() { stop(); }

void HistorySummaries::start() {
  thread_.start();
  QMetaObject::invokeMethod(builder_, &app::SummaryBuilder::build, Qt::QueuedConnection);
}

void HistorySummaries::rebuild_untrusted(const app::SeriesLoader* loader) {
  connect(loader, &app::SeriesLoader::untrusted, builder_, &app::SummaryBuilder::rebuild);
}

void HistorySummaries::stop() {
  if (!builder_) return;
  builder_->stop();  // after the series it is on: every series is written whole or not at all
  if (thread_.isRunning()) {
    thread_.quit();
    thread_.wait();  // the builder is deleted as its thread ends
  } else {
    delete builder_;  // never started
  }
  builder_ = nullptr;
}

}  // namespace spur::studio
