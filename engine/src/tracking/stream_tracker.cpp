// SPDX-License-Identifier: Apache-2.0
// The stream tracker: one record line per record on stdout ("@spur:<key> {json}", stream_line.h), which `spur
// launch` (over SSH and Slurm) and `spur launch` following a SageMaker job turn back into history on the launching
// machine. The key comes from SPUR_STREAM_KEY, which that launcher gives the run.
#include <cstdio>
#include <cstdlib>

#include <spur/tracking.h>

#include <spur/core/stream_line.h>

#include "tracking/tracking_hub.h"

namespace spur {
namespace {

class StreamTracker : public Tracker {
 public:
  std::string name() const override { return "stream"; }

  void start(const TrackingRun& run) override {
    emit(json::Object{{"type", "run"},
                      {"project", run.project},
                      {"name", run.name},
                      {"params", run.params},
                      {"total_steps", run.total_steps}});
  }

  void write(const MetricBatch& batch) override {
    std::string text;
    for (const auto& r : batch.records) {
      text +=
          prefix() +
          json::write(json::Object{
              {"type", "metric"}, {"key", batch.keys[r.key]}, {"step", r.step}, {"value", r.value}, {"wall", r.wall}}) +
          "\n";
    }
    put(text);
  }

  void set_total_steps(int64_t total_steps) override {
    emit(json::Object{{"type", "total_steps"}, {"total_steps", total_steps}});
  }

  void write_files(const std::vector<FileRecord>& files) override {
    for (const auto& file : files) {
      emit(json::Object{{"type", "file"},
                        {"kind", file.kind},
                        {"path", file.path},
                        {"step", file.step},
                        {"bytes", file.bytes},
                        {"wall", file.wall},
                        {"host", detail::this_host()}});
    }
  }

  void finish(const std::string& status) override { emit(json::Object{{"type", "end"}, {"status", status}}); }

 private:
  static const std::string& prefix() {
    static const std::string made = [] {
      const char* key = std::getenv(stream_line::kKeyVariable);
      return stream_line::prefix(key ? key : "");
    }();
    return made;
  }
  static void emit(const json::Value& value) { put(prefix() + json::write(value) + "\n"); }
  // One write per batch, under stdout's lock, so the program's own lines are not cut by ours.
  static void put(const std::string& text) {
    flockfile(stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    funlockfile(stdout);
  }
};

}  // namespace

std::shared_ptr<Tracker> make_stream_tracker() { return std::make_shared<StreamTracker>(); }

}  // namespace spur
