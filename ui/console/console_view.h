// SPDX-License-Identifier: GPL-3.0-or-later
// ConsoleView: one run's console lines (every rank's, as the launcher recorded them), filtered by rank and a
// host and search text, following new lines at the bottom unless paused; a banner says how the run ended. Thin over app::ConsoleModel.
#pragma once

#include <QWidget>

#include <set>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListView;

namespace spur::app {
class ConsoleModel;
}

namespace spur::studio {

class ConsoleView : public QWidget {
  Q_OBJECT

 public:
  explicit ConsoleView(QString history_path, QWidget* parent = nullptr);

  void set_run(qint64 run);
  /// Fetches new lines (called by the window's refresh timer).
  void refresh();
  app::ConsoleModel* model() const { return model_; }
  /// The line above the console: the run's status and exit code, and for a failed run the rank that failed
  /// with its last lines.
  QString banner() const;

 private:
  void filter_changed();
  void update_banner();

  app::ConsoleModel* model_;
  QListView* list_;
  QComboBox* ranks_;
  QComboBox* hosts_;
  QLabel* banner_;
  QLineEdit* search_;
  QCheckBox* follow_;
  std::set<int> known_ranks_;
  std::set<QString> known_hosts_;
  qint64 current_run_ = -1;
};

}  // namespace spur::studio
