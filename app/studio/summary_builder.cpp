// SPDX-License-Identifier: Apache-2.0
// Building the history's summaries in the background; see summary_builder.h.
#include "studio/summary_builder.h"

#include <QFileInfo>

#include <spur/history/writer.h>

namespace spur::app {

SummaryBuilder::SummaryBuilder(QString history_path) : path_(std::move(history_path)) {}

void SummaryBuilder::build() {
  if (!QFileInfo::exists(path_)) return;
  try {
    history::HistoryWriter writer(path_.toStdString());
    const auto built = writer.build_summaries(
        [this](int64_t done, int64_t total) {
          if (total > 0) emit progress(done, total);
          return !stop_.load();
        },
        /*check_all=*/false);
    emit finished(built, {});
  } catch (const std::exception& e) {
    emit finished(0, QString::fromUtf8(e.what()));
  }
}

void SummaryBuilder::rebuild(qint64 run, const QString& key) {
  if (!QFileInfo::exists(path_) || stop_) return;
  try {
    history::HistoryWriter writer(path_.toStdString());
    if (writer.rebuild_summaries(run, key.toStdString())) emit finished(1, {});
  } catch (const std::exception& e) {
    emit finished(0, QString::fromUtf8(e.what()));
  }
}

}  // namespace spur::app
