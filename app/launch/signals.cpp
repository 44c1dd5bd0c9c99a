// SPDX-License-Identifier: Apache-2.0
// Signal names, held signals and counted signals (signals.h). A counted signal only bumps a counter: the loop
// that follows a job acts on it between calls.
#include "launch/signals.h"

#include <pthread.h>
#include <string.h>

#include <atomic>

namespace spur::app {
namespace {

constexpr int kHandled[3] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<int> signals_received{0};
std::atomic<int> last_signal{0};

void on_signal(int signal) {
  last_signal = signal;
  ++signals_received;
}

}  // namespace

QString signal_name(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name ? QString("SIG") + name : QString::number(signal);
}

HeldSignals::HeldSignals() {
  sigemptyset(&handled_);
  for (const int signal : kHandled) sigaddset(&handled_, signal);
  ::pthread_sigmask(SIG_BLOCK, &handled_, &caller_mask_);
}

HeldSignals::~HeldSignals() { ::pthread_sigmask(SIG_SETMASK, &caller_mask_, nullptr); }

int HeldSignals::take() {
  const timespec now{0, 0};
  siginfo_t info;
  return ::sigtimedwait(&handled_, &info, &now) > 0 ? info.si_signo : 0;
}

struct SignalCounter::Saved {
  struct sigaction previous[3];
};

SignalCounter::SignalCounter() : saved_(std::make_unique<Saved>()) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kHandled[i], &action, &saved_->previous[i]);
}

SignalCounter::~SignalCounter() {
  for (int i = 0; i < 3; ++i) ::sigaction(kHandled[i], &saved_->previous[i], nullptr);
}

int SignalCounter::count() { return signals_received; }
int SignalCounter::last() { return last_signal; }

}  // namespace spur::app
