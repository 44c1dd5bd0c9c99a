// SPDX-License-Identifier: Apache-2.0
// The sqlite tracker: metrics straight into the run history. Under `spur launch` (SPUR_RUN_ID) it adds to the
// launcher's run, which owns the status; alone, it makes a run of its own and ends it.
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include <spur/history/writer.h>
#include <spur/tracking.h>

#include "tracking/tracking_hub.h"

namespace spur {
namespace {

class SqliteTracker : public Tracker {
 public:
  explicit SqliteTracker(std::string path) : path_(std::move(path)) {}

  std::string name() const override { return "sqlite (" + path_ + ")"; }

  void start(const TrackingRun& run) override {
    info_ = run;
    open();
  }

  void write(const MetricBatch& batch) override {
    open();
    std::map<uint32_t, std::size_t> slot;
    std::vector<history::MetricAppend> metrics;
    for (const auto& record : batch.records) {
      auto [it, added] = slot.emplace(record.key, metrics.size());
      if (added) metrics.push_back({batch.keys[record.key], {}});
      metrics[it->second].points.push_back({record.step, record.value, record.wall});
    }
    writer_->append_metrics(run_, metrics);
  }

  void write_files(const std::vector<FileRecord>& files) override {
    open();
    std::vector<history::RunFile> rows;
    rows.reserve(files.size());
    for (const auto& file : files) {
      rows.push_back({0, run_, file.kind, file.path, file.step, file.bytes, file.wall, detail::this_host()});
    }
    writer_->add_files(rows);
  }

  void set_total_steps(int64_t total_steps) override {
    open();
    writer_->set_total_steps(run_, total_steps);
  }

  void finish(const std::string& status) override {
    if (writer_ && owns_run_) writer_->set_status(run_, status, status == "finished" ? 0 : 1);
  }

 private:
  void open() {
    if (!writer_) writer_ = std::make_unique<history::HistoryWriter>(path_);
    if (run_ != 0) return;
    const char* launched = std::getenv("SPUR_RUN_ID");
    const int64_t id = launched ? std::atoll(launched) : 0;
    const std::string params = json::write(info_.params.is_null() ? json::Value(json::Object{}) : info_.params);
    if (id > 0 && writer_->has_run(id)) {
      // Everything set before run_ is: a failure here is retried whole at the next delivery.
      writer_->set_names(id, info_.project, info_.name);
      writer_->set_params(id, params);
      if (info_.total_steps > 0) writer_->set_total_steps(id, info_.total_steps);
      run_ = id;
    } else {
      history::Run run;
      run.project = info_.project;
      run.name = info_.name;
      run.command = detail::own_command_line();
      run.total_steps = info_.total_steps;
      run.params = params;
      run_ = writer_->create_run(run);
      owns_run_ = true;
    }
  }

  std::string path_;
  TrackingRun info_;
  std::unique_ptr<history::HistoryWriter> writer_;
  int64_t run_ = 0;
  bool owns_run_ = false;
};

}  // namespace

std::shared_ptr<Tracker> make_sqlite_tracker(std::string history_path) {
  return std::make_shared<SqliteTracker>(std::move(history_path));
}

}  // namespace spur
