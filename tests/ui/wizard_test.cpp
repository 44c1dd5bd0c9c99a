// SPDX-License-Identifier: GPL-3.0-or-later
// The set-up wizard driven with key and mouse events, as a person fills it: each compute environment writes the
// YAML expected (and Accelerate's loader rules accept it), a bad field keeps Next disabled and says why under
// the field, an Accelerate file opens and saves unchanged, and the command shown runs headless as it is.
#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QApplication>
#include <QFile>
#include <QMessageBox>
#include <QScopeGuard>
#include <QSettings>
#include <QTimer>
#include <QFileInfo>
#include <QFormLayout>
#include <QProcessEnvironment>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>
#include <QWizardPage>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "config/run_config.h"
#include "launch/detached_launch.h"
#include "runs/run_service.h"
#include "setup/setup_answers.h"
#include <spur/core/torch_features.h>
#include "dashboard/dashboard.h"
#include "studio/runs_model.h"
#include "main/main_window.h"
#include "rank_group.h"
#include "test_main.h"
#include "wizard/setup_wizard.h"

namespace {

using spur::studio::SetupWizard;

QByteArray read_file(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

void click_next(SetupWizard& wizard) { QTest::mouseClick(wizard.button(QWizard::NextButton), Qt::LeftButton); }

// Replaces a field's text by typing, as a person would (Ctrl+A, then the keys).
void type_into(QWidget* field, const QString& text) {
  QVERIFY2(field, "no such field");
  QTest::keyClick(field, Qt::Key_A, Qt::ControlModifier);
  if (text.isEmpty()) {
    QTest::keyClick(field, Qt::Key_Delete);
  } else {
    QTest::keyClicks(field, text);
  }
}

// "name=value": a line edit, spin box or combo box of the current page, typed into; "name" alone: a click.
void apply_edit(SetupWizard& wizard, const QString& edit) {
  const QString name = edit.section('=', 0, 0);
  const QString value = edit.section('=', 1);
  auto* field = wizard.currentPage()->findChild<QWidget*>(name);
  QVERIFY2(field, qPrintable("no field " + name + " on page " + QString::number(wizard.currentId())));
  if (auto* box = qobject_cast<QComboBox*>(field)) {
    // The item that writes `value` to the file (a person reads its label: "Several processes on CPUs (Gloo)").
    const int index = box->findData(value);
    QVERIFY2(index >= 0, qPrintable(name + " offers no " + value));
    box->setFocus();
    while (box->currentIndex() < index) QTest::keyClick(box, Qt::Key_Down);
    while (box->currentIndex() > index) QTest::keyClick(box, Qt::Key_Up);
    QCOMPARE(box->currentData().toString(), value);
  } else if (auto* text = qobject_cast<QPlainTextEdit*>(field)) {
    text->selectAll();
    const QStringList lines = value.split('\n');
    for (qsizetype i = 0; i < lines.size(); ++i) {
      if (i > 0) QTest::keyClick(text, Qt::Key_Return);
      QTest::keyClicks(text, lines[i]);
    }
  } else if (qobject_cast<QAbstractButton*>(field)) {
    QTest::mouseClick(field, Qt::LeftButton, {}, QPoint(4, field->height() / 2));
  } else {
    type_into(field, value);
  }
}

// Chooses the combo box's item whose data is `value` with the keyboard, as a person would.
void apply_edit_combo(QComboBox* box, const QString& value) {
  const int index = box->findData(value);
  QVERIFY2(index >= 0, qPrintable(box->objectName() + " offers no " + value));
  box->setFocus();
  while (box->currentIndex() < index) QTest::keyClick(box, Qt::Key_Down);
  while (box->currentIndex() > index) QTest::keyClick(box, Qt::Key_Up);
}

bool accelerate_accepts(const QString& path, QString* output) {
  const auto result =
      spur::test::run_process(SPUR_PEER_PYTHON, {SPUR_RIGS_DIR "/accelerate_loader.py", path}, {}, 30000);
  *output = result.output;
  return result.exit_code == 0;
}

}  // namespace

class WizardTest : public QObject {
  Q_OBJECT

 private slots:
  // Pages are listed as edits to make before pressing Next on each; the last page saves to the file.
  void fills_and_writes_the_configuration_data() {
    QTest::addColumn<QStringList>("where");
    QTest::addColumn<QStringList>("machines");
    QTest::addColumn<QStringList>("training");
    QTest::addColumn<QStringList>("program");
    QTest::addColumn<QString>("yaml");
    QTest::addColumn<QString>("target_flags");  // what the target file beside the configuration holds

    QTest::newRow("this machine, 3 CPU processes, bf16")
        << QStringList{"where_local"} << QStringList{"processes=3"}
        << QStringList{"mixed_precision=bf16", "gradient_accumulation=4"}
        << QStringList{QString("program=") + SPUR_LAUNCH_RIG,
                       "arguments=--lines 2 --sleep 0",
                       "environment=SEED=7",
                       "max_restarts=2",
                       "hang_timeout=600",
                       "run_name=baseline lr 0.1"}
        << QString(
               "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: MULTI_CPU\n"
               "downcast_bf16: false\nenable_cpu_affinity: false\nmachine_rank: 0\nmain_training_function: main\n"
               "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 3\nrdzv_backend: static\n"
               "same_network: false\ntpu_use_cluster: false\ntpu_use_sudo: false\nuse_cpu: true\n")
        << QString("--gradient_accumulation_steps 4 --env SEED=7 --max_restarts 2 --hang_timeout 600");
    QTest::newRow("two machines over SSH")
        << QStringList{"where_ssh"}
        << QStringList{"hosts=127.0.0.1, me@localhost", "main_process_port=29555", "processes=1"}
        << QStringList{"use_cpu"}  // remote machines start unticked: the user says these compute on CPUs
        << QStringList{"program=./train", "arguments='a b' c"}
        << QString(
               "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: MULTI_CPU\n"
               "downcast_bf16: false\nenable_cpu_affinity: false\nmachine_rank: 0\nmain_process_ip: 127.0.0.1\n"
               "main_process_port: 29555\nmain_training_function: main\nmixed_precision: 'no'\nnum_machines: 2\n"
               "num_processes: 2\nrdzv_backend: static\nsame_network: true\ntpu_use_cluster: false\n"
               "tpu_use_sudo: false\nuse_cpu: true\n")
        << QString("--hosts 127.0.0.1,me@localhost");
    QTest::newRow("Amazon SageMaker, 2 instances, fp16")
        << QStringList{"where_sagemaker"}
        << QStringList{"region=eu-west-1", "image_uri=123456789012.dkr.ecr.eu-west-1.amazonaws.com/train:1",
                       "instance_type=ml.g5.xlarge", "instance_count=2"}
        << QStringList{"mixed_precision=fp16"} << QStringList{"program=/opt/train", "arguments=--epochs 3"}
        << QString(
               "compute_environment: AMAZON_SAGEMAKER\ndebug: false\ndistributed_type: DATA_PARALLEL\n"
               "ec2_instance_type: ml.g5.xlarge\niam_role_name: spur_sagemaker_execution_role\n"
               "image_uri: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/train:1\nmixed_precision: fp16\n"
               "num_machines: 2\nregion: eu-west-1\nuse_cpu: false\n")
        << QString();
    // No rendezvous address or port in the file: the job's first node and its job id give them.
    QTest::newRow("a Slurm cluster, 2 nodes x 2")
        << QStringList{"where_slurm"} << QStringList{"partition=debug", "nodes=2",     "ntasks_per_node=2",
                                                     "time=1-00:30",    "account=lab", "slurm_args=--exclusive"}
        << QStringList{"use_cpu"} << QStringList{"program=./train", "max_restarts=1", "hang_timeout=300"}
        << QString(
               "compute_environment: LOCAL_MACHINE\ndebug: false\ndistributed_type: MULTI_CPU\n"
               "downcast_bf16: false\nenable_cpu_affinity: false\nmachine_rank: 0\nmain_training_function: main\n"
               "mixed_precision: 'no'\nnum_machines: 2\nnum_processes: 4\nrdzv_backend: static\n"
               "same_network: false\ntpu_use_cluster: false\ntpu_use_sudo: false\nuse_cpu: true\n")
        << QString(
               "--slurm --nodes 2 --ntasks_per_node 2 --partition debug --time 1-00:30 --account lab --slurm_args "
               "--exclusive --max_restarts 1 --hang_timeout 300");
  }

