// SPDX-License-Identifier: Apache-2.0
// The mlflow tracker (see make_mlflow_tracker in spur/tracking.h): the run's parameters, metrics and end status
// sent to an MLflow tracking server through its REST API (spur/core/mlflow.h).
//
// Threads: the tracking writer calls start/write/finish and never waits on the network: write() queues the
// records (bounded: beyond max_backlog the oldest are dropped, counted) and the tracker's own sender thread posts
// them, 1,000 a batch. A server that is down or refuses is said once, retried with a growing pause, and said again
// when it answers; what it never took is counted at the end (it is in Spur's history all the same).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <spur/error.h>
#include <spur/tracking.h>

#include "tracking/tracking_hub.h"

#include <spur/core/http.h>
#include <spur/core/mlflow.h>

namespace spur {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

int64_t milliseconds(double wall) { return std::llround(wall * 1000.0); }

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The config as MLflow parameters: nested objects flattened with "/", every value as text (MLflow keeps text).
void flatten(const json::Value& value, const std::string& name, std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (const auto& [key, member] : value.as_object()) flatten(member, name.empty() ? key : name + "/" + key, out);
  } else {
    out.emplace_back(name, mlflow::param_text(value));
  }
}

class MlflowTracker : public Tracker {
 public:
  MlflowTracker(mlflow::Server server, std::size_t max_backlog)
      : client_(std::move(server)), max_backlog_(std::max<std::size_t>(max_backlog, 1000)) {}
  ~MlflowTracker() override { stop(std::nullopt); }

  std::string name() const override { return "mlflow (" + client_.server().shown() + ")"; }

