// SPDX-License-Identifier: Apache-2.0
// The tensorboard tracker: one event file per run in its directory (see make_tensorboard_tracker in
// spur/tracking.h); the encoding is core/tensorboard_events.h. Runs on the tracking writer thread only.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <spur/error.h>
#include <spur/tracking.h>

#include <spur/core/tensorboard_events.h>

namespace spur {
namespace {

// The config as hyperparameters: numbers, strings and bools as they are, nested objects flattened with "/",
// arrays and nulls as their JSON text (the hparams plugin has no other types).
void flatten(const json::Value& value, const std::string& name, std::vector<tensorboard::HParam>& out) {
  if (value.is_object()) {
    for (const auto& [key, member] : value.as_object()) flatten(member, name.empty() ? key : name + "/" + key, out);
  } else if (value.is_bool()) {
    out.push_back({name, value.as_bool()});
  } else if (value.is_number()) {
    out.push_back({name, value.as_double()});
  } else if (value.is_string()) {
    out.push_back({name, value.as_string()});
  } else {
    out.push_back({name, json::write(value)});
  }
}

std::atomic<int> file_counter{0};

class TensorBoardTracker : public Tracker {
 public:
  explicit TensorBoardTracker(std::string directory) : directory_(std::move(directory)) {}
  ~TensorBoardTracker() override {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string name() const override { return "tensorboard (" + (path_.empty() ? directory_ : path_) + ")"; }

  void start(const TrackingRun& run) override {
    std::error_code error;
    std::filesystem::create_directories(directory_, error);
    if (error) throw Error("cannot create the TensorBoard directory " + directory_ + ": " + error.message());
    const double wall = now();
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    path_ = (std::filesystem::path(directory_) / tensorboard::event_file_name(wall, host, ::getpid(), file_counter++))
                .string();
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error("cannot create " + path_ + ": " + std::strerror(errno));
    std::string bytes = tensorboard::record(tensorboard::file_version_event(wall));
    std::vector<tensorboard::HParam> hparams;
    if (run.params.is_object()) flatten(run.params, "", hparams);
    if (!hparams.empty()) bytes += tensorboard::record(tensorboard::session_start_event(hparams, run.name, wall));
    try {
      put(bytes);
    } catch (const Error&) {
      // start() is tried again later: no half-made file, no descriptor left open.
      ::close(fd_);
      fd_ = -1;
      ::unlink(path_.c_str());
      throw;
    }
  }

  void write(const MetricBatch& batch) override {
    // Values logged by one call share their step and time: one event each.
    std::string bytes;
    std::vector<std::pair<std::string_view, double>> values;
    const auto& records = batch.records;
    for (std::size_t i = 0; i < records.size();) {
      std::size_t j = i;
      values.clear();
      while (j < records.size() && records[j].step == records[i].step && records[j].wall == records[i].wall) {
        values.emplace_back(batch.keys[records[j].key], records[j].value);
        ++j;
      }
      bytes += tensorboard::record(tensorboard::scalars_event(values, records[i].step, records[i].wall));
      i = j;
    }
    put(bytes);
  }

  void write_text(const std::vector<TextRecord>& texts) override {
    std::string bytes;
    for (const auto& text : texts) {
      bytes += tensorboard::record(tensorboard::text_event(text.key, text.text, text.step, text.wall));
    }
    put(bytes);
  }

  void finish(const std::string& status) override {
    if (fd_ < 0) return;
    put(tensorboard::record(tensorboard::session_end_event(status == "finished", now())));
    if (::fsync(fd_) != 0) throw Error("cannot sync " + path_ + ": " + std::strerror(errno));
    ::close(fd_);
    fd_ = -1;
  }

 private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  // Whole records only: a batch goes out in one write (the loop covers a short write). A batch that fails part-way
  // is cut off again, so the file never holds half a record and the retried batch is not written twice.
  void put(const std::string& bytes) {
    const off_t before = ::lseek(fd_, 0, SEEK_END);
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int cause = n < 0 ? errno : ENOSPC;
        if (before >= 0 && done > 0 && ::ftruncate(fd_, before) != 0) {
          // Left as it is: TensorBoard reads up to the cut record.
        }
        throw Error("cannot write " + path_ + ": " + std::strerror(cause));
      }
      done += static_cast<std::size_t>(n);
    }
  }

  std::string directory_;
  std::string path_;
  int fd_ = -1;
};

}  // namespace

std::shared_ptr<Tracker> make_tensorboard_tracker(std::string directory) {
  return std::make_shared<TensorBoardTracker>(std::move(directory));
}

}  // namespace spur
