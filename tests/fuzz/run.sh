#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the fuzz targets (tests/fuzz/CMakeLists.txt: clang, libFuzzer, ASan + UBSan, no LibTorch) into
# build-fuzz/ and runs each for SECONDS (default 60) from its seed corpus in tests/fuzz/corpus/TARGET. What the
# fuzzers find on the way stays in a scratch corpus; a crash stops the run, leaves its input under
# build-fuzz/artifacts/ and fails. Replay one input: build-fuzz/fuzz_TARGET FILE.
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]      explore: a new random seed each time
#        tests/fuzz/run.sh --ci [SECONDS] [TARGET...]  CI: replays every seed and regression input of the corpus
#                                                       under ASan/UBSan, then explores SECONDS per target (default
#                                                       0: replay only) from a new seed; any crash fails the run
set -euo pipefail
cd "$(dirname "$0")/../.."
ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
  explore=0
  if [[ "${1:-}" =~ ^[0-9]+$ ]]; then explore=$1; shift; fi
  seconds=180  # only a guard for the replay: the corpus's fixed inputs end each target long before
else
  seconds=${1:-60}
  shift || true
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config hostfile stream_line json history_chunk launch_arguments safetensors_header safetensors_index history_answer
                                 tensorboard_events checkpoint_state sweep)
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz
mkdir -p build-fuzz/artifacts
status=0
for target in "${targets[@]}"; do
  scratch=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$target/." "$scratch/"
  budget=(-max_total_time="$seconds")
  if [ "$ci" = 1 ]; then
    budget+=(-runs=0)
    echo "fuzz_$target: replaying $(ls "tests/fuzz/corpus/$target" | wc -l) corpus file(s)"
  else
    echo "fuzz_$target: ${seconds} s from $(ls "tests/fuzz/corpus/$target" | wc -l) seed file(s)"
  fi
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "build-fuzz/fuzz_$target" "${budget[@]}" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
      -artifact_prefix="build-fuzz/artifacts/$target-" -print_final_stats=1 "$scratch" 2>"build-fuzz/$target.log"; then
    echo "fuzz_$target FAILED: see build-fuzz/$target.log and build-fuzz/artifacts/"
    tail -40 "build-fuzz/$target.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov: " "build-fuzz/$target.log" | tail -2 | tr '\n' ' '
    echo
  fi
  if [ "$ci" = 1 ] && [ "$explore" -gt 0 ] && [ "$status" = 0 ]; then
    echo "fuzz_$target: exploring ${explore} s"
    if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "build-fuzz/fuzz_$target" -max_total_time="$explore" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
        -artifact_prefix="build-fuzz/artifacts/$target-" -print_final_stats=1 "$scratch" 2>"build-fuzz/$target.log"; then
      echo "fuzz_$target FOUND A CRASH: its input is in build-fuzz/artifacts/; add it to tests/fuzz/corpus/$target" \
           "as regression-NAME with a test, and fix it (tests/fuzz/README.md)"
      tail -40 "build-fuzz/$target.log"
      status=1
    else
      grep -E "stat::number_of_executed_units" "build-fuzz/$target.log" | tail -1
    fi
  fi
  rm -rf "$scratch"
done
exit $status
