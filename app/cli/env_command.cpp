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

#include "cli/commands.h"

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
  return match.hasMatch() ? QString::number(match.captured(1).toDouble() / (1024 * 1024), 'f', 1) + " GiB"
                          : "unknown";
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

}  // namespace

int env_command(const QStringList& arguments) {
  QTextStream out(stdout);
  const bool json = arguments.contains("--json");
  for (const auto& argument : arguments) {
    if (argument != "--json") {
      QTextStream(stderr) << "spur env: unknown argument '" << argument << "' (only --json)\n";
      return 2;
    }
  }
  const auto blas = blas_info_for_libtorch();
  const QList<QPair<QString, QString>> rows = {
      {"Spur", SPUR_VERSION_STRING},
      {"LibTorch (built against)", SPUR_TORCH_BUILD_VERSION},
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
