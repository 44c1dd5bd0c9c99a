// SPDX-License-Identifier: Apache-2.0
// Reading, checking and writing run configurations with Accelerate's loader rules (Accelerate 1.15, the version
// installer/python-requirements.txt pins and the tests judge with):
// unknown top-level keys are errors, distributed_type is required, legacy fp16: true is mixed_precision fp16,
// unquoted NO is YAML 1.1's false. Where Accelerate is wrong, Spur is stricter or keeps what it breaks.
#include "config/run_config.h"

#include <spur/core/zero_stage.h>

#include <spur/history/records.h>

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>
#include <QStandardPaths>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

namespace spur::app {
namespace {

// Run configurations are small, plain files: these bound what a hostile or mistaken one can cost.
constexpr qint64 kMaxConfigBytes = 1 << 20;
constexpr int kMaxConfigDepth = 64;

// Walks the document's parse events before it is loaded: anchors and aliases are refused (a self-referencing
// alias crashed `launch`; a billion-laughs file grew without bound; no Accelerate configuration uses them), and
// so is nesting deeper than kMaxConfigDepth. `validate`, `show` and `launch` all read through here.
class ConfigShape : public YAML::EventHandler {
 public:
  explicit ConfigShape(std::string name) : name_(std::move(name)) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { node(mark, anchor, false, "", true); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw ConfigError(name_ + ":" + std::to_string(mark.line + 1) +
                      ": aliases (*name) are not accepted here; write the value out");
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    node(mark, anchor, false, tag, value.empty());
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    node(mark, anchor, true, tag);
    open_.push_back({false, 0});
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    node(mark, anchor, true, tag);
    open_.push_back({true, 0});
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Open {
    bool map;
    long children;
  };
  void node(const YAML::Mark& mark, YAML::anchor_t anchor, bool collection, const std::string& tag,
            bool empty = false) {
    const std::string where = name_ + ":" + std::to_string(mark.line + 1) + ": ";
    if (anchor != YAML::NullAnchor) {
      throw ConfigError(where + "anchors (&name) are not accepted here; write the value out");
    }
    // YAML's own tags (!!str, !!int...) only, as Accelerate's yaml.safe_load: a custom tag (`!false`) was read
    // as an empty string and written back changed (found by fuzz_config).
    if (!tag.empty() && tag != "?" && tag != "!" && tag.rfind("tag:yaml.org,2002:", 0) != 0) {
      throw ConfigError(where + "the tag " + tag + " is not one of YAML's own (!!str, !!int, !!bool...)");
    }
    if (!open_.empty()) {
      // In a mapping, children alternate key, value: a key is a name (`{{}}: x` once crashed the writer).
      if (open_.back().map && open_.back().children % 2 == 0 && collection) {
        throw ConfigError(where + "a key must be a name, not a mapping or a list");
      }
      // An empty key (`: x`, or a lone `:` in a flow mapping) is refused, as PyYAML refuses the latter; yaml-cpp
      // read it as a null key that did not write back the same (found by fuzz_config).
      if (open_.back().map && open_.back().children % 2 == 0 && empty) {
        throw ConfigError(where + "a key must be a name, not empty");
      }
      ++open_.back().children;
    }
    if (collection && static_cast<int>(open_.size()) + 1 > kMaxConfigDepth) {
      throw ConfigError(where + "nested deeper than " + std::to_string(kMaxConfigDepth) + " levels");
    }
  }
  std::string name_;
  std::vector<Open> open_;
};

const std::vector<std::string> kLocalKeys = {"compute_environment",
                                             "distributed_type",
                                             "mixed_precision",
                                             "use_cpu",
                                             "debug",
                                             "enable_cpu_affinity",
                                             "num_processes",
                                             "num_machines",
                                             "machine_rank",
                                             "gpu_ids",
                                             "main_process_ip",
                                             "main_process_port",
                                             "rdzv_backend",
                                             "same_network",
                                             "main_training_function",
                                             "downcast_bf16",
                                             "fp8_config",
                                             "mpirun_config",
                                             "deepspeed_config",
                                             "fsdp_config",
                                             "parallelism_config",
                                             "megatron_lm_config",
                                             "dynamo_config",
                                             "tpu_name",
                                             "tpu_zone",
                                             "tpu_vm",
                                             "tpu_env",
                                             "tpu_use_cluster",
                                             "tpu_use_sudo",
                                             "command_file",
                                             "commands"};
const std::vector<std::string> kSageMakerKeys = {"compute_environment",
                                                 "distributed_type",
                                                 "mixed_precision",
                                                 "use_cpu",
                                                 "debug",
                                                 "enable_cpu_affinity",
                                                 "dynamo_config",
                                                 "ec2_instance_type",
                                                 "iam_role_name",
                                                 "image_uri",
                                                 "profile",
                                                 "region",
                                                 "num_machines",
                                                 "gpu_ids",
                                                 "base_job_name",
                                                 "pytorch_version",
                                                 "transformers_version",
                                                 "py_version",
                                                 "sagemaker_inputs_file",
                                                 "sagemaker_metrics_file",
                                                 "additional_args"};
const std::vector<std::string> kLocalTypes = {"NO",         "MULTI_CPU",  "MULTI_GPU", "MULTI_NPU",  "MULTI_MLU",
                                              "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "MULTI_HPU",  "MULTI_NEURON",
                                              "DEEPSPEED",  "FSDP",       "XLA",       "MEGATRON_LM"};
const std::vector<std::string> kSageMakerTypes = {"NO", "DATA_PARALLEL", "MODEL_PARALLEL"};
// Keys older Accelerate versions accepted and the one Spur follows refuses ("had unknown keys"): named with the
// version that dropped them, since a file from an older `accelerate config` is the usual cause.
const std::vector<std::pair<std::string, std::string>> kDroppedKeys = {{"ipex_config", "1.15"}};
const std::vector<std::string> kPrecisions = {"no", "fp16", "bf16", "fp8"};

// YAML 1.1 (PyYAML, Accelerate's loader) reads these plain words as booleans.
bool yaml11_bool_word(const std::string& s) {
  static const std::set<std::string> words = {"y",  "Y",  "yes",  "Yes",  "YES",  "n",     "N",     "no",
                                              "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
                                              "on", "On", "ON",   "off",  "Off",  "OFF"};
  return words.contains(s);
}

bool yaml11_true(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  return word == "y" || word == "yes" || word == "true" || word == "on";
}

// Plain (unquoted) as read, or built in code from a number or bool; "!" marks a string that must stay one.
// A scalar that is not a string tagged by yaml_string().
bool plain(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

class Checker {
 public:
  Checker(const std::string& name, const std::map<std::string, YAML::Node>& values) : name_(name), values_(values) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    std::string where = name_;
    auto it = values_.find(key);
    if (it != values_.end() && it->second.Mark().line >= 0) where += ":" + std::to_string(it->second.Mark().line + 1);
    throw ConfigError(where + ": " + key + ": " + why);
  }

  const YAML::Node* get(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() || it->second.IsNull() ? nullptr : &it->second;
  }

  std::string choice(const std::string& key, const std::vector<std::string>& allowed) const {
    const YAML::Node* node = get(key);
    if (!node) return "";
    if (!node->IsScalar()) fail(key, "must be one of " + join(allowed));
    std::string value = node->Scalar();
    if (plain(*node) && yaml11_bool_word(value)) {
      fail(key, "unquoted " + value + " is the boolean " + (yaml11_true(value) ? "true" : "false") +
                    " in YAML 1.1, as Accelerate's loader reads it: write '" + value + "' in quotes");
    }
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      fail(key, "'" + value + "' is not one of " + join(allowed));
    }
    return value;
  }

