// SPDX-License-Identifier: Apache-2.0
// spur::Scope: what `accumulate`, `no_sync` and `main_process_first` return; it undoes their effect when it
// goes out of scope, standing in for Python's `with` block. Keep it in a named variable.
//
// Two kinds of exit action. A restoring one (Scope::restoring: accumulate, no_sync) puts local state back and
// runs however the scope ends, also while an exception unwinds it, as Python's `with` runs `__exit__`: an error
// inside accumulate() must not leave gradient synchronisation off for the rest of the run. A completing one
// (the plain constructor: main_process_first's barrier) tells other ranks the body finished, so it is skipped
// while an exception unwinds the scope.
#pragma once

#include <exception>
#include <functional>
#include <utility>

namespace spur {

class [[nodiscard]] Scope {
 public:
  Scope() = default;
  /// A completing exit action: skipped when the scope ends by an exception.
  explicit Scope(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {}
  /// A restoring exit action: runs however the scope ends; it must not throw.
  static Scope restoring(std::function<void()> on_exit) {
    Scope scope(std::move(on_exit));
    scope.restoring_ = true;
    return scope;
  }
  Scope(Scope&& other) noexcept
      : on_exit_(std::exchange(other.on_exit_, nullptr)), uncaught_(other.uncaught_), restoring_(other.restoring_) {}
  Scope& operator=(Scope&& other) {
    if (this != &other) {
      close();
      on_exit_ = std::exchange(other.on_exit_, nullptr);
      uncaught_ = other.uncaught_;
      restoring_ = other.restoring_;
    }
    return *this;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // May throw (a barrier whose peer died): the error must reach the caller, not vanish. While another
  // exception unwinds the stack a completing action is skipped: the scope's body did not finish, so e.g.
  // main_process_first must not release the other ranks as if it had; they fail when this process exits. A
  // restoring action runs then too.
  ~Scope() noexcept(false) {
    if (!restoring_ && std::uncaught_exceptions() > uncaught_) {
      on_exit_ = nullptr;
      return;
    }
    close();
  }

  /// Ends the scope early; later calls do nothing.
  void close() {
    if (auto fn = std::exchange(on_exit_, nullptr)) fn();
  }

 private:
  std::function<void()> on_exit_;
  int uncaught_ = std::uncaught_exceptions();
  bool restoring_ = false;
};

}  // namespace spur
