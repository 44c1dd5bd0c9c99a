// SPDX-License-Identifier: GPL-3.0-or-later
// spur-studio: set up, launch and watch training runs. `spur-studio [--history FILE] [--runs 1,2 [--compare]
// [--baseline ID]] [--demo]`.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QIcon>
#include <QSettings>
#include <QStandardPaths>

#include "setup/setup_answers.h"
#include "main/askpass.h"
#include "main/demo_workspace.h"
#include "main/main_window.h"
#include "main/open_history_dialog.h"
#include "runs/remote_history.h"
#include "main/theme.h"
#include "compare/compare_view.h"
#include "runs/run_service.h"

#include <cstdio>
#include <optional>
#include <cstring>

namespace {

struct Options {
  QCommandLineOption history{"history",
                             "The run history database: a file, or ssh://[user@]host[:port]/path for one on "
                             "another machine (default: $SPUR_HISTORY, else $XDG_DATA_HOME/spur/history.db).",
                             "file"};
  QCommandLineOption runs{"runs", "Runs to show first, by ID (default: the newest).", "1,2,..."};
  QCommandLineOption compare{"compare", "Open on the Compare tab (the runs of --runs side by side)."};
  QCommandLineOption baseline{"baseline", "The run the Compare tab measures the others against.", "ID"};
  QCommandLineOption demo{"demo",
                          "Open the demo workspace: the bundled example, its configuration and a history "
                          "with one finished run (created on first use)."};
  QCommandLineOption version{QStringList{"v", "version"}, "Print the version."};
  void add_to(QCommandLineParser& parser) const {
    parser.setApplicationDescription("Spur Studio: set up, launch and watch LibTorch training runs");
    parser.addHelpOption();
    parser.addOptions({history, runs, compare, baseline, demo, version});
  }
};

}  // namespace

int main(int argc, char** argv) {
  // Started by ssh for a passphrase, a password or a host key's yes/no (askpass.h): a dialog, nothing else.
  if (spur::studio::started_as_askpass(argc, argv)) return spur::studio::askpass_main(argc, argv);
  const Options options;
  // --version and --help are answered without a display, as a command-line tool's are.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      std::printf("spur-studio %s\n", SPUR_VERSION_STRING);
      return 0;
    }
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      QCoreApplication core(argc, argv);
      QCoreApplication::setApplicationName("spur-studio");
      QCommandLineParser parser;
      options.add_to(parser);
      std::printf("%s", qPrintable(parser.helpText()));
      return 0;
    }
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("Spur Studio");
  QApplication::setOrganizationName("Spur");
  QApplication::setApplicationVersion(SPUR_VERSION_STRING);
  QApplication::setWindowIcon(QIcon::fromTheme("dev.spur.Studio", QIcon(":/icons/dev.spur.Studio.svg")));
  QApplication::setDesktopFileName("dev.spur.Studio");
  QCommandLineParser parser;
  options.add_to(parser);
  const auto& history = options.history;
  const auto& runs = options.runs;
  const auto& demo = options.demo;
  parser.process(app);
  // The demo's workspace, where it has always been (under "Spur Studio", the scope in use until here).
  const QString demo_directory =
      QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath("demo");
  // The settings in use, and the theme saved in them: the demo's are its own (its last configuration and command
  // are the example's), apart from the user's.
  spur::studio::use_settings_of(parser.isSet(options.demo) ? "Spur Studio Demo" : "Spur Studio");
  // ssh's questions for histories on other machines, and for launches over SSH, come up as this Studio's dialogs.
  spur::studio::offer_askpass(QCoreApplication::applicationFilePath());
  // What this machine has (nvidia-smi can take seconds), probed on a thread of its own while the window opens.
  spur::app::DetectedHardware::start();
  QString path = parser.isSet(history) ? parser.value(history) : spur::app::RunService::default_history_path();
  std::optional<spur::app::LaunchRequest> demo_run;
  if (parser.isSet(demo)) {
    const QString& directory = demo_directory;
    std::fprintf(stderr, "spur-studio: preparing the demo workspace in %s\n", qPrintable(directory));
    const auto workspace = spur::studio::prepare_demo(directory);
    if (!workspace.error.isEmpty()) {
      std::fprintf(stderr, "spur-studio: --demo: %s\n", qPrintable(workspace.error));
      return 1;
    }
    path = workspace.history;
    demo_run = workspace.first_run;
    std::fprintf(stderr, "%s",
                 workspace.first_run
                     ? "spur-studio: the example trains for 150 steps in the window; then press Launch "
                       "(Ctrl+L) and Finish to train it for 2 epochs\n"
                     : "spur-studio: press Launch (Ctrl+L), then Finish, to train the example and watch it "
                       "live\n");
  }
  try {
    spur::app::HistoryAddress::parse(path);  // an ssh:// address that cannot be one is said before any window
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spur-studio: --history: %s\n", e.what());
    return 2;
  }
  if (parser.isSet(history)) {
    QSettings settings;
    spur::studio::remember_history(settings, path);  // File > Open history offers it again
  }
  spur::studio::MainWindow window(path);
  QList<qint64> ids;
  for (const auto& id : parser.value(runs).split(',', Qt::SkipEmptyParts)) ids << id.toLongLong();
  if (!ids.isEmpty()) window.show_runs(ids);
  if (parser.isSet(options.baseline)) window.compare()->set_baseline(parser.value(options.baseline).toLongLong());
  if (parser.isSet(options.compare)) window.show_compare();
  window.show();
  if (demo_run) {
    // The demo's first run, launched once the window is up: its progress and curves show as it trains.
    window.launch(*demo_run);
  }
  return QApplication::exec();
}
