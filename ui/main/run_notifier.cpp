// SPDX-License-Identifier: GPL-3.0-or-later
// Desktop notifications; see run_notifier.h. org.freedesktop.Notifications.Notify(app_name, replaces_id,
// app_icon, summary, body, actions, hints, expire_timeout), as the Desktop Notifications Specification gives it.
#include "main/run_notifier.h"

#include <QDBusMessage>
#include <QDBusPendingCall>
#include <QVariantMap>

namespace spur::studio {

RunNotifier::RunNotifier(QObject* parent) : QObject(parent) {}

int RunNotifier::update(const std::vector<RunState>& runs, bool window_active) {
  int announced = 0;
  std::map<qint64, QString> now;
  for (const auto& run : runs) {
    now[run.id] = run.status;
    const auto before = last_.find(run.id);
    const bool was_live = before != last_.end() && (before->second == "running" || before->second == "queued");
    const bool ended = run.status == "finished" || run.status == "failed" || run.status == "stopped";
    if (!was_live || !ended || window_active || !enabled_) continue;
    if (!bus_) bus_ = QDBusConnection::sessionBus();
    if (!bus_->isConnected()) continue;
    QString summary = QString("Run %1 %2").arg(run.id).arg(run.status);
    QString body = run.name;
    if (run.exit_code) body += QString(": exit code %1").arg(*run.exit_code);
    auto call = QDBusMessage::createMethodCall("org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                               "org.freedesktop.Notifications", "Notify");
    // Urgency (a byte): 1 normal, 2 critical for a failure.
    const QVariantMap hints{{"urgency", QVariant::fromValue(static_cast<uchar>(run.status == "failed" ? 2 : 1))},
                            {"desktop-entry", "dev.spur.Studio"}};
    call << QString("Spur Studio") << 0u << QString("dev.spur.Studio") << summary << body << QStringList() << hints
         << -1;
    bus_->asyncCall(call);  // the reply (an id) is not needed
    ++announced;
    ++sent_;
  }
  last_ = std::move(now);
  return announced;
}

}  // namespace spur::studio
