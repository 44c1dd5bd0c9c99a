// SPDX-License-Identifier: Apache-2.0
// spur::Scope: what `accumulate`, `no_sync` and `main_process_first` return; it undoes their effect when it
// goes out of scope, standing in for Python's `with` block. Keep it in a named variable.
#pragma once

#include <exception>
#include <functional>
#include <utility>

namespace spur {

class [[nodiscard]] Scope {
 public:
  Scope() = default;
  explicit Scope(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {}
  Scope(Scope&& other) noexcept : on_exit_(std::exchange(other.on_exit_, nullptr)), uncaught_(other.uncaught_) {}
  Scope& operator=(Scope&& other) {
    if (this != &other) {
      close();
      on_exit_ = std::exchange(other.on_exit_, nullptr);
      uncaught_ = other.uncaught_;
    }
    return *this;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // May throw (a barrier whose peer died): the error must reach the caller, not vanish. While another
  // exception unwinds the stack the exit action is skipped: the scope's body did not finish, so e.g.
  // main_process_first must not release the other ranks as if it had; they fail when this process exits.
  ~Scope() noexcept(false) {
    if (std::uncaught_exceptions() > uncaught_) {
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
};

}  // namespace spur
