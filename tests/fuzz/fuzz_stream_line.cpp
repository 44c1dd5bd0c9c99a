// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a console line from a remote rank (SSH, Slurm, SageMaker's CloudWatch), which may be a record
// ("@spur:<key> {json}", engine/core/include/spur/core/stream_line.h) behind "[host] [rankN] " prefixes, or a machine's
// forwarded progress record. Whatever arrives, the launcher must not crash; a record it accepts carries the launch's
// key and is a JSON object; a line without the key is never one (issue 31: a rank's output forged the run's record); a
// progress record's numbers are in range (UBSan would report a cast of an out-of-range double).
#include <QJsonDocument>

#include <cstddef>
#include <cstdint>

#include "launch/local_launcher.h"
#include "launch/run_recorder.h"

namespace {
const QString kKey = "5eed5eed5eed5eed5eed5eed5eed5eed";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const QString line = QString::fromUtf8(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  int rank = -1;
  if (const auto record = spur::app::stream_record(line, kKey, &rank)) {
    if (!line.contains("@spur:" + kKey + " ")) __builtin_trap();  // accepted without the key
    QJsonParseError error{};
    const auto document = QJsonDocument::fromJson(record->toUtf8(), &error);
    if (error.error == QJsonParseError::NoError && !document.isObject()) __builtin_trap();
  }
  // Another key, or none, accepts nothing the fuzzer writes.
  if (spur::app::stream_record(line, "0000000000000000000000000000000f") &&
      !line.contains("0000000000000000000000000000000f"))
    __builtin_trap();
  if (spur::app::stream_record(line, QString())) __builtin_trap();
  if (const auto progress = spur::app::parse_progress_record(line, kKey)) {
    if (!(progress->op_seconds >= 0 && progress->op_seconds < 1e9) || progress->snapshot.op.size() > 1024)
      __builtin_trap();
  }
  return 0;
}