  void boolean(const std::string& key) const {
    const YAML::Node* node = get(key);
    bool value;
    if (node && (!node->IsScalar() || !plain(*node) || !YAML::convert<bool>::decode(*node, value))) {
      fail(key,
           "must be true or false, not '" + (node->IsScalar() ? node->Scalar() : std::string("a list or map")) + "'");
    }
  }

  std::optional<long long> integer(const std::string& key, long long minimum, long long maximum,
                                   const std::string& rule) const {
    const YAML::Node* node = get(key);
    if (!node) return std::nullopt;
    long long value = 0;
    if (!node->IsScalar() || !YAML::convert<long long>::decode(*node, value)) {
      fail(key, "must be an integer, not '" + (node->IsScalar() ? node->Scalar() : std::string("a list or map")) + "'");
    }
    if (value < minimum || value > maximum) fail(key, std::to_string(value) + " is out of range: " + rule);
    return value;
  }

  void single(const std::string& key) const {
    const YAML::Node* node = get(key);
    if (node && !node->IsScalar()) fail(key, "must be a single value");
  }

 private:
  const std::string& name_;
  const std::map<std::string, YAML::Node>& values_;
};

// Emits a scalar the way Accelerate's writer (PyYAML) would read back to the same value.
void write_scalar(YAML::Emitter& out, const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (plain(node)) {
    out << s;
    return;
  }
  // A string: quote it when a plain scalar would read as something else (NO, 0, 1.5, null, '').
  long long i;
  double d;
  const bool looks_typed = s.empty() || yaml11_bool_word(s) || s == "null" || s == "~" ||
                           YAML::convert<long long>::decode(YAML::Node(s), i) ||
                           YAML::convert<double>::decode(YAML::Node(s), d);
  if (looks_typed) {
    out << YAML::SingleQuoted << s;
  } else {
    out << s;
  }
}

bool empty_map(const YAML::Node& node) { return node.IsMap() && node.size() == 0; }

// What writing leaves out: a null, or a map of nothing but such values ({on: } wrote as {} and read back as
// nothing at all: the fuzzer's round trip failed).
bool blank(const YAML::Node& node) {
  if (node.IsNull()) return true;
  return node.IsMap() && std::all_of(node.begin(), node.end(), [](const auto& entry) { return blank(entry.second); });
}

void write_node(YAML::Emitter& out, const YAML::Node& node) {
  if (node.IsScalar()) {
    write_scalar(out, node);
  } else if (node.IsSequence()) {
    out << (node.size() == 0 ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
    for (const auto& item : node) write_node(out, item);
    out << YAML::EndSeq;
  } else if (node.IsMap()) {
    std::map<std::string, YAML::Node> sorted;
    for (const auto& entry : node) sorted[entry.first.as<std::string>()] = entry.second;
    out << YAML::BeginMap;
    for (const auto& [key, value] : sorted) {
      if (blank(value)) continue;
      out << YAML::Key << key << YAML::Value;
      write_node(out, value);
    }
    out << YAML::EndMap;
  } else {
    out << YAML::Null;
  }
}

std::string json_scalar(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (plain(node)) {
    bool b;
    long long i;
    double d;
    if (s == "true" || s == "false") return s;
    if (YAML::convert<bool>::decode(node, b)) return b ? "true" : "false";
    if (YAML::convert<long long>::decode(node, i)) return std::to_string(i);
    if (YAML::convert<double>::decode(node, d)) return s;
    if (s == "null" || s == "~") return "null";
  }
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void emit_json(std::ostringstream& out, const YAML::Node& node, int indent) {
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (node.IsScalar()) {
    out << json_scalar(node);
  } else if (node.IsSequence()) {
    out << "[";
    for (size_t i = 0; i < node.size(); ++i) {
      out << (i ? ", " : "");
      emit_json(out, node[i], indent + 2);
    }
    out << "]";
  } else if (node.IsMap()) {
    std::map<std::string, YAML::Node> sorted;
    for (const auto& entry : node) sorted[entry.first.as<std::string>()] = entry.second;
    out << "{";
    bool first = true;
    for (const auto& [key, value] : sorted) {
      if (blank(value)) continue;
      out << (first ? "\n" : ",\n") << pad << "\"" << key << "\": ";
      emit_json(out, value, indent + 2);
      first = false;
    }
    out << "\n" << std::string(static_cast<size_t>(indent), ' ') << "}";
  } else {
    out << "null";
  }
}

}  // namespace

const std::vector<std::string>& RunConfig::known_keys(bool sagemaker) {
  return sagemaker ? kSageMakerKeys : kLocalKeys;
}

RunConfig RunConfig::load(const std::string& path) {
  return parse(read_small_file(path, kMaxConfigBytes, "a run configuration"), path);
}

std::string read_small_file(const std::string& path, int64_t max_bytes, const std::string& what) {
  const auto too_big = [&](const std::string& size) {
    return ConfigError(path + ": " + size + " bytes; " + what + " is at most " + std::to_string(max_bytes) + " bytes");
  };
  // Opened without blocking (a FIFO would wait for a writer) and judged by what was opened, not by the name: a
  // FIFO or device put there in between is refused as well.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw ConfigError(path + ": cannot read " + what + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw ConfigError(path + ": cannot read " + what + ": " + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) throw ConfigError(path + ": is a directory, not " + what);
  if (!S_ISREG(info.st_mode)) throw ConfigError(path + ": is not a regular file (a device, FIFO or socket)");
  if (info.st_size > max_bytes) throw too_big(std::to_string(info.st_size));
  // At most one byte more than allowed: a file that grew since it was judged is refused, never read without end.
  std::string bytes(static_cast<size_t>(max_bytes) + 1, '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw ConfigError(path + ": cannot read " + what + ": " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > static_cast<size_t>(max_bytes)) throw too_big("more than " + std::to_string(max_bytes));
  bytes.resize(got);
  return bytes;
}

YAML::Node load_yaml(const std::string& yaml, const std::string& name) {
  // Line breaks as YAML defines them: CR LF, CR and LF are all one LF (YAML 1.2, 5.4). yaml-cpp kept a CR before a
  // comma in a flow mapping as part of a plain value, which then read back without it (found by fuzz_config in
  // CI; PyYAML reads the value without the CR). Files saved with Windows line ends read as before.
  std::string text;
  text.reserve(yaml.size());
  for (size_t i = 0; i < yaml.size(); ++i) {
    if (yaml[i] != '\r') {
      text += yaml[i];
    } else if (i + 1 >= yaml.size() || yaml[i + 1] != '\n') {
      text += '\n';
    }
  }
  // Text only, as Accelerate's yaml.safe_load reads it: no control characters but tab and line ends (a NUL in a
  // value was read, then written back changed; found by fuzz_config).
  for (size_t i = 0, line = 1; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof(code), "0x%02x", c);
      throw ConfigError(name + ":" + std::to_string(line) + ": control character " + code +
                        " (a configuration is text)");
    }
  }
  YAML::Node root;
  try {
    std::istringstream events(text);
    YAML::Parser parser(events);
    ConfigShape shape(name);
    // The first document only, as YAML::Load reads: yaml-cpp returns documents for ever from some inputs (a
    // lone "," made `spur config validate` hang; found by tests/fuzz/fuzz_config).
    parser.HandleNextDocument(shape);
    root = YAML::Load(text);  // JSON is read by the same parser: it is (near enough) YAML's flow style
  } catch (const YAML::ParserException& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML or JSON: " + e.msg);
  }
  return root;
}

RunConfig RunConfig::parse(const std::string& yaml, const std::string& name) {
  const YAML::Node root = load_yaml(yaml, name);
  if (!root.IsMap()) throw ConfigError(name + ": a configuration is a mapping of keys to values");
  RunConfig config;
  config.name_ = name;
  for (const auto& entry : root) {
    const auto key = entry.first.as<std::string>();
    if (config.values_.contains(key)) {
      throw ConfigError(name + ":" + std::to_string(entry.first.Mark().line + 1) + ": " + key + " appears twice");
    }
    config.values_[key] = entry.second;
  }
  // Accelerate's legacy keys.
  if (auto it = config.values_.find("fp16"); it != config.values_.end()) {
    bool on = false;
    if (it->second.IsScalar() && YAML::convert<bool>::decode(it->second, on) && on &&
        !config.values_.contains("mixed_precision")) {
      config.values_["mixed_precision"] = YAML::Node("fp16");
    }
    config.values_.erase(it);
  }
  if (auto it = config.values_.find("dynamo_backend"); it != config.values_.end()) {
    YAML::Node dynamo;
    dynamo["dynamo_backend"] = it->second;
    if (!config.values_.contains("dynamo_config")) config.values_["dynamo_config"] = dynamo;
    config.values_.erase(it);
  }
  config.validate(name);
  return config;
}

void RunConfig::validate(const std::string& name) const {
  const Checker check(name, values_);
  const std::string environment = check.choice("compute_environment", {"LOCAL_MACHINE", "AMAZON_SAGEMAKER"});
  const bool on_sagemaker = environment == "AMAZON_SAGEMAKER";
  const auto& known = known_keys(on_sagemaker);
  std::vector<std::string> unknown;
  for (const auto& [key, value] : values_) {
    if (std::find(known.begin(), known.end(), key) == known.end()) unknown.push_back(key);
  }
  for (const auto& key : unknown) {
    for (const auto& [dropped, version] : kDroppedKeys) {
      if (key == dropped) {
        check.fail(key, "Accelerate " + version +
                            " no longer accepts this key (its loader rejects it as unknown): "
                            "remove it, as `accelerate config` " +
                            version + " would not write it");
      }
    }
  }
  if (!unknown.empty()) {
    check.fail(
        unknown.front(),
        std::string("unknown key (Accelerate's loader rejects unknown keys") +
            (unknown.size() > 1 ? "; also unknown: " + join({unknown.begin() + 1, unknown.end()}) : std::string()) +
            ")");
  }
  if (!check.get("distributed_type")) {
    throw ConfigError(name + ": distributed_type is missing; it is required (one of " +
                      join(on_sagemaker ? kSageMakerTypes : kLocalTypes) + ")");
  }
  check.choice("distributed_type", on_sagemaker ? kSageMakerTypes : kLocalTypes);
  check.choice("mixed_precision", kPrecisions);
  for (const char* key :
       {"use_cpu", "debug", "enable_cpu_affinity", "same_network", "tpu_use_cluster", "tpu_use_sudo"}) {
    check.boolean(key);
  }
  const auto machines = check.integer("num_machines", 1, 100000, "at least 1");
  check.integer("machine_rank", 0, machines.value_or(1) - 1,
                "a machine's index, from 0 to num_machines - 1 (" + std::to_string(machines.value_or(1) - 1) + ")");
  if (const auto processes = check.integer("num_processes", -1, 10000000, "at least 1 (or -1: set at launch)");
      processes && *processes == 0) {
    check.fail("num_processes", "0 processes cannot run: at least 1 (or -1: set at launch)");
  }
  check.integer("main_process_port", 0, 65535, "a TCP port, 0 to 65535 (0: any free port)");
  for (const char* key : {"main_process_ip", "rdzv_backend", "main_training_function", "ec2_instance_type",
                          "iam_role_name", "image_uri", "profile", "region", "base_job_name"}) {
    check.single(key);
  }
  if (const YAML::Node* ids = check.get("gpu_ids")) {
    const std::string text = ids->IsScalar() ? ids->Scalar() : "";
    bool ok = text == "all" && ids->IsScalar();
    if (!ok && ids->IsScalar()) {
      ok = !text.empty();
      std::stringstream list(text);
      std::string id;
      while (std::getline(list, id, ',')) {
        ok = ok && !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
      }
    }
    if (!ok) check.fail("gpu_ids", "must be 'all' or a list of GPU numbers like '0,1'");
  }
  if (on_sagemaker) {
    for (const char* key : {"ec2_instance_type", "iam_role_name"}) {
      if (!check.get(key)) throw ConfigError(name + ": " + key + " is missing; the SageMaker schema requires it");
    }
  }
}

RunConfig RunConfig::from_node(const YAML::Node& root, const std::string& name) {
  if (!root.IsMap()) throw ConfigError(name + ": a configuration is a mapping of keys to values");
  RunConfig config;
  config.name_ = name;
  for (const auto& entry : root) config.values_[entry.first.as<std::string>()] = entry.second;
  config.validate(name);
  return config;
}

RunConfig RunConfig::defaults(const std::string& mixed_precision, int gpus) {
  RunConfig config;
  config.name_ = "defaults";
  auto& v = config.values_;
  v["compute_environment"] = YAML::Node("LOCAL_MACHINE");
  v["debug"] = YAML::Load("false");
  v["distributed_type"] = YAML::Node(gpus > 1 ? "MULTI_GPU" : "NO");
  v["downcast_bf16"] = YAML::Load("false");
  v["enable_cpu_affinity"] = YAML::Load("false");
  v["machine_rank"] = YAML::Load("0");
  v["main_training_function"] = YAML::Node("main");
  v["mixed_precision"] = YAML::Node(mixed_precision);
  v["num_machines"] = YAML::Load("1");
  v["num_processes"] = YAML::Load(std::to_string(std::max(1, gpus)));
  v["rdzv_backend"] = YAML::Node("static");
  v["same_network"] = YAML::Load("false");
  v["tpu_use_cluster"] = YAML::Load("false");
  v["tpu_use_sudo"] = YAML::Load("false");
  v["use_cpu"] = YAML::Load(gpus == 0 ? "true" : "false");
  // Strings built in code carry no quoting tag: mark them as strings so the writer quotes 'no' and 'NO'.
  for (const char* key :
       {"compute_environment", "distributed_type", "main_training_function", "mixed_precision", "rdzv_backend"}) {
    v[key].SetTag("!");
  }
  config.validate("defaults");
  return config;
}

std::string RunConfig::to_yaml() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [key, value] : values_) root[key] = value;
  YAML::Emitter out;
  write_node(out, root);
  return std::string(out.c_str()) + "\n";
}

