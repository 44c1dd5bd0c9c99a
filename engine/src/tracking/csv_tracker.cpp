// SPDX-License-Identifier: Apache-2.0
// The csv tracker: <directory>/<project>/<run>/metrics.csv, one row per value (step,key,value,wall_time).
#include <filesystem>
#include <fstream>
#include <iomanip>

#include <spur/error.h>
#include <spur/tracking.h>

namespace spur {
namespace {

std::string quoted(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

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
    file_.open(path_, std::ios::app);
    if (!file_) throw Error("cannot write " + path_);
    if (fresh) file_ << "step,key,value,wall_time\n";
    file_ << std::setprecision(17);
  }

  void write(const MetricBatch& batch) override {
    for (const auto& r : batch.records) {
      file_ << r.step << ',' << quoted(batch.keys[r.key]) << ',' << r.value << ',' << std::fixed << std::setprecision(6)
            << r.wall << std::defaultfloat << std::setprecision(17) << '\n';
    }
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
