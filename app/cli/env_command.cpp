// SPDX-License-Identifier: Apache-2.0
// `spur env`: versions, compiler, operating system, CPU, memory, GPUs and the BLAS LibTorch will load, in the
// "key: value" form bug reports quote. `--json` for tools.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTextStream>
#include <QThread>

#include <spur/blas.h>
#include <spur/history/records.h>

#include "cli/commands.h"
#include "config/run_config.h"
#include "setup/setup_answers.h"
#include "launch/companion.h"
#include "runs/run_status.h"

namespace spur::cli {
namespace {

QString cpu_model() {
  QFile file("/proc/cpuinfo");
  if (!file.open(QIODevice::ReadOnly)) return "unknown";
  static const QRegularExpression model(R"(^model name\s*:\s*(.+)$)", QRegularExpression::MultilineOption);
  const auto match = model.match(QString::fromLocal8Bit(file.readAll()));
  return match.hasMatch() ? match.captured(1).trimmed() : "unknown";
}

QString memory_total() {
  QFile file("/proc/meminfo");
  if (!file.open(QIODevice::ReadOnly)) return "unknown";
  static const QRegularExpression total(R"(MemTotal:\s*(\d+) kB)");
  const auto match = total.match(QString::fromLocal8Bit(file.readAll()));
  return match.hasMatch() ? QString::number(match.captured(1).toDouble() / (1024 * 1024), 'f', 1) + " GiB" : "unknown";
}

QString gpus() {
  const QString smi = QStandardPaths::findExecutable("nvidia-smi");
  if (smi.isEmpty()) return "none found (no nvidia-smi)";
  QProcess process;
  process.start(smi, {"-L"});
  if (!process.waitForFinished(10000) || process.exitCode() != 0) return "nvidia-smi failed";
  const auto lines = QString::fromLocal8Bit(process.readAllStandardOutput()).trimmed();
  return lines.isEmpty() ? "none" : lines.split('\n').join("; ");
}

QString compiler() {
#if defined(__clang__)
  return QString("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return QString("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

// The run history, and a warning when it is readable by others: Spur creates it 0600 (consoles and configs can
// hold secrets), but one made by an older Spur, or loosened by hand, keeps the mode it has.
QList<QPair<QString, QString>> history_rows() {
  const QString path = QString::fromStdString(history::default_history_path());
  if (!QFile::exists(path)) return {{"History", path + " (not created yet)"}};
  const QString warning = app::history_permission_warning(path);
  return {{"History", warning.isEmpty() ? path : path + "  <- WARNING: " + warning}};
}

// Which configuration a launch here would use, and what it says: "stale global config silently used" is a
// common Accelerate complaint, so the report names the file and its error if it has one.
QList<QPair<QString, QString>> config_rows(const std::string& named) {
  const std::string path = named.empty() ? app::config_in_effect() : named;
  if (path.empty()) {
    return {{"Config", "none (a launch runs 1 process here; write one with `spur config`)"}};
  }
  QList<QPair<QString, QString>> rows{{"Config", QString::fromStdString(path)}};
  try {
    const auto config = app::RunConfig::load(path);
    QString summary = QString::fromStdString(config.text("compute_environment", "LOCAL_MACHINE")) + ", " +
                      QString::fromStdString(config.distributed_type());
    if (config.sagemaker()) {
      summary += QString(", %1 x %2")
                     .arg(QString::fromStdString(config.text("ec2_instance_type", "?")))
                     .arg(config.num_machines());
    } else {
      const int processes = config.num_processes();
      summary += QString(", %1 process(es) over %2 machine(s)")
                     .arg(processes > 0 ? QString::number(processes) : QString("unset"))
                     .arg(config.num_machines());
      if (config.num_machines() > 1) {
        summary += QString(", this is machine %1, rendezvous at %2:%3")
                       .arg(config.machine_rank())
                       .arg(QString::fromStdString(config.main_process_ip()))
                       .arg(config.main_process_port());
      }
    }
    summary += ", mixed precision " + QString::fromStdString(config.mixed_precision());
    if (config.use_cpu()) summary += ", CPU only";
    rows.append({"Config values", summary});
    const auto ignored = config.unsupported();
    if (!ignored.empty()) {
      QStringList lines;
      for (const auto& line : ignored) lines << QString::fromStdString(line);
      rows.append({"Config keys Spur ignores", lines.join("; ")});
    }
  } catch (const app::ConfigError& e) {
    rows.append({"Config values", QString("INVALID: ") + e.what()});
  }
  return rows;
}

QList<QPair<QString, QString>> runtime_rows() {
  const QString check = app::find_companion("SPUR_CHECK_PROGRAM", {"spur-check", "../libexec/spur/spur-check"});
  if (check.isEmpty()) return {{"LibTorch (runtime)", "unknown: spur-check not found beside spur"}};
  QProcess process;
  process.start(check, {"--env"});
  if (!process.waitForFinished(60000) || process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0) {
    process.kill();
    process.waitForFinished(5000);
    return {{"LibTorch (runtime)",
             "spur-check --env failed: " + QString::fromLocal8Bit(process.readAllStandardError()).trimmed().left(300)}};
  }
  QList<QPair<QString, QString>> rows;
  for (const auto& line : QString::fromLocal8Bit(process.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts)) {
    const auto colon = line.indexOf(": ");
    if (colon > 0) rows.append({line.left(colon), line.mid(colon + 2)});
  }
  return rows;
}

}  // namespace

int env_command(const QStringList& arguments) {
  QTextStream out(stdout);
  bool json = false;
  std::string config_file;
  for (qsizetype i = 0; i < arguments.size(); ++i) {
    const QString& argument = arguments[i];
    if (argument == "--help" || argument == "-h") {
      out << "usage: spur env [--json] [--config_file F]\n"
             "Prints what a bug report needs: Spur's and LibTorch's versions, BLAS, Qt, the machine, the GPUs and the\n"
             "configuration in effect (or F), as text or as one JSON object.\n";
      return 0;
    }
    if (argument == "--json") {
      json = true;
    } else if ((argument == "--config_file" || argument == "--config-file") && i + 1 < arguments.size()) {
      config_file = arguments[++i].toStdString();
    } else if (argument.startsWith("--config_file=") || argument.startsWith("--config-file=")) {
      config_file = argument.section('=', 1).toStdString();
    } else {
      QTextStream(stderr) << "spur env: unknown argument '" << argument << "' (--json, --config_file F)\n";
      return 2;
    }
  }
  const auto blas = blas_info_for_libtorch();
  QList<QPair<QString, QString>> rows = {
      {"Spur", SPUR_VERSION_STRING},
      {"LibTorch (built against)", app::engine_torch_version()},
      {"Qt", qVersion()},
      {"Compiler", compiler()},
      {"OS", QSysInfo::prettyProductName() + ", kernel " + QSysInfo::kernelVersion()},
      {"CPU", cpu_model() + ", " + QString::number(QThread::idealThreadCount()) + " logical cores"},
      {"Memory", memory_total()},
      {"GPUs", gpus()},
      {"BLAS", QString::fromStdString(blas.name) +
                   (blas.path.empty() ? QString() : " (" + QString::fromStdString(blas.path) + ")") +
                   (blas.slow ? "  <- 16-20x slower than OpenBLAS: install libopenblas0-pthread" : "")},
  };
  // What a process with LibTorch loads (version, CUDA and NCCL, the devices it sees, the BLAS it runs on): spur
  // links no LibTorch, so spur-check reports it; its BLAS replaces the guess above.
  const auto runtime = runtime_rows();
  for (const auto& [key, value] : runtime) {
    if (key == "BLAS") {
      for (auto& row : rows) {
        if (row.first == "BLAS")
          row.second = value + (blas.slow ? "  <- 16-20x slower than OpenBLAS: install libopenblas0-pthread" : "");
      }
    } else {
      rows.append({key, value});
    }
  }
  rows += config_rows(config_file);
  rows += history_rows();
  if (json) {
    QJsonObject object;
    for (const auto& [key, value] : rows) object.insert(key, value);
    out << QJsonDocument(object).toJson();
    return 0;
  }
  for (const auto& [key, value] : rows) out << key << ": " << value << "\n";
  return 0;
}

}  // namespace spur::cli
