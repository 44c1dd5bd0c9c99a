// SPDX-License-Identifier: GPL-3.0-or-later
// ConsoleView: one run's console lines (every rank's, as the launcher recorded them), filtered by rank and a
// host and search text, following new lines at the bottom unless paused; a banner says how the run ended. Thin over
// app::ConsoleModel.
#pragma once

#include <QColor>
#include <QPalette>
#include <QThread>
#include <QWidget>

#include <memory>
#include <mutex>
#include <optional>
#include <set>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListView;

namespace spur::app {
class ConsoleModel;
class ConsoleSource;
struct ConsoleBatch;
}  // namespace spur::app

namespace spur::studio {

class ConsoleView : public QWidget {
  Q_OBJECT

 public:
  explicit ConsoleView(const QString& history_path, QWidget* parent = nullptr);
  ~ConsoleView() override;

  void set_run(qint64 run);
  /// Fetches new lines (called by the window's refresh timer), read on the console's own thread.
  void refresh();
  app::ConsoleModel* model() const { return model_; }
  /// The line above the console: the run's status and exit code, and for a failed run the rank that failed
  /// with its last lines.
  QString banner() const;
  /// The banner's background and text for a status on a palette: the status' colour (red for failed, amber for
  /// stopped) washed over the window's, the text the palette's, or black or white where that reads better; none
  /// for other statuses.
  struct BannerColours {
    QColor background, text;
  };
  static std::optional<BannerColours> banner_colours(const QString& status, const QPalette& palette);
  /// WCAG 2's contrast ratio of two colours, 1 to 21 (body text wants 4.5).
  static double contrast_ratio(const QColor& a, const QColor& b);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void filter_changed();
  void received(const app::ConsoleBatch& batch);
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
  // The history is read on thread_ (a busy database never stalls painting); one read at a time.
  QThread thread_;
  QObject* worker_;
  std::unique_ptr<app::ConsoleSource> source_;
  bool in_flight_ = false;
  bool again_ = false;
  // A read's result, handed from thread_ to this one under a std::mutex rather than in a queued call's capture
  // (studio/handoff.h: the order TSan can see); take_batch() applies it. One slot is enough because one read is in
  // flight at a time (in_flight_).
  std::mutex batch_mutex_;
  std::unique_ptr<app::ConsoleBatch> batch_;
  Q_INVOKABLE void take_batch();
};

}  // namespace spur::studio