std::string RunConfig::to_json() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [key, value] : values_) root[key] = value;
  std::ostringstream out;
  emit_json(out, root, 0);
  return out.str() + "\n";
}

void RunConfig::save(const std::string& path) const {
  // A configuration can name hosts, roles and profiles: a new one is its owner's only.
  write_private_file(path, QString::fromStdString(path).endsWith(".json") ? to_json() : to_yaml());
}

void write_private_file(const std::string& path, const std::string& text, bool executable) {
  const QString target = QString::fromStdString(path);
  const QString folder = QFileInfo(target).absolutePath();
  QString missing = folder;
  QStringList created;
  while (!QFileInfo::exists(missing) && missing != QFileInfo(missing).absolutePath()) {
    created.prepend(missing);  // top down
    missing = QFileInfo(missing).absolutePath();
  }
  // Made from the top down, each closed to others before anything goes into it.
  for (const auto& made : created) {
    if (!QDir().mkdir(made) && !QFileInfo(made).isDir())
      throw ConfigError(path + ": cannot be written: cannot make the folder " + made.toStdString());
    QFile::setPermissions(made, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
  }
  const bool is_new = !QFileInfo::exists(target);
  QSaveFile file(target);  // written whole or not at all: a crash never leaves half a file
  QFileDevice::Permissions mode = QFileDevice::ReadOwner | QFileDevice::WriteOwner;
  if (executable) mode |= QFileDevice::ExeOwner;
  // QSaveFile's temporary file is made with the umask's mode (0644 under 022): it is closed to others before the
  // text goes in, so nobody can open it in between and keep reading.
  if (!file.open(QIODevice::WriteOnly) || (is_new && !file.setPermissions(mode)) ||
      file.write(text.data(), static_cast<qint64>(text.size())) < 0 || !file.commit()) {
    throw ConfigError(path + ": cannot be written: " + file.errorString().toStdString());
  }
}

const YAML::Node* RunConfig::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() || it->second.IsNull() ? nullptr : &it->second;
}

