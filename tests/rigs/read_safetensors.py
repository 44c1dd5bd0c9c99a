#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The real `safetensors` package (pinned in installer/python-requirements.txt) as the reference reader and writer.
  read_safetensors.py read FILE          prints {"metadata": ..., "tensors": {name: [dtype, shape, sum, first]}}
                                         read with safetensors.safe_open (framework "pt"), as a user would
  read_safetensors.py write FILE         writes a file with safetensors.torch.save_file (every dtype Spur reads),
                                         and prints the same report of what it wrote"""
import json
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def report(tensors, metadata):
    out = {}
    for name, t in tensors.items():
        flat = t.reshape(-1).to(torch.float64)
        out[name] = [str(t.dtype).replace("torch.", ""), list(t.shape), float(flat.sum()),
                     float(flat[0]) if flat.numel() else 0.0]
    return {"metadata": metadata or {}, "tensors": out}


def read(path):
    tensors = {}
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        for name in f.keys():
            tensors[name] = f.get_tensor(name)
    return report(tensors, metadata)


def write(path):
    g = torch.Generator().manual_seed(7)
    tensors = {
        "weight.f32": torch.randn(3, 4, generator=g),
        "weight.f64": torch.randn(5, generator=g, dtype=torch.float64),
        "weight.f16": torch.randn(2, 3, generator=g).half(),
        "weight.bf16": torch.randn(4, 2, generator=g).bfloat16(),
        "count.i64": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "count.i32": torch.arange(4, dtype=torch.int32),
        "mask.bool": torch.tensor([True, False, True]),
        "byte.u8": torch.tensor([1, 2, 255], dtype=torch.uint8),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
    }
    metadata = {"format": "pt", "written_by": "safetensors.torch.save_file"}
    save_file(tensors, path, metadata=metadata)
    return report(tensors, metadata)


if __name__ == "__main__":
    action, path = sys.argv[1], sys.argv[2]
    print(json.dumps(read(path) if action == "read" else write(path), sort_keys=True))
