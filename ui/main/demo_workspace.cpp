// SPDX-License-Identifier: GPL-3.0-or-later
// The demo workspace; see demo_workspace.h.
#include "main/demo_workspace.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>

#include "setup/setup_answers.h"
#include "launch/companion.h"
#include "runs/run_service.h"

namespace spur::studio {

QString bundled_example() {
  return app::find_companion(nullptr,
                             {"../examples/train_fashion_mnist", "../libexec/spur/examples/train_fashion_mnist"});
}

DemoWorkspace prepare_demo(const QString& directory) {
  DemoWorkspace demo;
  demo.directory = directory;
  demo.history = QDir(directory).filePath("history.db");
  demo.config = QDir(directory).filePath("spur_config.yaml");
  demo.program = bundled_example();
  if (demo.program.isEmpty()) {
    demo.error =
        "the example program train_fashion_mnist is not next to spur-studio (build the examples, or install "
        "Spur)";
    return demo;
  }
  QDir().mkpath(directory);
  app::SetupAnswers answers;
  answers.distributed_type = "MULTI_CPU";
  answers.processes_per_machine = 2;
  answers.use_cpu = true;
  answers.program = demo.program;
  // Fashion-MNIST's CNN: two epochs (a few minutes on two cores) show the loss, accuracy and learning rate
  // curves growing; its checkpoints go under the workspace.
  answers.arguments = QStringList{"--epochs", "2", "--log_every", "10", "--num_workers", "1"};
  answers.working_directory = directory;
  try {
    if (!QFileInfo::exists(demo.config)) answers.to_config(demo.config.toStdString()).save(demo.config.toStdString());
  } catch (const std::exception& e) {
    demo.error = QString::fromUtf8(e.what());
    return demo;
  }
  bool has_run = false;
  if (QFileInfo::exists(demo.history)) {
    try {
      has_run = !app::RunService(demo.history.toStdString()).runs().empty();
    } catch (const std::exception&) {
    }
  }
  if (!has_run) {
    // One short run of the example (150 steps and a test accuracy), recorded as any launch is, started by the
    // window once it shows (it trained here first once, 35 s with no window).
    app::LaunchRequest first = answers.launch_request(demo.config);
    first.arguments = QStringList{"--max_steps", "150", "--log_every", "10", "--num_workers", "1"};
    first.flags << "--run_name"
                << "demo: first run";
    demo.first_run = first;
  }
  QSettings settings;
  settings.setValue("launch/last_config", demo.config);
  settings.setValue("launch/last_command", answers.launch_request(demo.config).command_line());
  return demo;
}

}  // namespace spur::studio
