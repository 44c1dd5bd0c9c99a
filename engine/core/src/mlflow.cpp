// SPDX-License-Identifier: Apache-2.0
// MLflow's tracking REST API; see spur/core/mlflow.h.
#include <spur/core/mlflow.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <spur/core/http.h>

namespace spur::mlflow {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool truthy(const std::string& value) {
  return value == "1" || value == "true" || value == "True" || value == "TRUE" || value == "yes";
}

std::string quoted(const std::string& text) { return json::write(json::Value(text)); }

// A double as protobuf's JSON mapping writes one: a number, or "NaN", "Infinity", "-Infinity".
std::string number(double value) {
  if (std::isnan(value)) return "\"NaN\"";
  if (std::isinf(value)) return value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return json::write(json::Value(value));
}

std::string pairs(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += "{\"key\": " + quoted(items[i].first) + ", \"value\": " + quoted(items[i].second) + "}";
  }
  return out + "]";
}

// Protobuf's JSON mapping writes 64-bit integers as strings; MLflow's server writes them as numbers. Both read.
int64_t integer(const json::Value* value) {
  if (!value || value->is_null()) return 0;
  if (value->is_string()) return std::strtoll(value->as_string().c_str(), nullptr, 10);
  if (value->is_int()) return value->as_int();
  return static_cast<int64_t>(value->as_double());
}

double real(const json::Value* value) {
  if (!value || value->is_null()) return 0;
  if (value->is_string()) {
    const auto& text = value->as_string();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    return std::strtod(text.c_str(), nullptr);
  }
  return value->as_double();
}

std::string text(const json::Value& object, const std::string& key) {
  const auto* value = object.find(key);
  return value && value->is_string() ? value->as_string() : std::string();
}

std::vector<std::pair<std::string, std::string>> key_values(const json::Value& object, const std::string& key) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto* list = object.find(key);
  if (!list || !list->is_array()) return out;
  for (const auto& item : list->as_array()) out.emplace_back(text(item, "key"), text(item, "value"));
  return out;
}

Metric metric(const json::Value& item) {
  return Metric{text(item, "key"), real(item.find("value")), integer(item.find("timestamp")),
                integer(item.find("step"))};
}

RunInfo run_info(const json::Value& run) {
  RunInfo out;
  const json::Value empty{json::Object{}};
  const auto* info = run.find("info");
  const auto* data = run.find("data");
  if (!info) info = &empty;
  if (!data) data = &empty;
  out.run_id = text(*info, "run_id");
  if (out.run_id.empty()) out.run_id = text(*info, "run_uuid");
  out.run_name = text(*info, "run_name");
  out.experiment_id = text(*info, "experiment_id");
  out.status = text(*info, "status");
  out.lifecycle_stage = text(*info, "lifecycle_stage");
  out.start_time = integer(info->find("start_time"));
  out.end_time = integer(info->find("end_time"));
  out.params = key_values(*data, "params");
  out.tags = key_values(*data, "tags");
  if (const auto* metrics = data->find("metrics"); metrics && metrics->is_array()) {
    for (const auto& item : metrics->as_array()) out.latest.push_back(metric(item));
  }
  return out;
}

}  // namespace

std::string Server::shown() const { return http::without_credentials(url); }

Server server_from_environment(const std::string& uri, const std::string& what) {
  Server server;
  if (uri.rfind("http://", 0) != 0 && uri.rfind("https://", 0) != 0) {
    throw Error(what + " '" + http::without_credentials(uri) +
                "': not a tracking server's http:// or https:// address (Spur speaks to an MLflow tracking server "
                "through its REST API: start one with `mlflow server --host HOST --port PORT`)");
  }
  server.url = uri;
  while (!server.url.empty() && server.url.back() == '/') server.url.pop_back();
  server.token = env("MLFLOW_TRACKING_TOKEN");
  server.user = env("MLFLOW_TRACKING_USERNAME");
  server.password = env("MLFLOW_TRACKING_PASSWORD");
  server.insecure = truthy(env("MLFLOW_TRACKING_INSECURE_TLS"));
  server.ca_file = env("MLFLOW_TRACKING_SERVER_CERT_PATH");
  if (const auto timeout = env("MLFLOW_HTTP_REQUEST_TIMEOUT"); !timeout.empty()) {
    char* end = nullptr;
    const double seconds = std::strtod(timeout.c_str(), &end);
    if (*end != '\0' || !(seconds > 0) || seconds > 86400) {
      throw Error("MLFLOW_HTTP_REQUEST_TIMEOUT='" + timeout + "': expected a number of seconds above 0");
    }
    server.timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }
  return server;
}

