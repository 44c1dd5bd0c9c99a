// SPDX-License-Identifier: Apache-2.0
// Building the history's summaries in the background; see summary_builder.h.
#include "studio/summary_builder.h"

#include <QFileInfo>

#include "runs/run_service.h"

namespace spur::app {

SummaryBuilder::SummaryBuilder(QString history_path) : path_(std::move(history_path)) {}

void SummaryBuilder::build() {
  try {
    RunService service(path_.toStdString(), RemoteOptions::from_environment(false));
    if (!service.exists() || service.read_only()) return;
    const auto built = service.summarise(
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
  if (stop_) return;
  try {
    RunService service(path_.toStdString(), RemoteOptions::from_environment(false));
    if (!service.exists() || service.read_only()) return;
    if (service.rebuild_summaries(run, key.toStdString())) emit finished(1, {});
  } catch (const std::exception& e) {
    emit finished(0, QString::fromUtf8(e.what()));
  }
}

}  // namespace spur::app
