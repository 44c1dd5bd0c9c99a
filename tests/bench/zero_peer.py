# SPDX-License-Identifier: Apache-2.0
# The peer of Spur's ZeRO benchmark (issue 17): PyTorch's own DistributedDataParallel with AdamW, and DDP with
# torch.distributed.optim.ZeroRedundancyOptimizer(AdamW) (ZeRO stage 1 in PyTorch), and FSDP2's fully_shard on each
# Linear and then the model (issue 37; ZeRO stage 3 in PyTorch), Gloo on the CPU. Started by zero_bench.py with
# torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR...); prints one JSON record per rank.
#   python zero_peer.py WORKLOAD ddp|zero|fsdp2 STEPS
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from peer_memory import memory_mib, write_record

# (in, hidden, out, batch, hidden-to-hidden layers): step_bench.cpp's
WORKLOADS = {"small": (256, 512, 10, 64, 1), "large": (1024, 2048, 10, 128, 1), "wide": (1024, 4096, 10, 32, 1),
             "wider": (1024, 8192, 10, 8, 1), "deep": (2048, 2048, 10, 32, 17)}


def main():
    name, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n_in, hidden, n_out, batch, layers = WORKLOADS[name]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    parts = [nn.Linear(n_in, hidden), nn.ReLU()]
    for _ in range(layers):
        parts += [nn.Linear(hidden, hidden), nn.ReLU()]
    model = nn.Sequential(*parts, nn.Linear(hidden, n_out))
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    else:
        model = DistributedDataParallel(model, gradient_as_bucket_view=True)
    if mode == "zero":
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3,
                                            weight_decay=0.01)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    xs = [torch.randn(batch, n_in) for _ in range(16)]
    ys = [torch.randint(0, n_out, (batch,)) for _ in range(16)]
    times = []
    for i in range(20 + steps):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[i % 16]), ys[i % 16])
        loss.backward()
        optimizer.step()
        if i >= 20:
            times.append((time.perf_counter() - t0) * 1000)
    write_record({"mode": "rank", "impl": "torch-" + mode, "workload": name, "rank": dist.get_rank(),
                  "median_ms": statistics.median(times), **memory_mib()})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