  void fills_and_writes_the_configuration() {
    QFETCH(QStringList, where);
    QFETCH(QStringList, machines);
    QFETCH(QStringList, training);
    QFETCH(QStringList, program);
    QFETCH(QString, yaml);
    QFETCH(QString, target_flags);
    QTemporaryDir dir(QDir::tempPath() + "/spur-wizard-XXXXXX");  // no space: Slurm's default job folder is in it
    spur::app::DetectedHardware hardware;
    hardware.cpu_cores = 4;
    auto answers = spur::app::SetupAnswers::defaults(hardware);
    answers.working_directory = dir.path();
    const QString file = dir.filePath("conf/run.yaml");
    SetupWizard wizard(answers, dir.filePath("elsewhere.yaml"));
    wizard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&wizard));
    for (const auto& edit : where) apply_edit(wizard, edit);
    click_next(wizard);
    for (const auto& edit : machines) apply_edit(wizard, edit);
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::TrainingPage));
    for (const auto& edit : training) apply_edit(wizard, edit);
    click_next(wizard);
    for (const auto& edit : program) apply_edit(wizard, edit);
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SummaryPage));
    apply_edit(wizard, "config_path=" + file);
    // The last page shows what will be written and how to run it without the Studio.
    QCOMPARE(wizard.findChild<QPlainTextEdit*>("yaml")->toPlainText(), yaml);
    const QString command = wizard.findChild<QLineEdit*>("command")->text();
    QVERIFY2(command.startsWith("cd " + spur::app::shell_quote({dir.path()}) + " && spur launch --config_file " +
                                spur::app::shell_quote({file})),
             qPrintable(command));
    // Where the run happens and its launch settings are the target file's, not the command's (issue 35).
    const auto target = wizard.answers().target();
    QCOMPARE(spur::app::shell_quote(target.launch_flags()), target_flags);
    for (const auto& flag : target.launch_flags()) {
      if (flag.startsWith("--")) QVERIFY2(!command.contains(" " + flag + " "), qPrintable(command));
    }
    QCOMPARE(wizard.findChild<QPlainTextEdit*>("target_yaml")->toPlainText().section('\n', 1),
             target.empty() ? QString() : target.to_yaml(file));
    QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(wizard.result(), int(QDialog::Accepted));
    QCOMPARE(QString::fromUtf8(read_file(file)), yaml);
    const auto saved = spur::app::LaunchTarget::load_for(file);
    QCOMPARE(bool(saved), !target.empty());
    if (saved) QCOMPARE(saved->launch_flags(), target.launch_flags());
    QString output;
    QVERIFY2(accelerate_accepts(file, &output), qPrintable(output));
  }

  // Issue 18: the kind of run reads in words (Accelerate's NO / MULTI_CPU / MULTI_GPU is what the file gets), and
  // fp16 on CPUs is checked on the page against the LibTorch this Spur's engine is built against: on 1.13 the run
  // failed 2 s after the launch ("CPU autocast runs bf16 only").
  void kind_of_run_and_precision_in_words() {
    spur::app::DetectedHardware hardware;
    hardware.cpu_cores = 4;  // no GPU
    SetupWizard wizard(spur::app::SetupAnswers::defaults(hardware), "/tmp/unused.yaml");
    wizard.show();
    apply_edit(wizard, "where_local");
    click_next(wizard);
    auto* kind = wizard.findChild<QComboBox*>("distributed_type");
    QStringList labels;
    for (int i = 0; i < kind->count(); ++i) labels << kind->itemText(i);
    QCOMPARE(labels,
             (QStringList{"One process", "Several processes on CPUs (Gloo)", "Several processes on GPUs (NCCL)"}));
    QCOMPARE(kind->currentData().toString(), QString("MULTI_CPU"));
    apply_edit(wizard, "distributed_type=NO");
    apply_edit(wizard, "processes=2");
    QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
    QVERIFY2(wizard.findChild<QLabel*>("processes_error")->text().contains("several processes on CPUs or GPUs"),
             qPrintable(wizard.findChild<QLabel*>("processes_error")->text()));
    apply_edit(wizard, "distributed_type=MULTI_CPU");
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::TrainingPage));
    apply_edit(wizard, "mixed_precision=fp16");
    auto* error = wizard.findChild<QLabel*>("mixed_precision_error");
    const std::string torch = spur::app::engine_torch_version().toStdString();
    QVERIFY(!torch.empty());
    if (spur::torch_features::has(torch, spur::torch_features::kCpuAutocastHalf)) {
      QVERIFY2(wizard.button(QWizard::NextButton)->isEnabled(), qPrintable(error->text()));  // 2.2 and later
    } else {
      QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
      QVERIFY2(error->text().contains("fp16 on the CPU needs LibTorch 2.2 or later") &&
                   error->text().contains(QString::fromStdString(torch)),
               qPrintable(error->text()));
      apply_edit(wizard, "mixed_precision=bf16");
      QVERIFY(wizard.button(QWizard::NextButton)->isEnabled());
    }
    // The rule itself, for both LibTorch flavours Spur builds against.
    QVERIFY(!spur::torch_features::has("1.13.0", spur::torch_features::kCpuAutocastHalf));
    QVERIFY(!spur::torch_features::has("2.1.2", spur::torch_features::kCpuAutocastHalf));
    QVERIFY(spur::torch_features::has("2.2.0", spur::torch_features::kCpuAutocastHalf));
    QVERIFY(spur::torch_features::has("2.15.0+cu130", spur::torch_features::kCpuAutocastHalf));
    QVERIFY(spur::torch_features::has("10.0", spur::torch_features::kCpuAutocastHalf));
    QVERIFY(spur::torch_features::has("", spur::torch_features::kCpuAutocastHalf));  // unknown: the engine checks
  }

  // A bad field is named under itself and keeps Next disabled until it is put right.
  void bad_fields_keep_next_disabled_data() {
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("bad");
    QTest::addColumn<QString>("says");
    QTest::addColumn<QString>("good");
    QTest::newRow("host") << "where_ssh"
                          << "hosts"
                          << "gpu1, bad_host!"
                          << "'bad_host!' is not"
                          << "gpu1, gpu2";
    QTest::newRow("host listed twice") << "where_ssh"
                                       << "hosts"
                                       << "gpu1,gpu1"
                                       << "listed twice"
                                       << "gpu1";
    QTest::newRow("port") << "where_ssh"
                          << "main_process_port"
                          << "70000"
                          << "not a TCP port"
                          << "29500";
    QTest::newRow("region") << "where_sagemaker"
                            << "region"
                            << "mars"
                            << "not an AWS region"
                            << "us-west-2";
    QTest::newRow("instance type") << "where_sagemaker"
                                   << "instance_type"
                                   << "p3.2xlarge"
                                   << "ml.*"
                                   << "ml.p3.2xlarge";
    QTest::newRow("Slurm time") << "where_slurm"
                                << "time"
                                << "2h"
                                << "'2h' is not a Slurm time"
                                << "2:00:00";
    QTest::newRow("Slurm partition") << "where_slurm"
                                     << "partition"
                                     << "gpu queue"
                                     << "letters, digits"
                                     << "gpu,cpu";
    // Issue 36, defects 6 and 15: a time typed into the partition; a port given with a host.
    QTest::newRow("Slurm partition holding a time") << "where_slurm"
                                                    << "partition"
                                                    << "2:00:00"
                                                    << "looks like a time limit"
                                                    << "gpu";
    QTest::newRow("host with a port") << "where_ssh"
                                      << "hosts"
                                      << "gpu1:2222"
                                      << "give it in ~/.ssh/config (Host gpu1, Port 2222) and list gpu1"
                                      << "gpu1";
    QTest::newRow("Slurm job folder") << "where_slurm"
                                      << "slurm_dir"
                                      << "/shared/my runs"
                                      << "holds a space"
                                      << "/shared/runs";
    QTest::newRow("Slurm options Spur sets") << "where_slurm"
                                             << "slurm_args"
                                             << "--exclusive --nodes=4"
                                             << "--nodes is spur launch's to set"
                                             << "--exclusive --mem=0";
    QTest::newRow("Slurm login node like an option") << "where_slurm"
                                                     << "submit_from"
                                                     << "-oProxyCommand=x"
                                                     << "--on: "
                                                     << "ana@login1:2222";
  }

  void bad_fields_keep_next_disabled() {
    QFETCH(QString, where);
    QFETCH(QString, field);
    QFETCH(QString, bad);
    QFETCH(QString, says);
    QFETCH(QString, good);
    spur::app::SetupAnswers answers;
    answers.image_uri = "image";
    answers.hosts = {"gpu1"};
    SetupWizard wizard(answers, "/tmp/unused.yaml");
    wizard.show();
    apply_edit(wizard, where);
    click_next(wizard);
    auto* next = wizard.button(QWizard::NextButton);
    apply_edit(wizard, field + "=" + bad);
    QVERIFY(!next->isEnabled());
    auto* error = wizard.currentPage()->findChild<QLabel*>(field + "_error");
    QVERIFY(error && error->isVisible());
    QVERIFY2(error->text().contains(says), qPrintable(error->text()));
    apply_edit(wizard, field + "=" + good);
    QVERIFY(next->isEnabled());
    QVERIFY(!error->isVisible());
  }

  // Issue 36, defects 6, 7 and 15: what a new user hit on the Machines, Slurm and Devices pages.
  void fields_say_what_is_wrong_where_and_when_it_is() {
    QTemporaryDir dir;
    const QString spaced = dir.filePath("my runs");
    QVERIFY(QDir().mkpath(spaced));
    spur::app::SetupAnswers answers;
    answers.working_directory = spaced;  // the demo's folder had a space
    answers.program = SPUR_LAUNCH_RIG;
    answers.use_cpu = true;  // this machine has no GPU
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    wizard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&wizard));
    auto* next = wizard.button(QWizard::NextButton);
    // SSH with no host yet: Next is disabled, but nothing is red before a key is pressed.
    apply_edit(wizard, "where_ssh");
    click_next(wizard);
    auto* hosts_error = wizard.currentPage()->findChild<QLabel*>("hosts_error");
    QVERIFY(!next->isEnabled());
    QVERIFY2(!hosts_error->isVisible(), qPrintable(hosts_error->text()));
    apply_edit(wizard, "hosts=gpu1");
    apply_edit(wizard, "hosts=");
    QVERIFY(hosts_error->isVisible() && hosts_error->text().contains("at least one host"));
    apply_edit(wizard, "hosts=gpu1, gpu2");
    QVERIFY(next->isEnabled());
    // "CPU only" starts unticked for remote machines (this machine's lack of a GPU says nothing of theirs).
    QVERIFY(!wizard.findChild<QCheckBox*>("use_cpu")->isChecked());
    const auto ssh = wizard.answers();
    // The same answers on Slurm write the same devices (SSH wrote MULTI_CPU with use_cpu false, Slurm MULTI_GPU).
    wizard.back();
    apply_edit(wizard, "where_slurm");
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SlurmPage));
    apply_edit(wizard, "nodes=2");
    const auto ssh_config = ssh.to_config("ssh"), slurm_config = wizard.answers().to_config("slurm");
    QCOMPARE(QString::fromStdString(ssh_config.distributed_type()), QString("MULTI_GPU"));
    QCOMPARE(QString::fromStdString(slurm_config.distributed_type()), QString("MULTI_GPU"));
    QCOMPARE(ssh_config.use_cpu(), false);
    QCOMPARE(slurm_config.use_cpu(), false);
    // The job folder left empty is spur-slurm in the working directory, which has a space: said here, in the
    // form's words (not a command-line flag), not only on the last page.
    auto* folder_error = wizard.currentPage()->findChild<QLabel*>("slurm_dir_error");
    QVERIFY(!next->isEnabled());
    QVERIFY2(folder_error->isVisible() &&
                 folder_error->text().contains("empty means spur-slurm in the working "
                                               "directory") &&
                 folder_error->text().contains("choose a folder") && !folder_error->text().contains("--slurm_dir"),
             qPrintable(folder_error->text()));
    // A long error grows its row, whole, and pushes the rows below; with no error the rows stay where they were.
    auto* page = wizard.currentPage();
    auto* folder = page->findChild<QWidget*>("slurm_dir_row");
    auto top = [page](QWidget* widget) { return widget->mapTo(page, QPoint(0, 0)).y(); };
    QApplication::processEvents();
    QVERIFY2(folder_error->height() >= folder_error->heightForWidth(folder_error->width()),
             qPrintable(QString("the error is %1 px of its %2")
                            .arg(folder_error->height())
                            .arg(folder_error->heightForWidth(folder_error->width()))));
    QVERIFY2(top(folder_error) >= top(folder) + folder->height(), "the error overlaps its field");
    auto* partition = page->findChild<QWidget*>("partition");
    const int partition_top = top(partition);
    apply_edit(wizard, "partition=gpu queue");
    QApplication::processEvents();
    QCOMPARE(top(partition), partition_top);
    auto* partition_error = page->findChild<QLabel*>("partition_error");
    QVERIFY(partition_error->isVisible());
    const int nodes_top = top(page->findChild<QWidget*>("nodes"));
    apply_edit(wizard, "partition=gpu");
    QApplication::processEvents();
    QCOMPARE(top(page->findChild<QWidget*>("nodes")), nodes_top);        // the error's line stays: nothing jumps
    apply_edit(wizard, "slurm_dir=" + QDir::tempPath() + "/spur-jobs");  // (the test's folder has a space)
    QVERIFY(next->isEnabled());
    // On this machine, several processes on GPUs with no GPU found: a warning (not an error: the file may be for
    // other machines), and "CPU only" follows the kind of run.
    wizard.back();
    apply_edit(wizard, "where_local");
    click_next(wizard);
    apply_edit(wizard, "distributed_type=MULTI_GPU");
    auto* kind_warning = wizard.currentPage()->findChild<QLabel*>("distributed_type_error");
    const auto found = spur::app::DetectedHardware::ready();
    if (found && found->gpus == 0) {
      QVERIFY2(kind_warning->isVisible() && kind_warning->text().contains("no GPU"), qPrintable(kind_warning->text()));
      QVERIFY(next->isEnabled());
    }
    QVERIFY(!wizard.findChild<QCheckBox*>("use_cpu")->isChecked());
    QVERIFY(!wizard.findChild<QCheckBox*>("use_cpu")->isEnabled());
    apply_edit(wizard, "distributed_type=MULTI_CPU");
    QVERIFY(wizard.findChild<QCheckBox*>("use_cpu")->isChecked());
    QVERIFY(!kind_warning->isVisible());
    QCOMPARE(wizard.answers().to_config("local").use_cpu(), true);
    // The Arguments placeholder does not read as arguments.
    QVERIFY(wizard.findChild<QLineEdit*>("arguments")->placeholderText().startsWith("empty: none"));
    // A new configuration is offered a name beside the last one, not its name.
    QFile last(dir.filePath("run.yaml"));
    QVERIFY(last.open(QIODevice::WriteOnly));
    last.close();
    QCOMPARE(spur::app::unused_file_name(dir.filePath("run.yaml")), dir.filePath("run-2.yaml"));
    QCOMPARE(spur::app::unused_file_name(dir.filePath("none.yaml")), dir.filePath("none.yaml"));
    QFile second(dir.filePath("run-2.yaml"));
    QVERIFY(second.open(QIODevice::WriteOnly));
    second.close();
    QCOMPARE(spur::app::unused_file_name(dir.filePath("run-2.yaml")), dir.filePath("run-3.yaml"));
    QCOMPARE(spur::app::unused_file_name(dir.filePath("run.yaml")), dir.filePath("run-3.yaml"));
  }

  void a_missing_program_keeps_next_disabled() {
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.working_directory = dir.path();
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    wizard.show();
    for (int page = 0; page < 3; ++page) click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::ProgramPage));
    auto* next = wizard.button(QWizard::NextButton);
    wizard.set_launch_now(true);
    apply_edit(wizard, "program=");
    QVERIFY(!next->isEnabled());
    // Nothing typed yet: no error in red (issue 36), Next disabled all the same; typed and cleared: said.
    QVERIFY(!wizard.findChild<QLabel*>("program_error")->isVisible());
    apply_edit(wizard, "program=x");
    apply_edit(wizard, "program=");
    QVERIFY(!next->isEnabled());
    QVERIFY(wizard.findChild<QLabel*>("program_error")->text().contains("choose the training program"));
    apply_edit(wizard, "program=./no_such_program");
    QVERIFY(!next->isEnabled());
    QVERIFY(wizard.findChild<QLabel*>("program_error")->text().contains("does not exist"));
    apply_edit(wizard, "program=" SPUR_LAUNCH_RIG);
    apply_edit(wizard, "environment=GOOD=1\n2BAD=x");
    QVERIFY(!next->isEnabled());
    QVERIFY2(wizard.findChild<QLabel*>("environment_error")->text().contains("line 2"),
             qPrintable(wizard.findChild<QLabel*>("environment_error")->text()));
    apply_edit(wizard, "environment=GOOD=1");
    QVERIFY(next->isEnabled());
  }

  // Issue 18: the environment box stays by its label in a tall window (it sat in the middle of a row that took the
  // page's spare height, the label at the row's top), and its error opens under it without moving it or the label.
  void the_environment_box_stays_by_its_label() {
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.working_directory = dir.path();
    answers.program = SPUR_LAUNCH_RIG;
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    wizard.resize(820, 1000);
    wizard.show();
    QVERIFY(QTest::qWaitForWindowExposed(&wizard));
    for (int page = 0; page < 3; ++page) click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::ProgramPage));
    auto* page = wizard.currentPage();
    auto* box = page->findChild<QPlainTextEdit*>("environment");
    auto* form = qobject_cast<QFormLayout*>(page->layout());
    QVERIFY(box && form);
    auto* label = form->labelForField(box->parentWidget());
    QVERIFY(label);
    auto top = [page](QWidget* widget) { return widget->mapTo(page, QPoint(0, 0)).y(); };
    QApplication::processEvents();
    const int box_top = top(box), label_top = top(label);
    // The label's text beside the box's first line: within a line of its top.
    QVERIFY2(std::abs(label_top - box_top) <= label->fontMetrics().height(),
             qPrintable(QString("label at y %1, box at y %2").arg(label_top).arg(box_top)));
    // And the next row right under it (no spare height given to this row).
    auto* run_name = page->findChild<QWidget*>("run_name");
    QVERIFY(run_name);
    QVERIFY2(
        top(run_name) - (box_top + box->height()) <= 4 * label->fontMetrics().height(),
        qPrintable(
            QString("box ends at y %1, the next field starts at %2").arg(box_top + box->height()).arg(top(run_name))));
    apply_edit(wizard, "environment=GOOD=1\nBAD LINE");
    auto* error = page->findChild<QLabel*>("environment_error");
    QTRY_VERIFY(error->isVisible());
    QApplication::processEvents();
    QCOMPARE(top(box), box_top);
    QCOMPARE(top(label), label_top);
    QVERIFY2(top(error) >= box_top + box->height(), "the error is under the box");
  }

  // A file Accelerate wrote opens with its values in the fields and saves back unchanged; a broken one is named.
  void opens_an_accelerate_file() {
    QTemporaryDir dir;
    const QString file = dir.filePath("accelerate.yaml");
    QVERIFY(QFile::copy(SPUR_FIXTURES_DIR "/configs/multi_gpu_2nodes_rank0_fp16.yaml", file));
    const QByteArray before = read_file(file);
    spur::studio::MainWindow window(dir.filePath("history.db"));
    std::unique_ptr<SetupWizard> wizard(window.make_wizard(file));
    QVERIFY(wizard);
    wizard->show();
    QVERIFY(wizard->findChild<QRadioButton*>("where_local")->isChecked());
    click_next(*wizard);
    QCOMPARE(wizard->findChild<QSpinBox*>("num_machines")->value(), 2);
    QCOMPARE(wizard->findChild<QSpinBox*>("processes")->value(), 4);
    QCOMPARE(wizard->findChild<QLineEdit*>("main_process_ip")->text(), QString("10.0.0.1"));
    click_next(*wizard);
    QCOMPARE(wizard->findChild<QComboBox*>("mixed_precision")->currentData().toString(), QString("fp16"));
    QVERIFY(!wizard->findChild<QCheckBox*>("use_cpu")->isChecked());
    click_next(*wizard);
    apply_edit(*wizard, "program=/bin/true");
    click_next(*wizard);
    QCOMPARE(wizard->config_path(), file);
    QVERIFY2(wizard->first_problem().isEmpty(), qPrintable(wizard->first_problem()));
    QTest::mouseClick(wizard->button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(wizard->result(), int(QDialog::Accepted));
    QCOMPARE(read_file(file), before);

    // Values the questions do not offer (FSDP, fp8) and keys they do not ask about survive, from the first page.
    const QString fsdp = dir.filePath("fsdp.yaml");
    QFile fsdp_file(fsdp);
    QVERIFY(fsdp_file.open(QIODevice::WriteOnly));
    fsdp_file.write(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: "
        "FULL_SHARD\nmixed_precision: fp8\nnum_machines: 1\nnum_processes: 8\nuse_cpu: false\n");
    fsdp_file.close();
    const auto fsdp_before = spur::app::RunConfig::load(fsdp.toStdString()).to_yaml();
    std::unique_ptr<SetupWizard> again(window.make_wizard(fsdp));
    QVERIFY(again);
    again->show();
    QVERIFY(again->button(QWizard::FinishButton)->isVisible());
    QTest::mouseClick(again->button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(again->result(), int(QDialog::Accepted));
    const auto after = spur::app::RunConfig::load(fsdp.toStdString());
    QCOMPARE(after.distributed_type(), std::string("FSDP"));
    QCOMPARE(after.mixed_precision(), std::string("fp8"));
    QCOMPARE(after.num_processes(), 8);
    QVERIFY(after.find("fsdp_config") &&
            (*after.find("fsdp_config"))["fsdp_sharding_strategy"].as<std::string>() == "FULL_SHARD");
    // Keys are only added (with Accelerate's defaults), never changed or dropped.
    const YAML::Node was = YAML::Load(fsdp_before), now = YAML::Load(after.to_yaml());
    for (const auto& entry : was) {
      QCOMPARE(YAML::Dump(now[entry.first.as<std::string>()]), YAML::Dump(entry.second));
    }

    const QString broken = dir.filePath("broken.yaml");
    QFile out(broken);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write("distributed_type: MULTI_CPU\nnum_processes: two\n");
    out.close();
    QVERIFY(!window.make_wizard(broken));
    QVERIFY2(window.last_error().contains(broken + ":2") && window.last_error().contains("num_processes"),
             qPrintable(window.last_error()));
  }

  // The last page of a Slurm launch shows the sbatch script that `spur launch --slurm` will submit, asked of the
  // launcher itself (--dry_run); what only the launcher can judge (a job folder sbatch cannot name) is said there.
  void a_slurm_launch_shows_its_sbatch_script() {
    qputenv("SPUR_PROGRAM", SPUR_CLI);
    QTemporaryDir dir("/tmp/spur-wizard-XXXXXX");  // (the suite's TMPDIR holds a space, which sbatch cannot take)
    spur::app::SetupAnswers answers;
    answers.where = spur::app::SetupAnswers::Where::Slurm;
    answers.num_machines = 2;
    answers.processes_per_machine = 3;
    answers.slurm.partition = "debug";
    answers.slurm.time = "45";
    answers.slurm.gres = "gpu:3";
    answers.working_directory = dir.path();
    answers.program = "./train";
    answers.arguments = {"--epochs", "2"};
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    wizard.show();
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SlurmPage));
    for (int page = 0; page < 3; ++page) click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SummaryPage));
    auto* script = wizard.findChild<QPlainTextEdit*>("sbatch_script");
    QVERIFY(script && script->isVisible());
    QTRY_VERIFY2_WITH_TIMEOUT(script->toPlainText().contains("#!/bin/bash"), qPrintable(script->toPlainText()), 20000);
    const QString text = script->toPlainText();
    for (const char* expected : {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=3", "#SBATCH --partition=debug",
                                 "#SBATCH --time=45", "#SBATCH --gres=gpu:3", "srun --export=ALL --kill-on-bad-exit=1",
                                 "'--num_processes' '6' '--num_machines' '2'", "'--' './train' '--epochs' '2'"}) {
      QVERIFY2(text.contains(expected), qPrintable(QString(expected) + " not in:\n" + text));
    }
    QVERIFY2(text.startsWith("#!/bin/bash\n"), qPrintable(text));  // only the script: what Copy copies
    QVERIFY2(text.contains("land in " + dir.path() + "/spur-slurm/spur-train-"), qPrintable(text));
    QVERIFY2(!QFileInfo::exists(dir.filePath("spur-slurm")), "a dry run wrote the job's folder");

    // A working directory sbatch's #SBATCH lines cannot carry (the job folder, left empty, is in it): the launcher's
    // own refusal, on the page where the directory is typed (issue 36: it came only on the last page).
    QTemporaryDir spaced(QDir::tempPath() + "/with space XXXXXX");
    wizard.back();
    QCOMPARE(wizard.currentId(), int(SetupWizard::ProgramPage));
    apply_edit(wizard, "working_directory=" + spaced.path());
    auto* directory_error = wizard.currentPage()->findChild<QLabel*>("working_directory_error");
    QVERIFY2(directory_error->isVisible() && directory_error->text().contains("holds a space"),
             qPrintable(directory_error->text()));
    QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
    apply_edit(wizard, "working_directory=" + dir.path());

    // Another target hides the script.
    spur::app::SetupAnswers local = answers;
    local.where = spur::app::SetupAnswers::Where::Local;
    local.num_machines = 1;
    local.processes_per_machine = 1;
    local.program = "/bin/true";
    SetupWizard other(local, dir.filePath("run.yaml"));
    other.show();
    for (int page = 0; page < 4; ++page) click_next(other);
    QCOMPARE(other.currentId(), int(SetupWizard::SummaryPage));
    QVERIFY(!other.findChild<QPlainTextEdit*>("sbatch_script")->isVisible());
    qunsetenv("SPUR_PROGRAM");
  }

  // File > New opens the wizard once this machine's hardware is known, the GUI thread never waiting for the probe
  // (nvidia-smi can take seconds): the first page says what was found.
  void new_opens_the_wizard_once_the_hardware_is_known() {
    QTemporaryDir dir;
    QSettings().remove("launch/last_config");
    spur::studio::MainWindow window(dir.filePath("history.db"));
    auto* create = window.findChild<QAction*>("new_config");
    QVERIFY(create);
    create->trigger();
    SetupWizard* wizard = nullptr;
    QTRY_VERIFY_WITH_TIMEOUT((wizard = window.findChild<SetupWizard*>()) && wizard->isVisible(), 15000);
    const auto hardware = spur::app::DetectedHardware::ready();
    QVERIFY(hardware);
    QCOMPARE(wizard->currentPage()->subTitle(),
             QString("Detected here: %1 CPU cores, %2 GPU(s).").arg(hardware->cpu_cores).arg(hardware->gpus));
    wizard->reject();
  }

  // A Slurm launch from the history comes back to its page with its settings.
  void a_slurm_launch_comes_back_with_its_settings() {
    QTemporaryDir dir;
    QSettings().setValue(
        "launch/last_command",
        "cd /tmp && spur launch --config_file c.yaml --slurm --nodes 3 --ntasks_per_node 4 "
        "--partition gpu --time 2:00:00 --account lab --qos high --gres gpu:4 --slurm_args "
        "'--exclusive --mem=0' --job_name spur-t --slurm_dir /shared/jobs --max_restarts 2 --on login1 ./t x");
    QSettings().remove("launch/last_config");
    spur::studio::MainWindow window(dir.filePath("history.db"));
    std::unique_ptr<SetupWizard> wizard(window.make_wizard());
    QVERIFY(wizard);
    wizard->show();
    QVERIFY(wizard->findChild<QRadioButton*>("where_slurm")->isChecked());
    click_next(*wizard);
    QCOMPARE(wizard->currentId(), int(SetupWizard::SlurmPage));
    QCOMPARE(wizard->findChild<QSpinBox*>("nodes")->value(), 3);
    QCOMPARE(wizard->findChild<QSpinBox*>("ntasks_per_node")->value(), 4);
    QCOMPARE(wizard->findChild<QLineEdit*>("partition")->text(), QString("gpu"));
    QCOMPARE(wizard->findChild<QLineEdit*>("slurm_args")->text(), QString("--exclusive --mem=0"));
    QCOMPARE(wizard->findChild<QLineEdit*>("submit_from")->text(), QString("login1"));  // submitted from there
    const QStringList expected{"--slurm",
                               "--nodes",
                               "3",
                               "--ntasks_per_node",
                               "4",
                               "--partition",
                               "gpu",
                               "--time",
                               "2:00:00",
                               "--account",
                               "lab",
                               "--qos",
                               "high",
                               "--gres",
                               "gpu:4",
                               "--job_name",
                               "spur-t",
                               "--slurm_args",
                               "--exclusive --mem=0",
                               "--slurm_dir",
                               "/shared/jobs",
                               "--max_restarts",
                               "2",
                               "--on",
                               "login1"};
    // They are saved in the target file beside the configuration; the launch itself names the file only.
    QCOMPARE(wizard->answers().target().launch_flags(), expected);
    QCOMPARE(wizard->launch_request().flags, QStringList{});
    QSettings().remove("launch/last_command");
  }

  // Issue 35: a Slurm configuration saved by the wizard opens again as a Slurm launch (its target file), with its
  // settings on the Slurm page and Next enabled, not as "several processes on GPUs" with an empty host.
  void a_saved_slurm_file_opens_again_as_slurm() {
    QTemporaryDir dir(QDir::tempPath() + "/spur-wizard-XXXXXX");  // no space: Slurm's default job folder is in it
    spur::app::SetupAnswers answers;
    answers.where = spur::app::SetupAnswers::Where::Slurm;
    answers.num_machines = 2;
    answers.processes_per_machine = 4;
    answers.use_cpu = false;
    answers.slurm.partition = "gpu";
    answers.slurm.gres = "gpu:4";
    answers.working_directory = dir.path();
    const QString file = dir.filePath("slurm.yaml");
    {
      SetupWizard wizard(answers, file);
      wizard.show();
      QVERIFY2(wizard.first_problem().isEmpty(), qPrintable(wizard.first_problem()));
      QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
      QCOMPARE(wizard.result(), int(QDialog::Accepted));
    }
    QVERIFY(QFileInfo::exists(dir.filePath("slurm.spur.yaml")));
    spur::studio::MainWindow window(dir.filePath("history.db"));
    std::unique_ptr<SetupWizard> wizard(window.make_wizard(file));
    QVERIFY(wizard);
    wizard->show();
    QVERIFY(wizard->findChild<QRadioButton*>("where_slurm")->isChecked());
    click_next(*wizard);
    QCOMPARE(wizard->currentId(), int(SetupWizard::SlurmPage));
    QCOMPARE(wizard->findChild<QSpinBox*>("nodes")->value(), 2);
    QCOMPARE(wizard->findChild<QSpinBox*>("ntasks_per_node")->value(), 4);
    QCOMPARE(wizard->findChild<QLineEdit*>("partition")->text(), QString("gpu"));
    QCOMPARE(wizard->findChild<QLineEdit*>("gres")->text(), QString("gpu:4"));
    QVERIFY(wizard->button(QWizard::NextButton)->isEnabled());
    // Saved again as this machine, the old target file goes: the configuration no longer launches a job.
    wizard->back();
    wizard->findChild<QRadioButton*>("where_local")->setChecked(true);
    click_next(*wizard);
    apply_edit(*wizard, "num_machines=1");  // the job's 2 nodes were 2 machines
    QVERIFY2(wizard->first_problem().isEmpty(), qPrintable(wizard->first_problem()));
    QTest::mouseClick(wizard->button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(wizard->result(), int(QDialog::Accepted));
    QVERIFY(!QFileInfo::exists(dir.filePath("slurm.spur.yaml")));
  }

  // Launch (Ctrl+L) starts from the last launch: an SSH launch comes back with its hosts and environment.
  void launch_starts_from_the_last_launch() {
    QTemporaryDir dir;
    QSettings().setValue(
        "launch/last_command",
        "cd /tmp && spur launch --config_file c.yaml --hosts a,b --env K=v --gradient_accumulation_steps 3 "
        "--max_restarts 1 --hang_timeout 90 ./t x");
    QSettings().remove("launch/last_config");
    spur::studio::MainWindow window(dir.filePath("history.db"));
    std::unique_ptr<SetupWizard> wizard(window.make_wizard());
    QVERIFY(wizard);
    const auto answers = wizard->answers();
    QCOMPARE(answers.where, spur::app::SetupAnswers::Where::Ssh);
    QCOMPARE(answers.hosts, (QStringList{"a", "b"}));
    QCOMPARE(answers.gradient_accumulation_steps, 3);
    QCOMPARE(answers.max_restarts, 1);
    QCOMPARE(answers.hang_timeout, 90);
    QCOMPARE(answers.program, QString("./t"));
    QCOMPARE(answers.arguments, QStringList{"x"});
    QCOMPARE(answers.working_directory, QString("/tmp"));
    QCOMPARE(wizard->answers().target().launch_flags(),
             (QStringList{"--hosts", "a,b", "--gradient_accumulation_steps", "3", "--env", "K=v", "--max_restarts", "1",
                          "--hang_timeout", "90"}));
    QSettings().remove("launch/last_command");
  }

  // Finish on an early page checks every page: to launch, a missing program is named and nothing is saved.
  void finish_early_names_what_is_missing() {
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.working_directory = dir.path();
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    wizard.set_launch_now(true);
    wizard.show();
    QVERIFY(wizard.button(QWizard::FinishButton)->isEnabled());
    QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
    auto* box = wizard.findChild<QMessageBox*>();
    QVERIFY(box && box->isVisible());
    QVERIFY2(box->text().contains("What to run: choose the training program"), qPrintable(box->text()));
    box->accept();
    QVERIFY(!QFileInfo::exists(dir.filePath("run.yaml")));
    QVERIFY(wizard.isVisible());
    QCOMPARE(wizard.result(), 0);
    // Only saving: a configuration needs no program yet.
    wizard.set_launch_now(false);
    QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(wizard.result(), int(QDialog::Accepted));
    QVERIFY(QFileInfo::exists(dir.filePath("run.yaml")));
  }

  // The Sweep page, as a person fills it: asked for on the program's page, it keeps Next disabled while its
  // parameters are wrong (the fault named by the line typed), says how many runs it makes, shows the W&B file it
  // saves beside the configuration, and the command shown runs the sweep headless; launched from the Studio, the
  // sweep's runs come into its history, the search shows them, and grouped by sweep they are one group.
  void the_sweep_page_writes_and_launches_a_sweep() {
    qputenv("SPUR_PROGRAM", SPUR_CLI);
    const auto restore = qScopeGuard([] { qunsetenv("SPUR_PROGRAM"); });
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.working_directory = dir.path();
    answers.program = SPUR_SWEEP_RIG;
    answers.arguments = {"--steps=3", "--interval_ms=0"};
    answers.run_name = "one name";  // a sweep names its runs itself
    SetupWizard wizard(answers, dir.filePath("run.yaml"));
    const QString headless_history = dir.filePath("headless.db");
    wizard.set_history(headless_history);
    wizard.show();
    for (int page = 0; page < 3; ++page) click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::ProgramPage));
    apply_edit(wizard, "as_sweep");
    QVERIFY(wizard.sweep());
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SweepPage));
    auto* error = wizard.currentPage()->findChild<QLabel*>("sweep_parameters_error");
    QVERIFY(error);
    QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
    QCOMPARE(error->text(), QString("at least one parameter to sweep"));
    apply_edit(wizard, "sweep_parameters=lr: 0.1, 0.01\nbatch_size: 64 .. 32");
    QVERIFY2(error->text().startsWith("line 2: "), qPrintable(error->text()));
    QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
    apply_edit(wizard, "sweep_parameters=lr: 0.1, 0.01\nbatch_size: 32");
    QCOMPARE(error->text(), QString());
    apply_edit(wizard, "sweep_name=lr/search");  // it names a file
    QCOMPARE(wizard.currentPage()->findChild<QLabel*>("sweep_name_error")->text(), QString("a name without /"));
    apply_edit(wizard, "sweep_name=");
    apply_edit(wizard, "sweep_parallel=2");
    apply_edit(wizard, "sweep_metric=loss");
    QCOMPARE(wizard.findChild<QLabel*>("sweep_runs")->text(), QString("2 runs, 2 at a time"));
    // Random needs a count, said under it.
    apply_edit(wizard, "sweep_method=random");
    QVERIFY(!wizard.button(QWizard::NextButton)->isEnabled());
    QVERIFY(!wizard.currentPage()->findChild<QLabel*>("sweep_count_error")->text().isEmpty());
    apply_edit(wizard, "sweep_method=grid");
    QVERIFY(wizard.button(QWizard::NextButton)->isEnabled());
    click_next(wizard);
    QCOMPARE(wizard.currentId(), int(SetupWizard::SummaryPage));
    const QString shown = wizard.findChild<QPlainTextEdit*>("sweep_yaml")->toPlainText();
    QVERIFY2(shown.contains("    values: [0.1, 0.01]") && shown.contains("metric:\n  name: \"loss\""),
             qPrintable(shown));
    const QString sweep_file = dir.filePath("spur_sweep_rig-sweep.sweep.yaml");
    QCOMPARE(wizard.findChild<QLineEdit*>("sweep_path")->text(), sweep_file);
    // It follows the configuration's folder (until a path of its own is typed).
    apply_edit(wizard, "config_path=" + dir.filePath("elsewhere/run.yaml"));
    QCOMPARE(wizard.findChild<QLineEdit*>("sweep_path")->text(),
             dir.filePath("elsewhere/spur_sweep_rig-sweep.sweep.yaml"));
    apply_edit(wizard, "config_path=" + dir.filePath("run.yaml"));
    QCOMPARE(wizard.findChild<QLineEdit*>("sweep_path")->text(), sweep_file);
    const QString command = wizard.findChild<QLineEdit*>("command")->text();
    QVERIFY2(command.contains(" sweep run " + spur::app::shell_quote({sweep_file}) + " --parallel 2 -- --config_file " +
                              spur::app::shell_quote({dir.filePath("run.yaml")})) &&
                 !command.contains("--run_name"),
             qPrintable(command));
    QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
    QCOMPARE(wizard.result(), int(QDialog::Accepted));
    QCOMPARE(read_file(sweep_file), shown.toUtf8());
    QVERIFY(QFileInfo::exists(dir.filePath("run.yaml")));

    // Headless, as shown.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("SPUR_HISTORY");
    const auto result = spur::test::run_process("/bin/bash", {"-c", command}, env, 120000);
    QVERIFY2(result.exit_code == 0, qPrintable(command + "\n" + result.output));
    const auto headless = spur::app::RunService(headless_history.toStdString()).runs();
    QCOMPARE(headless.size(), size_t{2});
    QVERIFY(headless[0].params.find("\"lr\"") != std::string::npos);

    // From the Studio: into its own history, found by the sweep's tag, grouped as one sweep.
    const QString studio_history = dir.filePath("studio.db");
    spur::studio::MainWindow window(studio_history);
    window.show();
    QCOMPARE(window.launch_sweep(wizard.sweep_launch()), QString());
    QTRY_COMPARE_WITH_TIMEOUT(window.runs()->rowCount(), 2, 60000);
    auto* search = window.findChild<QLineEdit*>("run_search");
    QTRY_VERIFY_WITH_TIMEOUT(search->text().startsWith("sweep:"), 30000);
    for (int row = 0; row < 2; ++row) {
      const auto& tags = window.runs()->run(row).tags;
      QVERIFY(std::find(tags.begin(), tags.end(), "sweep:" + search->text().mid(6).toStdString()) != tags.end());
    }
    search->clear();
    auto* group_by = window.findChild<QComboBox*>("group_by");
    QVERIFY(group_by);
    apply_edit_combo(group_by, "sweep");
    auto* model = window.runs_view()->model();
    QTRY_COMPARE(model->rowCount(), 1);
    QCOMPARE(model->rowCount(model->index(0, 0)), 2);
    QCOMPARE(QSettings().value("runs/group_by").toString(), QString("sweep"));
    // Clicking the group's row shows its runs.
    QTest::mouseClick(window.runs_view()->viewport(), Qt::LeftButton, {},
                      window.runs_view()->visualRect(model->index(0, 0)).center());
    QTRY_COMPARE(window.dashboard()->runs().size(), qsizetype{2});
    apply_edit_combo(group_by, "");
    QTRY_COMPARE(model->rowCount(), 2);
    QSettings().remove("runs/group_by");
  }

  // The command on the last page, run in a shell as it is shown, launches the configuration headless: with the
  // program's full path where `spur` on PATH is not this Spur, into the history the Studio shows (issue 35: it
  // said "spur", which the README's set-up had not put on PATH, and named no history).
  void the_command_shown_runs_headless() {
    qputenv("SPUR_PROGRAM", SPUR_CLI);
    // Without the set-up's link to this build on PATH (a clone where `installer/setup.sh studio` ran has one).
    const QByteArray path_before = qgetenv("PATH");
    qputenv("PATH", "/usr/bin:/bin");
    const auto restore_path = qScopeGuard([&] { qputenv("PATH", path_before); });
    QTemporaryDir dir;
    spur::app::SetupAnswers answers;
    answers.distributed_type = "MULTI_CPU";
    answers.processes_per_machine = 2;
    answers.working_directory = dir.path();
    answers.program = SPUR_LAUNCH_RIG;
    answers.arguments = {"--lines", "1", "--sleep", "0"};
    SetupWizard wizard(answers, dir.filePath("my config.yaml"));
    const QString history = dir.filePath("studio history.db");
    wizard.set_history(history);
    wizard.show();
    for (int page = 0; page < 4; ++page) click_next(wizard);
    const QString command = wizard.findChild<QLineEdit*>("command")->text();
    QVERIFY2(command.contains(" && " + QFileInfo(SPUR_CLI).absoluteFilePath() + " launch --config_file") &&
                 command.contains("--history '" + history + "'"),
             qPrintable(command));
    QTest::mouseClick(wizard.button(QWizard::FinishButton), Qt::LeftButton);
    QVERIFY(QFileInfo::exists(dir.filePath("my config.yaml")));
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("SPUR_HISTORY");
    env.insert("XDG_DATA_HOME", dir.filePath("elsewhere"));
    const auto result = spur::test::run_process("/bin/bash", {"-c", command}, env, 60000);
    QVERIFY2(result.exit_code == 0, qPrintable(command + "\n" + result.output));
    QVERIFY2(result.output.contains("hello from rank 1 of 2"), qPrintable(result.output));
    QCOMPARE(spur::app::RunService(history.toStdString()).runs().size(), size_t{1});
    // With this Spur on PATH (the README's set-up links it there), the command says `spur`.
    const QString bin = dir.filePath("bin");
    QVERIFY(QDir().mkpath(bin));
    QVERIFY(QFile::link(SPUR_CLI, bin + "/spur"));
    qputenv("PATH", bin.toUtf8() + ":/usr/bin:/bin");
    QCOMPARE(spur::app::spur_command(), QString("spur"));
  }
};

SPUR_TEST_CLASS(WizardTest)
#include "wizard_test.moc"
