// SPDX-License-Identifier: Apache-2.0
// Importing TensorBoard runs into the run history (`spur runs import PATH`, the Studio's File > Import): every
// folder at or below PATH that holds event files ("*tfevents*", TensorBoard's own rule) is one run. Its files are
// read whole, in name order (their names start with the time they were opened), before anything is written; a
// run is then written in one transaction, so a corrupt file leaves nothing of its run in the history. Scalars
// become series (the tag is the key), the hparams plugin's session start the run's parameters, its session end
// the status; other summaries (images, histograms, text) are counted and left out. A run whose files were
// imported before (same records, wherever they now lie), or a folder imported before whose files have changed
// since (a run still being written), is skipped and named unless asked again.
//
// Threads: import_tensorboard() blocks on file reads and the history; the Studio calls it on a worker thread.
#pragma once

#include <QString>
#include <QStringList>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spur::app {

struct TensorBoardImportOptions {
  /// The project the runs are filed under. Default: empty, meaning PATH's folder name.
  QString project;
  /// Import runs whose files were imported before once more. Default: false (they are skipped and named).
  bool again = false;
  /// Only these run folders (absolute, as ImportedRun::directory gives them); the others are passed over without a
  /// word. Default: empty, meaning every folder. (The Studio's "import again" of the folders skipped, under the
  /// same root, so they keep their names and project.)
  QStringList only;
  /// Asked before each run folder: true stops the import there (the runs imported so far stay, each whole).
  /// Default: none (every folder is imported).
  std::function<bool()> cancelled;
};

/// What became of one run folder.
struct ImportedRun {
  QString directory;     // absolute
  QString name;          // its run name: the path below PATH, or the folder's name when PATH is the run
  qint64 run = 0;        // the new run's id; 0 when skipped or failed
  qint64 earlier = 0;    // skipped: the run its files (or this folder's, before they changed) were imported as
  bool changed = false;  // skipped: the folder was imported before, and its files have changed since
  QString error;         // failed: why, naming the file and record
  bool empty = false;    // skipped: its event files hold no record yet
  uint64_t points = 0, series = 0, hparams = 0, other_values = 0;
};

/// The run folders at or below `path` (a folder, or one event file), sorted. Throws std::invalid_argument when
/// `path` does not exist or holds no event files.
QStringList tensorboard_run_directories(const QString& path);

/// Imports every run folder at or below `path` into the history at `history_path`; `done` is called after each
/// (for progress). Throws std::invalid_argument for a path with no event files, history::HistoryError when the
/// history cannot be written; a bad run folder is reported in its ImportedRun and the others are imported.
std::vector<ImportedRun> import_tensorboard(const std::string& history_path, const QString& path,
                                            const TensorBoardImportOptions& options = {},
                                            const std::function<void(const ImportedRun&)>& done = {});

/// One line for a person: "imported DIR as run 7 (3 series, 1200 points, 4 hyperparameters)", "DIR: already
/// imported as run 7", "DIR: imported as run 7 before, and its event files have changed since (a run still being
/// written?)", each followed by `again_hint` when skipped (the CLI's " (--again imports it again)"), or the error.
QString import_summary(const ImportedRun& run, const QString& again_hint = " (--again imports it again)");

}  // namespace spur::app
