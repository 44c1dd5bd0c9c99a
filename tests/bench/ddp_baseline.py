# SPDX-License-Identifier: Apache-2.0
# The baseline for Spur's DDP benchmark: the same workload in plain PyTorch DistributedDataParallel (Debian's
# python3-torch), one rank per process, started by run_benchmarks.py with RANK/WORLD_SIZE/MASTER_* set.
import json
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

WORKLOADS = {"small": (256, 512, 10, 64), "large": (1024, 2048, 10, 128)}


def main():
    name = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    n_in, hidden, n_out, batch = WORKLOADS[name]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, n_out))
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    xs = [torch.randn(batch, n_in) for _ in range(16)]
    ys = [torch.randint(0, n_out, (batch,)) for _ in range(16)]
    times = []
    for i in range(20 + steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(xs[i % 16]), ys[i % 16])
        loss.backward()
        optimizer.step()
        if i >= 20:
            times.append((time.perf_counter() - t0) * 1000)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rollup = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3:
                rollup[parts[0]] = int(parts[1]) / 1024
    print(json.dumps({"mode": "rank", "impl": "pytorch", "workload": name, "rank": dist.get_rank(),
                      "median_ms": statistics.median(times), "peak_rss_mib": peak, "pss_mib": rollup["Pss:"],
                      "private_mib": rollup["Private_Clean:"] + rollup["Private_Dirty:"]}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
