// SPDX-License-Identifier: Apache-2.0
// `spur test [launch flags]`: launches spur-check (engine/check) exactly as `spur launch` would launch a training
// program with the same configuration and flags, then says in one line whether the setup works.
#include <QCoreApplication>
#include <QFileInfo>
#include <QProcessEnvironment>
#include <QTextStream>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "launch/companion.h"
#include "launch/launch_request.h"
#include "config/run_config.h"

namespace spur::cli {
namespace {

const char* kUsage =
    "usage: spur test [--config_file F] [spur launch flags]\n"
    "Runs a built-in check on the processes the configuration (or the flags) describes: every rank joins the\n"
    "run, then all-reduce, gather, broadcast and one synchronised training step must agree on every rank.\n"
    "Takes the flags of `spur launch` (see spur launch --help), without a program.\n";

// $SPUR_CHECK_PROGRAM, else next to `spur` (the build tree), else the installed libexec/spur/spur-check.
QString check_program() {
  return app::find_companion("SPUR_CHECK_PROGRAM", {"spur-check", "../libexec/spur/spur-check"});
}

}  // namespace

int test_command(const QStringList& arguments) {
  QTextStream out(stdout);
  QTextStream err(stderr);
  try {
    const Arguments args(arguments, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
    if (args.has("help")) {
      out << kUsage;
      return 0;
    }
    if (!args.positional().isEmpty()) {
      throw UsageError("takes no program (it runs its own check), got '" + args.positional().front() + "'\n" + kUsage);
    }
  } catch (const UsageError& e) {
    err << "spur test: " << e.what() << "\n";
    return 2;
  }
  try {
    // A SageMaker job would be billed for a check whose program path is this machine's, not the image's.
    const Arguments args(arguments, app::launch_valued_flags(), app::launch_switches(), /*stop_at_positional=*/true);
    const std::string path = args.value("config_file") ? args.value("config_file")->toStdString()
                             : args.has("no_config")   ? std::string()
                                                       : app::config_in_effect();
    if (!path.empty() && app::RunConfig::load(path).sagemaker()) {
      err << "spur test: " << QString::fromStdString(path) << " is a SageMaker configuration: spur test checks "
          << "this machine or SSH hosts. To check SageMaker, launch the check installed in your image:\n"
          << "  spur launch --config_file " << QString::fromStdString(path) << " /usr/libexec/spur/spur-check\n";
      return 2;
    }
  } catch (const app::ConfigError&) {
    // spur launch reports it, naming file, line and key
  }
  const QString program = check_program();
  if (program.isEmpty()) {
    err << "spur test: spur-check is missing: looked next to " << QCoreApplication::applicationFilePath()
        << " and in ../libexec/spur (set SPUR_CHECK_PROGRAM to its path)\n";
    return 2;
  }
  const int code = launch_command(arguments + QStringList{program});
  out.flush();
  if (code == 0) {
    out << "spur test: the setup works.\n";
  } else if (code == 2) {
    err << "spur test: could not start the check (see the error above).\n";
  } else {
    err << "spur test: the setup does NOT work: the check failed with exit code " << code
        << " (the failing rank and its last lines are above).\n";
  }
  return code;
}

}  // namespace spur::cli
