#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Set-up for a fresh Debian 12 machine, run as root from a clone:
#   installer/setup.sh studio install what is missing, build what the Studio opens (spur-studio, spur, the example),
#                             open Spur Studio on the demo workspace (its first run trains in the window)
#   installer/setup.sh run    install what is missing, build, run the main job (the bundled example, 2 processes)
#   installer/setup.sh test   install what is missing, build the wheel tree and the sanitizer trees, run every
#                             suite, the fuzzers and the format and lint checks (non-zero on any failure)
#   installer/setup.sh deps | build   just those steps
# Two builds: build/ against the pinned torch wheel (LibTorch 2.x, a CUDA build; the main target) and build-debian/
# against Debian's libtorch-dev (LibTorch 1.13, CPU; the Debian packages). The wheel, Accelerate, safetensors and
# TensorBoard live in a virtual environment outside the tree, $XDG_CACHE_HOME/spur/python, made from
# installer/python-requirements.txt and remade when that file changes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

say() { printf '\033[1mspur setup:\033[0m %s\n' "$*"; }

install_packages() {
  local wanted missing=()
  wanted=$(grep -v '^\s*#' "$here/debian-packages.txt" | awk 'NF {print $1}')
  for package in $wanted; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || { echo "spur setup: run as root (or install sudo) to install: ${missing[*]}" >&2; exit 1; }
      sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}"
  else
    say "all Debian packages present"
  fi
  # LibTorch links the generic libblas.so.3: make sure the alternatives system points it at OpenBLAS.
  local blas
  blas=$(readlink -f "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)/libblas.so.3" || true)
  case "$blas" in
    *openblas*) say "BLAS: $blas" ;;
    *)
      if [ "$(id -u)" = 0 ]; then
        update-alternatives --auto "libblas.so.3-$(gcc -dumpmachine)" >/dev/null 2>&1 || true
      fi
      say "warning: libblas.so.3 is $blas, not OpenBLAS: LibTorch steps will be 16-20x slower" ;;
  esac
}

python_environment() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/spur"
  local venv="$cache/python" stamp want
  want=$(sha256sum "$here/python-requirements.txt" | cut -c1-16)
  stamp="$venv/.spur-requirements"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    say "Python environment ready: $venv"
    return
  fi
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip install --quiet -r "$here/python-requirements.txt"; then
    # An environment from an earlier requirements file: brought up to this one in place (the torch wheel, 4 GB,
    # is not fetched again when its pin has not moved).
    say "Python environment $venv brought up to installer/python-requirements.txt"
  else
    say "making the Python environment $venv (installer/python-requirements.txt: torch, accelerate, safetensors, tensorboard, mlflow)"
    rm -rf "$venv"
    mkdir -p "$cache"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$here/python-requirements.txt"
  fi
  "$venv/bin/python" -c "import torch, accelerate, safetensors, tensorboard, mlflow; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  echo "$want" > "$stamp"  # written last: a half-made environment is made again
}

# `spur` and `spur-studio` on PATH, as the Debian packages install them: links to this clone's build/ in
# /usr/local/bin (as root) or ~/.local/bin (Debian's ~/.profile puts it on PATH when it exists). A program of the
# same name that is not such a link is left alone, and said.
link_commands() {
  local bin program target
  if [ "$(id -u)" = 0 ]; then bin=/usr/local/bin; else bin="$HOME/.local/bin"; fi
  mkdir -p "$bin"
  for program in spur spur-studio; do
    target="$root/build/app/$program"
    [ -x "$target" ] || continue
    if [ -e "$bin/$program" ] && [ ! -L "$bin/$program" ]; then
      say "warning: $bin/$program exists and is not a link: left as it is (this build's is $target)"
      continue
    fi
    ln -sfn "$target" "$bin/$program"
  done
  say "spur and spur-studio on PATH: links in $bin to $root/build/app"
  case ":$PATH:" in
    *":$bin:"*) ;;
    *) say "note: $bin is not on this shell's PATH: log in again, or export PATH=\"$bin:\$PATH\"" ;;
  esac
}

