// SPDX-License-Identifier: Apache-2.0
// Reading TensorBoard event files without TensorFlow or protobuf: the TFRecord framing (every length and data
// CRC checked) and, of the Event messages, the scalars (a Summary value's simple_value, as PyTorch's SummaryWriter
// and Spur's tracker write, or a one-element tensor of the scalars plugin, as tensorboard.summary.Writer and
// TensorFlow 2 write) and the hparams plugin's session start (the hyperparameters) and end (the status). Anything
// malformed throws EventFileError naming the file, the record and its byte offset. Torch-free; shared with app/.
// Field numbers: tensorboard/compat/proto/{event,summary,tensor,types}.proto, plugins/hparams/plugin_data.proto.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spur/core/tensorboard_events.h>

#include <spur/history/records.h>  // history::Point: a scalar is a history point

namespace spur::tensorboard {

/// A file that is not a readable event file: "FILE: record N at byte B: what".
class EventFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What the event files of one run directory hold, merged in the order the files were added.
struct RunEvents {
  /// Per tag, in the order tags were first seen; each tag's points in the order they were written.
  std::vector<std::pair<std::string, std::vector<history::Point>>> scalars;
  std::vector<HParam> hparams;           // the last session start's, in its order
  bool has_session_start = false;        // an hparams session start was read
  int session_status = 0;                // the last session end's: 0 none, 1 success, 2 failure, 3 running
  double first_wall = 0, last_wall = 0;  // over every event with a time
  uint64_t records = 0;
  uint64_t scalar_points = 0;
  uint64_t other_values = 0;  // summary values of other kinds (images, histograms, text, ...), not read
  /// FNV-1a over every record's length and data CRC, in order: the same files give the same number.
  uint64_t fingerprint = 0xcbf29ce484222325ULL;
};

/// Reads event files one after another into one RunEvents. Not thread-safe; one per run directory.
class EventReader {
 public:
  /// Adds the records of one file's bytes. `name` is what messages call the file. Throws EventFileError; what
  /// was added before the bad record stays added (callers that want all or nothing drop the reader).
  void add_file(std::string_view bytes, const std::string& name);
  const RunEvents& events() const { return events_; }

 private:
  void add_event(std::string_view event);
  void add_value(std::string_view value, int64_t step, double wall);
  void add_hparams(std::string_view content);
  void add_point(const std::string& tag, history::Point point);

  RunEvents events_;
  std::map<std::string, std::size_t, std::less<>> index_;   // tag -> its position in events_.scalars
  std::map<std::string, std::string, std::less<>> plugin_;  // tag -> the plugin its first metadata named
};

}  // namespace spur::tensorboard
