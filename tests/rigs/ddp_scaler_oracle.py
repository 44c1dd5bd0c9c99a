#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The second oracle of issue 32's differential test: the worker's `scaler_oracle` set-up in PyTorch itself.
  ddp_scaler_oracle.py PORT STEPS POISON
Two ranks (gloo, CPU) run DistributedDataParallel over two branches, a: Linear(4, 3) trained by AdamW(0.01, weight
decay 0.1) with LibTorch's StepLR(2, 0.5) schedule, b: Linear(4, 3) trained by SGD(0.1) with StepLR(3, 0.5)'s, in fp16
autocast with torch.amp.GradScaler("cpu", init_scale=1024, growth_interval=2). POISON ("step:branch,...") multiplies that branch's
inputs on rank 0 by 1e4 at that step, so its scaled gradients overflow. Each step: scaler.step for both optimizers,
one scaler.update(), then each scheduler steps world-size times unless its own optimizer skipped (Accelerate's
AcceleratedScheduler rule). Rank 0 prints one JSON line per step: the scale the loss was scaled by, which optimizers
skipped, both learning rates after the schedulers. Weights and data need not match Spur's: what is compared depends
only on where the overflows are."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


class TwoBranch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(4, 3)

    def forward(self, xa, xb):
        return self.a(xa), self.b(xb)


def rank_main(rank, port, steps, poisoned):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(5)
    net = TwoBranch()
    model = DistributedDataParallel(net)
    opt_a = torch.optim.AdamW(net.a.parameters(), lr=0.01, weight_decay=0.1)
    opt_b = torch.optim.SGD(net.b.parameters(), lr=0.1)
    # LibTorch's StepLR decays one step later than torch's (it asks for the rate before counting the step): the
    # same schedule as a LambdaLR here, so that what differs can only be when each scheduler steps.
    sched_a = torch.optim.lr_scheduler.LambdaLR(opt_a, lambda n: 0.5 ** (max(n - 1, 0) // 2))
    sched_b = torch.optim.lr_scheduler.LambdaLR(opt_b, lambda n: 0.5 ** (max(n - 1, 0) // 3))
    scaler = torch.amp.GradScaler("cpu", init_scale=1024, growth_interval=2)
    torch.manual_seed(6 + rank)
    for step in range(steps):
        xa, xb, ya, yb = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 3), torch.randn(2, 3)
        if rank == 0 and step in poisoned:
            (xa if poisoned[step] == "a" else xb).mul_(1e4)
        with torch.autocast("cpu", dtype=torch.float16):
            out_a, out_b = model(xa, xb)
        loss = torch.nn.functional.mse_loss(out_a.float(), ya) + torch.nn.functional.mse_loss(out_b.float(), yb)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        skipped = []
        for opt in (opt_a, opt_b):
            before = [p.detach().clone() for group in opt.param_groups for p in group["params"]]
            scaler.step(opt)
            after = [p.detach() for group in opt.param_groups for p in group["params"]]
            skipped.append(all(torch.equal(x, y) for x, y in zip(before, after)))
        scaler.update()
        for sched, skip in ((sched_a, skipped[0]), (sched_b, skipped[1])):
            if not skip:
                for _ in range(2):
                    sched.step()
        opt_a.zero_grad()
        opt_b.zero_grad()
        if rank == 0:
            print(json.dumps({"step": step, "scale": scale, "skipped_a": skipped[0], "skipped_b": skipped[1],
                              "lr_a": opt_a.param_groups[0]["lr"], "lr_b": opt_b.param_groups[0]["lr"]}), flush=True)
    # Both ranks at the end, then out without tearing Gloo down: its teardown crashed in CI twice ("terminate called
    # without an active exception" in torch's own process, 2026-12-06, and again 2026-12-07 with a barrier before
    # destroy_process_group; pytorch/pytorch#190489 and #179291 describe the same). Everything compared is printed.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def main():
    port, steps = int(sys.argv[1]), int(sys.argv[2])
    poisoned = {}
    for item in filter(None, sys.argv[3].split(",")):
        step, branch = item.split(":")
        poisoned[int(step)] = branch
    mp.spawn(rank_main, args=(port, steps, poisoned), nprocs=2)


if __name__ == "__main__":
    main()
