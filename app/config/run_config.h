// SPDX-License-Identifier: Apache-2.0
// RunConfig: a run's configuration in the format of Hugging Face Accelerate's default_config.yaml (YAML, or JSON
// as `accelerate config default` writes), read with Accelerate's loader rules and errors naming file, line, key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spur::app {

/// A bad configuration: the message names the file, the line and the key.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

class RunConfig {
 public:
  /// Reads and validates a file (".json": JSON, anything else: YAML). Throws ConfigError.
  static RunConfig load(const std::string& path);
  /// Same, from text; `name` is what errors call the file.
  static RunConfig parse(const std::string& yaml, const std::string& name);
  /// From a mapping built in code (strings tagged "!" stay strings: 'no', 'NO'); validated as a file would be.
  static RunConfig from_node(const YAML::Node& root, const std::string& name);
  /// A local configuration for this machine with Accelerate's `config default` values.
  static RunConfig defaults(const std::string& mixed_precision = "no", int gpus = 0);

  /// Accelerate's writer: keys sorted, nulls and empty dicts dropped, 'no'/'NO' quoted.
  std::string to_yaml() const;
  std::string to_json() const;
  /// Writes YAML, or JSON for a ".json" path, atomically (temporary file, then rename).
  void save(const std::string& path) const;

  bool sagemaker() const { return text("compute_environment", "LOCAL_MACHINE") == "AMAZON_SAGEMAKER"; }
  std::string distributed_type() const { return text("distributed_type", ""); }
  std::string mixed_precision() const { return text("mixed_precision", "no"); }
  /// ZeRO stage the file asks for: DEEPSPEED's deepspeed_config.zero_stage (default 2), FSDP's
  /// fsdp_config.fsdp_sharding_strategy (SHARD_GRAD_OP 2, NO_SHARD 0, FULL_SHARD (the default) 3; hybrid ones -1,
  /// which Spur refuses), else 0.
  int zero_stage() const;
  /// How stage 3 checkpoints the weights, as the file says it (FSDP's fsdp_config.fsdp_state_dict_type, as
  /// written; Accelerate's default for fsdp_version 2, SHARDED_STATE_DICT, when it says none), else "".
  std::string state_dict_type() const;
  bool use_cpu() const { return flag("use_cpu", false); }
  bool debug() const { return flag("debug", false); }
  /// Total over all machines; -1 when the file leaves it to the command line.
  int num_processes() const { return number("num_processes", -1); }
  int num_machines() const { return number("num_machines", 1); }
  int machine_rank() const { return number("machine_rank", 0); }
  std::string gpu_ids() const { return text("gpu_ids", "all"); }
  std::string main_process_ip() const { return text("main_process_ip", ""); }
  /// -1 when unset.
  int main_process_port() const { return number("main_process_port", -1); }
  std::string rdzv_backend() const { return text("rdzv_backend", "static"); }
  bool same_network() const { return flag("same_network", false); }

  /// What errors call the file (its path).
  const std::string& name() const { return name_; }
  /// A key's value as written (nullptr when absent).
  const YAML::Node* find(const std::string& key) const;
  std::string text(const std::string& key, const std::string& fallback) const;
  bool flag(const std::string& key, bool fallback) const;
  int number(const std::string& key, int fallback) const;
  /// Sets a key (Accelerate's keys only) and re-validates; ConfigError naming the key on a bad value.
  void set(const std::string& key, const YAML::Node& value);
  void erase(const std::string& key);
  /// Every key as a YAML mapping (tags kept).
  YAML::Node node() const;

  /// Keys that would change the run's behaviour in Accelerate but that Spur does not act on (FSDP, DeepSpeed,
  /// dynamo, TPU...), with why; they are kept as they are in the file.
  std::vector<std::string> unsupported() const;
  /// The keys Accelerate's loader accepts at the top level for this file's compute environment.
  static const std::vector<std::string>& known_keys(bool sagemaker);

 private:
  void validate(const std::string& name) const;
  std::map<std::string, YAML::Node> values_;
  std::string name_ = "config";
};

/// A YAML string node, whatever its text looks like ('NO', '0', 'null'): tagged "!" so that writing a
/// configuration (RunConfig::to_yaml) quotes it where YAML 1.1 (Accelerate's loader) would read another type.
YAML::Node yaml_string(const std::string& text);

/// The first YAML (or JSON) document of a small file Spur reads, `name` naming it in errors: line ends as YAML
/// reads them, no control characters, no anchors, aliases or foreign tags, at most 64 levels deep (each refused by
/// ConfigError "NAME:LINE: ...", as Accelerate's yaml.safe_load refuses or as a hostile file would cost).
YAML::Node load_yaml(const std::string& yaml, const std::string& name);

/// Reads a file Spur is handed (a configuration, a hostfile, Slurm settings): a regular file of at most
/// `max_bytes`, checked before it is opened (a FIFO would block for ever, /dev/zero never ends). Throws ConfigError
/// naming the path and what it was to be (`what`: "a configuration file", "a hostfile"...).
std::string read_small_file(const std::string& path, int64_t max_bytes, const std::string& what);

/// Writes `text` to `path` whole or not at all (a temporary file, then rename), for what can hold secrets
/// (configurations, launch scripts): a new file is its owner's only (0600, or 0700 when `executable`), and so is
/// every folder it creates (0700); an existing file keeps its mode. Throws ConfigError naming the path.
void write_private_file(const std::string& path, const std::string& text, bool executable = false);

/// Where the default configuration lives: $XDG_CONFIG_HOME/spur/default_config.yaml.
std::string default_config_path();
/// Where a user's settings go: $XDG_CONFIG_HOME, else ~/.config (the home folder from HOME or the password
/// database: history::home_directory, which throws when there is none; never "/" or the current folder).
std::string config_home();
/// Accelerate's: $HF_HOME/accelerate/default_config.yaml ($XDG_CACHE_HOME/huggingface or ~/.cache/huggingface).
std::string accelerate_config_path();
/// The file a run uses when none is named: Spur's default, else Accelerate's if it exists; empty when neither (or
/// when the user has no home folder).
std::string config_in_effect();

}  // namespace spur::app