build() {
  say "building against the torch wheel (cmake --preset default, build/)"
  cmake --preset default
  cmake --build --preset default
  link_commands
  say "building against Debian's libtorch-dev (cmake --preset debian, build-debian/)"
  cmake --preset debian
  cmake --build --preset debian
}

case "${1:-}" in
  studio)
    install_packages
    python_environment
    # What the Studio opens and nothing else (the whole tree, its tests and the Debian tree: `setup.sh build`).
    say "building spur-studio, spur and the Fashion-MNIST example against the torch wheel (build/)"
    cmake --preset default
    cmake --build --preset default --target spur_studio_app spur_cli train_fashion_mnist
    link_commands
    say "opening Spur Studio on the demo workspace: spur-studio --demo"
    if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      say "no display (DISPLAY/WAYLAND_DISPLAY unset): run spur-studio --demo from a desktop session"
      exit 1
    fi
    build/app/spur-studio --demo
    ;;
  run)
    install_packages
    python_environment
    build
    say "training the Fashion-MNIST example for one epoch on 2 processes:" \
      "spur launch --num_processes 2 build/examples/train_fashion_mnist --epochs 1"
    build/app/spur launch --num_processes 2 build/examples/train_fashion_mnist --epochs 1
    ;;
  test)
    install_packages
    python_environment
    # The wheel tree as users build it; Debian's LibTorch built with ASan + UBSan on all of Spur's code (the
    # plain Debian tree differs only in flags: `build` makes it); the torch-free parts under TSan
    # (docs/sanitizers.md says what runs under which and why).
    # CI builds no benchmark programs (2-3 minutes of a cold build, figures nobody reads there): `cmake --preset
    # default` builds them, and `ctest --preset bench` runs their smoke tests (docs/testing.md).
    say "building against the torch wheel (cmake --preset default -DSPUR_BUILD_BENCHMARKS=OFF, build/)"
    cmake --preset default -DSPUR_BUILD_BENCHMARKS=OFF
    cmake --build --preset default
    say "building against Debian's libtorch-dev with ASan + UBSan (cmake --preset debian-asan, build-debian-asan/)"
    cmake --preset debian-asan
    cmake --build --preset debian-asan
    say "building the torch-free parts with ThreadSanitizer (cmake --preset tsan, build-tsan/)"
    cmake --preset tsan
    cmake --build --preset tsan
    status=0
    # What the suites leave in the source tree (a test writing where it should not) is a failure: the untracked
    # files before and after are compared (in a git checkout; a tarball's tree is not checked).
    untracked() {
      if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$root" ls-files --others --exclude-standard | LC_ALL=C sort
      fi
    }
    before=$(untracked)
    say "running the test suite against the torch wheel (ctest --preset default)"
    ctest --preset default || status=1
    say "running the test suite against Debian's LibTorch under ASan + UBSan (ctest --preset debian-asan)"
    ctest --preset debian-asan || status=1
    say "running the threaded torch-free suites under TSan (ctest --preset tsan)"
    ctest --preset tsan || status=1
    say "fuzzing: the corpora replayed, then 5 s of new inputs per target (tests/fuzz/run.sh --ci 5)"
    tests/fuzz/run.sh --ci 5 || status=1
    left=$(LC_ALL=C comm -13 <(printf '%s\n' "$before") <(untracked))
    if [ -n "$left" ]; then
      say "the suites left files in the source tree (a test writes into the working directory?):"
      echo "$left"
      status=1
    fi
    say "format and lint (tests/lint/check.sh: clang-format on every file, clang-tidy on what changed since tests/lint/base)"
    tests/lint/check.sh || status=1
    exit "$status"
    ;;
  deps) install_packages; python_environment ;;
  build) install_packages; python_environment; build ;;
  *)
    echo "usage: installer/setup.sh studio|run|test|deps|build" >&2
    exit 2
    ;;
esac
