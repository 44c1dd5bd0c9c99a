// SPDX-License-Identifier: Apache-2.0
// `spur`: dispatches to the sub-commands in this folder.
#include <QCoreApplication>
#include <QTextStream>

#include <new>

#include "cli/commands.h"
#include "launch/byte_text.h"

namespace {

int usage(QTextStream& out) {
  out << "usage: spur <command> [arguments]\n\n"
         "commands:\n"
         "  config         write a run configuration (questions; or default, show, validate FILE)\n"
         "  launch         run a program on this machine's ranks: spur launch [flags] PROGRAM [ARGS...]\n"
         "  test           check the configured setup: rendezvous, all-reduce, gather and a synchronised step\n"
         "  runs           the run history: list, show, export, config, logs, rm, tag, note\n"
         "  sweep          many runs from one W&B sweep file: run FILE, list, show, stop, resume\n"
         "  sagemaker      follow, stop or describe a SageMaker training job: spur sagemaker follow JOB\n"
         "  slurm          follow, stop or describe a Slurm job of spur launch --slurm: spur slurm follow JOB\n"
         "  env            print what a bug report needs: versions, compiler, CPU/GPU, BLAS, the config in effect\n"
         "  shard-plan     print which batches each rank's data loader yields (--help for its flags)\n"
         "  merge-weights  one model.safetensors from a sharded checkpoint: spur merge-weights CHECKPOINT OUT\n\n"
         "options:\n"
         "  --version      print Spur's version\n"
         "  --help         print this help\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  QCoreApplication::setApplicationName("spur");
  QCoreApplication::setApplicationVersion(SPUR_VERSION_STRING);
  // From argv itself: QCoreApplication::arguments() rewrites bytes that are not UTF-8 to U+FFFD; a program path,
  // argument or --env value may hold any bytes (launch/byte_text.h).
  QStringList arguments;
  for (int i = 1; i < argc; ++i) arguments << spur::app::text_from_bytes(QByteArray(argv[i]));
  QTextStream out(stdout);
  QTextStream err(stderr);

  if (arguments.isEmpty() || arguments.front() == "--help" || arguments.front() == "-h" ||
      arguments.front() == "help") {
    return usage(out);
  }
  const QString command = arguments.takeFirst();
  if (command == "--version") {
    out << "spur " << SPUR_VERSION_STRING << "\n";
    return 0;
  }
  try {
    if (command == "env") return spur::cli::env_command(arguments);
    if (command == "config") return spur::cli::config_command(arguments);
    if (command == "launch") return spur::cli::launch_command(arguments);
    if (command == "test") return spur::cli::test_command(arguments);
    if (command == "runs") return spur::cli::runs_command(arguments);
    if (command == "sweep") return spur::cli::sweep_command(arguments);
    if (command == "sagemaker") return spur::cli::sagemaker_command(arguments);
    if (command == "slurm") return spur::cli::slurm_command(arguments);
    if (command == "shard-plan") return spur::cli::shard_plan_command(arguments);
    if (command == "merge-weights") return spur::cli::merge_weights_command(arguments);
  } catch (const std::bad_alloc&) {
    // A request too large for this machine's memory is an error to name, not an abort.
    err << "spur " << command << ": out of memory (is a count or size in the command far larger than meant?)\n";
    return 1;
  }
  err << "spur: unknown command '" << command << "' (see spur --help)\n";
  return 2;
}
