// SPDX-License-Identifier: Apache-2.0
// The record lines a run's processes write on their output for the launcher that records the run: the stream
// tracker's metrics and run record (a rank over SSH, Slurm or SageMaker) and a machine's launcher's progress and
// system samples. A rank's output is untrusted text (it prints whatever its data or its libraries print), so a
// record is accepted only when it carries the run's key: a random string the recording launcher makes for each
// launch and gives to the machines and ranks in the SPUR_STREAM_KEY variable (never on a command line). A line
// that looks like a record without the key is console text, shown and kept as any other.
//
//   @spur:<key> {json object}
//
// One format, written here (engine) and read here (app).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace spur::stream_line {

/// The variable the key travels in.
inline constexpr const char* kKeyVariable = "SPUR_STREAM_KEY";

/// "@spur:<key> ": what a record line starts with. An empty key gives "@spur " (a program run by hand: no
/// launcher reads it as a record).
std::string prefix(std::string_view key);

/// The JSON text of a record line whose key is `key` (compared in constant time), else nothing; an empty `key`
/// accepts nothing. `line` starts at "@spur" (prefixes such as "[host] [rankN] " already taken off).
std::optional<std::string_view> record(std::string_view line, std::string_view key);

/// A new key: 32 hexadecimal digits from the system's random source.
std::string new_key();

}  // namespace spur::stream_line
