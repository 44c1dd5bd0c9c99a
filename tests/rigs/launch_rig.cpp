// SPDX-License-Identifier: Apache-2.0
// A rank that behaves on cue, for the launcher's tests (no torch, starts fast):
//   launch_rig [--pids DIR] [--lines N] [--fail_rank R] [--code C] [--sleep S] [--ignore_term] [--env_var NAME]
// Prints "hello from rank R of W" and its variables (and NAME=value for each --env_var), writes DIR/rank<R>.pid, prints
// N lines, then the failing rank exits with C while the others sleep S seconds (SIGTERM/SIGINT end them unless
// --ignore_term).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

volatile sig_atomic_t got_signal = 0;
void on_signal(int signal) { got_signal = signal; }

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

int main(int argc, char** argv) {
  std::string pids;
  int lines = 0, fail_rank = -1, code = 3;
  double sleep_seconds = 0;
  bool ignore_term = false;
  std::string shown;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--pids") pids = next();
    else if (arg == "--lines") lines = std::stoi(next());
    else if (arg == "--fail_rank") fail_rank = std::stoi(next());
    else if (arg == "--code") code = std::stoi(next());
    else if (arg == "--sleep") sleep_seconds = std::stod(next());
    else if (arg == "--ignore_term") ignore_term = true;
    else if (arg == "--env_var") {
      const std::string name = next();
      shown += name + "=" + env(name.c_str()) + "\n";
    } else std::printf("argument: %s\n", arg.c_str());
  }
  const int rank = std::atoi(env("RANK"));
  if (ignore_term) {
    signal(SIGTERM, SIG_IGN);
  } else {
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
  }
  std::printf("hello from rank %d of %s (local %s of %s, machine %s) at %s:%s threads %s precision %s\n", rank,
              env("WORLD_SIZE"), env("LOCAL_RANK"), env("LOCAL_WORLD_SIZE"), env("GROUP_RANK"), env("MASTER_ADDR"),
              env("MASTER_PORT"), env("OMP_NUM_THREADS"), env("SPUR_MIXED_PRECISION"));
  std::fputs(shown.c_str(), stdout);
  std::fflush(stdout);
  if (!pids.empty()) std::ofstream(pids + "/rank" + std::to_string(rank) + ".pid") << getpid() << "\n";
  for (int i = 0; i < lines; ++i) std::printf("rank %d line %d\n", rank, i);
  std::fflush(stdout);
  if (rank == fail_rank) {
    std::fprintf(stderr, "rank %d is failing on cue\n", rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return code;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(sleep_seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (got_signal) {
      std::printf("rank %d stopping on signal %d\n", rank, static_cast<int>(got_signal));
      std::fflush(stdout);
      return 128 + got_signal;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (sleep_seconds > 0) std::printf("rank %d done\n", rank);
  return 0;
}
