#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ported programs of examples/ported, as a user builds them: Spur installed into a fresh prefix, each port
# configured out of tree with its own CMakeLists.txt (find_package(Spur), Spur::spur; no C++ standard added: the
# originals even ask for C++17), each original beside it against the same LibTorch. Then each runs on 1 process
# with the original's output, byte for byte (cut short: mnist's first epoch, dcgan's first 100 batches), and on
# 2 processes (by hand, as torchrun starts them) ending with equal weights on both ranks: equal test-set lines
# (every rank evaluates the whole test set) or equal checkpoints.
# pytorch-cpp's feedforward never seeds torch: both builds of it get seed.h forced in, the same seed before main.
# Every changed-line count named in docs/porting.md is checked against the diffs.
#   run.sh BUILD_DIR PORTED_DIR WORK_DIR
set -euo pipefail
build=$(realpath "$1") ported=$(realpath "$2") work=$(realpath -m "$3")
fail() { echo "ported: FAIL: $*" >&2; exit 1; }
step() { echo "ported: $*"; }
pids=()
# What it started, by PID, also on failure: the ranks, and the programs of both() (with their head) under the
# subshells it started.
cleanup() {
  for pid in "${pids[@]}"; do
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"

step "install into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
configure() {  # source build extra-args...
  local source=$1 out=$2
  shift 2
  cmake -S "$source" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$work/prefix" \
    "${launcher[@]}" -Wno-dev "$@" >"$out.configure.log" 2>&1 || { cat "$out.configure.log"; fail "configure $source"; }
}
argparse="-isystem $ported/dcgan/third_party"
# The originals: their sources with LibTorch only (the LibTorch the package was built against; its CMake set-up
# comes from Spur's package, which is how this machine's CUDA-build wheel links).
mkdir -p "$work/originals-src"
cat >"$work/originals-src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(originals CXX)
find_package(Spur REQUIRED)
add_executable(mnist $ported/mnist/original/mnist.cpp)
add_executable(dcgan $ported/dcgan/original/dcgan.cpp)
add_executable(feedforward $ported/feedforward/original/src/main.cpp $ported/feedforward/original/src/neural_net.cpp)
target_include_directories(feedforward PRIVATE $ported/feedforward/original/include)
target_compile_options(feedforward PRIVATE -include $here/seed.h)
foreach(program mnist dcgan feedforward)
  target_link_libraries(\${program} \${TORCH_LIBRARIES})
endforeach()
CMAKE
# Configured one after another, then built side by side: the originals (their three programs) beside the ports,
# one after another (a cold build is 6 torch translation units: one at a time they took 164 s of 2 cores).
step "configure the originals and the ports"
configure "$work/originals-src" "$work/originals" "-DCMAKE_CXX_FLAGS=$argparse"
for port in mnist dcgan feedforward; do
  seed=()
  [ "$port" = feedforward ] && seed=("-DCMAKE_PROJECT_INCLUDE=$here/seed.cmake")
  configure "$ported/$port" "$work/port-$port" -DDOWNLOAD_MNIST=OFF "-DCMAKE_CXX_FLAGS=$argparse" "${seed[@]}"
done
step "build the originals and the ports"
cmake --build "$work/originals" -j 2 >"$work/originals.build.log" 2>&1 &
originals=$!
pids+=("$originals")
for port in mnist dcgan feedforward; do
  cmake --build "$work/port-$port" -j 1 >"$work/port-$port.build.log" 2>&1 ||
    { tail -40 "$work/port-$port.build.log"; fail "build the port of $port"; }
done
wait "$originals" || { tail -40 "$work/originals.build.log"; fail "build the originals"; }

# Data: Debian's Fashion-MNIST in MNIST's files (torch's MNIST reader insists on 60,000 and 10,000 samples).
fashion=/usr/share/datasets/fashion-mnist
[ -f "$fashion/train-images-idx3-ubyte.gz" ] || fail "no $fashion (installer/debian-packages.txt: dataset-fashion-mnist)"
python3 "$here/make_mnist.py" "$fashion" "$work/data" 60000 10000
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT SPUR_HISTORY SPUR_RUN_ID SPUR_LAUNCH_ID
export OMP_NUM_THREADS=1

# run DIR DATA PROGRAM ARGS...: runs PROGRAM in DIR, where the program's own relative data path finds DATA.
place() {  # dir data relative-data-path
  mkdir -p "$1/$(dirname "$3")"
  ln -sfn "$2" "$1/$3"
}
# A relative data path climbing N folders (pytorch-cpp's ../../../../data/mnist) runs N folders deep, so that it
# stays inside the run's own folder.
rundir() {  # base relative-path
  local depth
  depth=$(grep -o '\.\./' <<<"$2" | wc -l)
  printf '%s' "$1"
  for ((i = 0; i < depth; i++)); do printf '/d%s' "$i"; done
}
# one NAME BYTES PROGRAM DATA RELATIVE-PATH ARGS...: the program's first BYTES bytes of output (all of it if it
# ends sooner); there the closed pipe stops it (SIGPIPE, 141) at its next line (line-buffered), as `program | head
# -c BYTES` does.
one() {
  local name=$1 bytes=$2 dir status
  shift 2
  dir=$(rundir "$work/run-$name" "$3")
  mkdir -p "$dir"
  place "$dir" "$2" "$3"
  set +o pipefail
  (cd "$dir" && exec stdbuf -oL "$1" "${@:4}") 2>"$work/run-$name.err" | head -c "$bytes" >"$work/run-$name.out"
  status=${PIPESTATUS[0]}
  set -o pipefail
  [ "$status" = 0 ] || [ "$status" = 141 ] || { cat "$work/run-$name.err"; fail "$name exited with $status"; }
}
# both BYTES NAME-A PROGRAM-A NAME-B PROGRAM-B DATA RELATIVE-PATH ARGS...: the original and its port at once, on
# one process each; their first BYTES bytes must be equal.
both() {
  local bytes=$1 a=$2 b=$4 first second
  one "$a" "$bytes" "$3" "${@:6}" &
  first=$!
  pids+=("$first")
  one "$b" "$bytes" "$5" "${@:6}" &
  second=$!
  pids+=("$second")
  wait "$first" || fail "$a failed"
  wait "$second" || fail "$b failed"
  [ -s "$work/run-$a.out" ] || fail "$a printed nothing"
  cmp -s "$work/run-$a.out" "$work/run-$b.out" ||
    { diff "$work/run-$a.out" "$work/run-$b.out" | head -20; fail "$b printed other output than $a"; }
}
# two NAME PATTERN COUNT PROGRAM DATA RELATIVE-PATH ARGS...: 2 ranks, started by hand as torchrun starts them, run
# until each has printed PATTERN COUNT times (line-buffered), then stopped.
two() {
  local name=$1 pattern=$2 count=$3
  shift 3
  local port rank started=()
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for rank in 0 1; do
    local dir
    dir=$(rundir "$work/run-$name-rank$rank" "$3")
    mkdir -p "$dir"
    place "$dir" "$2" "$3"
    (cd "$dir" && exec env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank \
       LOCAL_WORLD_SIZE=2 stdbuf -oL "$1" "${@:4}") >"$work/run-$name-rank$rank.out" \
      2>"$work/run-$name-rank$rank.err" &
    started+=($!)
    pids+=($!)
  done
  local deadline=$((SECONDS + 600)) reached
  while :; do
    reached=0
    for rank in 0 1; do
      if (($(grep -ac -- "$pattern" "$work/run-$name-rank$rank.out") >= count)); then
        reached=$((reached + 1))
      elif ! kill -0 "${started[$rank]}" 2>/dev/null &&
        (($(grep -ac -- "$pattern" "$work/run-$name-rank$rank.out") < count)); then  # (printed, then ended)
        cat "$work/run-$name-rank$rank.err"
        fail "$name rank $rank ended before printing '$pattern' $count times"
      fi
    done
    ((reached == 2)) && break
    ((SECONDS < deadline)) || fail "$name: no '$pattern' $count times on both ranks within 600 s"
    sleep 0.5
  done
  kill "${started[@]}" 2>/dev/null || true
  wait "${started[@]}" 2>/dev/null || true
}

# Each program's output is cut short (the full runs take minutes): mnist after the first of its 10 epochs, dcgan
# after 100 batches on 1 process (10 loss lines each of D and G, byte for byte) and 200 on 2 (its first checkpoint);
# pytorch-cpp's feedforward runs whole (5 epochs of a small MLP, seconds).
step "mnist: 1 process (the original's output for an epoch), 2 processes (equal test-set results)"
both 6000 mnist-original "$work/originals/mnist" mnist-port "$work/port-mnist/mnist" "$work/data" data
tests() { grep -a 'Test set' "$work/run-$1.out" | tr -d '\r' | head -1; }
[ "$(tests mnist-port | wc -l)" = 1 ] || fail "mnist printed no test line in 6000 bytes"
two mnist-port 'Test set' 1 "$work/port-mnist/mnist" "$work/data" data
[ "$(tests mnist-port-rank0)" = "$(tests mnist-port-rank1)" ] || fail "mnist: the ranks' test results differ"
[ "$(tests mnist-port-rank0)" != "$(tests mnist-port)" ] || fail "mnist: 2 processes trained as 1 (not sharded?)"

step "feedforward (pytorch-cpp): 1 process, 2 processes"
both 100000 ff-original "$work/originals/feedforward" ff-port "$work/port-feedforward/feedforward-neural-network" \
  "$work/data" ../../../../data/mnist
grep -q 'Testset' "$work/run-ff-port.out" || fail "feedforward did not finish: $(tail -3 "$work/run-ff-port.out")"
two ff-port 'Testset' 1 "$work/port-feedforward/feedforward-neural-network" "$work/data" ../../../../data/mnist
testset() { grep -a 'Testset' "$work/run-$1.out"; }
[ "$(testset ff-port-rank0)" = "$(testset ff-port-rank1)" ] ||
  fail "feedforward: the ranks' test results differ: $(testset ff-port-rank0) / $(testset ff-port-rank1)"

step "dcgan: 1 process (the original's output for 100 batches), 2 processes (equal checkpoints at batch 200)"
both 600 dcgan-original "$work/originals/dcgan" dcgan-port "$work/port-dcgan/dcgan" "$work/data" data --epochs 1
grep -aq '\[100/938\]' "$work/run-dcgan-port.out" || fail "dcgan printed no batch 100 in 600 bytes"
two dcgan-port '-> checkpoint 2' 1 "$work/port-dcgan/dcgan" "$work/data" data --epochs 1
for file in generator-checkpoint.pt discriminator-checkpoint.pt dcgan-sample-1.pt; do
  [ -f "$work/run-dcgan-port-rank0/$file" ] || fail "dcgan wrote no $file"
  cmp -s "$work/run-dcgan-port-rank0/$file" "$work/run-dcgan-port-rank1/$file" || fail "dcgan: the ranks' $file differ"
done

step "the diffs and their line counts"
python3 "$here/check_diffs.py" "$ported" "$here/../../../docs/porting.md" "$here/../../../README.md"
step "ok"
