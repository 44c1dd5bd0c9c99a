#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Remakes the Studio screenshots in docs/ from real runs, on a virtual display (Debian: xvfb, imagemagick).
#   tests/screens/take_screenshots.sh [BUILD_DIR]
set -e
build=${1:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
cmake --build "$build" --target studio_screens spur_cli train_fashion_mnist
xvfb-run -a -s "-screen 0 1400x860x24" "$build/tests/screens/studio_screens" \
  "$(realpath "$build/app/spur")" "$(realpath "$build/examples/train_fashion_mnist")" "$here/docs"
# docs/sweeps.md's: a real sweep (spur sweep run, 10 runs of the example), then the Hyperparameters tab.
cmake --build "$build" --target sweep_screens
xvfb-run -a -s "-screen 0 1400x860x24" "$build/tests/screens/sweep_screens" \
  "$(realpath "$build/app/spur")" "$(realpath "$build/examples/train_fashion_mnist")" "$here/docs"