std::string param_text(const json::Value& value) {
  if (value.is_string()) return value.as_string();
  if (value.is_bool()) return value.as_bool() ? "True" : "False";
  if (value.is_int()) return std::to_string(value.as_int());
  if (value.is_number()) {
    const double d = value.as_double();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    // Python's repr: the shortest digits that read back the same, fixed for exponents -4..15, else scientific
    // with a two-digit exponent at least.
    char buffer[64];
    const auto stop = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific).ptr;
    const std::string sci(buffer, stop);  // [-]d[.ddd]e(+|-)xx
    const bool negative = sci[0] == '-';
    const auto e = sci.find('e');
    std::string digits;
    for (std::size_t i = negative ? 1 : 0; i < e; ++i) {
      if (sci[i] != '.') digits += sci[i];
    }
    const int exponent = std::stoi(sci.substr(e + 1));
    std::string out = negative ? "-" : "";
    const auto n = static_cast<int>(digits.size());
    if (exponent >= -4 && exponent < 16) {
      if (exponent < 0) {
        out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
      } else if (n <= exponent + 1) {
        out += digits + std::string(static_cast<std::size_t>(exponent + 1 - n), '0') + ".0";
      } else {
        const auto whole = static_cast<std::size_t>(exponent) + 1;
        out += digits.substr(0, whole) + "." + digits.substr(whole);
      }
    } else {
      out += digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "") + "e" + (exponent < 0 ? "-" : "+");
      const int magnitude = exponent < 0 ? -exponent : exponent;
      out += (magnitude < 10 ? "0" : "") + std::to_string(magnitude);
    }
    return out;
  }
  return json::write(value);
}

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxKey) return false;
  for (const unsigned char c : key) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c >= 0x80;  // letters beyond ASCII (Python's \w), as UTF-8
    if (!word && c != '/' && c != '.' && c != '-' && c != ' ' && c != ':') return false;
  }
  // posixpath.normpath(key) must be key itself: no empty, "." or ".." part, no leading or trailing "/".
  std::size_t start = 0;
  for (;;) {
    const auto slash = key.find('/', start);
    const std::string part = key.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

json::Value Client::call(const std::string& method, const std::string& endpoint, const std::string& query,
                         const std::string& body) {
  http::Request request;
  request.method = method;
  request.url = server_.url + "/api/2.0/mlflow/" + endpoint + (query.empty() ? "" : "?" + query);
  request.body = body;
  if (!server_.token.empty()) request.headers.emplace_back("Authorization", "Bearer " + server_.token);
  request.user = server_.user;
  request.password = server_.password;
  request.insecure = server_.insecure;
  request.ca_file = server_.ca_file;
  request.timeout = server_.timeout;
  const auto response = http::send(request);
  json::Value answer;
  std::string parse_error;
  try {
    answer = response.body.empty() ? json::Value(json::Object{}) : json::parse(response.body);
  } catch (const std::exception& e) {
    parse_error = e.what();
  }
  const std::string where = server_.shown() + " (" + endpoint + ")";
  if (response.status < 200 || response.status >= 300) {
    std::string code = answer.is_object() ? text(answer, "error_code") : "";
    std::string message = answer.is_object() ? text(answer, "message") : "";
    if (message.empty()) message = response.body.substr(0, 200);
    throw ServerError(where + ": HTTP " + std::to_string(response.status) + (code.empty() ? "" : " " + code) +
                          (message.empty() ? "" : ": " + message),
                      response.status, code);
  }
  if (!parse_error.empty() || !answer.is_object()) {
    throw ServerError(where + ": the answer is not MLflow's JSON (" +
                          (parse_error.empty() ? "not an object" : parse_error) + "): is this an MLflow server?",
                      response.status, "");
  }
  return answer;
}

json::Value Client::get(const std::string& endpoint, const std::string& query) {
  return call("GET", endpoint, query, {});
}

json::Value Client::post(const std::string& endpoint, const std::string& body) {
  return call("POST", endpoint, {}, body);
}

std::optional<std::string> Client::experiment_id(const std::string& name) {
  try {
    const auto answer = get("experiments/get-by-name", "experiment_name=" + http::url_encode(name));
    const auto& experiment = answer.at("experiment", "experiments/get-by-name's answer");
    if (text(experiment, "lifecycle_stage") == "deleted") return std::nullopt;
    return text(experiment, "experiment_id");
  } catch (const ServerError& e) {
    if (e.code() == "RESOURCE_DOES_NOT_EXIST") return std::nullopt;
    throw;
  }
}

std::string Client::ensure_experiment(const std::string& name) {
  if (auto id = experiment_id(name)) return *id;
  try {
    return text(post("experiments/create", "{\"name\": " + quoted(name) + "}"), "experiment_id");
  } catch (const ServerError& e) {
    if (e.code() != "RESOURCE_ALREADY_EXISTS") throw;
  }
  if (auto id = experiment_id(name)) return *id;  // made by another client meanwhile
  throw ServerError(server_.shown() + ": experiment '" + name +
                        "' exists but is deleted: restore it (mlflow experiments restore) or choose another name",
                    400, "RESOURCE_ALREADY_EXISTS");
}

std::vector<Experiment> Client::experiments() {
  std::vector<Experiment> out;
  std::string token;
  do {
    std::string body = R"({"max_results": 1000, "view_type": "ACTIVE_ONLY")";
    if (!token.empty()) body += ", \"page_token\": " + quoted(token);
    const auto answer = post("experiments/search", body + "}");
    if (const auto* list = answer.find("experiments"); list && list->is_array()) {
      for (const auto& item : list->as_array()) out.push_back({text(item, "experiment_id"), text(item, "name")});
    }
    token = text(answer, "next_page_token");
  } while (!token.empty());
  return out;
}

std::string Client::create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_time,
                               const std::vector<std::pair<std::string, std::string>>& tags) {
  std::string body = "{\"experiment_id\": " + quoted(experiment_id) +
                     ", \"start_time\": " + std::to_string(start_time) + ", \"tags\": " + pairs(tags);
  if (!run_name.empty()) body += ", \"run_name\": " + quoted(run_name);
  const auto answer = post("runs/create", body + "}");
  auto id = run_info(answer.at("run", "runs/create's answer")).run_id;
  if (id.empty()) throw ServerError(server_.shown() + ": runs/create answered without a run id", 200, "");
  return id;
}

