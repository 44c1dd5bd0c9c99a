#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The checks that need an NVIDIA GPU, as one prepared script for a machine that has one (CI machines do not):
#   tests/gpu/run.sh [BUILD_DIR]          default BUILD_DIR: build-gpu
# 1. finds that machine's own torch (SPUR_PYTHON, else the set-up's environment, else python3) and checks that it
#    sees a GPU; 2. builds Spur against it (CUDA, NCCL); 3. runs spur env and spur-check (NCCL at world size 1);
# 4. runs the test suite's engine parts (unit, multiprocess) with the GPU visible, when Qt Test is there to build
#    them, and find_executable_batch_size against the GPU's real out-of-memory error; 5. trains the examples (MLP, Fashion-MNIST one epoch, GPT 300 steps) on the GPU in fp32, fp16 and bf16; 6. benchmarks one process on the GPU: Spur
#    against hand-written LibTorch, and against Accelerate (when installed) on the same torch. Prints one summary
#    and exits non-zero if any step failed. Nothing here needs a network.
# SPUR_GPU_DRY_RUN=1 runs every step on a machine without a GPU (on the CPU), to check the script itself.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-gpu}"
log="$build/gpu-run.log"
dry="${SPUR_GPU_DRY_RUN:-0}"
mkdir -p "$build"
: > "$log"
declare -a summary
failed=0

say() { printf '\033[1mgpu run:\033[0m %s\n' "$*" | tee -a "$log"; }
record() {  # record NAME STATUS DETAIL
  summary+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")")
  [ "$2" = ok ] || [ "$2" = skip ] || failed=1
}
step() {  # step NAME COMMAND...: runs it, logs its output, records ok/FAIL with its last line
  local name="$1"; shift
  say "$name: $*"
  local out
  if out=$("$@" 2>&1); then
    printf '%s\n' "$out" >> "$log"
    record "$name" ok "$(printf '%s' "$out" | tail -n1 | cut -c1-90)"
  else
    printf '%s\n' "$out" >> "$log"
    record "$name" FAIL "$(printf '%s' "$out" | tail -n1 | cut -c1-90)"
  fi
}

# 1. The machine's torch.
python=""
for candidate in "${SPUR_PYTHON:-}" "${XDG_CACHE_HOME:-$HOME/.cache}/spur/python/bin/python" "$(command -v python3 || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c "import torch" 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "gpu run: no Python with torch here (set SPUR_PYTHON)" >&2
  exit 2
fi
facts=$("$python" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-')")
say "torch: $python: $facts"
read -r torch_version cuda_version has_gpu gpu_count gpu_name <<< "$facts"
if [ "$has_gpu" != True ] && [ "$dry" != 1 ]; then
  echo "gpu run: torch $torch_version sees no GPU here (nvidia-smi: $(nvidia-smi -L 2>&1 | head -1))" >&2
  exit 2
fi
record "torch" ok "$torch_version (CUDA $cuda_version), $gpu_count GPU(s): $gpu_name"
device=cuda
[ "$has_gpu" = True ] || device=cpu

# 2. Build against it. The suite's test binaries need Qt 6 Test; without Qt only the engine, examples and
#    benchmarks are built.
with_qt=OFF
if pkg-config --exists Qt6Test 2>/dev/null || [ -e /usr/lib/x86_64-linux-gnu/cmake/Qt6Test ]; then with_qt=ON; fi
step "configure" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPUR_TORCH=wheel \
  -DSPUR_PYTHON="$python" -DSPUR_PEER_PYTHON="$python" -DSPUR_BUILD_APP="$with_qt" -DSPUR_BUILD_STUDIO=OFF \
  -DSPUR_BUILD_TESTS="$with_qt"
step "build" cmake --build "$build" --parallel "$(nproc)"

# 3. What the build loaded, and a one-rank NCCL group through spur-check.
check="$build/app/spur-check"
step "spur-check --env" "$check" --env
port=$("$python" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
step "spur-check (NCCL, world 1)" env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT="$port" "$check"

# 4. The engine's suites with the GPU visible.
if [ "$with_qt" = ON ]; then
  step "ctest unit" ctest --test-dir "$build" -L unit --output-on-failure
  step "ctest multiprocess" ctest --test-dir "$build" -L multiprocess --output-on-failure
  # find_executable_batch_size against the device's own out-of-memory error (1 GiB per item, from 16 TiB down).
  step "batch size search (device OOM)" "$build/tests/spur_test_worker" batch_search
else
  record "ctest" skip "no Qt 6 Test here: the suites were not built"
fi

# 5. The examples in each precision on the GPU (loss printed falling, accuracy at the end).
# (A dry run on the CPU cuts them short: fp16 there is ~10x slower than fp32.)
short=(); gpt_steps=300
if [ "$dry" = 1 ]; then short=(--max_steps 20); gpt_steps=20; fi
for precision in no fp16 bf16; do
  step "train_mlp $precision on $device" env SPUR_MIXED_PRECISION="$precision" "$build/examples/train_mlp" --epochs 3
  # The real workloads (issue 14): the Fashion-MNIST CNN to a test accuracy, the GPT to a validation loss.
  if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    step "train_fashion_mnist $precision on $device" "$build/examples/train_fashion_mnist" --mixed_precision "$precision" \
      --epochs 1 "${short[@]}" --output_dir "$build/run-fashion-$precision"
  else
    record "train_fashion_mnist $precision" skip "no /usr/share/datasets/fashion-mnist (apt install dataset-fashion-mnist)"
  fi
  step "train_gpt $precision on $device" "$build/examples/train_gpt" --mixed_precision "$precision" --max_steps "$gpt_steps" \
    --eval_every "$gpt_steps" --output_dir "$build/run-gpt-$precision"
done

# 5b. System metrics (issue 18): a launched GPU run records each GPU's utilisation, memory and power through NVML
#     (dlopened); on a machine without a driver (the dry run) only the ranks' CPU and memory.
if [ -x "$build/app/spur" ]; then
  history="$build/gpu-system.db"
  rm -f "$history"*
  step "spur launch (system metrics)" env SPUR_HISTORY="$history" "$build/app/spur" launch --num_processes 1 \
    "$build/examples/train_mlp" --epochs 20
  wanted="system/rank0/rss_mib"
  [ "$has_gpu" = True ] && wanted="system/gpu0/utilization_percent"
  step "system metrics recorded ($wanted)" sh -c "SPUR_HISTORY='$history' '$build/app/spur' runs show 1 | grep -q '$wanted'"
fi

# 6. One process on the GPU: Spur against hand-written LibTorch, and against Accelerate on the same torch.
for workload in small large; do
  step "step_bench $workload ($device)" "$build/tests/bench/step_bench" single "$workload" --steps 200
done
if "$python" -c "import accelerate" 2>/dev/null; then
  for workload in small large; do
    step "accelerate $workload ($device)" env HF_HOME="$build/hf" "$(dirname "$python")/accelerate" launch \
      --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no \
      "$root/tests/bench/accelerate_peer.py" "$workload" 200
  done
else
  record "accelerate" skip "not installed beside this torch"
fi

echo
echo "Spur on a GPU: summary (full output in $log)"
printf '%s\n' "${summary[@]}"
exit "$failed"
