// SPDX-License-Identifier: GPL-3.0-or-later
// OpenHistoryDialog: File > Open history: a history file on this machine (typed or browsed for) or one on another
// machine (ssh://[user@]host[:port]/path, read through `spur runs serve` over SSH), with the recently opened ones
// to pick from; and the recent list itself (QSettings "history/recent", newest first, at most 10).
// Threads: the GUI thread only; it reads nothing but the settings (the window that opens the history reads it).
#pragma once

#include <QDialog>
#include <QString>
#include <QStringList>

class QComboBox;
class QLabel;
class QSettings;

namespace spur::studio {

/// The histories opened lately, newest first.
QStringList recent_histories(const QSettings& settings);
/// `path` first in the recent list (once), the list cut to 10.
void remember_history(QSettings& settings, const QString& path);

class OpenHistoryDialog : public QDialog {
  Q_OBJECT

 public:
  /// Object names: "open_history_dialog", its field "history_location" (an editable list of the recent ones),
  /// "history_browse", and "history_problem" (what is wrong with what is typed).
  explicit OpenHistoryDialog(const QStringList& recent, QWidget* parent = nullptr);
  /// What was chosen: a file's whole path, or an ssh:// address as typed.
  QString location() const;
  /// Empty when `text` names a history that can be opened (a file, or a well-formed ssh:// address); otherwise why
  /// not, for a person.
  static QString problem(const QString& text);

 private:
  void check();
  QComboBox* location_;
  QLabel* problem_;
};

}  // namespace spur::studio