  void start(const TrackingRun& run) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (thread_.joinable()) return;
    run_ = run;
    thread_ = std::thread([this] { loop(); });
  }

  void write(const MetricBatch& batch) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& record : batch.records) {
      const auto& key = batch.keys[record.key];
      if (!mlflow::valid_key(key)) {
        if (bad_keys_.insert(key).second) {
          std::cerr << "spur: tracking: " << name() << ": '" << key
                    << "' is not a metric name MLflow takes (letters, digits, _ - . : space and /, at most 250, no "
                       "empty or . parts): kept in Spur's history only"
                    << std::endl;
        }
        ++unsendable_;
        continue;
      }
      queue_.push_back(mlflow::Metric{key, record.value, milliseconds(record.wall), record.step});
      ++logged_;
    }
    if (queue_.size() > max_backlog_) {
      const auto excess = queue_.size() - max_backlog_;
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(excess));
      dropped_ += excess;
    }
    wake_.notify_one();
  }

  void finish(const std::string& status) override { stop(status); }

 private:
  // The sender: makes the run, sends the parameters, then batches until told to stop.
  void loop() {
    auto pause = 500ms;
    auto wait_until = Clock::now();
    for (;;) {
      std::vector<mlflow::Metric> batch;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        // Asleep while there is nothing to send; a failure's pause is waited out (stopping cuts it short).
        const auto until = !stop_ && queue_.empty() && started_ ? Clock::now() + 1h : wait_until;
        wake_.wait_until(lock, until,
                         [&] { return stop_ || (Clock::now() >= wait_until && (!queue_.empty() || !started_)); });
        stopping = stop_;
        if (stopping && (Clock::now() > deadline_ || given_up_)) break;
        const auto n = std::min(queue_.size(), mlflow::kMaxMetricsPerBatch);
        batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      }
      try {
        if (!started_) begin();
        if (!batch.empty()) client_.log_batch(run_id_, batch);
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(batch.size()));
        sent_ += batch.size();
        if (failing_) {
          std::cerr << "spur: tracking: " << name() << " takes values again" << std::endl;
          failing_ = false;
        }
        pause = 500ms;
        wait_until = Clock::now();
        if (stopping && queue_.empty()) break;
      } catch (const std::exception& e) {
        const auto* refused = dynamic_cast<const mlflow::ServerError*>(&e);
        const bool permanent = refused && !refused->retryable();
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = e.what();
        if (permanent) {
          // The server refuses the run itself (deleted, a bad experiment, no permission): nothing more goes.
          std::cerr << "spur: tracking: " << name() << " refuses this run's values (" << e.what()
                    << "); training goes on, its values are kept in Spur's history" << std::endl;
          given_up_ = true;
          break;
        }
        if (!failing_) {
          std::cerr << "spur: tracking: " << name() << " cannot be reached (" << e.what()
                    << "); training goes on, keeping up to " << max_backlog_ << " values and retrying" << std::endl;
          failing_ = true;
        }
        if (stopping) break;  // one try at the end; no waiting on a server that is down
        wait_until = Clock::now() + pause;
        pause = std::min<std::chrono::milliseconds>(pause * 2, 10s);
      }
    }
  }

  // Runs on the sender: the experiment, the run (or MLFLOW_RUN_ID's, continued), its tags and parameters.
  void begin() {
    std::string experiment = env("MLFLOW_EXPERIMENT_NAME");
    if (experiment.empty()) experiment = run_.project.empty() ? "Default" : run_.project;
    std::vector<std::pair<std::string, std::string>> tags;
    const std::string command = detail::own_command_line();
    if (!command.empty()) tags.emplace_back("mlflow.source.name", command.substr(0, mlflow::kMaxParamValue));
    tags.emplace_back("mlflow.source.type", "LOCAL");
    if (const auto user = env("USER"); !user.empty()) tags.emplace_back("mlflow.user", user);
    if (const auto id = env("SPUR_RUN_ID"); !id.empty()) tags.emplace_back("spur.run_id", id);
    if (const auto launch = env("SPUR_LAUNCH_COMMAND"); !launch.empty()) {
      tags.emplace_back("spur.launch_command", launch.substr(0, 8000));
    }
    if (!run_.project.empty()) tags.emplace_back("spur.project", run_.project);
    if (const auto extra = env("MLFLOW_TAGS"); !extra.empty()) {
      // Accelerate's MLFLOW_TAGS: a JSON object of tags.
      try {
        const auto parsed = json::parse(extra);
        for (const auto& [key, value] : parsed.as_object("MLFLOW_TAGS")) {
          tags.emplace_back(key, value.is_string() ? value.as_string() : json::write(value));
        }
      } catch (const std::exception& e) {
        std::cerr << "spur: tracking: MLFLOW_TAGS is not a JSON object of tags (" << e.what() << "): left out"
                  << std::endl;
      }
    }
    const std::string resumed = env("MLFLOW_RUN_ID");
    if (!run_id_.empty()) {
      // made before a failure: only the parameters are left to send
    } else if (!resumed.empty()) {
      // MLflow's start_run(run_id): the run's status back to RUNNING; its other attributes stay.
      client_.update_run(resumed, "RUNNING", 0);
      client_.set_tags(resumed, tags);
      run_id_ = resumed;
    } else {
      run_id_ = client_.create_run(client_.ensure_experiment(experiment), run_.name, now_ms(), tags);
    }
    std::vector<std::pair<std::string, std::string>> params, sendable;
    if (run_.params.is_object()) flatten(run_.params, "", params);
    for (auto& [key, value] : params) {
      if (!mlflow::valid_key(key) || value.size() > mlflow::kMaxParamValue) {
        // As Accelerate's MLflowTracker: a value MLflow cannot hold is left out, and said.
        std::cerr << "spur: tracking: " << name() << ": parameter '" << key << "' left out ("
                  << (value.size() > mlflow::kMaxParamValue ? "its value is longer than MLflow's 6000 characters"
                                                            : "not a name MLflow takes")
                  << ")" << std::endl;
        continue;
      }
      sendable.emplace_back(std::move(key), std::move(value));
    }
    for (std::size_t i = 0; i < sendable.size(); i += mlflow::kMaxParamsPerBatch) {
      const std::vector<std::pair<std::string, std::string>> some(
          sendable.begin() + static_cast<std::ptrdiff_t>(i),
          sendable.begin() + static_cast<std::ptrdiff_t>(std::min(sendable.size(), i + mlflow::kMaxParamsPerBatch)));
      try {
        client_.log_batch(run_id_, {}, some);
      } catch (const mlflow::ServerError& e) {
        // A continued run (MLFLOW_RUN_ID) whose parameters had other values: MLflow keeps the first ones.
        if (resumed.empty() || e.code() != "INVALID_PARAMETER_VALUE") throw;
        std::cerr << "spur: tracking: " << name() << ": run " << resumed << " keeps its earlier parameters ("
                  << e.what() << ")" << std::endl;
      }
    }
    started_ = true;
  }

  // Finishing (a status) or abandoning (nullopt, the tracker destroyed unfinished): what is queued gets up to
  // 30 s to go, then the run's status; whatever did not go is counted.
  void stop(const std::optional<std::string>& status) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_ || !thread_.joinable()) return;
      stop_ = true;
      deadline_ = Clock::now() + 30s;
    }
    wake_.notify_one();
    thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    std::string unsent_status;
    if (!run_id_.empty() && !given_up_ && status) {
      const std::string final = *status == "finished" ? "FINISHED" : "FAILED";
      try {
        client_.update_run(run_id_, final, now_ms());
      } catch (const std::exception& e) {
        if (error_.empty()) error_ = e.what();
        unsent_status = final;
      }
    }
    const auto unsent = queue_.size() + dropped_;
    if (unsent || unsendable_ || !unsent_status.empty()) {
      std::cerr << "spur: tracking: " << name() << ": " << unsent << " of " << logged_
                << " logged value(s) were not sent";
      if (!unsent_status.empty()) std::cerr << ", nor run " << run_id_ << "'s status " << unsent_status;
      if (!error_.empty()) std::cerr << " (" << error_ << ")";
      if (unsendable_) std::cerr << "; " << unsendable_ << " had names MLflow does not take";
      std::cerr << "; every value is in Spur's run history" << std::endl;
    }
  }

  mlflow::Client client_;
  std::size_t max_backlog_;
  TrackingRun run_;
  std::string run_id_;    // the sender's (read by stop() once the sender has ended)
  bool started_ = false;  // the sender's: the run made and its parameters sent

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<mlflow::Metric> queue_;
  std::set<std::string> bad_keys_;
  uint64_t logged_ = 0, sent_ = 0, dropped_ = 0, unsendable_ = 0;
  bool stop_ = false, failing_ = false, given_up_ = false;
  Clock::time_point deadline_;
  std::string error_;
  std::thread thread_;
};

}  // namespace

std::shared_ptr<Tracker> make_mlflow_tracker(const std::string& tracking_uri, std::size_t max_backlog) {
  return std::make_shared<MlflowTracker>(mlflow::server_from_environment(tracking_uri, "MLFLOW_TRACKING_URI"),
                                         max_backlog);
}

}  // namespace spur
