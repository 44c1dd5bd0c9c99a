// SPDX-License-Identifier: Apache-2.0
// The csv tracker: <directory>/<project>/<run>/metrics.csv, one row per value, in the one metrics CSV layout
// (engine/core/include/spur/core/metrics_csv.h: key,step,value,wall_time, as `spur runs export` writes).
#include <filesystem>
#include <fstream>

#include <spur/error.h>
#include <spur/tracking.h>

#include <spur/core/metrics_csv.h>

namespace spur {
namespace {

class CsvTracker : public Tracker {
 public:
  explicit CsvTracker(std::string directory) : directory_(std::move(directory)) {}
  std::string name() const override { return "csv (" + path_ + ")"; }

  void start(const TrackingRun& run) override {
    const auto folder = std::filesystem::path(directory_) / (run.project.empty() ? "default" : run.project) /
                        (run.name.empty() ? "run" : run.name);
    std::filesystem::create_directories(folder);
    path_ = (folder / "metrics.csv").string();
    const bool fresh = !std::filesystem::exists(path_) || std::filesystem::file_size(path_) == 0;
    if (!fresh) {
      // Appending to a file of another layout would mix columns (Spur before 2026-12 wrote step,key,...).
      std::ifstream existing(path_);
      std::string header;
      std::getline(existing, header);
      if (header + "\n" != metrics_csv::kHeader) {
        throw Error(path_ + " has the columns '" + header + "', not '" +
                    std::string(metrics_csv::kHeader.substr(0, metrics_csv::kHeader.size() - 1)) +
                    "': move it away, or log this run under another name");
      }
    }
    file_.open(path_, std::ios::app | std::ios::binary);
    if (!file_) throw Error("cannot write " + path_);
    if (fresh) file_ << metrics_csv::kHeader;
  }

  void write(const MetricBatch& batch) override {
    std::string lines;
    for (const auto& r : batch.records) {
      metrics_csv::append_line(lines, metrics_csv::field(batch.keys[r.key]), r.step, r.value, r.wall);
    }
    file_ << lines;
    file_.flush();
    if (!file_) throw Error("cannot write " + path_);
  }

 private:
  std::string directory_;
  std::string path_;
  std::ofstream file_;
};

}  // namespace

std::shared_ptr<Tracker> make_csv_tracker(std::string directory) {
  return std::make_shared<CsvTracker>(std::move(directory));
}

}  // namespace spur
