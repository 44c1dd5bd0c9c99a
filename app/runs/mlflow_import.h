// SPDX-License-Identifier: Apache-2.0
// Importing MLflow runs into the run history (`spur runs import mlflow://HOST:PORT[/EXPERIMENT]`, the Studio's
// File > Import from MLflow): every active run of the experiment (of every experiment when none is named) read
// from the tracking server's REST API (spur/core/mlflow.h) with its parameters, every point of every metric
// (metrics/get-history, page by page), its status and times, then written in one transaction per run. A run
// imported before with the same records is skipped and named; one whose records have changed since (a run still
// being written) is named too; --again imports it anyway. As the TensorBoard import (tensorboard_import.h), with
// the server in place of the folder.
//
// Addresses: mlflow://HOST:PORT[/EXPERIMENT] speaks http, mlflow+https://HOST[:PORT][/EXPERIMENT] https; the
// experiment is a name (percent-encoded where it holds "/" or spaces) or an experiment id. Credentials come from
// the environment as for MLflow's own clients (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME/PASSWORD).
//
// Threads: import_mlflow() blocks on the server and the history; the Studio calls it on a worker thread.
#pragma once

#include <QString>
#include <QStringList>

#include <functional>
#include <string>
#include <vector>

#include "runs/tensorboard_import.h"

namespace spur::app {

struct MlflowImportOptions {
  /// The project the runs are filed under. Default: empty, meaning each run's experiment name.
  QString project;
  /// Import runs imported before once more. Default: false (they are skipped and named).
  bool again = false;
  /// Only these runs (MLflow run ids). Default: empty, meaning every active run.
  QStringList run_ids;
  /// Asked before each run: true stops the import there. Default: none.
  std::function<bool()> cancelled;
};

/// True for the addresses import_mlflow takes (mlflow:// and mlflow+https://).
bool is_mlflow_address(const QString& address);
/// The MLflow run id in an ImportedRun::directory of an MLflow import ("... run ID"); empty for any other.
QString mlflow_run_id(const QString& imported_directory);

/// Imports the runs at `address` into the history at `history_path`; `done` is called after each, with
/// ImportedRun::directory naming the run ("mlflow://HOST:PORT/EXPERIMENT run ID"). Throws std::invalid_argument
/// for a bad address, an experiment or run that does not exist, or a server that cannot be reached or refuses;
/// history::HistoryError when the history cannot be written.
std::vector<ImportedRun> import_mlflow(const std::string& history_path, const QString& address,
                                       const MlflowImportOptions& options = {},
                                       const std::function<void(const ImportedRun&)>& done = {});

}  // namespace spur::app