void Client::update_run(const std::string& run_id, const std::string& status, int64_t end_time) {
  std::string body = "{\"run_id\": " + quoted(run_id) + ", \"status\": " + quoted(status);
  if (end_time > 0) body += ", \"end_time\": " + std::to_string(end_time);
  post("runs/update", body + "}");
}

void Client::set_tags(const std::string& run_id, const std::vector<std::pair<std::string, std::string>>& tags) {
  for (std::size_t i = 0; i < tags.size(); i += kMaxParamsPerBatch) {
    const std::vector<std::pair<std::string, std::string>> some(
        tags.begin() + static_cast<std::ptrdiff_t>(i),
        tags.begin() + static_cast<std::ptrdiff_t>(std::min(tags.size(), i + kMaxParamsPerBatch)));
    post("runs/log-batch", "{\"run_id\": " + quoted(run_id) + ", \"tags\": " + pairs(some) + "}");
  }
}

void Client::log_batch(const std::string& run_id, const std::vector<Metric>& metrics,
                       const std::vector<std::pair<std::string, std::string>>& params) {
  if (metrics.size() > kMaxMetricsPerBatch || params.size() > kMaxParamsPerBatch) {
    throw Error("mlflow: a batch holds at most 1000 metrics and 100 params");
  }
  std::string body = "{\"run_id\": " + quoted(run_id) + ", \"metrics\": [";
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const auto& m = metrics[i];
    if (i) body += ", ";
    body += "{\"key\": " + quoted(m.key) + ", \"value\": " + number(m.value) +
            ", \"timestamp\": " + std::to_string(m.timestamp) + ", \"step\": " + std::to_string(m.step) + "}";
  }
  body += "], \"params\": " + pairs(params) + "}";
  post("runs/log-batch", body);
}

RunInfo Client::run(const std::string& run_id) {
  return run_info(get("runs/get", "run_id=" + http::url_encode(run_id)).at("run", "runs/get's answer"));
}

std::vector<RunInfo> Client::runs(const std::string& experiment_id) {
  std::vector<RunInfo> out;
  std::string token;
  do {
    std::string body = "{\"experiment_ids\": [" + quoted(experiment_id) +
                       "], \"max_results\": 1000, \"run_view_type\": \"ACTIVE_ONLY\", "
                       "\"order_by\": [\"attributes.start_time ASC\"]";
    if (!token.empty()) body += ", \"page_token\": " + quoted(token);
    const auto answer = post("runs/search", body + "}");
    if (const auto* list = answer.find("runs"); list && list->is_array()) {
      for (const auto& item : list->as_array()) out.push_back(run_info(item));
    }
    token = text(answer, "next_page_token");
  } while (!token.empty());
  return out;
}

std::vector<Metric> Client::metric_history(const std::string& run_id, const std::string& key) {
  std::vector<Metric> out;
  std::string token;
  do {
    std::string query =
        "run_id=" + http::url_encode(run_id) + "&metric_key=" + http::url_encode(key) + "&max_results=25000";
    if (!token.empty()) query += "&page_token=" + http::url_encode(token);
    const auto answer = get("metrics/get-history", query);
    if (const auto* list = answer.find("metrics"); list && list->is_array()) {
      for (const auto& item : list->as_array()) out.push_back(metric(item));
    }
    token = text(answer, "next_page_token");
  } while (!token.empty());
  return out;
}

}  // namespace spur::mlflow
