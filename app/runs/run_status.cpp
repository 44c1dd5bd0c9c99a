// SPDX-License-Identifier: Apache-2.0
// Run records as text; see run_status.h.
#include "runs/run_status.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDateTime>
#include <QFile>

#include <optional>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace spur::app {
namespace {

// When a process started, in seconds since the epoch (Linux /proc); nullopt when unknown.
std::optional<double> process_start(int64_t pid) {
  QFile stat(QString("/proc/%1/stat").arg(pid));
  QFile system("/proc/stat");
  if (!stat.open(QIODevice::ReadOnly) || !system.open(QIODevice::ReadOnly)) return std::nullopt;
  const QByteArray line = stat.readAll();
  // Field 22 (starttime, clock ticks since boot) comes after the command name, which may hold spaces: ")" ends it.
  const QList<QByteArray> fields = line.mid(line.lastIndexOf(')') + 2).split(' ');
  if (fields.size() < 20) return std::nullopt;
  const double ticks = fields[19].toDouble();
  for (const QByteArray& entry : system.readAll().split('\n')) {
    if (entry.startsWith("btime "))
      return entry.mid(6).trimmed().toDouble() + ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return std::nullopt;
}

}  // namespace

bool owns_run(const history::Run& run) {
  if (run.pid <= 0 || QString::fromStdString(run.host) != local_host_name()) return false;
  if (::kill(static_cast<pid_t>(run.pid), 0) != 0 && errno == ESRCH) return false;
  const auto started = process_start(run.pid);
  // Clock ticks and btime are coarse (1 s): allow that much.
  return !started || run.created <= 0 || *started <= run.created + 2.0;
}

QString effective_status(const history::Run& run) {
  if ((run.status == "running" || run.status == "queued") && run.pid > 0 &&
      QString::fromStdString(run.host) == local_host_name() && !owns_run(run)) {
    return "failed";
  }
  return QString::fromStdString(run.status);
}

double progress_fraction(const history::Run& run) {
  if (run.total_steps <= 0 || run.last_step < 0) return -1;
  return std::min(1.0, static_cast<double>(run.last_step) / static_cast<double>(run.total_steps));
}

namespace {

// The last second of year 9999: a time beyond it (or not a number) is damage, not a date (an imported event file
// can hold any double; a cast of 1e300 to an integer is undefined behaviour).
constexpr double kLastSecond = 253402300799.0;

}  // namespace

bool plausible_time(double seconds) { return std::isfinite(seconds) && seconds > 0 && seconds <= kLastSecond; }

QString time_text(double seconds) {
  return plausible_time(seconds)
             ? QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(seconds * 1000)).toString("yyyy-MM-dd HH:mm:ss")
             : QString("-");
}

QString duration_text(double seconds) {
  if (!(std::isfinite(seconds) && seconds >= 0 && seconds <= kLastSecond)) return "-";
  const auto s = static_cast<qint64>(seconds);
  return s >= 3600 ? QString("%1h%2m").arg(s / 3600).arg((s / 60) % 60, 2, 10, QChar('0'))
                   : QString("%1m%2s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
}

QString size_text(qint64 bytes) {
  if (bytes < 1000) return QString("%1 B").arg(bytes);
  static const char* const units[] = {"kB", "MB", "GB", "TB", "PB"};
  auto value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 4) value /= 1000, ++unit;
  return QString("%1 %2").arg(QString::number(value, 'f', value < 10 ? 1 : 0), units[unit]);
}

QString terminal_text(const QString& text) {
  QString shown;
  shown.reserve(text.size());
  for (const QChar c : text) {
    const char16_t u = c.unicode();
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      shown += QString("\\x%1").arg(u, 2, 16, QChar('0'));
    } else if ((u >= 0x80 && u < 0xa0) || (u >= 0x202a && u <= 0x202e) || (u >= 0x2066 && u <= 0x2069)) {
      shown += QString("\\u{%1}").arg(u, 4, 16, QChar('0'));
    } else {
      shown += c;
    }
  }
  return shown;
}

double run_duration(const history::Run& run) {
  if (!plausible_time(run.started)) return -1;
  if (run.ended > 0 && !plausible_time(run.ended)) return -1;
  return (run.ended > 0 ? run.ended : history::now_seconds()) - run.started;
}

QString progress_text(const history::Run& run) {
  if (run.last_step < 0) return "-";
  const double fraction = progress_fraction(run);
  if (fraction < 0) return QString("step %1").arg(run.last_step);
  QString text = QString("%1/%2 %3%").arg(run.last_step).arg(run.total_steps).arg(std::lround(fraction * 100));
  if (effective_status(run) == "running" && run.started > 0 && fraction > 0 && fraction < 1) {
    const double elapsed = history::now_seconds() - run.started;
    text += " eta " + duration_text(elapsed / fraction - elapsed);
  }
  return text;
}

QString history_permission_warning(const QString& path) {
  struct stat info {};
  if (::stat(QFile::encodeName(path).constData(), &info) != 0 || (info.st_mode & 077) == 0) return {};
  return QString("mode %1, readable by others; consoles and configs can hold secrets: chmod 600 %2")
      .arg(info.st_mode & 0777, 4, 8, QChar('0'))
      .arg(path);
}

QString stop_run(const history::Run& run) {
  const QString status = effective_status(run);
  if (status != "running" && status != "queued") {
    return QString("run %1 is not running (%2)").arg(run.id).arg(status);
  }
  if (QString::fromStdString(run.host) != local_host_name()) {
    return QString("run %1 was launched on %2: stop it there").arg(run.id).arg(QString::fromStdString(run.host));
  }
  if (!owns_run(run)) {
    return QString("run %1's launcher (pid %2) is gone; the pid now belongs to another process")
        .arg(run.id)
        .arg(run.pid);
  }
  if (run.pid <= 0 || ::kill(static_cast<pid_t>(run.pid), SIGTERM) != 0) {
    return QString("cannot signal run %1's launcher (pid %2): %3").arg(run.id).arg(run.pid).arg(std::strerror(errno));
  }
  return {};
}

}  // namespace spur::app
