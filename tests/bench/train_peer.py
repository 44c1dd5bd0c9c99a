# SPDX-License-Identifier: Apache-2.0
# The Fashion-MNIST example (examples/fashion_mnist) in Python under Accelerate, for the time to reach a test
# accuracy side by side with Spur: the same CNN (workload_peer.make_cnn), data (Debian's dataset-fashion-mnist),
# augmentation (random crop of the image padded by 2, horizontal flip; in 2 loader workers), batch 64 per process,
# AdamW (lr 3e-3; weight decay 5e-4 on conv and linear weights only), warm-up then cosine to 1% (as
# spur::CosineWithWarmup, stepped by Accelerate's scheduler wrapper), clipping at 1.0, test accuracy each epoch
# through gather_for_metrics. Usage, from run_benchmarks.py or by hand:
#   ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 tests/bench/train_peer.py \
#       [--epochs 5] [--target 0.90] [--data_dir /usr/share/datasets/fashion-mnist] [--max_steps N]
# (--max_steps ends each epoch's training after N steps in all, as the example's: for a quick check of the tooling).
# Prints "epoch N test accuracy A at T s" lines and, on reaching the target, "reached A at T s".
import argparse
import gzip
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload_peer import make_cnn  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path, dims):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    assert magic == 0x800 | dims, f"{path}: not an IDX file of {dims} dimension(s)"
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class FashionMnist(Dataset):
    def __init__(self, directory, split, augment):
        self.images = torch.from_numpy(read_idx(f"{directory}/{split}-images-idx3-ubyte.gz", 3).copy())
        self.labels = torch.from_numpy(read_idx(f"{directory}/{split}-labels-idx1-ubyte.gz", 1).astype(np.int64))
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = ((self.images[i].float() / 255.0 - MEAN) / STD).unsqueeze(0)
        if self.augment:
            dy, dx, flip = torch.randint(0, 5, (3,)).tolist()
            padded = torch.full((1, 32, 32), -MEAN / STD)
            padded[:, 2:30, 2:30] = image
            image = padded[:, dy:dy + 28, dx:dx + 28].contiguous()
            if flip % 2 == 1:
                image = image.flip(2)
        return image, self.labels[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.90)
    parser.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max_steps", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    accelerator = Accelerator()
    torch.manual_seed(42)
    train_set = FashionMnist(args.data_dir, "train", True)
    test_set = FashionMnist(args.data_dir, "t10k", False)
    model = make_cnn()
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True, num_workers=2)
    test_loader = DataLoader(test_set, batch_size=500, num_workers=2)
    total = args.epochs * len(train_loader)
    warmup = max(1, total // 20)

    def factor(step):
        if step < warmup:
            return step / max(1, warmup)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    model, optimizer, train_loader, test_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, test_loader, scheduler)
    reached = None
    steps = 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        for images, labels in train_loader:
            if args.max_steps and steps >= args.max_steps:
                break
            steps += 1
            loss = F.cross_entropy(model(images), labels)
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        model.eval()
        correct = seen = 0
        with torch.no_grad():
            for images, labels in test_loader:
                hits = accelerator.gather_for_metrics((model(images).argmax(1) == labels).float())
                correct += hits.sum().item()
                seen += hits.numel()
        accuracy = correct / seen
        elapsed = time.perf_counter() - start
        accelerator.print(f"epoch {epoch} test accuracy {accuracy:.4f} at {elapsed:.1f} s")
        if reached is None and accuracy >= args.target:
            reached = (accuracy, elapsed)
            accelerator.print(f"reached {accuracy:.4f} at {elapsed:.1f} s")
    accelerator.end_training()


if __name__ == "__main__":
    main()
