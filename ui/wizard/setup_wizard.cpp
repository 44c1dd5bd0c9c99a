// SPDX-License-Identifier: GPL-3.0-or-later
// The set-up wizard; see setup_wizard.h. The questions' rules (defaults, checks, the file written) live in
// app::SetupAnswers; the pages only lay out fields and show what a check says under the field at fault.
#include "wizard/setup_wizard.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>

#include "launch/detached_launch.h"
#include "runs/run_service.h"
#include "slurm/script_preview.h"

#include <stdexcept>
#include <vector>

namespace spur::studio {

// A page whose fields each have a check; Next (or Finish) stays disabled while a visible field's check fails,
// and the failing check's text is shown under its field.
class SetupWizard::Page : public QWizardPage {
 public:
  explicit Page(QWidget* parent) : QWizardPage(parent), form_(new QFormLayout(this)) {
    form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  }

  QFormLayout* form() const { return form_; }

  /// A labelled row; `check` (may be empty) says what is wrong with the field's value (Next stays disabled);
  /// `warn` (may be empty) what may be wrong, shown in amber without holding Next back. A text field left empty and
  /// not yet typed into shows no error (Next is still disabled): "list at least one host" in red before a key was
  /// pressed read as a mistake made.
  void add(const QString& label, QWidget* field, std::function<QString()> check = {},
           std::function<QString()> warn = {}) {
    auto* box = new QWidget(this);
    // As tall as the field and its error, never taller: a field that can grow (the environment's text box, capped
    // in height) made its row take the page's spare height, and the box sat in the middle of it, far below its
    // label, moving when the error showed.
    box->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    auto* column = new QVBoxLayout(box);
    column->setContentsMargins(0, 0, 0, 0);
    column->setSpacing(2);
    column->addWidget(field);
    auto* error = new QLabel(box);
    QString name = field->objectName();  // a field with a Browse button is named "<field>_row"
    if (name.endsWith("_row")) name.chop(4);
    error->setObjectName(name + "_error");
    error->setWordWrap(true);
    // A checked row keeps a line for its error while there is none, so the fields below do not move as errors come
    // and go; a longer error grows the row.
    if (check || warn) {
      QSizePolicy policy = error->sizePolicy();
      policy.setRetainSizeWhenHidden(true);
      error->setSizePolicy(policy);
      error->setMinimumHeight(error->fontMetrics().lineSpacing());
    }
    error->hide();
    column->addWidget(error);
    form_->addRow(label, box);
    auto* edit = qobject_cast<QLineEdit*>(field);
    if (!edit) edit = field->findChild<QLineEdit*>();
    rows_.push_back({box, field, error, std::move(check), std::move(warn), edit});
    if (edit) {
      connect(edit, &QLineEdit::textEdited, this, [this, edit] {
        for (auto& row : rows_) row.touched = row.touched || row.edit == edit;
      });
    }
  }
  /// A field whose emptiness means something (a default) is judged from the start, typed into or not.
  void judge_when_empty(QWidget* field) {
    for (auto& row : rows_) row.touched = row.touched || row.field == field;
  }
  /// Every row's error shown, typed into or not (Finish pressed early, a page opened with a file's values).
  void touch_all() {
    for (auto& row : rows_) row.touched = true;
    recheck();
  }
  void show_row(QWidget* field, bool shown) {
    for (auto& row : rows_) {
      if (row.field != field) continue;
      row.shown = shown;  // kept here: isRowVisible is false for every row of a page not on screen
      form_->setRowVisible(row.box, shown);
    }
  }
  /// Re-checks every field (call on any edit).
  void recheck() {
    for (auto& row : rows_) {
      QString problem = row.check && row.shown ? row.check() : QString();
      if (!problem.isEmpty() && row.edit && row.edit->text().trimmed().isEmpty() && !row.touched) problem.clear();
      const QString warning = problem.isEmpty() && row.warn && row.shown ? row.warn() : QString();
      row.error->setStyleSheet(problem.isEmpty() ? "color: #b26a00;" : "color: #d32f2f;");
      row.error->setText(problem.isEmpty() ? warning : problem);
      row.error->setVisible(!problem.isEmpty() || !warning.isEmpty());
    }
    emit completeChanged();
  }
  bool isComplete() const override { return problem().isEmpty() && (!extra_check || extra_check()); }
  /// The first visible field's problem, empty when every field is fine.
  QString problem() const {
    for (const auto& row : rows_) {
      if (!row.check || !row.shown) continue;
      if (QString text = row.check(); !text.isEmpty()) return text;
    }
    return {};
  }
  void initializePage() override {
    if (on_enter) on_enter();
    recheck();
  }

  std::function<void()> on_enter;
  std::function<bool()> extra_check;

