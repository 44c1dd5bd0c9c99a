# SPDX-License-Identifier: Apache-2.0
# The Accelerate peers of the real workloads: the examples' two models (examples/fashion_mnist/cnn.h,
# examples/gpt/gpt_model.h) written the same way in PyTorch, the same initialisation, optimizer and step as
# tests/bench/workload_bench.cpp (AdamW lr 1e-3, weight decay 0.01, clipping at 1.0; data made before timing).
# Also the model definitions train_peer.py trains for time-to-accuracy. Started by run_benchmarks.py with
# `accelerate launch --multi_gpu --num_processes 2` and ACCELERATE_USE_CPU=1. Prints one JSON record per rank.
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from accelerate_peer import write_rank_record  # noqa: E402


def make_cnn():
    layers, channels = [], 1
    for block, width in enumerate((24, 48, 96)):
        for _ in range(2):
            layers += [nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
            channels = width
        if block < 2:
            layers.append(nn.MaxPool2d(2))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1), nn.Linear(channels, 10)]
    return nn.Sequential(*layers)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, 2)
        q, k, v = (y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for y in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.n_head)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attention = self.drop(torch.softmax(scores.masked_fill(future, float("-inf")), -1))
        return self.drop(self.proj((attention @ v).transpose(1, 2).contiguous().view(b, t, c)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.out = nn.Linear(4 * n_embd, n_embd)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))


class Gpt(nn.Module):
    def __init__(self, block_size=128, n_layer=4, n_head=4, n_embd=128, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.tokens = nn.Embedding(256, n_embd)
        self.positions = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, 256, bias=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif p.dim() >= 2:
                    residual = name.endswith("proj.weight") or name.endswith("out.weight")
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer) if residual else 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.drop(self.tokens(idx) + self.positions(torch.arange(t, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    from accelerate import Accelerator
    name = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    accelerator = Accelerator()
    torch.manual_seed(0)
    if name == "cnn":
        model = make_cnn()
        xs = [torch.randn(64, 1, 28, 28) for _ in range(8)]
        ys = [torch.randint(0, 10, (64,)) for _ in range(8)]
        loss_fn = F.cross_entropy
    else:
        model = Gpt()
        windows = [torch.randint(0, 256, (32, 129)) for _ in range(8)]
        xs = [w[:, :128].contiguous() for w in windows]
        ys = [w[:, 1:].contiguous() for w in windows]
        loss_fn = lambda logits, y: F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))  # noqa: E731
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    times = []
    for i in range(10 + steps):
        t0 = time.perf_counter()
        loss = loss_fn(model(xs[i % 8]), ys[i % 8])
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if i >= 10:
            times.append((time.perf_counter() - t0) * 1000)
    write_rank_record(accelerator, name, times)
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
