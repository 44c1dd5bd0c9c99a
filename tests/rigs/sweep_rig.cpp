// SPDX-License-Identifier: Apache-2.0
// A training program for the sweep tests (no torch, starts fast), taking its flags as a sweep's ${args} writes them
// (examples/common/example_flags.h):
//   sweep_rig [--lr=X] [--steps=N] [--interval_ms=M] [--fail=True] [--other=...]
// Under `spur launch` (SPUR_RUN_ID) it logs "loss" at steps 0..N-1 into the run's history, one value every M ms:
// lr * (1 + 10 / (step + 1)), so that a smaller lr is better at every step (a synthetic metric Hyperband can rank).
// --fail=True exits 1 after the first step. SIGINT or SIGTERM end it with 130 (the launcher's stop).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <spur/history/writer.h>

#include "../../examples/common/example_flags.h"

namespace {
volatile sig_atomic_t got_signal = 0;
void on_signal(int signal) { got_signal = signal; }
}  // namespace

int main(int argc, char** argv) try {
  double lr = 0.1;
  int64_t steps = 10, interval_ms = 50;
  bool fail = false;
  ExampleFlags flags(argc, argv, "--lr X --steps N --interval_ms M --fail --batch_size B --optimizer NAME");
  while (flags.next()) {
    if (flags.is("--lr")) lr = flags.real();
    else if (flags.is("--steps")) steps = flags.integer(1);
    else if (flags.is("--interval_ms")) interval_ms = flags.integer(0);
    else if (flags.is("--fail")) fail = flags.on();
    else if (flags.is("--batch_size")) flags.integer(1);
    else if (flags.is("--optimizer")) flags.value();
    else flags.unknown();
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  const char* id = std::getenv("SPUR_RUN_ID");
  std::printf("sweep_rig lr=%g steps=%lld run=%s\n", lr, static_cast<long long>(steps), id ? id : "-");
  std::fflush(stdout);
  spur::history::HistoryWriter writer;
  const int64_t run = id ? std::atoll(id) : 0;
  for (int64_t step = 0; step < steps && !got_signal; ++step) {
    const double loss = lr * (1 + 10.0 / static_cast<double>(step + 1));
    const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (run > 0) writer.append_metrics(run, {{"loss", {{step, loss, wall}}}});
    if (fail) {
      std::fprintf(stderr, "sweep_rig: failing as asked (--fail)\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return got_signal ? 130 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sweep_rig: %s\n", e.what());
  return 2;
}
