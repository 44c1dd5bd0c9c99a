// SPDX-License-Identifier: Apache-2.0
// connect_handoff(): a worker's results to the GUI thread through a queue guarded by a std::mutex, in place of a
// queued connection's copy of the signal's arguments.
//
// A queued connection copies a signal's arguments into an event on the emitting thread and hands the event over
// through Qt's event queue, whose lock (a futex inside Debian's uninstrumented Qt) ThreadSanitizer cannot see; it
// sees only the eventfd write that wakes a sleeping thread, which Qt makes for the first event of a burst. The
// copies of Spur's own types (RunsSnapshot, CompareSnapshot, a SeriesLoader's deltas) are made by Spur's compiled
// code, so TSan reported the GUI thread's reads of them as races whenever a window was busy. Here the worker's
// signal is received on the worker's thread (a direct connection), its value copied into the queue under the
// mutex, and the GUI thread, woken by a queued call with no arguments, takes the values out under the same mutex:
// an order TSan sees, and the same values, in the same order, on the same thread as a queued connection gives. (In
// order per signal: a value emitted while a drain is pending goes with that drain, ahead of other queued signals
// the worker sent in between; and the slot is always called later, never within the emit.)
//
// Threads: the signal's sender on its worker thread; `receiver`, and the slot, on the thread it lives on. The queue
// outlives both ends: a value the worker hands over after `receiver` is gone is dropped, as a queued connection's
// event to a deleted receiver is.
#pragma once

#include <QObject>
#include <QPointer>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace spur::app {

namespace detail {

/// The receiving end: lives on the receiver's thread, a child of the receiver; drain() runs there.
class HandoffEnd : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  /// Queued by the worker's side (by name: the event is made inside Qt, with no argument of Spur's to copy).
  Q_INVOKABLE void drain() { deliver(); }

 protected:
  virtual void deliver() = 0;  // takes the values out and calls the slot with each (on this object's thread)
};

template <typename Value>
struct HandoffQueue {
  std::mutex mutex;
  std::vector<Value> values;
  bool scheduled = false;
  detail::HandoffEnd* end = nullptr;  // null once the receiver is gone; read and written under the mutex
};

template <typename Value, typename Slot>
class HandoffEndFor final : public HandoffEnd {
 public:
  HandoffEndFor(std::shared_ptr<HandoffQueue<Value>> queue, Slot slot, QObject* receiver)
      : HandoffEnd(receiver), queue_(std::move(queue)), slot_(std::move(slot)) {}
  ~HandoffEndFor() override {
    const std::lock_guard lock(queue_->mutex);
    queue_->end = nullptr;
  }

 protected:
  void deliver() override {
    std::vector<Value> values;
    {
      const std::lock_guard lock(queue_->mutex);
      values.swap(queue_->values);
      queue_->scheduled = false;
    }
    QPointer<QObject> alive(this);
    for (const auto& value : values) {
      slot_(value);
      if (!alive) return;  // the slot deleted the receiver
    }
  }

 private:
  std::shared_ptr<HandoffQueue<Value>> queue_;
  Slot slot_;
};

}  // namespace detail

/// Delivers each `signal` of `sender` (emitted on its worker thread) to `slot(value)` on `receiver`'s thread, in
/// order, as Qt::QueuedConnection would, through a mutex-guarded queue (above: why). `slot` is any callable taking
/// `const Value&`. Once `receiver` is gone, values are dropped; the connection itself lasts as long as `sender`.
template <typename Sender, typename Value, typename Slot>
QMetaObject::Connection connect_handoff(Sender* sender, void (Sender::*signal)(const Value&), QObject* receiver,
                                        Slot slot) {
  auto queue = std::make_shared<detail::HandoffQueue<Value>>();
  auto* end = new detail::HandoffEndFor<Value, Slot>(queue, std::move(slot), receiver);
  {
    // Under the mutex: the sender may already be running on its thread and read `end` there.
    const std::lock_guard lock(queue->mutex);
    queue->end = end;
  }
  return QObject::connect(
      sender, signal, sender,
      [queue](const Value& value) {
        Value copy = value;  // made before the lock: a snapshot can be large
        const std::lock_guard lock(queue->mutex);
        if (!queue->end) return;  // the receiver is gone
        queue->values.push_back(std::move(copy));
        if (!queue->scheduled) {  // one drain() takes every value queued before it runs
          queue->scheduled = true;
          QMetaObject::invokeMethod(queue->end, "drain", Qt::QueuedConnection);
        }
      },
      Qt::DirectConnection);
}

}  // namespace spur::app
