// SPDX-License-Identifier: Apache-2.0
// Command-line flags of the example programs (`--name value` or `--name=value`, `--switch` or `--switch=true`, as
// argparse takes them and as a sweep's ${args} writes them): one flag at a time, values checked,
// and every error names the flag and lists the known ones; --help (or -h) prints the usage and exits 0. Header-only:
// the examples stay single programs.
//
//   ExampleFlags flags(argc, argv, "--epochs N --checksum");   (every flag the program knows, for --help and errors)
//   while (flags.next()) {
//     if (flags.is("--epochs")) o.epochs = flags.integer(1);
//     else if (flags.is("--checksum")) o.checksum = flags.on();
//     else flags.unknown();
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include <spur/error.h>

/// A default output folder that is each run's own under `spur sweep` (whose runs share a working folder, and would
/// otherwise write each other's checkpoints): BASE/sweep-ID/run-N from SPUR_SWEEP_ID and SPUR_SWEEP_RUN, which the
/// sweep sets for every run; BASE otherwise. A run relaunched by `spur sweep resume` gets its folder back.
inline std::string run_output_folder(const std::string& base) {
  const char* sweep = std::getenv("SPUR_SWEEP_ID");
  const char* run = std::getenv("SPUR_SWEEP_RUN");
  if (!sweep || !run || !*sweep || !*run) return base;
  return base + "/sweep-" + sweep + "/run-" + run;
}

class ExampleFlags {
 public:
  ExampleFlags(int argc, char** argv, const std::string& known)
      : argc_(argc), argv_(argv), known_(known), usage_(" (known: " + known + ")") {}

  /// Moves to the next flag; false after the last. --help or -h prints the usage and ends the program (exit 0).
  bool next() {
    if (attached_) throw spur::Error(flag_ + " takes no value, not '" + *attached_ + "'" + usage_);
    if (++index_ >= argc_) return false;
    flag_ = argv_[index_];
    attached_.reset();
    if (const auto equals = flag_.find('='); flag_.rfind("--", 0) == 0 && equals != std::string::npos) {
      attached_ = flag_.substr(equals + 1);
      flag_.resize(equals);
    }
    if (flag_ == "--help" || flag_ == "-h") {
      std::string name = argc_ > 0 ? argv_[0] : "program";
      name = name.substr(name.find_last_of('/') + 1);
      std::printf("usage: %s [flags]\n  flags: %s\n  on several processes: spur launch --num_processes N %s [flags]\n",
                  name.c_str(), known_.c_str(), name.c_str());
      std::exit(0);
    }
    return true;
  }
  bool is(const char* name) const { return flag_ == name; }
  const std::string& flag() const { return flag_; }

  /// The flag's value (after "=", else the next word).
  std::string value() {
    if (attached_) {
      std::string text = *attached_;
      attached_.reset();
      return text;
    }
    if (index_ + 1 >= argc_) throw spur::Error(flag_ + " needs a value" + usage_);
    return argv_[++index_];
  }
  /// A switch: true when given alone, else its "=" value (true/false, True/False as Python writes them, 1/0).
  bool on() {
    if (!attached_) return true;
    const std::string text = value();
    if (text == "true" || text == "True" || text == "1") return true;
    if (text == "false" || text == "False" || text == "0") return false;
    throw spur::Error(flag_ + "=" + text + ": expected true or false");
  }
  /// The value as an integer of at least `low`.
  int64_t integer(int64_t low) {
    const std::string text = value();
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || v < low) {
      throw spur::Error(flag_ + " " + text + ": expected an integer >= " + std::to_string(low));
    }
    return v;
  }
  /// The value as a number of at least 0.
  double real() {
    const std::string text = value();
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || !(v >= 0)) throw spur::Error(flag_ + " " + text + ": expected a number >= 0");
    return v;
  }
  [[noreturn]] void unknown() const { throw spur::Error("unknown argument " + flag_ + usage_); }

 private:
  int argc_;
  char** argv_;
  std::string known_;
  std::string usage_;
  int index_ = 0;
  std::string flag_;
  std::optional<std::string> attached_;  // the value after "=", until taken
};
