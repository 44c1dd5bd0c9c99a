// SPDX-License-Identifier: GPL-3.0-or-later
// ConsoleView: one run's console lines (every rank's, as the launcher recorded them), filtered by rank and a
// search text, following new lines at the bottom unless paused. Thin over app::ConsoleModel.
#pragma once

#include <QWidget>

#include <set>

class QCheckBox;
class QComboBox;
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

 private:
  void filter_changed();

  app::ConsoleModel* model_;
  QListView* list_;
  QComboBox* ranks_;
  QLineEdit* search_;
  QCheckBox* follow_;
  std::set<int> known_ranks_;
};

}  // namespace spur::studio
