// SPDX-License-Identifier: Apache-2.0
// `spur shard-plan`: which batches each rank's prepared data loader yields for a sequential sampler, one JSON
// line per rank, by Accelerate's rules; `--iterable` for a stream dataset.
#include <QTextStream>

#include <spur/error.h>
#include <spur/sharding.h>

#include "cli/arguments.h"
#include "cli/commands.h"

namespace spur::cli {

int shard_plan_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments, {"dataset_len", "batch_size", "num_processes", "even_batches"},
                         {"split_batches", "drop_last", "iterable", "help"});
    if (args.has("help")) {
      out << "usage: spur shard-plan --dataset_len L --batch_size B --num_processes N [--split_batches]\n"
             "                       [--even_batches true|false] [--drop_last] [--iterable]\n";
      return 0;
    }
    if (!args.positional().isEmpty()) throw UsageError("unexpected argument '" + args.positional().front() + "'");
    for (const char* required : {"dataset_len", "batch_size", "num_processes"}) {
      if (!args.value(required)) throw UsageError(QString("--%1 is required").arg(required));
    }
    const qint64 length = *args.integer("dataset_len", 0, 100'000'000);
    const qint64 batch_size = *args.integer("batch_size", 1, 1'000'000);
    sharding::Layout layout;
    layout.num_processes = *args.integer("num_processes", 1, 100'000);
    layout.split_batches = args.has("split_batches");
    layout.even_batches = args.boolean("even_batches").value_or(true);
    const bool drop_last = args.has("drop_last");
    // Bounded by what it prints: every index listed once, plus the padding of the last round (issue 12, defect 8:
    // 100,000 processes of a 1,000,000 batch asked for 10^11 indices and ended in bad_alloc).
    constexpr qint64 kMaxListed = 10'000'000;
    const bool padded = !drop_last && layout.even_batches;
    const qint64 padding = !padded ? 0 : (layout.split_batches ? batch_size : layout.num_processes * batch_size);
    if (length + padding > kMaxListed) {
      throw UsageError(QString("this plan would list up to %1 indices (--dataset_len %2 plus the padding of a last "
                               "round of --num_processes %3 x --batch_size %4); spur shard-plan lists at most %5")
                           .arg(length + padding)
                           .arg(length)
                           .arg(layout.num_processes)
                           .arg(batch_size)
                           .arg(kMaxListed));
    }
    // A stream's plan replays the whole stream once per process.
    if (args.has("iterable") && length * layout.num_processes > 10 * kMaxListed) {
      throw UsageError(QString("--iterable with --num_processes %1 replays --dataset_len %2 on every process (%3 "
                               "samples); spur shard-plan does at most %4")
                           .arg(layout.num_processes)
                           .arg(length)
                           .arg(length * layout.num_processes)
                           .arg(10 * kMaxListed));
    }
    const auto plan = args.has("iterable") ? sharding::stream_plan(length, batch_size, drop_last, layout)
                                           : sharding::plan(length, batch_size, drop_last, layout);
    out << QString::fromStdString(sharding::plan_json_lines(plan));
    return 0;
  } catch (const UsageError& e) {
    err << "spur shard-plan: " << e.what() << "\n";
  } catch (const Error& e) {
    err << "spur shard-plan: " << e.what() << "\n";
  }
  return 2;
}

}  // namespace spur::cli
