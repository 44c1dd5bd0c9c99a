// SPDX-License-Identifier: Apache-2.0
// Experiment tracking: Accelerator::init_trackers / log / end_training hand metrics to trackers (sqlite: the run
// history; stream: lines on stdout for a launcher to ingest; tensorboard: event files; csv; mlflow: a tracking
// server; or your own) through one
// background writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <spur/json.h>

namespace spur {

/// One logged value. `key` indexes MetricBatch::keys.
struct MetricRecord {
  uint32_t key = 0;
  int64_t step = 0;
  double value = 0;
  double wall = 0;  // seconds since the epoch
};

/// What a tracker receives: records in the order they were logged, and every key name so far.
struct MetricBatch {
  const std::vector<std::string>& keys;
  const std::vector<MetricRecord>& records;
};

/// One logged text (Accelerator::log with a string value).
struct TextRecord {
  std::string key;
  std::string text;
  int64_t step = 0;
  double wall = 0;
};

/// A file the run wrote: a checkpoint (save_state's folder) or a model (save_model's folder), recorded by the
/// main process once it is complete, so the Studio can list it with the run.
struct FileRecord {
  std::string kind;   // "checkpoint", "model"
  std::string path;   // absolute
  int64_t step = -1;  // the last step logged before it was written; -1: none
  int64_t bytes = 0;
  double wall = 0;  // seconds since the epoch
};

/// What init_trackers says about the run.
struct TrackingRun {
  std::string project;
  std::string name;
  json::Value params;  // init_trackers' config
  int64_t total_steps = 0;
  int64_t rank = 0;
};

/// A destination for metrics. Every call comes from the tracking writer thread, never the training thread;
/// a call that throws is retried with the same records later (the backlog is bounded, drops are counted).
class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual std::string name() const = 0;
  virtual void start(const TrackingRun& run) = 0;
  virtual void write(const MetricBatch& batch) = 0;
  /// Texts, in the order they were logged (trackers that keep no text ignore them).
  virtual void write_text(const std::vector<TextRecord>& texts) { (void)texts; }
  /// Files written (trackers that list no files ignore them).
  virtual void write_files(const std::vector<FileRecord>& files) { (void)files; }
  virtual void set_total_steps(int64_t total_steps) { (void)total_steps; }
  /// `status`: "finished" or "failed".
  virtual void finish(const std::string& status) { (void)status; }
};

/// The history database (see spur/history): a run of its own, or the launcher's run (SPUR_RUN_ID).
std::shared_ptr<Tracker> make_sqlite_tracker(std::string history_path);
/// `@spur:<key> {json}` lines on stdout, one per record (the format: stream_line.h): for runs whose history is
/// elsewhere.
std::shared_ptr<Tracker> make_stream_tracker();
/// `<directory>/<project>/<run>/metrics.csv` with columns key,step,value,wall_time (the layout `spur runs export
/// --format csv` writes). A file of another layout is left alone: the tracker reports it and records nothing there.
std::shared_ptr<Tracker> make_csv_tracker(std::string directory);
/// TensorBoard event files in `directory` (made if missing): scalars (float32, as PyTorch's SummaryWriter), texts,
/// and the run's config as the hparams plugin's hyperparameters (nested keys joined with "/"). Every batch is
/// written whole, so a crash leaves a file TensorBoard reads up to the last batch; finish() syncs it to disk.
std::shared_ptr<Tracker> make_tensorboard_tracker(std::string directory);
/// An MLflow tracking server at `tracking_uri` (http:// or https://, what MLFLOW_TRACKING_URI holds), through its
/// REST API: a run in the experiment MLFLOW_EXPERIMENT_NAME (else the project, else "Default"), or MLFLOW_RUN_ID's
/// run continued; the config as parameters (flattened with "/"), tags (MLFLOW_TAGS, the program's command, the
/// Spur run id and launch command), metrics 1,000 a batch from a thread of its own, and the end status. Credentials
/// come from MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD, never stored. A server
/// that is down is said once and retried; up to `max_backlog` values wait for it, and the end says how many never
/// went. Texts are not sent (MLflow metrics are numbers). Throws spur::Error for an address that is not http(s).
std::shared_ptr<Tracker> make_mlflow_tracker(const std::string& tracking_uri, std::size_t max_backlog = 1u << 20);

struct TrackingOptions {
  /// Built-in trackers by name: "sqlite", "stream", "csv", "tensorboard", "mlflow" (MLFLOW_TRACKING_URI's server),
  /// "all" (tensorboard and csv, and mlflow when MLFLOW_TRACKING_URI is set), "none". Empty: SPUR_TRACKERS
  /// (comma-separated, set by the launcher), else "sqlite". AcceleratorOptions::log_with adds to these.
  std::vector<std::string> trackers;
  /// Your own trackers, in addition.
  std::vector<std::shared_ptr<Tracker>> custom;
  /// The history database. Empty: SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db.
  std::string history;
  /// Where the csv tracker writes.
  std::string csv_directory = "runs";
  /// The run's name. Empty: the launcher's (SPUR_RUN_NAME), else "run-<id>".
  std::string run_name;
  /// Known total steps (progress and ETA in `spur runs` and the Studio); 0: unknown.
  int64_t total_steps = 0;
  /// Record on every rank, not only the main process.
  bool all_processes = false;
  /// How often the writer hands records to the trackers (readers see new points about this late).
  std::chrono::milliseconds flush_interval{100};
  /// Values kept while a tracker cannot write (a locked or full disk); beyond, the oldest are dropped, counted.
  /// Values waiting for the writer thread are bounded too (at least 4 million), for a writer that is stuck.
  std::size_t max_backlog = 1u << 20;
};

}  // namespace spur