std::string RunConfig::text(const std::string& key, const std::string& fallback) const {
  const YAML::Node* node = find(key);
  return node && node->IsScalar() ? node->Scalar() : fallback;
}

bool RunConfig::flag(const std::string& key, bool fallback) const {
  const YAML::Node* node = find(key);
  bool value = fallback;
  if (node && node->IsScalar()) YAML::convert<bool>::decode(*node, value);
  return value;
}

int RunConfig::number(const std::string& key, int fallback) const {
  const YAML::Node* node = find(key);
  int value = fallback;
  if (node && node->IsScalar()) YAML::convert<int>::decode(*node, value);
  return value;
}

void RunConfig::set(const std::string& key, const YAML::Node& value) {
  auto previous = values_;
  values_[key] = value;
  try {
    validate(name_);
  } catch (...) {
    values_ = std::move(previous);
    throw;
  }
}

void RunConfig::erase(const std::string& key) { values_.erase(key); }

YAML::Node RunConfig::node() const {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [key, value] : values_) root[key] = YAML::Clone(value);
  return root;
}

std::vector<std::string> RunConfig::unsupported() const {
  std::vector<std::string> notes;
  const std::string type = distributed_type();
  if (type == "XLA" || type == "MEGATRON_LM" || type == "MODEL_PARALLEL" ||
      (type.rfind("MULTI_", 0) == 0 && type != "MULTI_CPU" && type != "MULTI_GPU")) {
    notes.push_back("distributed_type " + type + ": Spur runs data parallel (DDP) instead");
  }
  // DEEPSPEED and FSDP select Spur's own ZeRO (stage from deepspeed_config.zero_stage, or
  // fsdp_config.fsdp_sharding_strategy); every other key of theirs that asks for something is named.
  auto honoured_only = [&](const char* section, std::initializer_list<const char*> honoured, bool active) {
    const YAML::Node* node = find(section);
    if (!node || empty_map(*node) || !node->IsMap()) return;
    for (const auto& item : *node) {
      const auto key = item.first.as<std::string>();
      if (active && std::find(honoured.begin(), honoured.end(), key) != honoured.end()) continue;
      const std::string value = item.second.IsScalar() ? item.second.Scalar() : std::string("...");
      std::string lower = value;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower == "none" || lower == "false" || lower.empty()) continue;
      notes.push_back(std::string(section) + "." + key + " " + value + ": not acted on by Spur" +
                      (active ? "" : " (distributed_type is " + type + ")"));
    }
  };
  if ((type == "DEEPSPEED" || type == "FSDP") && (zero_stage() < 0 || zero_stage() > 3)) {
    notes.push_back("distributed_type " + type +
                    (type == "FSDP" ? " with this fsdp_sharding_strategy" : " with this zero_stage") +
                    ": Spur's ZeRO runs stages 1 to 3 (SHARD_GRAD_OP, FULL_SHARD) only; `spur launch` refuses "
                    "the file");
  }
  honoured_only("deepspeed_config", {"zero_stage", "deepspeed_multinode_launcher"}, type == "DEEPSPEED");
  honoured_only("fsdp_config",
                {"fsdp_sharding_strategy", "fsdp_version", "fsdp_reshard_after_forward", "fsdp_state_dict_type"},
                type == "FSDP");
  for (const char* key : {"megatron_lm_config", "parallelism_config", "fp8_config", "dynamo_config", "mpirun_config"}) {
    const YAML::Node* node = find(key);
    if (node && !empty_map(*node)) notes.push_back(std::string(key) + ": kept in the file, not acted on by Spur");
  }
  if (mixed_precision() == "fp8") notes.emplace_back("mixed_precision fp8: Spur runs no, fp16 or bf16");
  if (flag("enable_cpu_affinity", false)) notes.emplace_back("enable_cpu_affinity: not acted on by Spur");
  if (find("tpu_name") || find("commands") || find("command_file"))
    notes.emplace_back("TPU keys: Spur does not run on TPUs");
  return notes;
}

