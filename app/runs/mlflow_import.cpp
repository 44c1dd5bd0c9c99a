// SPDX-License-Identifier: Apache-2.0
// Importing MLflow runs; see mlflow_import.h.
#include "runs/mlflow_import.h"

#include <QByteArray>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUrl>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <spur/history/writer.h>

#include "launch/launch_request.h"
#include <spur/core/http.h>
#include <spur/core/mlflow.h>

namespace spur::app {
namespace {

struct Address {
  std::string server;  // http(s)://HOST:PORT
  QString shown;       // mlflow://HOST:PORT, as given (no credentials)
  QString experiment;  // empty: every experiment
};

Address parse_address(const QString& address) {
  Address out;
  QString rest;
  if (address.startsWith("mlflow://")) {
    out.server = "http://";
    rest = address.mid(9);
  } else if (address.startsWith("mlflow+https://")) {
    out.server = "https://";
    rest = address.mid(15);
  } else {
    throw std::invalid_argument(address.toStdString() +
                                ": not an MLflow address (mlflow://HOST:PORT[/EXPERIMENT] or "
                                "mlflow+https://HOST[:PORT][/EXPERIMENT])");
  }
  const auto slash = rest.indexOf('/');
  const QString host = slash < 0 ? rest : rest.left(slash);
  if (host.isEmpty() || host.contains('@')) {
    throw std::invalid_argument(address.toStdString() + (host.isEmpty()
                                                             ? ": no HOST:PORT after the scheme"
                                                             : ": credentials do not go in the address (set "
                                                               "MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
                                                               "MLFLOW_TRACKING_PASSWORD)"));
  }
  out.server += host.toStdString();
  out.shown = address.left(address.indexOf("://") + 3) + host;
  if (slash >= 0) {
    QString experiment = rest.mid(slash + 1);
    while (experiment.endsWith('/')) experiment.chop(1);
    out.experiment = QUrl::fromPercentEncoding(experiment.toUtf8());
  }
  return out;
}

QString status_of(const std::string& mlflow_status) {
  if (mlflow_status == "FINISHED") return "finished";
  if (mlflow_status == "FAILED") return "failed";
  return "stopped";  // KILLED, or RUNNING/SCHEDULED: a snapshot of a run that goes on elsewhere
}

// A parameter's text as JSON where it reads as a JSON number or a Python bool (what trackers write for numbers
// and flags), else the text.
QJsonValue param_value(const std::string& text) {
  if (text == "True" || text == "true") return true;
  if (text == "False" || text == "false") return false;
  const auto parsed = QJsonDocument::fromJson("[" + QByteArray::fromStdString(text) + "]");
  if (parsed.isArray() && parsed.array().size() == 1 && parsed.array()[0].isDouble()) return parsed.array()[0];
  return QString::fromStdString(text);
}

struct Fingerprint {
  uint64_t hash = 1469598103934665603ull;
  void add(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  }
  void add(const std::string& text) {
    add(text.data(), text.size());
    add("", 1);
  }
  template <typename T>
  void add_value(T value) {
    add(&value, sizeof value);
  }
};

[[noreturn]] void unreachable(const QString& address, const std::exception& e) {
  throw std::invalid_argument(address.toStdString() + ": " + e.what());
}

}  // namespace

bool is_mlflow_address(const QString& address) {
  return address.startsWith("mlflow://") || address.startsWith("mlflow+https://");
}

QString mlflow_run_id(const QString& imported_directory) {
  if (!is_mlflow_address(imported_directory)) return {};
  const auto at = imported_directory.lastIndexOf(" run ");
  return at < 0 ? QString() : imported_directory.mid(at + 5);
}

std::vector<ImportedRun> import_mlflow(const std::string& history_path, const QString& address,
                                       const MlflowImportOptions& options,
                                       const std::function<void(const ImportedRun&)>& done) {
  const Address where = parse_address(address);
  mlflow::Server server;
  try {
    server = mlflow::server_from_environment(where.server, address.toStdString());
  } catch (const Error& e) {
    throw std::invalid_argument(e.what());
  }
  mlflow::Client client(server);

  // The experiments first, so a wrong name is an error before anything is written.
  std::vector<mlflow::Experiment> experiments;
  try {
    if (where.experiment.isEmpty()) {
      experiments = client.experiments();
    } else {
      const std::string name = where.experiment.toStdString();
      if (auto id = client.experiment_id(name)) {
        experiments.push_back({*id, name});
      } else {
        std::string known;
        for (const auto& experiment : client.experiments()) {
          if (experiment.id == name) experiments.push_back(experiment);  // an experiment id given
          known += (known.empty() ? "" : ", ") + experiment.name;
        }
        if (experiments.empty()) {
          throw std::invalid_argument(address.toStdString() + ": no experiment '" + name + "' at " +
                                      where.shown.toStdString() +
                                      " (its experiments: " + (known.empty() ? "none" : known) + ")");
        }
      }
    }
  } catch (const http::TransportError& e) {
    unreachable(address, e);
  } catch (const mlflow::ServerError& e) {
    unreachable(address, e);
  }

  history::HistoryWriter writer(history_path);
  std::vector<ImportedRun> results;
  QStringList missing = options.run_ids;
  for (const auto& experiment : experiments) {
    std::vector<mlflow::RunInfo> runs;
    try {
      runs = client.runs(experiment.id);
    } catch (const std::exception& e) {
      unreachable(address, e);
    }
    const QString source = where.shown + "/" + QString::fromStdString(experiment.name);
    for (const auto& info : runs) {
      const QString run_id = QString::fromStdString(info.run_id);
      if (!options.run_ids.isEmpty() && !options.run_ids.contains(run_id)) continue;
      missing.removeAll(run_id);
      if (options.cancelled && options.cancelled()) return results;
      ImportedRun result;
      result.directory = source + " run " + QString::fromStdString(info.run_id);
      result.name = QString::fromStdString(info.run_name.empty() ? info.run_id : info.run_name);
      try {
        // Every point of every metric the run has (its latest values name them).
        Fingerprint fingerprint;
        std::vector<history::MetricAppend> metrics;
        int64_t last_step = -1;
        double last_wall = 0;
        std::vector<std::string> keys;
        for (const auto& latest : info.latest) keys.push_back(latest.key);
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        for (const auto& key : keys) {
          auto points = client.metric_history(info.run_id, key);
          std::stable_sort(points.begin(), points.end(), [](const mlflow::Metric& a, const mlflow::Metric& b) {
            return a.step != b.step ? a.step < b.step : a.timestamp < b.timestamp;
          });
          history::MetricAppend metric{key, {}};
          metric.points.reserve(points.size());
          fingerprint.add(key);
          for (const auto& point : points) {
            const double wall = static_cast<double>(point.timestamp) / 1000.0;
            metric.points.push_back({point.step, point.value, wall});
            last_step = std::max(last_step, point.step);
            last_wall = std::max(last_wall, wall);
            fingerprint.add_value(point.step);
            fingerprint.add_value(point.timestamp);
            uint64_t bits = 0;
            std::memcpy(&bits, &point.value, sizeof bits);
            fingerprint.add_value(bits);
          }
          result.points += points.size();
          metrics.push_back(std::move(metric));
        }
        result.series = metrics.size();

        history::Run run;
        run.name = result.name.toStdString();
        run.project = options.project.isEmpty() ? experiment.name : options.project.toStdString();
        run.status = status_of(info.status).toStdString();
        run.target = "mlflow";
        run.command =
            "spur runs import " + shell_quote({source, "--run", QString::fromStdString(info.run_id)}).toStdString();
        QJsonObject params;
        for (const auto& [key, value] : info.params) params.insert(QString::fromStdString(key), param_value(value));
        run.params = QJsonDocument(params).toJson(QJsonDocument::Compact).toStdString();
        result.hparams = info.params.size();
        for (const auto& [key, value] : info.tags) {
          if (key == "mlflow.note.content") run.notes = value;  // the run's description in MLflow's UI
        }
        if (last_step >= 0) run.total_steps = last_step;
        run.created = run.started = info.start_time > 0 ? static_cast<double>(info.start_time) / 1000.0 : last_wall;
        run.ended = info.end_time > 0 ? static_cast<double>(info.end_time) / 1000.0 : last_wall;
        fingerprint.add(run.params);
        fingerprint.add(info.status);
        fingerprint.add_value(info.end_time);
        const std::string origin = "imported from MLflow run " + info.run_id + " at " + where.shown.toStdString() +
                                   " (" + info.status + ", fingerprint " +
                                   QString("%1").arg(fingerprint.hash, 16, 16, QChar('0')).toStdString() + ")";
        if (const auto id = writer.import_run(run, metrics, origin, options.again)) {
          result.run = *id;
        } else {
          result.earlier = writer.last_imported_as();
          result.changed = writer.last_import_changed();
        }
      } catch (const http::TransportError& e) {
        result.error = result.directory + ": " + QString::fromUtf8(e.what()) + "; nothing of this run was imported";
      } catch (const mlflow::ServerError& e) {
        result.error = result.directory + ": " + QString::fromUtf8(e.what()) + "; nothing of this run was imported";
      }
      if (done) done(result);
      results.push_back(std::move(result));
    }
  }
  if (!missing.isEmpty()) {
    throw std::invalid_argument(address.toStdString() + ": no active run " + missing.join(", ").toStdString() + " in " +
                                (where.experiment.isEmpty() ? "any experiment" : "that experiment"));
  }
  return results;
}

}  // namespace spur::app
