// SPDX-License-Identifier: Apache-2.0
// A client of MLflow's tracking server REST API (/api/2.0/mlflow/...), as MLflow's own Python client speaks it:
// experiments by name, runs created, updated, searched and read, metrics and parameters logged in batches, metric
// histories read page by page. Used by the engine's mlflow tracker and by `spur runs import mlflow://`.
// Torch-free and Qt-free; every call is one blocking HTTP request (spur/core/http.h) or a few for paged reads.
//
// The server and its credentials come from the environment MLflow's clients read (server_from_environment), never
// from a file or a command line, and no message shows a credential.
//
// Threads: a Client is used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spur/error.h>
#include <spur/json.h>

namespace spur::mlflow {

/// Where a tracking server is and how to reach it.
struct Server {
  std::string url;             // http(s)://host[:port][/prefix], no trailing slash
  std::string token;           // sent as "Authorization: Bearer"
  std::string user, password;  // basic authentication
  bool insecure = false;
  std::string ca_file;
  std::chrono::milliseconds timeout{30000};  // one request's
  /// `url` without credentials, for messages.
  std::string shown() const;
};

/// The server at `uri` (MLFLOW_TRACKING_URI's value, or what `spur runs import` was given as http(s)://...),
/// with what MLflow's clients read from the environment: MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME and
/// MLFLOW_TRACKING_PASSWORD, MLFLOW_TRACKING_INSECURE_TLS, MLFLOW_TRACKING_SERVER_CERT_PATH,
/// MLFLOW_HTTP_REQUEST_TIMEOUT (seconds). Throws spur::Error naming `what` when `uri` is not an http(s) URL (a
/// local ./mlruns folder, databricks, sqlite:// are MLflow's Python client's own, not a server's).
Server server_from_environment(const std::string& uri, const std::string& what);

/// The server answered with an error: its HTTP status, MLflow's error code (RESOURCE_DOES_NOT_EXIST,
/// INVALID_PARAMETER_VALUE, ...) and message.
class ServerError : public Error {
 public:
  ServerError(const std::string& message, long status, std::string code)
      : Error(message), status_(status), code_(std::move(code)) {}
  long status() const { return status_; }
  const std::string& code() const { return code_; }
  /// Worth trying again later: the server is overloaded or failing (5xx, 429), not refusing the request.
  bool retryable() const { return status_ >= 500 || status_ == 429 || status_ == 408; }

 private:
  long status_;
  std::string code_;
};

struct Metric {
  std::string key;
  double value = 0;
  int64_t timestamp = 0;  // milliseconds since the epoch
  int64_t step = 0;
};

struct RunInfo {
  std::string run_id, run_name, experiment_id;
  std::string status;                    // RUNNING, SCHEDULED, FINISHED, FAILED, KILLED
  std::string lifecycle_stage;           // active, deleted
  int64_t start_time = 0, end_time = 0;  // milliseconds since the epoch; 0: not set
  std::vector<std::pair<std::string, std::string>> params, tags;
  std::vector<Metric> latest;  // each metric's latest value (its keys)
};

struct Experiment {
  std::string id, name;
};

/// The most metrics, and params or tags, one runs/log-batch takes (MLflow's MAX_METRICS_PER_BATCH,
/// MAX_PARAMS_TAGS_PER_BATCH); the longest parameter value (MAX_PARAM_VAL_LENGTH) and key (MAX_ENTITY_KEY_LENGTH).
inline constexpr std::size_t kMaxMetricsPerBatch = 1000, kMaxParamsPerBatch = 100, kMaxParamValue = 6000, kMaxKey = 250;

/// MLflow's rule for a metric or parameter name: at most 250 characters of letters, digits, "_", "-", ".", " ",
/// ":" and "/", not a path that resolves to another name ("a//b", "./a", "a/", "/a", "..").
bool valid_key(const std::string& key);

/// A parameter's value as MLflow's Python client writes it, str(value): text as it is, True/False, an integer,
/// a float in its shortest round-trip form with ".0" when whole ("0.003", "100.0", "1e-05"), anything else as
/// JSON.
std::string param_text(const json::Value& value);

class Client {
 public:
  explicit Client(Server server) : server_(std::move(server)) {}
  const Server& server() const { return server_; }

  /// The id of the experiment named `name`; nullopt when there is none (or it was deleted).
  std::optional<std::string> experiment_id(const std::string& name);
  /// The experiment named `name`, made when missing (another client making it at the same time is fine).
  std::string ensure_experiment(const std::string& name);
  /// Every active experiment.
  std::vector<Experiment> experiments();
  /// A new run: its id.
  std::string create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_time,
                         const std::vector<std::pair<std::string, std::string>>& tags);
  /// Status RUNNING, FINISHED, FAILED or KILLED; `end_time` 0 leaves it unset.
  void update_run(const std::string& run_id, const std::string& status, int64_t end_time);
  void set_tags(const std::string& run_id, const std::vector<std::pair<std::string, std::string>>& tags);
  /// One runs/log-batch: at most kMaxMetricsPerBatch metrics and kMaxParamsPerBatch params (checked).
  void log_batch(const std::string& run_id, const std::vector<Metric>& metrics,
                 const std::vector<std::pair<std::string, std::string>>& params = {});
  RunInfo run(const std::string& run_id);
  /// The runs of an experiment, active ones, oldest first (every page).
  std::vector<RunInfo> runs(const std::string& experiment_id);
  /// Every point of a run's metric (every page), in the server's order.
  std::vector<Metric> metric_history(const std::string& run_id, const std::string& key);

  /// The answer to GET `endpoint` (below /api/2.0/mlflow/) with `query` ("a=1&b=2", already encoded).
  json::Value get(const std::string& endpoint, const std::string& query = {});
  /// The answer to POST `endpoint` with a JSON body.
  json::Value post(const std::string& endpoint, const std::string& body);

 private:
  json::Value call(const std::string& method, const std::string& endpoint, const std::string& query,
                   const std::string& body);
  Server server_;
};

}  // namespace spur::mlflow