YAML::Node yaml_string(const std::string& text) {
  YAML::Node node(text);
  node.SetTag("!");
  return node;
}

int RunConfig::zero_stage() const {
  const std::string type = distributed_type();
  auto nested = [&](const char* section, const char* key) -> std::optional<std::string> {
    const YAML::Node* node = find(section);
    if (!node || !node->IsMap() || !(*node)[key] || !(*node)[key].IsScalar()) return std::nullopt;
    return (*node)[key].Scalar();
  };
  if (type == "DEEPSPEED") {
    const auto stage = nested("deepspeed_config", "zero_stage");
    if (!stage) return kDeepSpeedDefaultStage;
    try {
      return std::stoi(*stage);
    } catch (const std::exception&) {
      return -1;
    }
  }
  if (type == "FSDP") {
    // FSDP2 (fsdp_version 2) says it with fsdp_reshard_after_forward: true is FULL_SHARD, false SHARD_GRAD_OP.
    if (nested("fsdp_config", "fsdp_version").value_or("1") == "2") {
      return fsdp_reshard_stage(nested("fsdp_config", "fsdp_reshard_after_forward").value_or("true")).value_or(-1);
    }
    return fsdp_strategy_stage(nested("fsdp_config", "fsdp_sharding_strategy").value_or("FULL_SHARD")).value_or(-1);
  }
  return 0;
}

