#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ported programs of examples/ported, as a user builds them: Spur installed into a fresh prefix, each port
# configured out of tree with its own CMakeLists.txt (find_package(Spur), Spur::spur; no C++ standard added: the
# originals even ask for C++17), each original beside it against the same LibTorch. Then each runs on 1 process
# with the original's output, byte for byte, and on 2 processes (by hand, as torchrun starts them) ending with
# equal weights on both ranks: equal test-set lines (every rank evaluates the whole test set) or equal checkpoints.
# Every changed-line count named in docs/porting.md is checked against the diffs.
#   run.sh BUILD_DIR PORTED_DIR WORK_DIR
set -euo pipefail
build=$(realpath "$1") ported=$(realpath "$2") work=$(realpath -m "$3")
fail() { echo "ported: FAIL: $*" >&2; exit 1; }
step() { echo "ported: $*"; }
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
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
foreach(program mnist dcgan feedforward)
  target_link_libraries(\${program} \${TORCH_LIBRARIES})
endforeach()
CMAKE
step "build the originals"
configure "$work/originals-src" "$work/originals" "-DCMAKE_CXX_FLAGS=$argparse"
cmake --build "$work/originals" >"$work/originals.build.log" 2>&1 || { tail -40 "$work/originals.build.log"; fail "build the originals"; }
for port in mnist dcgan feedforward; do
  step "build the port of $port"
  configure "$ported/$port" "$work/port-$port" -DDOWNLOAD_MNIST=OFF "-DCMAKE_CXX_FLAGS=$argparse"
  cmake --build "$work/port-$port" >"$work/port-$port.build.log" 2>&1 ||
    { tail -40 "$work/port-$port.build.log"; fail "build the port of $port"; }
done

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
one() {  # name program data relative-path args...
  local dir
  dir=$(rundir "$work/run-$1" "$4")
  mkdir -p "$dir"
  place "$dir" "$3" "$4"
  (cd "$dir" && "$2" "${@:5}") >"$work/run-$1.out" 2>"$work/run-$1.err" ||
    { cat "$work/run-$1.err"; fail "$1 exited non-zero"; }
}
two() {  # name program data relative-path args...
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local rank started=()
  for rank in 0 1; do
    local dir
    dir=$(rundir "$work/run-$1-rank$rank" "$4")
    mkdir -p "$dir"
    place "$dir" "$3" "$4"
    (cd "$dir" && exec env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" WORLD_SIZE=2 RANK=$rank LOCAL_RANK=$rank \
       LOCAL_WORLD_SIZE=2 "$2" "${@:5}") >"$work/run-$1-rank$rank.out" 2>"$work/run-$1-rank$rank.err" &
    started+=($!)
    pids+=($!)
  done
  for rank in 0 1; do
    wait "${started[$rank]}" || { cat "$work/run-$1-rank$rank.err"; fail "$1 rank $rank exited non-zero"; }
  done
}
same_output() {  # name-a name-b
  cmp -s "$work/run-$1.out" "$work/run-$2.out" ||
    { diff "$work/run-$1.out" "$work/run-$2.out" | head -20; fail "$2 printed other output than $1"; }
}

step "mnist: 1 process (the original's output), 2 processes (equal test-set results)"
one mnist-original "$work/originals/mnist" "$work/data" data
one mnist-port "$work/port-mnist/mnist" "$work/data" data
same_output mnist-original mnist-port
two mnist-port "$work/port-mnist/mnist" "$work/data" data
tests() { grep -a 'Test set' "$work/run-$1.out" | tr -d '\r'; }
[ "$(tests mnist-port-rank0 | wc -l)" = 10 ] || fail "mnist rank 0 printed $(tests mnist-port-rank0 | wc -l) test lines, not 10"
[ "$(tests mnist-port-rank0)" = "$(tests mnist-port-rank1)" ] || fail "mnist: the ranks' test results differ"
[ "$(tests mnist-port-rank0)" != "$(tests mnist-port)" ] || fail "mnist: 2 processes trained as 1 (not sharded?)"

step "feedforward (pytorch-cpp): 1 process, 2 processes"
one ff-original "$work/originals/feedforward" "$work/data" ../../../../data/mnist
one ff-port "$work/port-feedforward/feedforward-neural-network" "$work/data" ../../../../data/mnist
same_output ff-original ff-port
two ff-port "$work/port-feedforward/feedforward-neural-network" "$work/data" ../../../../data/mnist
testset() { grep -a 'Testset' "$work/run-$1.out"; }
[ -n "$(testset ff-port-rank0)" ] && [ "$(testset ff-port-rank0)" = "$(testset ff-port-rank1)" ] ||
  fail "feedforward: the ranks' test results differ: $(testset ff-port-rank0) / $(testset ff-port-rank1)"

step "dcgan: 1 process, an epoch (the original's output), 2 processes (equal checkpoints at batch 200)"
one dcgan-original "$work/originals/dcgan" "$work/data" data --epochs 1
one dcgan-port "$work/port-dcgan/dcgan" "$work/data" data --epochs 1
same_output dcgan-original dcgan-port
two dcgan-port "$work/port-dcgan/dcgan" "$work/data" data --epochs 1
for file in generator-checkpoint.pt discriminator-checkpoint.pt dcgan-sample-1.pt; do
  [ -f "$work/run-dcgan-port-rank0/$file" ] || fail "dcgan wrote no $file"
  cmp -s "$work/run-dcgan-port-rank0/$file" "$work/run-dcgan-port-rank1/$file" || fail "dcgan: the ranks' $file differ"
done

step "the diffs and their line counts"
python3 "$here/check_diffs.py" "$ported" "$here/../../../docs/porting.md"
step "ok"
