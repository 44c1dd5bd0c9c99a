// SPDX-License-Identifier: Apache-2.0
// TensorBoard event files, written without TensorFlow or protobuf: the TFRecord framing (length, masked CRC-32C,
// data, masked CRC-32C) and the few Event messages the tensorboard tracker writes (scalars, text, the hparams
// plugin's session start and end), encoded by hand in protobuf's wire format. Torch-free; shared with app/.
// Field numbers: tensorboard/compat/proto/{event,summary,tensor}.proto, tensorboard/plugins/hparams/plugin_data.proto.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace spur::tensorboard {

/// CRC-32C (Castagnoli), as TFRecord uses it; `crc` continues an earlier call.
uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);
/// The masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, std::size_t size);

/// One TFRecord around a serialised Event.
std::string record(std::string_view event);

/// "events.out.tfevents.<seconds>.<host>.<pid>.<counter>", the name TensorBoard's own writer gives (it finds
/// event files by the "tfevents" in their names).
std::string event_file_name(double wall, std::string_view host, int64_t pid, int counter);

/// The first event of every file: file_version "brain.Event:2".
std::string file_version_event(double wall);

/// Scalars logged at one step and time: one Event whose Summary holds a simple_value (float32, as PyTorch's
/// SummaryWriter.add_scalar writes) per tag.
std::string scalars_event(const std::vector<std::pair<std::string_view, double>>& values, int64_t step, double wall);

/// Text as the text plugin reads it: tag "<tag>/text_summary", a 1-element DT_STRING tensor (as add_text).
std::string text_event(std::string_view tag, std::string_view text, int64_t step, double wall);

/// One hyperparameter: a number, a string or a bool (the hparams plugin's types).
struct HParam {
  std::string name;
  std::variant<double, std::string, bool> value;
};

/// The hparams plugin's session start ("_hparams_/session_start_info"): the run's hyperparameters.
std::string session_start_event(const std::vector<HParam>& hparams, std::string_view group_name, double wall);
/// Its session end ("_hparams_/session_end_info"): status success or failure and the end time.
std::string session_end_event(bool success, double wall);

}  // namespace spur::tensorboard
