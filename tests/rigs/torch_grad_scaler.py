#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The reference for Spur's GradScaler: torch.amp.GradScaler (Python, the pinned torch) on recorded gradients.
  torch_grad_scaler.py FILE
FILE (safetensors, written by the GradScaler test) holds "init.<j>" (the parameters), "grad.<i>.<j>" (step i's
unscaled gradient of parameter j, some with inf or nan injected) and metadata init_scale, growth_interval, lr.
Each step sets every gradient to gradient * scale (what backward of the scaled loss gives), then
scaler.step(SGD) and scaler.update(). Prints {"scales": [after each update], "stepped": [...], "params": [...]}."""
import json
import sys

import torch
from safetensors import safe_open


def main(path):
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        names = list(f.keys())
        tensors = {name: f.get_tensor(name) for name in names}
    count = sum(1 for name in names if name.startswith("init."))
    params = [tensors[f"init.{j}"].clone().requires_grad_(True) for j in range(count)]
    steps = sorted({int(name.split(".")[1]) for name in names if name.startswith("grad.")})
    optimizer = torch.optim.SGD(params, lr=float(meta["lr"]))
    scaler = torch.amp.GradScaler("cpu", init_scale=float(meta["init_scale"]),
                                  growth_interval=int(meta["growth_interval"]))
    scales, stepped = [], []
    for i in steps:
        before = [p.detach().clone() for p in params]
        scaler.scale(torch.ones(()))  # as a training loop scales its loss (torch makes the scale tensor here)
        for j, p in enumerate(params):
            p.grad = tensors[f"grad.{i}.{j}"] * scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        stepped.append(any(not torch.equal(b, p.detach()) for b, p in zip(before, params)))
        scales.append(scaler.get_scale())
        optimizer.zero_grad(set_to_none=True)
    flat = torch.cat([p.detach().reshape(-1) for p in params]).tolist()
    print(json.dumps({"scales": scales, "stepped": stepped, "params": flat, "torch": torch.__version__}))


if __name__ == "__main__":
    main(sys.argv[1])
