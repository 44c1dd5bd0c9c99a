// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a DeepSpeed-style hostfile (`--hostfile`) and a `--hosts` list. A bad line is a LaunchError naming
// it; a host that could reach ssh as an option (a leading '-') must never be accepted.
#include <unistd.h>

#include <QFile>

#include <cstddef>
#include <cstdint>

#include "launch/launch_plan.h"
#include "launch/ssh_fanout.h"

namespace {
void check(const std::vector<spur::app::Host>& hosts) {
  for (const auto& host : hosts) {
    if (host.name.isEmpty() || host.name.startsWith('-') || !spur::app::check_host(host.name).isEmpty())
      __builtin_trap();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const QByteArray bytes(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  static const QString path = QString("/tmp/spur-fuzz-hostfile-%1").arg(::getpid());
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate)) return 0;
  file.write(bytes);
  file.close();
  try {
    check(spur::app::read_hostfile(path));
  } catch (const spur::app::LaunchError&) {
  }
  try {
    check(spur::app::parse_host_list(QString::fromUtf8(bytes)));
  } catch (const spur::app::LaunchError&) {
  }
  return 0;
}
