// SPDX-License-Identifier: Apache-2.0
// The run service off the GUI thread; see run_actions.h.
#include "studio/run_actions.h"

#include <QPromise>

#include <memory>

#include "runs/run_service.h"

namespace spur::app {

RunActions::RunActions(QString history_path, QObject* parent)
    : QObject(parent), path_(std::move(history_path)), worker_(new QObject) {
  thread_.setObjectName("run actions");
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
}

RunActions::~RunActions() {
  // Queued behind the calls already made: they finish first.
  QMetaObject::invokeMethod(
      worker_, [thread = &thread_] { thread->quit(); }, Qt::QueuedConnection);
  thread_.wait();
}

QFuture<QString> RunActions::post(std::function<void(RunService&)> work) {
  auto promise = std::make_shared<QPromise<QString>>();
  QFuture<QString> future = promise->future();
  promise->start();
  QMetaObject::invokeMethod(
      worker_,
      [promise, work = std::move(work), path = path_.toStdString()] {
        QString error;
        try {
          RunService service(path, RemoteOptions::from_environment(false));
          work(service);
        } catch (const std::exception& e) {
          error = QString::fromUtf8(e.what());
          if (error.isEmpty()) error = "the history could not be changed";
          error[0] = error[0].toUpper();
          if (!error.endsWith('.')) error += '.';
        }
        promise->addResult(error);
        promise->finish();
      },
      Qt::QueuedConnection);
  return future;
}

QFuture<QString> RunActions::rename(qint64 run, const QString& name) {
  return post([run, name](RunService& service) { service.rename(run, name); });
}

QFuture<QString> RunActions::tag(qint64 run, const QString& tag, bool remove) {
  return post([run, tag, remove](RunService& service) { service.tag(run, tag, remove); });
}

QFuture<QString> RunActions::set_notes(qint64 run, const QString& notes) {
  return post([run, notes](RunService& service) { service.set_notes(run, notes); });
}

QFuture<QString> RunActions::stop(qint64 run) {
  return post([run](RunService& service) { service.stop(run); });
}

QFuture<QString> RunActions::remove(qint64 run) {
  return post([run](RunService& service) { service.remove(run); });
}

QFuture<QString> RunActions::export_metrics(qint64 run, const QString& file) {
  return post([run, file](RunService& service) { service.export_metrics(run, ExportFormat::csv, file); });
}

QFuture<QString> RunActions::export_config(qint64 run, const QString& file) {
  return post([run, file](RunService& service) { service.export_config(run, file); });
}

}  // namespace spur::app
