#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 38's oracle: the worker's `hook_oracle` set-up in PyTorch itself.
  ddp_hook_oracle.py PORT STEPS HOOK
Two ranks (gloo, CPU) run DistributedDataParallel over Linear(6, 5) - tanh - Linear(5, 3), whose weights and data
come from formulas, with HOOK registered as Accelerate registers DistributedDataParallelKwargs(comm_hook=...): "no"
(DDP's own all-reduce), "fp16" (default_hooks.fp16_compress_hook) or "bf16" (bf16_compress_hook). SGD(0.1, momentum
0.9), STEPS steps. Rank 0 prints every parameter's float32 bits, one line per parameter, as the worker does."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel


class HookNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 5)
        self.fc2 = torch.nn.Linear(5, 3)
        with torch.no_grad():
            for offset, p in enumerate(self.parameters()):
                p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32) * 0.37 + float(offset)).mul(0.5)
                        .view_as(p))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def rank_main(rank, port, steps, hook):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    net = HookNet()
    model = DistributedDataParallel(net)
    if hook == "fp16":
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif hook == "bf16":
        model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        x = torch.cos(torch.arange(24, dtype=torch.float32) * 0.11 + (step * 1.3 + rank * 0.7)).mul(2.0).view(4, 6)
        y = torch.sin(torch.arange(12, dtype=torch.float32) * 0.23 + float(step + rank)).view(4, 3)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    if rank == 0:
        for name, p in net.named_parameters():
            bits = p.detach().contiguous().view(torch.int32).flatten().tolist()
            print(f"param {name}: " + " ".join(str(b) for b in bits), flush=True)
    dist.barrier()
    # Everything compared is printed: leave without Gloo's teardown (it can crash under load, pytorch#190489).
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(rank_main, args=(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]), nprocs=2)
