// SPDX-License-Identifier: Apache-2.0
// Reading, checking and expanding a W&B sweep file (sweep_spec.h). The rules are W&B's, from its `sweeps` library
// (params.py, grid_search.py, config/schema.json) and its agent (wandb_agent.py's command line); where W&B's
// behaviour is not a file's meaning (its server, its Bayesian search), Spur says so instead of guessing.
#include "sweep/sweep_spec.h"

#include <yaml-cpp/yaml.h>

#include <QFileInfo>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <spur/core/mlflow.h>

#include "config/run_config.h"
#include "sweep/hyperband.h"

namespace spur::app {
namespace {

constexpr int64_t kMaxSweepBytes = 1 << 20;
// A grid is launched run by run: more points than this is a mistake in the file, not a sweep.
constexpr size_t kMaxGridPoints = 100000;

const std::set<std::string> kTopKeys = {"program", "command",     "method", "metric",  "parameters",     "name",
                                        "project", "description", "entity", "run_cap", "early_terminate"};
// W&B's keys that name its own services (W&B Launch, its scheduler and controller).
const std::set<std::string> kServiceKeys = {"job",     "image_uri",  "controller", "scheduler",
                                            "metrics", "apiVersion", "kind"};
const std::set<std::string> kParameterKeys = {
    "value", "values", "probabilities", "distribution", "min", "max", "q", "mu", "sigma", "a", "b", "parameters"};
const std::set<std::string> kDistributions = {"constant",
                                              "categorical",
                                              "int_uniform",
                                              "uniform",
                                              "q_uniform",
                                              "log_uniform",
                                              "log_uniform_values",
                                              "q_log_uniform",
                                              "q_log_uniform_values",
                                              "inv_log_uniform",
                                              "inv_log_uniform_values",
                                              "normal",
                                              "q_normal",
                                              "log_normal",
                                              "q_log_normal",
                                              "beta",
                                              "q_beta"};

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : 0;
    throw SweepError(file_ + (line > 0 ? ":" + std::to_string(line) : "") + ": " + what);
  }
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw SweepError(file_ + (line > 0 ? ":" + std::to_string(line) : "") + ": " + what);
  }

  std::string text(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, key + ": expected text");
    return node.Scalar();
  }

  std::optional<double> number_of(const YAML::Node& node) const {
    if (!node.IsScalar() || node.Tag() == "!") return std::nullopt;
    const std::string& s = node.Scalar();
    double v = 0;
    const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
    const auto [end, error] = std::from_chars(begin, s.data() + s.size(), v);
    if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
  }
  bool is_integer_text(const YAML::Node& node) const {
    if (!node.IsScalar() || node.Tag() == "!") return false;
    const std::string& s = node.Scalar();
    size_t i = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i >= s.size()) return false;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
    }
    return true;
  }
  double number(const YAML::Node& node, const std::string& key) const {
    const auto v = number_of(node);
    if (!v || !std::isfinite(*v))
      fail(node, key + ": expected a number, not '" + (node.IsScalar() ? node.Scalar() : "...") + "'");
    return *v;
  }
  int64_t integer(const YAML::Node& node, const std::string& key, int64_t low) const {
    if (!is_integer_text(node)) fail(node, key + ": expected an integer");
    int64_t v = 0;
    const std::string& s = node.Scalar();
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    const auto [end, error] = std::from_chars(begin, s.data() + s.size(), v);
    if (error != std::errc() || end != s.data() + s.size()) fail(node, key + ": " + s + " is out of range");
    if (v < low) fail(node, key + ": " + s + " is below " + std::to_string(low));
    return v;
  }

  // A value as the run gets it: YAML's own types (a quoted scalar stays text).
  json::Value value(const YAML::Node& node) const {
    if (node.IsNull()) return nullptr;
    if (node.IsSequence()) {
      json::Array items;
      for (const auto& item : node) items.push_back(value(item));
      return items;
    }
    if (node.IsMap()) {
      json::Object fields;
      for (const auto& entry : node) fields.emplace_back(entry.first.Scalar(), value(entry.second));
      return fields;
    }
    const std::string& s = node.Scalar();
    if (node.Tag() == "!") return s;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (is_integer_text(node)) {
      int64_t v = 0;
      const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
      if (const auto [end, error] = std::from_chars(begin, s.data() + s.size(), v);
          error == std::errc() && end == s.data() + s.size()) {
        return v;
      }
    }
    // A finite number; "inf" and "nan" stay text, as PyYAML reads them (and as a command line passes them on).
    if (const auto v = number_of(node); v && std::isfinite(*v)) return *v;
    return s;
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

SweepParameter read_parameter(const Reader& r, const std::string& name, const YAML::Node& node) {
  SweepParameter p;
  p.name = name;
  p.line = node.Mark().line + 1;
  if (!node.IsMap()) r.fail(node, "parameter " + name + ": expected a mapping (value:, values:, min:/max:...)");
  std::map<std::string, YAML::Node> keys;
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (!kParameterKeys.contains(key)) {
      r.fail(entry.first, "parameter " + name + ": unknown key '" + key + "' (W&B's: " + join(kParameterKeys) + ")");
    }
    if (keys.contains(key)) r.fail(entry.first, "parameter " + name + ": " + key + " appears twice");
    keys[key] = entry.second;
  }
  auto has = [&](const char* key) { return keys.contains(key); };
  if (has("parameters")) {
    r.fail(keys["parameters"], "parameter " + name +
                                   ": nested parameters are not supported by spur sweep yet; "
                                   "name each one at the top level (" +
                                   name + "_lr, ...)");
  }
  if (has("value") && (has("values") || has("min") || has("max"))) {
    r.fail(node, "parameter " + name + " is both fixed (value:) and swept (" +
                     std::string(has("values") ? "values:" : "min:/max:") + "); keep one");
  }
  if (has("distribution")) {
    p.distribution = r.text(keys["distribution"], name + ".distribution");
    if (!kDistributions.contains(p.distribution)) {
      r.fail(keys["distribution"], "parameter " + name + ": unknown distribution '" + p.distribution +
                                       "' (W&B's: " + join(kDistributions) + ")");
    }
  } else if (has("value")) {
    p.distribution = "constant";
  } else if (has("values")) {
    p.distribution = "categorical";
  } else if (has("min") && has("max")) {
    p.distribution = r.is_integer_text(keys["min"]) && r.is_integer_text(keys["max"]) ? "int_uniform" : "uniform";
  } else {
    r.fail(node, "parameter " + name + ": give value:, values:, or min: and max: (and a distribution:)");
  }
  const std::string& d = p.distribution;
  auto need = [&](const char* key) -> YAML::Node {
    if (!has(key)) r.fail(node, "parameter " + name + ": distribution " + d + " needs " + key + ":");
    return keys[key];
  };
  if (d == "constant") {
    p.value = r.value(need("value"));
  } else if (d == "categorical") {
    const YAML::Node values = need("values");
    if (!values.IsSequence()) r.fail(values, "parameter " + name + ": values: expected a list");
    if (values.size() == 0) r.fail(values, "parameter " + name + ": values: is empty (an empty grid has no runs)");
    for (const auto& item : values) p.values.push_back(r.value(item));
    if (has("probabilities")) {
      const YAML::Node probabilities = keys["probabilities"];
      if (!probabilities.IsSequence() || probabilities.size() != values.size()) {
        r.fail(probabilities, "parameter " + name + ": probabilities: expected a list as long as values: (" +
                                  std::to_string(values.size()) + ")");
      }
      double sum = 0;
      for (const auto& item : probabilities) {
        const double v = r.number(item, name + ".probabilities");
        if (v < 0) r.fail(item, "parameter " + name + ": a probability below 0");
        p.probabilities.push_back(v);
        sum += v;
      }
      if (std::abs(sum - 1) > 1e-6) {
        r.fail(probabilities, "parameter " + name + ": probabilities add up to " + sweep_value_text(sum) + ", not 1");
      }
    }
  } else if (d == "normal" || d == "q_normal" || d == "log_normal" || d == "q_log_normal") {
    if (has("mu")) p.mu = r.number(keys["mu"], name + ".mu");
    if (has("sigma")) p.sigma = r.number(keys["sigma"], name + ".sigma");
    if (p.sigma <= 0) r.fail(keys["sigma"], "parameter " + name + ": sigma must be above 0");
  } else if (d == "beta" || d == "q_beta") {
    if (has("a")) p.a = r.number(keys["a"], name + ".a");
    if (has("b")) p.b = r.number(keys["b"], name + ".b");
    if (p.a <= 0 || p.b <= 0) r.fail(node, "parameter " + name + ": a and b must be above 0");
  } else {
    const YAML::Node min = need("min"), max = need("max");
    p.min = r.number(min, name + ".min");
    p.max = r.number(max, name + ".max");
    if (p.min > p.max) {
      r.fail(min, "parameter " + name + ": min " + min.Scalar() + " is above max " + max.Scalar());
    }
    p.integer_bounds = r.is_integer_text(min) && r.is_integer_text(max);
    if (d == "int_uniform") {
      if (!r.is_integer_text(min) || !r.is_integer_text(max)) {
        r.fail(min, "parameter " + name + ": int_uniform needs integer min and max");
      }
      // Within +-2^53, where a double holds every integer (and min..max has a size that fits).
      constexpr int64_t kLimit = int64_t{1} << 53;
      const int64_t lo = r.integer(min, name + ".min", -kLimit), hi = r.integer(max, name + ".max", -kLimit);
      if (lo > kLimit || hi > kLimit) r.fail(min, "parameter " + name + ": int_uniform's bounds are at most 2^53");
      p.integer_bounds = true;
    }
    if (d.ends_with("_values") && p.min <= 0) {
      r.fail(min, "parameter " + name + ": " + d + " draws the logarithm of its values: min " + min.Scalar() +
                      " must be above 0 (log_uniform takes the exponents instead)");
    }
  }
  if (d.starts_with("q_")) {
    if (has("q")) {
      p.q = r.number(keys["q"], name + ".q");
      p.integer_q = r.is_integer_text(keys["q"]);
      if (p.q <= 0) r.fail(keys["q"], "parameter " + name + ": q must be above 0");
    } else {
      p.integer_q = true;  // W&B's default q is 1, an integer
    }
  }
  return p;
}

