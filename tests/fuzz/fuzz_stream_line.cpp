// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a console line from a remote rank (SSH, SageMaker's CloudWatch), which may be an "@spur {json}"
// record behind "[host] [rankN] " prefixes, or a machine's forwarded progress record. Whatever arrives, the
// launcher must not crash; a record it accepts is a JSON object, and a progress record's numbers are in range
// (UBSan would report a cast of an out-of-range double).
#include <QJsonDocument>

#include <cstddef>
#include <cstdint>

#include "launch/local_launcher.h"
#include "runs/run_recorder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const QString line = QString::fromUtf8(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  int rank = -1;
  if (const auto record = spur::app::stream_record(line, &rank)) {
    QJsonParseError error{};
    const auto document = QJsonDocument::fromJson(record->toUtf8(), &error);
    if (error.error == QJsonParseError::NoError && !document.isObject()) __builtin_trap();
  }
  if (const auto progress = spur::app::parse_progress_record(line)) {
    if (!(progress->op_seconds >= 0 && progress->op_seconds < 1e9) || progress->snapshot.op.size() > 1024)
      __builtin_trap();
  }
  return 0;
}
