// SPDX-License-Identifier: GPL-3.0-or-later
// SetupWizard: Accelerate's configuration questions as wizard pages (where, machines or Slurm or SageMaker,
// precision, program), each field checked as it is typed; the last page shows the YAML to be written, the headless
// `spur launch` and, for a Slurm cluster, the sbatch script it will submit (asked of `spur launch --dry_run`).
// Asked for on the program's page, a Sweep page (app::SweepForm: parameters with values or ranges, method, metric
// and goal, runs at a time) makes the run a sweep: the W&B sweep file it writes is shown, saved beside the
// configuration, and launched with `spur sweep run`.
#pragma once

#include <QWizard>

#include <functional>
#include <optional>

#include "config/run_config.h"
#include "setup/setup_answers.h"
#include "sweep/sweep_form.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QRadioButton;
class QSpinBox;

namespace spur::app {
class SlurmScriptPreview;
}

namespace spur::studio {

class SetupWizard : public QWizard {
  Q_OBJECT

 public:
  enum PageId { WherePage, MachinesPage, SageMakerPage, SlurmPage, TrainingPage, ProgramPage, SweepPage, SummaryPage };

  /// Starts from `answers`; `base` (an opened file) keeps the keys the questions do not cover (FSDP, DeepSpeed...).
  SetupWizard(const app::SetupAnswers& answers, const QString& config_path, std::optional<app::RunConfig> base = {},
              QWidget* parent = nullptr);

  /// The answers as the fields hold them now.
  app::SetupAnswers answers() const;
  QString config_path() const;
  /// What "Save as" offers (File > New offers a name no file has).
  void set_config_path(const QString& path);
  /// The configuration the fields make, or ConfigError.
  app::RunConfig config() const;
  /// The launch of the saved configuration (its target file holds the hosts, Slurm settings...), into the history
  /// set_history named.
  app::LaunchRequest launch_request() const;
  /// The history the Studio shows: launches record there, and the headless command names it (--history) unless it
  /// is the default one.
  void set_history(const QString& history_path);
  /// The user asked to launch the run when the file is saved.
  bool launch_now() const;
  void set_launch_now(bool launch);

  /// A sweep was asked for (the program page's "as a sweep"): Finish saves its file too, and launch_now launches it.
  bool sweep() const;
  /// The Sweep page's answers; set_sweep fills the page (and ticks "as a sweep").
  app::SweepForm sweep_form() const;
  void set_sweep(const app::SweepForm& form);
  /// Where the sweep file is saved. Default: beside the configuration, NAME.sweep.yaml.
  QString sweep_path() const;
  /// `spur sweep run` of the saved sweep file with the saved configuration, into set_history's history.
  app::SweepLaunch sweep_launch() const;

  int nextId() const override;
  /// Finish, from any page: every question's field must be fine (else it says which), then the file is saved.
  void accept() override;
  /// "Page: what is wrong" for the first field that is not fine, over every page that applies.
  QString first_problem() const;

 private:
  class Page;
  Page* new_page(const QString& title, const QString& subtitle);
  void show_answers(const app::SetupAnswers& answers);
  void update_visibility();
  void update_summary();
  bool save();
  /// The page after Where for the target chosen there.
  int target_page() const;

  std::optional<app::RunConfig> base_;
  app::SetupAnswers start_;
  QString history_;  // empty: the default history
  // Where
  QRadioButton *local_, *ssh_, *sagemaker_, *slurm_;
  // Machines
  QComboBox* distributed_type_;
  QSpinBox *machines_, *machine_rank_, *processes_;
  QLineEdit *main_ip_, *main_port_, *hosts_;
  QCheckBox* same_network_;
  // SageMaker
  QLineEdit *region_, *role_, *profile_, *image_, *instance_type_, *inputs_, *metrics_;
  QSpinBox* instances_;
  QComboBox* sagemaker_type_;
  // Slurm
  QPlainTextEdit* target_yaml_ = nullptr;
  QLineEdit *partition_, *time_limit_, *account_, *qos_, *gres_, *sbatch_options_, *job_folder_;
  QLineEdit* submit_from_;  // the login node spur launch runs on (--on); empty: this machine
  QSpinBox *nodes_, *tasks_per_node_;
  // Training
  QCheckBox* use_cpu_;
  QLineEdit* gpu_ids_;
  QComboBox* precision_;
  QSpinBox* accumulation_;
  // Program
  QLineEdit *program_, *arguments_, *directory_;
  QPlainTextEdit* environment_;
  QSpinBox* max_restarts_;
  QSpinBox* hang_timeout_;
  QLineEdit* run_name_;
  QCheckBox* as_sweep_;
  // Sweep
  QLineEdit *sweep_name_, *sweep_metric_;
  QComboBox *sweep_method_, *sweep_goal_;
  QPlainTextEdit* sweep_parameters_;
  QSpinBox *sweep_count_, *sweep_parallel_, *sweep_seed_, *sweep_min_iter_;
  QCheckBox* sweep_hyperband_;
  QLabel* sweep_runs_;
  // Summary
  QLineEdit *path_, *command_;
  QPlainTextEdit* yaml_;
  QLabel* summary_error_;
  QPlainTextEdit* sbatch_script_;  // Slurm: the script the launch submits
  QLineEdit* sweep_path_;
  bool sweep_path_chosen_ = false;
  // "CPU only" clicked by the user, or read from a file: no longer follows the target (remote machines' GPUs are not
  // this machine's: unticked for SSH and Slurm, this machine's default here).
  bool use_cpu_chosen_ = false;  // typed or browsed by the user: no longer follows the configuration's folder
  QPlainTextEdit* sweep_yaml_;   // a sweep: the file it saves
  app::SlurmScriptPreview* preview_;
  QCheckBox* launch_now_;
};

}  // namespace spur::studio