double uniform01(std::mt19937_64& random) { return std::generate_canonical<double, 53>(random); }

double standard_normal(std::mt19937_64& random) {
  const double u1 = uniform01(random), u2 = uniform01(random);
  return std::sqrt(-2 * std::log(1 - u1)) * std::cos(2 * M_PI * u2);
}

// Gamma(alpha, 1) by Marsaglia and Tsang's method, from this generator's uniforms alone.
double gamma_draw(double alpha, std::mt19937_64& random) {
  if (alpha < 1) return gamma_draw(alpha + 1, random) * std::pow(1 - uniform01(random), 1 / alpha);
  const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (int tries = 0; tries < 1000; ++tries) {
    const double x = standard_normal(random);
    const double v = std::pow(1 + c * x, 3);
    if (v <= 0) continue;
    const double u = uniform01(random);
    if (u < 1 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
  return d;  // not reached in practice (each try is accepted with probability above 0.95)
}

json::Value quantised(double v, const SweepParameter& p) {
  const double r = std::round(v / p.q) * p.q;
  if (p.integer_q) return static_cast<int64_t>(std::llround(r));
  return r;
}

json::Value draw(const SweepParameter& p, std::mt19937_64& random) {
  const std::string& d = p.distribution;
  const double u = uniform01(random);
  auto between = [&](double lo, double hi) { return lo + (hi - lo) * u; };
  if (d == "constant") return p.value;
  if (d == "categorical") {
    if (p.probabilities.empty()) {
      const auto i = std::min(p.values.size() - 1, static_cast<size_t>(u * static_cast<double>(p.values.size())));
      return p.values[i];
    }
    double sum = 0;
    for (size_t i = 0; i < p.values.size(); ++i) {
      sum += p.probabilities[i];
      if (u < sum) return p.values[i];
    }
    return p.values.back();
  }
  if (d == "int_uniform") {
    // Bounds within 2^53 (read_parameter): exact as doubles.
    return static_cast<int64_t>(std::min(p.max, p.min + std::floor(u * (p.max - p.min + 1))));
  }
  if (d == "uniform") return between(p.min, p.max);
  if (d == "q_uniform") return quantised(between(p.min, p.max), p);
  if (d == "log_uniform") return std::exp(between(p.min, p.max));
  if (d == "log_uniform_values") return std::exp(between(std::log(p.min), std::log(p.max)));
  if (d == "q_log_uniform") return quantised(std::exp(between(p.min, p.max)), p);
  if (d == "q_log_uniform_values") return quantised(std::exp(between(std::log(p.min), std::log(p.max))), p);
  if (d == "inv_log_uniform") return std::exp(-between(p.min, p.max));
  if (d == "inv_log_uniform_values") return std::exp(-between(-std::log(p.max), -std::log(p.min)));
  if (d == "normal" || d == "q_normal" || d == "log_normal" || d == "q_log_normal") {
    // Box-Muller from two of this generator's uniforms: the same numbers on every standard library.
    const double u2 = uniform01(random);
    const double z = std::sqrt(-2 * std::log(1 - u)) * std::cos(2 * M_PI * u2);
    const double v = p.mu + p.sigma * z;
    if (d == "normal") return v;
    if (d == "q_normal") return quantised(v, p);
    if (d == "log_normal") return std::exp(v);
    return quantised(std::exp(v), p);
  }
  // beta: X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b) (gamma_draw() above: the same numbers on every library).
  const double x = gamma_draw(p.a, random), y = gamma_draw(p.b, random);
  const double v = x / (x + y);
  return d == "beta" ? json::Value(v) : quantised(v, p);
}

}  // namespace

namespace {

// Python's repr() of a value inside a list or dict: 'text' (in double quotes when it holds a ' and no "), None,
// True/False, numbers as str() writes them.
std::string python_repr(const json::Value& value) {
  if (value.is_null()) return "None";
  if (value.is_string()) {
    const std::string& s = value.as_string();
    const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (const char c : s) {
      if (c == '\\' || c == quote) out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out + quote;
  }
  if (value.is_array()) {
    std::string out = "[";
    for (const auto& item : value.as_array()) out += (out.size() > 1 ? ", " : "") + python_repr(item);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    for (const auto& [key, item] : value.as_object()) {
      out += (out.size() > 1 ? ", " : "") + python_repr(json::Value(key)) + ": " + python_repr(item);
    }
    return out + "}";
  }
  return mlflow::param_text(value);
}

}  // namespace

std::string sweep_value_text(const json::Value& value) {
  // str(): text as it is; everything else as repr (None, [1, 'a'], {'k': 0.1}).
  return value.is_string() ? value.as_string() : python_repr(value);
}

std::vector<json::Value> SweepParameter::grid_values(const std::string& file) const {
  const auto all = [&]() -> std::vector<json::Value> {
    const std::string& d = distribution;
    const auto too_many = [&] {
      return SweepError(file + ":" + std::to_string(line) + ": parameter " + name + " gives a grid more than " +
                        std::to_string(kMaxGridPoints) + " values; narrow it or use method: random");
    };
    if (d == "constant") return {value};
    if (d == "categorical" && probabilities.empty()) return values;
    if (d == "int_uniform") {
      if (max - min + 1 > static_cast<double>(kMaxGridPoints)) throw too_many();
      std::vector<json::Value> out;
      for (auto v = static_cast<int64_t>(min); v <= static_cast<int64_t>(max); ++v) out.emplace_back(v);
      return out;
    }
    if (d == "q_uniform") {
      // numpy.arange(min, max, q): ceil((max - min) / q) values, the i-th min + i * ((min + q) - min) (numpy's own
      // step), max left out; integers when min, max and q are all written as integers.
      const double count = std::ceil((max - min) / q);
      if (!(count <= static_cast<double>(kMaxGridPoints))) throw too_many();
      const auto n = static_cast<int64_t>(count);
      const bool integers = integer_q && integer_bounds && std::abs(min) < 0x1p53 && std::abs(max) < 0x1p53;
      const double step = (min + q) - min;
      std::vector<json::Value> out;
      for (int64_t i = 0; i < n; ++i) {
        const double v = min + static_cast<double>(i) * step;
        out.push_back(integers ? json::Value(static_cast<int64_t>(v)) : json::Value(v));
      }
      return out;
    }
    throw SweepError(file + ":" + std::to_string(line) + ": parameter " + name + " (" + d +
                     (d == "categorical" ? " with probabilities" : "") +
                     ") cannot be a grid's: a grid takes value:, values: (without probabilities), int_uniform or "
                     "q_uniform; use method: random");
  }();
  // A value given twice is one point, as W&B's controller counts them (by YAML text, 1.0 being 1): in the place of
  // its first, with the value of its last (W&B looks values up by their hash, the last one written winning).
  std::vector<json::Value> unique;
  std::map<std::string, size_t> seen;
  for (const auto& v : all) {
    const bool whole =
        v.is_number() && !v.is_int() && std::floor(v.as_double()) == v.as_double() && std::abs(v.as_double()) < 0x1p53;
    const std::string key = whole ? std::to_string(static_cast<int64_t>(v.as_double())) : json::write(v);
    if (const auto it = seen.find(key); it != seen.end()) {
      unique[it->second] = v;
    } else {
      seen.emplace(key, unique.size());
      unique.push_back(v);
    }
  }
  return unique;
}

SweepSpec SweepSpec::read(const std::string& path) {
  std::string text;
  try {
    text = read_small_file(path, kMaxSweepBytes, "a sweep file");
  } catch (const ConfigError& e) {
    throw SweepError(e.what());
  }
  return parse(text, path);
}

SweepSpec SweepSpec::parse(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = load_yaml(text, file);
  } catch (const ConfigError& e) {
    throw SweepError(e.what());
  }
  const Reader r(file);
  if (!root.IsMap()) r.fail(root, "a sweep file is a mapping (method:, parameters:, program:...)");
  SweepSpec spec;
  spec.file = file;
  spec.text = text;
  std::map<std::string, YAML::Node> keys;
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (kServiceKeys.contains(key)) {
      r.fail(entry.first, "'" + key + "' is W&B's own service's setting; spur sweep does not use it (remove it)");
    }
    if (!kTopKeys.contains(key))
      r.fail(entry.first, "unknown key '" + key + "' (W&B's sweep keys: " + join(kTopKeys) + ")");
    if (keys.contains(key)) r.fail(entry.first, key + " appears twice");
    keys[key] = entry.second;
  }
  auto top = [&](const char* key) -> const YAML::Node* {
    const auto it = keys.find(key);
    return it == keys.end() ? nullptr : &it->second;
  };
  if (const auto* n = top("name")) spec.name = r.text(*n, "name");
  if (spec.name.empty()) spec.name = QFileInfo(QString::fromStdString(file)).completeBaseName().toStdString();
  if (const auto* n = top("description")) spec.description = r.text(*n, "description");
  if (const auto* n = top("project")) spec.project = r.text(*n, "project");
  if (const auto* n = top("program")) spec.program = r.text(*n, "program");
  const auto* method = top("method");
  if (!method) r.fail(root, "method: is missing (grid or random)");
  spec.method = r.text(*method, "method");
  if (spec.method == "bayes") {
    r.fail(*method, "method bayes is not supported by spur sweep yet; use grid or random");
  }
  if (spec.method != "grid" && spec.method != "random") {
    r.fail(*method, "method " + spec.method + ": expected grid or random");
  }
  if (const auto* n = top("run_cap")) spec.run_cap = r.integer(*n, "run_cap", 1);
  if (const auto* n = top("metric")) {
    if (!n->IsMap()) r.fail(*n, "metric: expected a mapping with name: and goal:");
    for (const auto& entry : *n) {
      const std::string key = entry.first.Scalar();
      if (key == "name") {
        spec.metric_name = r.text(entry.second, "metric.name");
      } else if (key == "goal") {
        spec.metric_goal = r.text(entry.second, "metric.goal");
        if (spec.metric_goal != "minimize" && spec.metric_goal != "maximize") {
          r.fail(entry.second, "metric.goal " + spec.metric_goal + ": expected minimize or maximize");
        }
      } else if (key == "target" || key == "impute" || key == "imputeWhileRunning") {
        r.fail(entry.first, "metric." + key + " is not supported by spur sweep yet (remove it)");
      } else {
        r.fail(entry.first, "metric: unknown key '" + key + "' (W&B's: name, goal)");
      }
    }
    if (spec.metric_name.empty()) r.fail(*n, "metric: name: is missing");
  }
  if (const auto* n = top("early_terminate")) {
    if (!n->IsMap()) r.fail(*n, "early_terminate: expected a mapping (type: hyperband, min_iter: ...)");
    Hyperband h;
    std::string type;
    for (const auto& entry : *n) {
      const std::string key = entry.first.Scalar();
      if (key == "type") type = r.text(entry.second, "early_terminate.type");
      else if (key == "min_iter") h.min_iter = r.integer(entry.second, "early_terminate.min_iter", 1);
      else if (key == "max_iter") h.max_iter = r.integer(entry.second, "early_terminate.max_iter", 1);
      else if (key == "s") {
        h.s = r.number(entry.second, "early_terminate.s");
        if (h.s < 0 || h.s > 1000) r.fail(entry.second, "early_terminate.s: expected a number of bands, 0 to 1000");
      } else if (key == "eta") {
        h.eta = r.number(entry.second, "early_terminate.eta");
        if (h.eta <= 1) r.fail(entry.second, "early_terminate.eta must be above 1");
      } else if (key == "strict") {
        const std::string s = r.text(entry.second, "early_terminate.strict");
        if (s != "true" && s != "false" && s != "True" && s != "False") {
          r.fail(entry.second, "early_terminate.strict: expected true or false");
        }
        h.strict = s == "true" || s == "True";
      } else {
        r.fail(entry.first,
               "early_terminate: unknown key '" + key + "' (W&B's: type, min_iter, max_iter, s, eta, strict)");
      }
    }
    if (type != "hyperband") r.fail(*n, "early_terminate: type: hyperband is the one W&B has");
    if (!h.max_iter && !h.min_iter) r.fail(*n, "early_terminate: give min_iter:, or max_iter: and s:");
    // W&B takes max_iter (with s) when both are given.
    if (h.max_iter && h.s < 1) r.fail(*n, "early_terminate: max_iter: needs s: (1 or more bands)");
    try {
      (void)hyperband_bands(h);
    } catch (const SweepError& e) {
      r.fail(*n, e.what());
    }
    if (spec.metric_name.empty()) r.fail(*n, "early_terminate needs a metric: (name: and goal:) to compare runs by");
    spec.early_terminate = h;
  }
  const auto* parameters = top("parameters");
  if (!parameters) r.fail(root, "parameters: is missing");
  if (!parameters->IsMap() || parameters->size() == 0) {
    r.fail(*parameters, "parameters: expected a mapping of names to value:, values: or min:/max:");
  }
  for (const auto& entry : *parameters) {
    const std::string name = entry.first.Scalar();
    for (const auto& p : spec.parameters) {
      if (p.name == name) r.fail(entry.first, "parameter " + name + " appears twice");
    }
    spec.parameters.push_back(read_parameter(r, name, entry.second));
  }
  std::sort(spec.parameters.begin(), spec.parameters.end(),
            [](const SweepParameter& a, const SweepParameter& b) { return a.name < b.name; });

  std::vector<int> lines;  // each command word's line (0: the default command)
  if (const auto* n = top("command")) {
    if (!n->IsSequence() || n->size() == 0) r.fail(*n, "command: expected a list of words");
    for (const auto& word : *n) {
      spec.command.push_back(r.text(word, "command"));
      lines.push_back(word.Mark().line + 1);
    }
  } else {
    spec.command = {"${env}", "${interpreter}", "${program}", "${args}"};
    lines.assign(spec.command.size(), 0);
  }
  bool args = false;
  const std::set<std::string> macros = {"${env}",      "${interpreter}",     "${program}",
                                        "${args}",     "${args_no_hyphens}", "${args_no_boolean_flags}",
                                        "${args_json}"};
  for (size_t i = 0; i < spec.command.size(); ++i) {
    const std::string& word = spec.command[i];
    if (word.find("${") != std::string::npos && !macros.contains(word)) {
      r.fail(lines[i], "command: " + word + " is not one Spur replaces (" + join(macros) + ", each a word of its own)");
    }
    if (word == "${program}" && spec.program.empty())
      r.fail(lines[i], "command: uses ${program} but program: is missing");
    if (word.starts_with("${args")) args = true;
  }
  // The first word that is not ${env} or ${interpreter} is what runs: ${program} (checked above) or a word of the
  // user's own (W&B's [${env}, python, train.py, ${args}] needs no program:).
  const auto first = std::find_if(spec.command.begin(), spec.command.end(),
                                  [](const std::string& w) { return w != "${env}" && w != "${interpreter}"; });
  if (first == spec.command.end() || first->starts_with("${args")) {
    r.fail(first == spec.command.end() ? 0 : lines[static_cast<size_t>(first - spec.command.begin())],
           "command: names no program to run (program: and ${program}, or the program's own words)");
  }
  // A parameter swept and also written into the command line by hand.
  if (args) {
    for (size_t i = 0; i < spec.command.size(); ++i) {
      const std::string& word = spec.command[i];
      const std::string bare = word.starts_with("--") ? word.substr(2) : word;
      const std::string name = bare.substr(0, bare.find('='));
      for (const auto& p : spec.parameters) {
        if (p.name == name && (word.starts_with("--") || bare.find('=') != std::string::npos)) {
          r.fail(lines[i], "parameter " + p.name + " is both fixed in command: (" + word +
                               ") and swept in parameters:; keep one");
        }
      }
    }
  }
  if (spec.method == "grid") {
    size_t points = 1;
    for (const auto& p : spec.parameters) {
      points *= p.grid_values(file).size();
      if (points == 0) r.fail(p.line, "parameter " + p.name + " gives the grid no values (an empty grid has no runs)");
      if (points > kMaxGridPoints) {
        r.fail(p.line, "the grid has more than " + std::to_string(kMaxGridPoints) +
                           " points; narrow it or use "
                           "method: random with run_cap");
      }
    }
  }
  return spec;
}