std::string RunConfig::state_dict_type() const {
  if (distributed_type() != "FSDP") return {};
  const YAML::Node* node = find("fsdp_config");
  if (!node || !node->IsMap()) return {};
  if ((*node)["fsdp_state_dict_type"] && (*node)["fsdp_state_dict_type"].IsScalar()) {
    return (*node)["fsdp_state_dict_type"].Scalar();
  }
  const bool fsdp2 =
      (*node)["fsdp_version"] && (*node)["fsdp_version"].IsScalar() && (*node)["fsdp_version"].Scalar() == "2";
  return fsdp2 ? "SHARDED_STATE_DICT" : "";
}

std::string config_home() {
  const QString chosen = qEnvironmentVariable("XDG_CONFIG_HOME");
  if (!chosen.isEmpty()) return chosen.toStdString();
  return history::home_directory() + "/.config";
}

std::string default_config_path() { return config_home() + "/spur/default_config.yaml"; }

std::string accelerate_config_path() {
  QString home = qEnvironmentVariable("HF_HOME");
  if (home.isEmpty()) {
    const QString cache = qEnvironmentVariable("XDG_CACHE_HOME");
    home = (cache.isEmpty() ? QString::fromStdString(history::home_directory()) + "/.cache" : cache) + "/huggingface";
  }
  return (home + "/accelerate/default_config.yaml").toStdString();
}

std::string config_in_effect() {
  try {
    if (QFileInfo::exists(QString::fromStdString(default_config_path()))) return default_config_path();
    if (QFileInfo::exists(QString::fromStdString(accelerate_config_path()))) return accelerate_config_path();
  } catch (const std::runtime_error&) {
    // No home folder (history::home_directory): then no default file either.
  }
  return {};
}

}  // namespace spur::app
