// SPDX-License-Identifier: Apache-2.0
// Accelerator::init_trackers, log, set_total_steps and end_training: trackers chosen from the options or the
// launcher's SPUR_TRACKERS, fed through one TrackingHub.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <spur/accelerator.h>
#include <spur/error.h>
#include <spur/history/records.h>

#include <spur/core/mlflow.h>

#include "accelerator_core.h"

namespace spur {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Made now, on the training thread, so a bad logging directory is an error where init_trackers is called.
void ensure_writable_directory(const std::string& directory, const std::string& what) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw Error("cannot create " + what + " " + directory + ": " + error.message());
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw Error(what + " " + directory + " is not writable: " + std::strerror(errno));
  }
}

}  // namespace

LogValue::LogValue(const torch::Tensor& tensor) : value(tensor.item<double>()) {}

void Accelerator::init_trackers(const std::string& project, json::Object config, const TrackingOptions& options) {
  auto& core = *core_;
  if (core.tracking) throw Error("init_trackers was already called");
  std::vector<std::string> names = options.trackers;
  if (names.empty()) {
    const char* chosen = std::getenv("SPUR_TRACKERS");
    names = split(chosen && *chosen ? chosen : "sqlite");
  }
  names.insert(names.end(), core.options.log_with.begin(), core.options.log_with.end());
  // "all": every tracker that writes files, besides the history, and MLflow when a server is named (as
  // Accelerate's "all" takes the trackers that are available).
  const char* mlflow_uri = std::getenv("MLFLOW_TRACKING_URI");
  const bool has_mlflow = mlflow_uri && *mlflow_uri;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "all") {
      names[i] = "tensorboard";
      names.insert(names.begin() + static_cast<std::ptrdiff_t>(i) + 1, "csv");
      if (has_mlflow) names.insert(names.begin() + static_cast<std::ptrdiff_t>(i) + 2, "mlflow");
    }
  }
  // Every rank judges the names, so a typo is the same error everywhere, not only on the main process.
  std::vector<std::string> chosen;
  for (const auto& name : names) {
    if (name != "sqlite" && name != "stream" && name != "csv" && name != "tensorboard" && name != "mlflow" &&
        name != "none") {
      throw Error("unknown tracker '" + name +
                  "' (AcceleratorOptions::log_with, TrackingOptions::trackers or SPUR_TRACKERS): sqlite, stream, "
                  "tensorboard, csv, mlflow, all or none");
    }
    if (name == "mlflow" && !has_mlflow) {
      throw Error(
          "the mlflow tracker needs MLFLOW_TRACKING_URI: the address of an MLflow tracking server, such as "
          "http://127.0.0.1:5000 (start one with `mlflow server --port 5000`)");
    }
    if (name != "none" && std::find(chosen.begin(), chosen.end(), name) == chosen.end()) chosen.push_back(name);
  }
  // The server's address judged on every rank too (the same error everywhere).
  mlflow::Server mlflow_server;
  if (std::find(chosen.begin(), chosen.end(), "mlflow") != chosen.end()) {
    mlflow_server = mlflow::server_from_environment(mlflow_uri, "MLFLOW_TRACKING_URI");
  }
  if (!options.all_processes && !core.state.is_main_process()) return;

  std::vector<std::shared_ptr<Tracker>> trackers;
  for (const auto& name : chosen) {
    if (name == "sqlite") {
      std::string path = options.history;
      if (path.empty()) {
        try {
          path = history::default_history_path();
        } catch (const std::runtime_error& no_home) {
          // Training goes on without the history (the other trackers still record): said once, on this rank.
          std::cerr << "spur: warning: this run is not recorded in the run history: " << no_home.what() << "\n";
          continue;
        }
      }
      if (path.rfind("ssh://", 0) == 0) {
        // `spur runs` reads a history on another machine; a program records into one on its own (said once).
        std::cerr << "spur: warning: this run is not recorded in the run history: " << path
                  << " is on another machine (SPUR_HISTORY=ssh://... is for spur runs); unset it here\n";
        continue;
      }
      trackers.push_back(make_sqlite_tracker(path));
    } else if (name == "stream") {
      trackers.push_back(make_stream_tracker());
    } else if (name == "csv") {
      trackers.push_back(make_csv_tracker(options.csv_directory));
    } else if (name == "tensorboard") {
      // logging_dir/<project>, as Accelerate's TensorBoardTracker; one folder per rank when every rank records.
      std::string directory = logging_dir() + "/" + (project.empty() ? "default" : project);
      if (options.all_processes && core.state.world_size > 1) directory += "/rank" + std::to_string(core.state.rank);
      ensure_writable_directory(directory, "the TensorBoard logging directory");
      trackers.push_back(make_tensorboard_tracker(directory));
    } else if (name == "mlflow") {
      trackers.push_back(make_mlflow_tracker(mlflow_server.url, options.max_backlog));
    }
  }
  for (auto& tracker : options.custom) trackers.push_back(tracker);
  TrackingRun run;
  run.project = project;
  run.name = options.run_name;
  if (run.name.empty()) {
    if (const char* launched = std::getenv("SPUR_RUN_NAME")) run.name = launched;
  }
  run.params = json::Value(std::move(config));
  run.total_steps = options.total_steps;
  run.rank = core.state.rank;
  core.tracking = std::make_unique<detail::TrackingHub>(std::move(run), std::move(trackers), options);
}

void Accelerator::log(std::initializer_list<std::pair<std::string_view, LogValue>> values,
                      std::optional<int64_t> step) {
  auto& core = *core_;
  if (!core.tracking) return;
  std::pair<std::string_view, double> plain[16];
  const int64_t at = step.value_or(core.next_log_step);
  core.next_log_step = at + 1;
  std::size_t n = 0;
  for (const auto& [key, value] : values) {
    if (value.is_text) {
      core.tracking->log_text(key, value.text, at);
      continue;
    }
    plain[n++] = {key, value.value};
    if (n == 16) {
      core.tracking->log(plain, n, at);
      n = 0;
    }
  }
  if (n) core.tracking->log(plain, n, at);
}

void Accelerator::log(const std::vector<std::pair<std::string, double>>& values, std::optional<int64_t> step) {
  auto& core = *core_;
  if (!core.tracking) return;
  const int64_t at = step.value_or(core.next_log_step);
  core.next_log_step = at + 1;
  std::vector<std::pair<std::string_view, double>> plain(values.begin(), values.end());
  for (std::size_t i = 0; i < plain.size(); i += 16)
    core.tracking->log(plain.data() + i, std::min<std::size_t>(16, plain.size() - i), at);
}

void Accelerator::set_total_steps(int64_t total_steps) {
  if (core_->tracking) core_->tracking->set_total_steps(total_steps);
}

void Accelerator::end_training() {
  if (core_->tracking) core_->tracking->finish("finished");
}

}  // namespace spur