std::vector<SweepPoint> SweepSpec::grid() const {
  std::vector<std::vector<json::Value>> axes;
  for (const auto& p : parameters) axes.push_back(p.grid_values(file));
  std::vector<SweepPoint> out;
  std::vector<size_t> at(axes.size(), 0);
  while (true) {
    SweepPoint point;
    for (size_t i = 0; i < axes.size(); ++i) point.emplace_back(parameters[i].name, axes[i][at[i]]);
    out.push_back(std::move(point));
    if (run_cap && static_cast<int64_t>(out.size()) >= *run_cap) break;
    // itertools.product: the last axis varies fastest.
    size_t i = axes.size();
    while (i > 0 && ++at[i - 1] == axes[i - 1].size()) at[--i] = 0;
    if (i == 0) break;
  }
  return out;
}

std::vector<SweepPoint> SweepSpec::random(int64_t count, uint64_t seed) const {
  std::mt19937_64 generator(seed);
  std::vector<SweepPoint> out;
  for (int64_t n = 0; n < count; ++n) {
    SweepPoint point;
    for (const auto& p : parameters) {
      json::Value v = draw(p, generator);
      if (v.is_number() && !std::isfinite(v.as_double())) {
        throw SweepError(file + ":" + std::to_string(p.line) + ": parameter " + p.name + " (" + p.distribution +
                         ") drew a value that is not finite (exp() of its range overflows): narrow min and max");
      }
      point.emplace_back(p.name, std::move(v));
    }
    out.push_back(std::move(point));
  }
  return out;
}