 private:
  struct Row {
    QWidget* box;
    QWidget* field;
    QLabel* error;
    std::function<QString()> check;
    std::function<QString()> warn;
    QLineEdit* edit = nullptr;  // the row's text field, if it has one
    bool shown = true;
    bool touched = false;  // typed into (or its page left through Finish)
  };
  QFormLayout* form_;
  std::vector<Row> rows_;
};

namespace {

QLineEdit* line(QWidget* parent, const char* name, const QString& placeholder = {}) {
  auto* edit = new QLineEdit(parent);
  edit->setObjectName(name);
  edit->setPlaceholderText(placeholder);
  return edit;
}

QSpinBox* spin(QWidget* parent, const char* name, int minimum, int maximum) {
  auto* box = new QSpinBox(parent);
  box->setObjectName(name);
  box->setRange(minimum, maximum);
  return box;
}

// Each item is {what the user reads, the value written to the file}; currentData() is the value.
QComboBox* combo(QWidget* parent, const char* name, const QList<QPair<QString, QString>>& items) {
  auto* box = new QComboBox(parent);
  box->setObjectName(name);
  for (const auto& [label, value] : items) box->addItem(label, value);
  return box;
}

QString value_of(const QComboBox* box) { return box->currentData().toString(); }

// A read-only text box in a fixed-width font (a file or script to be written).
QPlainTextEdit* shown_text(QWidget* parent, const char* name) {
  auto* text = new QPlainTextEdit(parent);
  text->setObjectName(name);
  text->setReadOnly(true);
  text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  return text;
}

// A "Copy" button that puts `text()` on the clipboard.
QPushButton* copy_button(QWidget* parent, const char* name, const std::function<QString()>& text) {
  auto* button = new QPushButton(QObject::tr("Copy"), parent);
  button->setObjectName(name);
  QObject::connect(button, &QPushButton::clicked, parent, [text] { QGuiApplication::clipboard()->setText(text()); });
  return button;
}

// `text` with a Copy button under it, at the right: the row a form shows.
QWidget* with_copy(QPlainTextEdit* text, const char* copy_name) {
  auto* row = new QWidget(text->parentWidget());
  auto* layout = new QVBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(text);
  layout->addWidget(copy_button(row, copy_name, [text] { return text->toPlainText(); }), 0, Qt::AlignRight);
  return row;
}

// A line edit with a "Browse..." button beside it.
QWidget* with_browse(QLineEdit* edit, const std::function<QString()>& choose) {
  auto* box = new QWidget(edit->parentWidget());
  box->setObjectName(edit->objectName() + "_row");
  auto* row = new QHBoxLayout(box);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(edit, 1);
  auto* button = new QPushButton(QObject::tr("Browse..."), box);
  QObject::connect(button, &QPushButton::clicked, edit, [edit, choose] {
    const QString chosen = choose();
    if (!chosen.isEmpty()) edit->setText(chosen);
  });
  row->addWidget(button);
  return box;
}

}  // namespace

SetupWizard::Page* SetupWizard::new_page(const QString& title, const QString& subtitle) {
  auto* p = new Page(this);
  // Finish on every page (beside Next): a configuration opened to launch again needs no walk through the
  // questions. accept() checks every page before saving.
  p->setFinalPage(true);
  p->setTitle(title);
  p->setSubTitle(subtitle);
  return p;
}

SetupWizard::SetupWizard(const app::SetupAnswers& answers, const QString& config_path,
                         std::optional<app::RunConfig> base, QWidget* parent)
    : QWizard(parent), base_(std::move(base)), start_(answers) {
  setWindowTitle(tr("Run configuration"));
  setWizardStyle(QWizard::ModernStyle);
  setOption(QWizard::NoBackButtonOnStartPage);
  setOption(QWizard::HaveHelpButton, false);

  // What this machine has, from the probe the Studio started (never waited for here: nvidia-smi can take seconds).
  app::DetectedHardware::start();
  const auto hardware = app::DetectedHardware::ready();
  const auto hardware_text = [](const app::DetectedHardware& found) {
    return tr("Detected here: %1 CPU cores, %2 GPU(s).").arg(found.cpu_cores).arg(found.gpus);
  };

  // --- Where ------------------------------------------------------------------------------------------------
  auto* where = new_page(tr("Where does the run happen?"),
                         hardware ? hardware_text(*hardware) : tr("Looking for this machine's GPUs..."));
  if (!hardware) {
    auto* waiting = new QTimer(this);
    connect(waiting, &QTimer::timeout, this, [where, waiting, hardware_text] {
      if (const auto found = app::DetectedHardware::ready()) {
        where->setSubTitle(hardware_text(*found));
        waiting->stop();
      }
    });
    waiting->start(100);
  }
  local_ = new QRadioButton(tr("On this machine (or machines you start by hand)"), where);
  local_->setObjectName("where_local");
  ssh_ = new QRadioButton(tr("On several machines over SSH"), where);
  ssh_->setObjectName("where_ssh");
  sagemaker_ = new QRadioButton(tr("On Amazon SageMaker (your container)"), where);
  sagemaker_->setObjectName("where_sagemaker");
  slurm_ = new QRadioButton(tr("On a Slurm cluster (a batch job submitted with sbatch)"), where);
  slurm_->setObjectName("where_slurm");
  where->form()->addRow(local_);
  where->form()->addRow(ssh_);
  where->form()->addRow(slurm_);
  where->form()->addRow(sagemaker_);
  setPage(WherePage, where);

  // --- Machines ---------------------------------------------------------------------------------------------
  auto* machines = new_page(tr("Machines and processes"), tr("How many processes, on which machines."));
  distributed_type_ = combo(machines, "distributed_type",
                            {{tr("One process"), "NO"},
                             {tr("Several processes on CPUs (Gloo)"), "MULTI_CPU"},
                             {tr("Several processes on GPUs (NCCL)"), "MULTI_GPU"}});
  distributed_type_->setToolTip(
      tr("Accelerate's distributed_type: NO (one process), MULTI_CPU or MULTI_GPU (a "
         "process group over Gloo or NCCL)"));
  machines_ = spin(machines, "num_machines", 1, 10000);
  machine_rank_ = spin(machines, "machine_rank", 0, 9999);
  main_ip_ = line(machines, "main_process_ip", tr("the address the other machines reach machine 0 at"));
  main_port_ = line(machines, "main_process_port");
  same_network_ = new QCheckBox(tr("All machines are on the same local network"), machines);
  same_network_->setObjectName("same_network");
  hosts_ = line(machines, "hosts", tr("gpu1, gpu2, user@gpu3 (the first one is the rendezvous)"));
  processes_ = spin(machines, "processes", 1, 4096);
  machines->add(tr("Kind of run:"), distributed_type_, {}, [this] {
    // NCCL needs a GPU per process: none was found here (a file for other machines may still be written).
    const auto found = app::DetectedHardware::ready();
    return local_->isChecked() && value_of(distributed_type_) == "MULTI_GPU" && found && found->gpus == 0
               ? tr("this machine has no GPU: runs started here need \"Several processes on CPUs\"")
               : QString();
  });
  machines->add(tr("Hosts:"), hosts_, [this] { return app::check_host_list(hosts_->text()); });
  machines->add(tr("Machines:"), machines_);
  machines->add(tr("This machine's rank:"), machine_rank_, [this] {
    return machine_rank_->value() < machines_->value() ? QString()
                                                       : tr("a rank from 0 to %1").arg(machines_->value() - 1);
  });
  machines->add(tr("Main machine's address:"), main_ip_,
                [this] { return app::check_host(main_ip_->text().trimmed()); });
  machines->add(tr("Main machine's port:"), main_port_, [this] { return app::check_port(main_port_->text()); });
  machines->add(QString(), same_network_);
  machines->add(tr("Processes per machine:"), processes_, [this] {
    return value_of(distributed_type_) == "NO" && processes_->value() > 1 && machines_->value() == 1 &&
                   !ssh_->isChecked()
               ? tr("\"One process\" starts one: for more, choose several processes on CPUs or GPUs")
               : QString();
  });
  machines->on_enter = [this] { update_visibility(); };
  setPage(MachinesPage, machines);

  // --- SageMaker --------------------------------------------------------------------------------------------
  auto* sm =
      new_page(tr("Amazon SageMaker"), tr("A training job with your container image; credentials come from your AWS "
                                          "configuration."));
  sagemaker_type_ = combo(sm, "sagemaker_distributed_type",
                          {{tr("Data parallel (SageMaker's library, every GPU)"), "DATA_PARALLEL"},
                           {tr("One process per instance"), "NO"}});
  region_ = line(sm, "region");
  role_ = line(sm, "iam_role");
  profile_ = line(sm, "profile", tr("empty: the AWS CLI's default credentials"));
  image_ = line(sm, "image_uri", tr("123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest"));
  instance_type_ = line(sm, "instance_type");
  instances_ = spin(sm, "instance_count", 1, 1000);
  inputs_ = line(sm, "inputs_file", tr("optional TSV: channel<TAB>s3://uri"));
  metrics_ = line(sm, "metrics_file", tr("optional TSV: name<TAB>regex"));
  const auto optional_file = [](QLineEdit* edit) {
    return [edit]() -> QString {
      const QString file = edit->text().trimmed();
      return file.isEmpty() || QFileInfo(file).isFile() ? QString() : file + tr(" does not exist");
    };
  };
  sm->add(tr("Distributed mode:"), sagemaker_type_);
  sm->add(tr("Region:"), region_, [this] { return app::check_region(region_->text().trimmed()); });
  sm->add(tr("IAM role:"), role_,
          [this] { return role_->text().trimmed().isEmpty() ? tr("a role name or ARN") : QString(); });
  sm->add(tr("AWS profile:"), profile_);
  sm->add(tr("Training image:"), image_, [this] { return app::check_image_uri(image_->text()); });
  sm->add(tr("Instance type:"), instance_type_,
          [this] { return app::check_instance_type(instance_type_->text().trimmed()); });
  sm->add(tr("Instances:"), instances_);
  sm->add(tr("Input channels:"), inputs_, optional_file(inputs_));
  sm->add(tr("Metrics:"), metrics_, optional_file(metrics_));
  setPage(SageMakerPage, sm);

  // --- Slurm ------------------------------------------------------------------------------------------------
  auto* slurm = new_page(tr("Slurm cluster"),
                         tr("One spur launch per node, started by srun. Slurm's commands (sbatch, squeue, scontrol, "
                            "scancel) must work where the job is submitted (here, or the login node below), and "
                            "Spur and the program be at the same path on the nodes."));
  submit_from_ = line(slurm, "submit_from", tr("empty: this machine; or a login node over SSH, like login1"));
  submit_from_->setToolTip(
      tr("spur launch runs there, detached (spur launch --on): the job outlives this machine, "
         "and its run is watched from here in that machine's history"));
  partition_ = line(slurm, "partition", tr("empty: the cluster's default partition"));
  nodes_ = spin(slurm, "nodes", 1, 100000);
  tasks_per_node_ = spin(slurm, "ntasks_per_node", 1, 4096);
  tasks_per_node_->setToolTip(tr("Ranks on each node: one per GPU, or several CPU processes"));
  time_limit_ = line(slurm, "time", tr("empty: the partition's limit; 30, 2:00:00 or 1-12:00:00"));
  account_ = line(slurm, "account", tr("empty: your default account"));
  qos_ = line(slurm, "qos", tr("empty: the default quality of service"));
  gres_ = line(slurm, "gres", tr("per node, like gpu:4; empty: none"));
  sbatch_options_ = line(slurm, "slurm_args", tr("more #SBATCH options, like --exclusive --mem=0"));
  job_folder_ = line(slurm, "slurm_dir", tr("empty: spur-slurm in the working directory; the nodes must see it"));
  slurm->add(tr("Submit from:"), submit_from_, [this] { return app::check_launch_machine(submit_from_->text()); });
  slurm->add(tr("Partition:"), partition_, [this] { return app::check_slurm_partition(partition_->text()); });
  slurm->add(tr("Nodes:"), nodes_);
  slurm->add(tr("Processes per node:"), tasks_per_node_);
  slurm->add(tr("Time limit:"), time_limit_, [this] { return app::check_slurm_time(time_limit_->text()); });
  slurm->add(tr("Account:"), account_, [this] { return app::check_slurm_name(account_->text()); });
  slurm->add(tr("QOS:"), qos_, [this] { return app::check_slurm_name(qos_->text()); });
  slurm->add(tr("Generic resources:"), gres_, [this] { return app::check_slurm_gres(gres_->text()); });
  slurm->add(tr("Other sbatch options:"), sbatch_options_,
             [this] { return app::check_slurm_options(sbatch_options_->text()); });
  auto* job_folder_row = with_browse(job_folder_, [this] {
    return QFileDialog::getExistingDirectory(this, tr("Folder for the jobs' scripts and output"), directory_->text());
  });
  slurm->add(tr("Job folder:"), job_folder_row,
             [this] { return app::check_slurm_directory(job_folder_->text(), directory_->text()); });
  slurm->judge_when_empty(job_folder_row);  // empty is spur-slurm in the working directory
  setPage(SlurmPage, slurm);

  // --- Training ---------------------------------------------------------------------------------------------
  auto* training = new_page(tr("Devices and precision"), tr("What each process computes on."));
  use_cpu_ = new QCheckBox(tr("CPU only"), training);
  use_cpu_->setObjectName("use_cpu");
  gpu_ids_ = line(training, "gpu_ids", tr("all, or GPU numbers like 0,1"));
  precision_ = combo(training, "mixed_precision",
                     {{tr("No (fp32)"), "no"}, {tr("fp16 (with loss scaling)"), "fp16"}, {tr("bf16"), "bf16"}});
  accumulation_ = spin(training, "gradient_accumulation", 1, 1'000'000);
  training->add(QString(), use_cpu_);
  training->add(tr("GPUs:"), gpu_ids_, [this] { return app::check_gpu_ids(gpu_ids_->text().trimmed()); });
  training->add(tr("Mixed precision:"), precision_, [this] {
    // On CPUs: "CPU only", or a run on this machine alone, which has no GPU, not asked to run on GPUs (a file
    // for GPU machines may be edited here). Other machines' GPUs are not known here, nor this one's until the
    // probe is done.
    const auto found = app::DetectedHardware::ready();
    const int gpus = found ? found->gpus : -1;
    const bool here_without_gpus =
        local_->isChecked() && gpus == 0 && machines_->value() == 1 && value_of(distributed_type_) != "MULTI_GPU";
    const bool on_cpu = !sagemaker_->isChecked() && (use_cpu_->isChecked() || here_without_gpus);
    return app::check_mixed_precision(value_of(precision_), on_cpu);
  });
  training->add(tr("Gradient accumulation steps:"), accumulation_);
  training->on_enter = [this] { update_visibility(); };
  setPage(TrainingPage, training);

  // --- Program ----------------------------------------------------------------------------------------------
  auto* program = new_page(tr("What to run"), tr("Your training program (built against Spur), as you would start it."));
  program_ = line(program, "program", tr("./train"));
  arguments_ = line(program, "arguments", tr("empty: none (the program's own flags, like --epochs 3)"));
  directory_ = line(program, "working_directory");
  environment_ = new QPlainTextEdit(program);
  environment_->setObjectName("environment");
  environment_->setPlaceholderText(tr("NAME=VALUE, one per line"));
  environment_->setMaximumHeight(90);
  program->add(
      tr("Program:"),
      with_browse(program_,
                  [this] { return QFileDialog::getOpenFileName(this, tr("Training program"), directory_->text()); }),
      [this] {
        const QString program = program_->text().trimmed();
        // A configuration can be saved before there is a program; launching needs one.
        if (program.isEmpty()) return launch_now_->isChecked() ? tr("choose the training program") : QString();
        if (!local_->isChecked()) return QString();  // it runs on the machines (or the nodes)
        return app::check_program(program, directory_->text().trimmed());
      });
  program->add(tr("Arguments:"), arguments_, [this] {
    try {
      app::shell_split(arguments_->text());
      return QString();
    } catch (const std::invalid_argument&) {
      return tr("an unterminated quote");
    }
  });
  program->add(
      tr("Working directory:"),
      with_browse(
          directory_,
          [this] { return QFileDialog::getExistingDirectory(this, tr("Working directory"), directory_->text()); }),
      [this] {
        QString problem = app::check_directory(directory_->text().trimmed());
        if (!problem.isEmpty() || !slurm_->isChecked()) return problem;
        // Slurm's job folder, left empty, is in this directory (asked on the Slurm page, which came before).
        return app::check_slurm_directory(job_folder_->text(), directory_->text());
      });
  program->add(tr("Environment:"), environment_,
               [this] { return app::check_environment(environment_->toPlainText()); });
  // Surviving faults (spur launch --max_restarts, --hang_timeout): not for SageMaker, which restarts nothing.
  max_restarts_ = spin(program, "max_restarts", 0, 1000);
  max_restarts_->setToolTip(
      tr("After a rank fails, stop the others and start them all again, up to this many "
         "times; a program with automatic checkpoint naming resumes from its latest one"));
  hang_timeout_ = spin(program, "hang_timeout", 0, 31'536'000);
  hang_timeout_->setSpecialValueText(tr("off"));
  hang_timeout_->setSuffix(tr(" s"));
  hang_timeout_->setToolTip(
      tr("When no rank makes progress for this long, say where each rank is and stop the run "
         "(or restart it)"));
  run_name_ = line(program, "run_name", tr("empty: run-N, N its number in the history"));
  run_name_->setToolTip(tr("The run's name in the history and the plots' legends (spur launch --run_name)"));
  program->add(tr("Run name:"), run_name_, [this] {
    for (const QChar c : run_name_->text()) {
      if (c.category() == QChar::Other_Control) return tr("a name without control characters");
    }
    return run_name_->text().size() > 200 ? tr("at most 200 characters") : QString();
  });
  program->add(tr("Restarts after a failure:"), max_restarts_);
  program->add(tr("Stop when stuck for:"), hang_timeout_);
  as_sweep_ = new QCheckBox(tr("Sweep: many runs over parameters (asked on the next page)"), program);
  as_sweep_->setObjectName("as_sweep");
  as_sweep_->setToolTip(
      tr("A W&B sweep file launched with spur sweep run: every run of this configuration, with "
         "the parameters you choose"));
  program->add(QString(), as_sweep_);
  setPage(ProgramPage, program);

  // --- Sweep ------------------------------------------------------------------------------------------------
  auto* sweep = new_page(tr("Sweep"), tr("Many runs of the program, each with its own parameters (W&B's sweep "
                                         "file; docs/sweeps.md). Each run gets --name=value for each parameter."));
  sweep_parameters_ = new QPlainTextEdit(sweep);
  sweep_parameters_->setObjectName("sweep_parameters");
  sweep_parameters_->setPlaceholderText(
      tr("One per line, for example:\nlr: 0.001, 0.003, 0.01\ndropout: 0.1 .. 0.5\nweight_decay: 1e-5 .. 1e-2 log"));
  sweep_parameters_->setMaximumHeight(sweep_parameters_->fontMetrics().lineSpacing() * 6 + 12);
  sweep_parameters_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  sweep_parameters_->setToolTip(
      tr("NAME: VALUE, VALUE... (each value); NAME: MIN .. MAX (a range, random only); NAME: MIN .. MAX log (a "
         "range drawn on a log scale); NAME: VALUE (the same in every run)"));
  sweep_method_ = combo(sweep, "sweep_method",
                        {{tr("Grid: every combination of the values"), "grid"},
                         {tr("Random: draws from the values and ranges"), "random"}});
  sweep_count_ = spin(sweep, "sweep_count", 0, 100000);
  sweep_count_->setSpecialValueText(tr("all"));
  sweep_count_->setToolTip(tr("run_cap: the runs of a random sweep, or the first ones of a grid"));
  sweep_seed_ = spin(sweep, "sweep_seed", 0, 1'000'000'000);
  sweep_seed_->setToolTip(tr("The same seed draws the same runs"));
  sweep_parallel_ = spin(sweep, "sweep_parallel", 1, 256);
  sweep_parallel_->setToolTip(tr("Runs at a time (spur sweep run --parallel)"));
  sweep_metric_ = line(sweep, "sweep_metric", tr("a key the program logs, like loss; empty: none"));
  sweep_goal_ = combo(sweep, "sweep_goal", {{tr("lower is better"), "minimize"}, {tr("higher is better"), "maximize"}});
  auto* metric_row = new QWidget(sweep);
  metric_row->setObjectName("sweep_metric_row");
  auto* metric_layout = new QHBoxLayout(metric_row);
  metric_layout->setContentsMargins(0, 0, 0, 0);
  metric_layout->addWidget(sweep_metric_, 1);
  metric_layout->addWidget(sweep_goal_);
  sweep_hyperband_ = new QCheckBox(tr("Stop runs early that fall behind (Hyperband)"), sweep);
  sweep_hyperband_->setObjectName("sweep_hyperband");
  sweep_min_iter_ = spin(sweep, "sweep_min_iter", 1, 1'000'000);
  sweep_min_iter_->setToolTip(
      tr("The first comparison, after this many values of the metric (then eta = 3 times "
         "as many, and so on)"));
  sweep_name_ = line(sweep, "sweep_name", tr("empty: the program's name and -sweep"));
  sweep_runs_ = new QLabel(sweep);
  sweep_runs_->setObjectName("sweep_runs");
  sweep->add(tr("Parameters:"), sweep_parameters_, [this]() -> QString {
    try {
      app::SweepForm::parse_parameters(sweep_parameters_->toPlainText());
    } catch (const std::invalid_argument& e) {
      return QString::fromUtf8(e.what());
    }
    const auto form = sweep_form();
    if (form.parameters.empty()) return tr("at least one parameter to sweep");
    // Faults of the other fields are said under them.
    if ((form.method == "random" && form.count == 0) || (form.hyperband && form.metric.isEmpty())) return {};
    // The constructor's `answers` hides the member function here.
    const auto now = this->answers();
    return form.problem(now.program.isEmpty() ? "PROGRAM" : now.program, now.arguments);
  });
  sweep->add(tr("Method:"), sweep_method_);
  sweep->add(tr("Runs:"), sweep_count_, [this] {
    return value_of(sweep_method_) == "random" && sweep_count_->value() == 0
               ? tr("how many runs to draw (a random sweep has no end of its own)")
               : QString();
  });
  sweep->add(tr("Seed:"), sweep_seed_);
  sweep->add(tr("At a time:"), sweep_parallel_);
  sweep->add(tr("Metric:"), metric_row, [this] {
    for (const QChar c : sweep_metric_->text()) {
      if (c.category() == QChar::Other_Control) return tr("a name without control characters");
    }
    return sweep_hyperband_->isChecked() && sweep_metric_->text().trimmed().isEmpty()
               ? tr("stopping early compares a metric: name the one the program logs")
               : QString();
  });
  sweep->add(QString(), sweep_hyperband_);
  sweep->add(tr("First comparison after:"), sweep_min_iter_);
  sweep->add(tr("Sweep name:"), sweep_name_, [this] {
    for (const QChar c : sweep_name_->text()) {
      if (c.category() == QChar::Other_Control) return tr("a name without control characters");
    }
    // It names the sweep's file (NAME.sweep.yaml) and its runs (NAME-1...).
    if (sweep_name_->text().contains('/')) return tr("a name without /");
    return sweep_name_->text().size() > 200 ? tr("at most 200 characters") : QString();
  });
  sweep->form()->addRow(QString(), sweep_runs_);
  sweep->on_enter = [this] { update_visibility(); };
  // How many runs the answers make, said as they change.
  connect(sweep, &QWizardPage::completeChanged, this, [this, sweep] {
    const auto form = sweep_form();
    const auto now = this->answers();
    const int64_t runs =
        sweep->problem().isEmpty() ? form.run_count(now.program.isEmpty() ? "PROGRAM" : now.program, now.arguments) : 0;
    const QString count = runs == 1 ? tr("1 run") : tr("%1 runs").arg(runs);
    sweep_runs_->setText(runs > 0 ? tr("%1, %2 at a time").arg(count).arg(form.parallel) : QString());
  });
  setPage(SweepPage, sweep);

  // --- Summary ----------------------------------------------------------------------------------------------
  auto* summary = new_page(tr("Save and launch"), tr("The file is Accelerate's format; the command runs it without the "
                                                     "Studio."));
  path_ = line(summary, "config_path");
  yaml_ = shown_text(summary, "yaml");
  command_ = line(summary, "command");
  command_->setReadOnly(true);
  command_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  summary_error_ = new QLabel(summary);
  summary_error_->setObjectName("summary_error");
  summary_error_->setStyleSheet("color: #d32f2f;");
  summary_error_->setWordWrap(true);
  launch_now_ = new QCheckBox(tr("Launch it when I press Finish"), summary);
  launch_now_->setObjectName("launch_now");
  summary->add(tr("Save as:"),
               with_browse(path_,
                           [this] {
                             return QFileDialog::getSaveFileName(this, tr("Save the run configuration"), path_->text(),
                                                                 tr("YAML (*.yaml *.yml);;JSON (*.json)"));
                           }),
               [this] {
                 const QFileInfo file(path_->text().trimmed());
                 if (path_->text().trimmed().isEmpty()) return tr("where to save the configuration");
                 return file.isDir() ? tr("%1 is a directory").arg(file.filePath()) : QString();
               });
  summary->form()->addRow(tr("Configuration:"), with_copy(yaml_, "copy_yaml"));
  // What Accelerate's file cannot say (hosts, Slurm settings, the environment...): Spur's target file beside it.
  target_yaml_ = shown_text(summary, "target_yaml");
  target_yaml_->setMaximumHeight(target_yaml_->fontMetrics().lineSpacing() * 9);
  summary->form()->addRow(tr("Launch settings:"), target_yaml_);
  auto* command_row = new QWidget(summary);
  auto* command_layout = new QHBoxLayout(command_row);
  command_layout->setContentsMargins(0, 0, 0, 0);
  command_layout->addWidget(command_, 1);
  command_layout->addWidget(copy_button(command_row, "copy_command", [this] { return command_->text(); }));
  // A sweep: its file, saved beside the configuration, and launched by the command below.
  sweep_path_ = line(summary, "sweep_path");
  connect(sweep_path_, &QLineEdit::textEdited, this, [this] { sweep_path_chosen_ = true; });
  summary->add(tr("Sweep file:"),
               with_browse(sweep_path_,
                           [this] {
                             QString chosen = QFileDialog::getSaveFileName(
                                 this, tr("Save the sweep file"), sweep_path_->text(), tr("YAML (*.yaml *.yml)"));
                             if (!chosen.isEmpty()) sweep_path_chosen_ = true;
                             return chosen;
                           }),
               [this] {
                 if (!this->sweep()) return QString();
                 const QFileInfo file(sweep_path_->text().trimmed());
                 if (sweep_path_->text().trimmed().isEmpty()) return tr("where to save the sweep file");
                 if (file.absoluteFilePath() == QFileInfo(this->config_path()).absoluteFilePath()) {
                   return tr("the configuration is saved there: the sweep needs a file of its own");
                 }
                 return file.isDir() ? tr("%1 is a directory").arg(file.filePath()) : QString();
               });
  sweep_yaml_ = shown_text(summary, "sweep_yaml");
  summary->form()->addRow(tr("Sweep:"), with_copy(sweep_yaml_, "copy_sweep"));
  summary->form()->addRow(tr("Headless:"), command_row);
  // Slurm: the script the launch will submit, as the launcher itself writes it (spur launch --dry_run).
  sbatch_script_ = shown_text(summary, "sbatch_script");
  summary->form()->addRow(tr("sbatch script:"), with_copy(sbatch_script_, "copy_sbatch"));
  preview_ = new app::SlurmScriptPreview(this);
  connect(preview_, &app::SlurmScriptPreview::answered, this, [this](const QString& script, const QString& error) {
    sbatch_script_->setPlainText(error.isEmpty() ? script : tr("No script: %1").arg(error));
  });
  summary->form()->addRow(summary_error_);
  summary->form()->addRow(launch_now_);
  summary->on_enter = [this] { update_summary(); };
  summary->extra_check = [this] { return summary_error_->text().isEmpty(); };
  setPage(SummaryPage, summary);

  // Any edit re-checks the page it is on.
  const auto recheck_all = [this] {
    for (const int id : pageIds()) static_cast<Page*>(this->page(id))->recheck();
  };
  for (auto* edit : findChildren<QLineEdit*>()) {
    if (edit != command_) connect(edit, &QLineEdit::textChanged, this, recheck_all);
    if (edit == sweep_name_) connect(edit, &QLineEdit::textChanged, this, [this] { update_summary(); });
  }
  for (auto* box : findChildren<QSpinBox*>())
    connect(box, &QSpinBox::valueChanged, this, [this, recheck_all] {
      update_visibility();
      recheck_all();
    });
  for (auto* box : findChildren<QComboBox*>()) connect(box, &QComboBox::currentIndexChanged, this, recheck_all);
  // The kind of run sets "CPU only" (several processes on CPUs, or on GPUs).
  connect(distributed_type_, &QComboBox::currentIndexChanged, this, [this] { update_visibility(); });
  for (auto* box : {local_, ssh_, sagemaker_, slurm_})
    connect(box, &QRadioButton::toggled, this, [this] { update_visibility(); });
  use_cpu_chosen_ = base_.has_value();
  // (pressed: before toggled, whose handler lays the page out again; a click and the space key both press)
  connect(use_cpu_, &QCheckBox::pressed, this, [this] { use_cpu_chosen_ = true; });
  connect(use_cpu_, &QCheckBox::toggled, this, [this, recheck_all] {
    update_visibility();
    recheck_all();
  });
  connect(environment_, &QPlainTextEdit::textChanged, this, recheck_all);
  connect(sweep_parameters_, &QPlainTextEdit::textChanged, this, recheck_all);
  for (auto* box : {as_sweep_, sweep_hyperband_}) {
    connect(box, &QCheckBox::toggled, this, [this, recheck_all] {
      update_visibility();
      recheck_all();
    });
  }
  connect(sweep_method_, &QComboBox::currentIndexChanged, this, [this] { update_visibility(); });
  connect(launch_now_, &QCheckBox::toggled, this, recheck_all);
  connect(path_, &QLineEdit::textChanged, this, [this] { update_summary(); });

  show_answers(answers);
  path_->setText(config_path);
  resize(760, 620);
}

namespace {

// Selects the item whose value is `value`, adding it first when the list lacks it: an opened file's FSDP or fp8 is
// kept, not replaced (shown as the file writes it).
void choose(QComboBox* box, const QString& value) {
  if (box->findData(value) < 0) box->addItem(value, value);
  box->setCurrentIndex(box->findData(value));
}

}  // namespace

void SetupWizard::show_answers(const app::SetupAnswers& a) {
  using Where = app::SetupAnswers::Where;
  (a.where == Where::Ssh         ? ssh_
   : a.where == Where::SageMaker ? sagemaker_
   : a.where == Where::Slurm     ? slurm_
                                 : local_)
      ->setChecked(true);
  if (a.where == Where::SageMaker) {
    choose(sagemaker_type_, QString::fromStdString(a.distributed_type));
  } else {
    choose(distributed_type_, QString::fromStdString(a.distributed_type));
  }
  machines_->setValue(a.num_machines);
  machine_rank_->setValue(a.machine_rank);
  main_ip_->setText(a.main_process_ip);
  main_port_->setText(QString::number(a.main_process_port));
  same_network_->setChecked(a.same_network);
  hosts_->setText(a.hosts.join(", "));
  processes_->setValue(a.processes_per_machine);
  region_->setText(QString::fromStdString(a.region));
  role_->setText(QString::fromStdString(a.iam_role_name));
  profile_->setText(QString::fromStdString(a.profile));
  image_->setText(QString::fromStdString(a.image_uri));
  instance_type_->setText(QString::fromStdString(a.ec2_instance_type));
  instances_->setValue(a.num_machines);
  partition_->setText(a.slurm.partition);
  nodes_->setValue(a.num_machines);
  tasks_per_node_->setValue(a.processes_per_machine);
  time_limit_->setText(a.slurm.time);
  account_->setText(a.slurm.account);
  qos_->setText(a.slurm.qos);
  gres_->setText(a.slurm.gres);
  sbatch_options_->setText(a.slurm.extra.join(' '));
  job_folder_->setText(a.slurm.directory);
  submit_from_->setText(a.launch_on);
  inputs_->setText(QString::fromStdString(a.inputs_file));
  metrics_->setText(QString::fromStdString(a.metrics_file));
  use_cpu_->setChecked(a.use_cpu);
  gpu_ids_->setText(QString::fromStdString(a.gpu_ids));
  choose(precision_, QString::fromStdString(a.mixed_precision));
  accumulation_->setValue(a.gradient_accumulation_steps);
  program_->setText(a.program);
  arguments_->setText(app::shell_quote(a.arguments));
  directory_->setText(a.working_directory);
  QStringList environment;
  for (const auto& [name, value] : a.environment) environment << name + "=" + value;
  environment_->setPlainText(environment.join('\n'));
  max_restarts_->setValue(a.max_restarts);
  run_name_->setText(a.run_name);
  hang_timeout_->setValue(a.hang_timeout);
  update_visibility();
}

app::SetupAnswers SetupWizard::answers() const {
  using Where = app::SetupAnswers::Where;
  app::SetupAnswers a = start_;
  a.where = ssh_->isChecked()         ? Where::Ssh
            : sagemaker_->isChecked() ? Where::SageMaker
            : slurm_->isChecked()     ? Where::Slurm
                                      : Where::Local;
  if (a.where == Where::SageMaker) {
    a.distributed_type = value_of(sagemaker_type_).toStdString();
    a.num_machines = instances_->value();
  } else if (a.where == Where::Slurm) {
    a.num_machines = nodes_->value();
  } else {
    a.distributed_type = value_of(distributed_type_).toStdString();
    a.num_machines = machines_->value();
  }
  a.machine_rank = machine_rank_->value();
  a.main_process_ip = main_ip_->text().trimmed();
  a.main_process_port = main_port_->text().trimmed().toInt();
  a.same_network = same_network_->isChecked();
  a.hosts = app::split_host_list(hosts_->text());
  a.processes_per_machine = a.where == Where::Slurm ? tasks_per_node_->value() : processes_->value();
  a.slurm.partition = partition_->text().trimmed();
  a.slurm.time = time_limit_->text().trimmed();
  a.slurm.account = account_->text().trimmed();
  a.slurm.qos = qos_->text().trimmed();
  a.slurm.gres = gres_->text().trimmed();
  a.slurm.extra = sbatch_options_->text().split(' ', Qt::SkipEmptyParts);
  a.slurm.directory = job_folder_->text().trimmed();
  a.launch_on = submit_from_->text().trimmed();
  a.region = region_->text().trimmed().toStdString();
  a.iam_role_name = role_->text().trimmed().toStdString();
  a.profile = profile_->text().trimmed().toStdString();
  a.image_uri = image_->text().trimmed().toStdString();
  a.ec2_instance_type = instance_type_->text().trimmed().toStdString();
  a.inputs_file = inputs_->text().trimmed().toStdString();
  a.metrics_file = metrics_->text().trimmed().toStdString();
  a.use_cpu = a.where != Where::SageMaker && use_cpu_->isChecked();
  a.gpu_ids = gpu_ids_->text().trimmed().toStdString();
  a.mixed_precision = value_of(precision_).toStdString();
  a.gradient_accumulation_steps = accumulation_->value();
  a.max_restarts = max_restarts_->value();
  a.hang_timeout = hang_timeout_->value();
  a.run_name = run_name_->text().trimmed();
  a.program = program_->text().trimmed();
  try {
    a.arguments = app::shell_split(arguments_->text());
  } catch (const std::invalid_argument&) {
    a.arguments.clear();  // the page does not let an unterminated quote through
  }
  a.working_directory = directory_->text().trimmed();
  try {
    a.environment = app::parse_environment(environment_->toPlainText());
  } catch (const std::exception&) {
    a.environment.clear();
  }
  return a;
}

void SetupWizard::set_config_path(const QString& path) { path_->setText(path); }

QString SetupWizard::config_path() const {
  // Absolute: the launcher runs in the run's working directory, not the Studio's.
  const QString path = path_->text().trimmed();
  return path.isEmpty() ? path : QFileInfo(path).absoluteFilePath();
}

app::RunConfig SetupWizard::config() const {
  const auto& base = base_ && base_->sagemaker() == sagemaker_->isChecked() ? &*base_ : nullptr;
  return answers().to_config(config_path().toStdString(), base);
}

app::LaunchRequest SetupWizard::launch_request() const {
  auto request = answers().launch_request(config_path());
  request.history = history_;
  return request;
}

void SetupWizard::set_history(const QString& history_path) {
  history_ = history_path == app::RunService::default_history_path() ? QString() : history_path;
  update_summary();
}

bool SetupWizard::launch_now() const { return launch_now_->isChecked(); }
void SetupWizard::set_launch_now(bool launch) { launch_now_->setChecked(launch); }

bool SetupWizard::sweep() const { return as_sweep_->isChecked(); }

app::SweepForm SetupWizard::sweep_form() const {
  app::SweepForm form;
  form.name = sweep_name_->text().trimmed();
  form.method = value_of(sweep_method_);
  form.metric = sweep_metric_->text().trimmed();
  form.goal = value_of(sweep_goal_);
  form.count = sweep_count_->value();
  form.parallel = sweep_parallel_->value();
  form.seed = static_cast<uint64_t>(sweep_seed_->value());
  form.hyperband = sweep_hyperband_->isChecked();
  form.min_iter = sweep_min_iter_->value();
  try {
    form.parameters = app::SweepForm::parse_parameters(sweep_parameters_->toPlainText());
  } catch (const std::invalid_argument&) {
    form.parameters.clear();  // the page says what is wrong and does not let it through
  }
  return form;
}

void SetupWizard::set_sweep(const app::SweepForm& form) {
  as_sweep_->setChecked(true);
  sweep_name_->setText(form.name);
  choose(sweep_method_, form.method);
  sweep_metric_->setText(form.metric);
  choose(sweep_goal_, form.goal);
  sweep_count_->setValue(static_cast<int>(form.count));
  sweep_parallel_->setValue(form.parallel);
  sweep_seed_->setValue(static_cast<int>(form.seed));
  sweep_hyperband_->setChecked(form.hyperband);
  sweep_min_iter_->setValue(static_cast<int>(form.min_iter));
  sweep_parameters_->setPlainText(app::SweepForm::parameters_text(form.parameters));
  update_visibility();
}

QString SetupWizard::sweep_path() const {
  const QString path = sweep_path_->text().trimmed();
  if (!path.isEmpty()) return QFileInfo(path).absoluteFilePath();
  // Beside the configuration, named after the sweep.
  const QString config = config_path();
  const QString folder = config.isEmpty() ? QDir::currentPath() : QFileInfo(config).absolutePath();
  return QDir(folder).filePath(sweep_form().sweep_name(answers().program) + ".sweep.yaml");
}

app::SweepLaunch SetupWizard::sweep_launch() const { return sweep_form().launch(sweep_path(), launch_request()); }

int SetupWizard::nextId() const {
  switch (currentId()) {
    case WherePage:
      return target_page();
    case MachinesPage:
    case SageMakerPage:
    case SlurmPage:
      return TrainingPage;
    case TrainingPage:
      return ProgramPage;
    case ProgramPage:
      return as_sweep_->isChecked() ? SweepPage : SummaryPage;
    case SweepPage:
      return SummaryPage;
    default:
      return -1;
  }
}

int SetupWizard::target_page() const {
  if (sagemaker_->isChecked()) return SageMakerPage;
  return slurm_->isChecked() ? SlurmPage : MachinesPage;
}

void SetupWizard::update_visibility() {
  auto* machines = static_cast<Page*>(page(MachinesPage));
  const bool ssh = ssh_->isChecked();
  const bool several = !ssh && machines_->value() > 1;
  machines->show_row(hosts_, ssh);
  machines->show_row(machines_, !ssh);
  machines->show_row(machine_rank_, several);
  machines->show_row(main_ip_, several);
  machines->show_row(main_port_, several || ssh);
  machines->show_row(same_network_, several);
  machines->show_row(distributed_type_, !ssh);
  // One device rule with the file written (SetupAnswers::to_config): several processes on CPUs or on GPUs decide
  // "CPU only" here; on SSH and Slurm it decides the kind of run, and does not start from this machine's hardware.
  const QString kind = value_of(distributed_type_);
  const bool remote = ssh || slurm_->isChecked();
  {
    const QSignalBlocker quiet(use_cpu_);
    if (!remote && kind != "NO") {
      use_cpu_->setChecked(kind == "MULTI_CPU");
    } else if (!use_cpu_chosen_) {
      use_cpu_->setChecked(remote ? false : start_.use_cpu);
    }
  }
  use_cpu_->setEnabled(remote || kind == "NO");
  use_cpu_->setToolTip(use_cpu_->isEnabled() ? tr("Every process computes on CPUs (Gloo between processes)")
                                             : tr("Set by the kind of run (Machines page)"));
  auto* training = static_cast<Page*>(page(TrainingPage));
  training->show_row(use_cpu_, !sagemaker_->isChecked());
  training->show_row(gpu_ids_, !sagemaker_->isChecked() && !use_cpu_->isChecked());
  static_cast<Page*>(page(SummaryPage))->form()->setRowVisible(sbatch_script_->parentWidget(), slurm_->isChecked());
  static_cast<Page*>(page(SummaryPage))->form()->setRowVisible(target_yaml_, !answers().target().empty());
  auto* sweep = static_cast<Page*>(page(SweepPage));
  const bool random = value_of(sweep_method_) == "random";
  sweep->show_row(sweep_seed_, random);
  sweep->show_row(sweep_min_iter_, sweep_hyperband_->isChecked());
  auto* summary = static_cast<Page*>(page(SummaryPage));
  summary->show_row(sweep_path_->parentWidget(), as_sweep_->isChecked());
  summary->form()->setRowVisible(sweep_yaml_->parentWidget(), as_sweep_->isChecked());
}

void SetupWizard::update_summary() {
  if (currentId() != SummaryPage) return;
  try {
    const auto now = answers();
    yaml_->setPlainText(QString::fromStdString(config().to_yaml()));
    const auto target = now.target();
    target_yaml_->setPlainText(target.empty() ? QString()
                                              : "# " + app::LaunchTarget::path_for(config_path()) + "\n" +
                                                    target.to_yaml(config_path()));
    static_cast<Page*>(page(SummaryPage))->form()->setRowVisible(target_yaml_, !target.empty());
    auto request = launch_request();
    if (request.program.isEmpty()) request.program = "PROGRAM";
    command_->setText(request.command_line(app::spur_command()));
    if (as_sweep_->isChecked()) {
      // Beside the configuration, named after the sweep, until the user types a path of their own.
      if (!sweep_path_chosen_) {
        sweep_path_->clear();
        sweep_path_->setText(sweep_path());
      }
      const auto form = sweep_form();
      sweep_yaml_->setPlainText(form.to_yaml(request.program, request.arguments));
      command_->setText(sweep_launch().command_line(app::spur_command()));
    } else {
      sweep_yaml_->clear();
    }
    command_->setCursorPosition(0);  // the start (directory, configuration) says most
    summary_error_->clear();
    if (slurm_->isChecked()) {
      sbatch_script_->setPlainText(tr("Asking spur launch --dry_run for the script..."));
      // The preview's configuration is a temporary copy, with no target file beside it: the flags say it all.
      auto full = now.launch_request(config_path(), /*with_target=*/true);
      if (full.program.isEmpty()) full.program = "PROGRAM";
      preview_->ask(full, yaml_->toPlainText());
    }
  } catch (const std::exception& e) {
    yaml_->clear();
    command_->clear();
    sbatch_script_->clear();  // nothing would be submitted: no old script stays on show
    summary_error_->setText(QString::fromUtf8(e.what()));
  }
  static_cast<Page*>(page(SummaryPage))->recheck();
}

QString SetupWizard::first_problem() const {
  for (const int id : pageIds()) {
    // Of the pages after Where, only the chosen target's is answered (machines, SageMaker or Slurm).
    const bool target = id == MachinesPage || id == SageMakerPage || id == SlurmPage;
    if (target && id != target_page()) continue;
    if (id == SweepPage && !as_sweep_->isChecked()) continue;
    auto* p = static_cast<Page*>(page(id));
    p->touch_all();  // empty fields too: Finish was pressed
    if (const QString problem = p->problem(); !problem.isEmpty()) return p->title() + ": " + problem;
  }
  return {};
}

void SetupWizard::accept() {
  QString problem = first_problem();
  if (problem.isEmpty() && !save()) problem = summary_error_->text();
  if (!problem.isEmpty()) {
    // Window-modal, not a nested event loop: the wizard stays as it was, to be put right.
    auto* box = new QMessageBox(QMessageBox::Warning, windowTitle(), problem, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    return;
  }
  QWizard::accept();
}

bool SetupWizard::save() {
  try {
    // The target file first: a configuration never stands without the settings it is launched with.
    answers().target().save_for(config_path());
    config().save(config_path().toStdString());
    if (as_sweep_->isChecked()) {
      const auto request = launch_request();
      app::write_private_file(sweep_path().toStdString(),
                              sweep_form().to_yaml(request.program, request.arguments).toStdString());
    }
    return true;
  } catch (const std::exception& e) {
    summary_error_->setText(tr("Not saved: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
}

}  // namespace spur::studio
