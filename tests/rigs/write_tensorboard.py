#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""TensorBoard runs written by the real writers, for `spur runs import` to read.
  write_tensorboard.py DIR            writes two runs and prints what was written as JSON:
      DIR/tb      tensorboard.summary.Writer (the tensorboard package's own writer: scalars as rank-0 tensors of
                  the scalars plugin, as TensorFlow 2 writes them), two tags, 50 steps, a text;
      DIR/torch   torch.utils.tensorboard.SummaryWriter (simple_value scalars, as most PyTorch scripts write),
                  add_scalar over 40 steps, add_text, and add_hparams in the same folder (hparams plugin's
                  experiment, session start and end, and the metric it is given), in two event files.
      {"tb": {"scalars": {tag: [[step, value, wall], ...]}, "hparams": {}}, "torch": {...}}
  write_tensorboard.py --many DIR N   one run of N scalars (tag "loss") through tensorboard.summary.Writer, for the
                                      import benchmark; prints the seconds it took.
Values are chosen to be exact in float32, walls are given (whole and half seconds), so what was written is known exactly."""
import json
import os
import sys
import time

BASE = float(int(time.time()) - 1000)  # walls in the recent past, as a real run's: exact in a double


def tb_run(path, out):
    from tensorboard.summary import Writer

    writer = Writer(path)
    run = {"scalars": {"loss": [], "eval/accuracy": []}, "hparams": {}}
    for step in range(50):
        wall = BASE + step * 0.5
        loss = 4.0 - step / 16
        writer.add_scalar("loss", loss, step, wall_time=wall, description="training loss")
        run["scalars"]["loss"].append([step, loss, wall])
        if step % 10 == 9:
            accuracy = step / 64
            writer.add_scalar("eval/accuracy", accuracy, step, wall_time=wall + 0.25)
            run["scalars"]["eval/accuracy"].append([step, accuracy, wall + 0.25])
    writer.close()
    out["tb"] = run


def torch_run(path, out):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=path)
    run = {"scalars": {"train/loss": []}, "hparams": {}}
    for step in range(40):
        wall = BASE + 100.0 + step
        loss = 2.0 - step / 32
        writer.add_scalar("train/loss", loss, step, walltime=wall)
        run["scalars"]["train/loss"].append([step, loss, wall])
    writer.add_text("notes", "a text summary", 39, walltime=BASE + 140.0)
    hparams = {"lr": 0.125, "optimizer": "adamw", "shuffle": True, "layers": 3}
    # run_name "." keeps the hparams in this run's folder (a second event file), as many scripts do.
    writer.add_hparams(hparams, {"hparam/accuracy": 0.75}, run_name=".")
    writer.close()
    run["hparams"] = hparams
    run["scalars"]["hparam/accuracy"] = [[0, 0.75, None]]
    out["torch"] = run


def main(argv):
    if argv[1] == "--many":
        from tensorboard.summary import Writer

        path, count = argv[2], int(argv[3])
        started = time.perf_counter()
        writer = Writer(path)
        for step in range(count):
            writer.add_scalar("loss", 1.0 / (step + 1), step, wall_time=1700000000.0 + step)
        writer.close()
        print(json.dumps({"seconds": time.perf_counter() - started}))
        return
    root = argv[1]
    out = {}
    tb_run(os.path.join(root, "tb"), out)
    torch_run(os.path.join(root, "torch"), out)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv)
