// SPDX-License-Identifier: Apache-2.0
// The result of a QFuture in a test on the GUI thread, with the event loop running while it waits (a future whose
// work ends with a step on the GUI thread, as MainWindow::relaunch's, never finishes while the thread blocks in
// QFuture::result). `fallback` when it does not finish within `timeout_ms`.
#pragma once

#include <QDeadlineTimer>
#include <QFuture>
#include <QTest>

namespace spur::test {

template <typename T>
T future_result(QFuture<T> future, T fallback, int timeout_ms = 30000) {
  QDeadlineTimer deadline(timeout_ms);
  while (!future.isFinished() && !deadline.hasExpired()) QTest::qWait(10);
  return future.isFinished() ? future.result() : fallback;
}

/// An action's error ("" when done); "(not finished)" when it did not finish in time.
inline QString done(QFuture<QString> action, int timeout_ms = 30000) {
  return future_result(std::move(action), QString("(not finished)"), timeout_ms);
}

}  // namespace spur::test