std::vector<SweepPoint> SweepSpec::points(std::optional<int64_t> count, uint64_t seed) const {
  if (method == "grid") {
    auto all = grid();
    if (count && static_cast<int64_t>(all.size()) > *count) all.resize(static_cast<size_t>(*count));
    return all;
  }
  const auto n = count ? count : run_cap;
  if (!n) throw SweepError(file + ": method random needs a number of runs: run_cap: in the file, or --count N");
  return random(*n, seed);
}

std::vector<std::string> SweepSpec::command_for(const SweepPoint& point) const {
  std::vector<std::string> out;
  for (const auto& word : command) {
    if (word == "${env}") continue;
    if (word == "${interpreter}") {
      if (program.ends_with(".py")) out.emplace_back("python3");
    } else if (word == "${program}") {
      out.push_back(program);
    } else if (word == "${args}") {
      for (const auto& [name, value] : point) out.push_back("--" + name + "=" + sweep_value_text(value));
    } else if (word == "${args_no_hyphens}") {
      for (const auto& [name, value] : point) out.push_back(name + "=" + sweep_value_text(value));
    } else if (word == "${args_no_boolean_flags}") {
      for (const auto& [name, value] : point) {
        if (value.is_bool()) {
          if (value.as_bool()) out.push_back("--" + name);
        } else {
          out.push_back("--" + name + "=" + sweep_value_text(value));
        }
      }
    } else if (word == "${args_json}") {
      // json.dumps's layout, floats as Python writes them (1e-05, not 1.0000000000000001e-05).
      std::string text = "{";
      for (const auto& [name, value] : point) {
        text += (text.size() > 1 ? ", " : "") + json::write(json::Value(name)) + ": ";
        text += value.is_number() && !value.is_int() ? sweep_value_text(value) : json::write(value);
      }
      out.push_back(text + "}");
    } else {
      out.push_back(word);
    }
  }
  return out;
}

}  // namespace spur::app
