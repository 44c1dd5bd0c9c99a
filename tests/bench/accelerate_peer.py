# SPDX-License-Identifier: Apache-2.0
# The peer of Spur's step benchmark: the same workload under Hugging Face Accelerate (the pinned version, on the
# pinned torch), started by run_benchmarks.py with `accelerate launch --multi_gpu --num_processes 2` and
# ACCELERATE_USE_CPU=1 (Accelerate's torchrun launcher with its MULTI_CPU / Gloo state: on a machine without GPUs
# its MULTI_CPU launch path needs mpirun); tests/gpu/run.sh starts one process on the GPU. Prints one JSON record
# per rank.
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator

from peer_memory import memory_mib, write_record

WORKLOADS = {"small": (256, 512, 10, 64), "large": (1024, 2048, 10, 128)}


def write_rank_record(accelerator, workload, step_ms, **extra):
    """This rank's JSON record for run_benchmarks.py: the median step and memory now (peak RSS, PSS, private)."""
    write_record({"mode": "rank", "impl": "accelerate", "workload": workload, "rank": accelerator.process_index,
                  "distributed_type": str(accelerator.distributed_type), "torch": torch.__version__, **extra,
                  "median_ms": statistics.median(step_ms), **memory_mib()})


def main():
    name = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    n_in, hidden, n_out, batch = WORKLOADS[name]
    # DDP's communication hook as Accelerate takes it (multihost_bench.py sets SPUR_PEER_COMM_HOOK: fp16, bf16).
    hook = os.environ.get("SPUR_PEER_COMM_HOOK", "no")
    handlers = []
    if hook != "no":
        from accelerate.utils import DDPCommunicationHookType, DistributedDataParallelKwargs
        handlers.append(DistributedDataParallelKwargs(comm_hook=DDPCommunicationHookType(hook)))
    accelerator = Accelerator(kwargs_handlers=handlers)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, n_out))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    xs = [torch.randn(batch, n_in).to(accelerator.device) for _ in range(16)]
    ys = [torch.randint(0, n_out, (batch,)).to(accelerator.device) for _ in range(16)]
    cuda = accelerator.device.type == "cuda"
    times = []
    for i in range(20 + steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xs[i % 16]), ys[i % 16])
        accelerator.backward(loss)
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        if i >= 20:
            times.append((time.perf_counter() - t0) * 1000)
    write_rank_record(accelerator, name, times, device=str(accelerator.device), comm_hook=hook)
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
