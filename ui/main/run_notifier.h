// SPDX-License-Identifier: GPL-3.0-or-later
// RunNotifier: a desktop notification (the freedesktop Notifications service, over the D-Bus session bus) when
// a run fails, stops or finishes while the Studio's window is not focused, as a browser tab does when its job is
// done. Off in View > Notify when runs end (kept between sessions). Runs that ended before the Studio saw them
// running are not announced. The call is asynchronous: the GUI thread never waits on the bus, and without a bus
// or a notification service nothing happens. The session bus is connected to when the first notification is due,
// not before: a window that never notifies starts no D-Bus thread.
#pragma once

#include <QDBusConnection>
#include <QObject>
#include <QString>

#include <map>
#include <optional>
#include <vector>

namespace spur::studio {

struct RunState {
  qint64 id = 0;
  QString name;
  QString status;  // effective status
  std::optional<int> exit_code;
};

class RunNotifier : public QObject {
  Q_OBJECT

 public:
  /// Notifies over the session bus, connected when the first notification is due.
  explicit RunNotifier(QObject* parent = nullptr);

  /// Notifies over another bus from now on (a test's own).
  void set_bus(QDBusConnection bus) { bus_ = std::move(bus); }
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  /// The runs as of a read of the history. A run seen queued or running before and ended now is announced,
  /// unless `window_active` or the notifier is off. Returns how many were announced.
  int update(const std::vector<RunState>& runs, bool window_active);
  /// Notifications sent so far.
  int sent() const { return sent_; }

 private:
  std::optional<QDBusConnection> bus_;  // none until the first notification (or set_bus)
  bool enabled_ = true;
  int sent_ = 0;
  std::map<qint64, QString> last_;  // each run's status at the last update
};

}  // namespace spur::studio
