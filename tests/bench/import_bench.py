#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`spur runs import` against TensorBoard's own readers on the same event file (issue 18: 1,000,000 scalars in
< 2 s). The file is written by Spur's TensorBoard tracker (test_worker's tensorboard_history scenario: 2 tags, one
simple_value each per step, as PyTorch's SummaryWriter writes them), then read by:
  spur          `spur runs import DIR` into a new history: the whole command, process start, CRC checks and the
                history transaction included
  accumulator   TensorBoard's EventAccumulator(size_guidance: keep every scalar).Reload(), what TensorBoard's scalar
                dashboard and most scripts use, in this Python process (its import time not counted)
  loader        TensorBoard's EventFileLoader alone, as its server reads files: records parsed into Event protos
                and migrated to the tensor form (data_compat), nothing kept
Run with the Python that has the tensorboard package (the set-up's environment):
  import_bench.py --spur build/app/spur --worker build/tests/spur_test_worker [--scalars 1000000] [--repeats 3]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(function, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times), max(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spur", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--scalars", type=int, default=1000000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from tensorboard.backend.event_processing import event_accumulator, event_file_loader

    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ, SPUR_HISTORY=os.path.join(scratch, "written.db"))
        steps = max(1, args.scalars // 2)
        subprocess.run([args.worker, "tensorboard_history", "--out", scratch, "--steps", str(steps)], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        run = os.path.join(scratch, "both")
        files = glob.glob(os.path.join(run, "*tfevents*"))
        size = sum(os.path.getsize(f) for f in files)

        counter = [0]

        def spur_import():
            counter[0] += 1
            history = os.path.join(scratch, f"imported{counter[0]}.db")
            out = subprocess.run([args.spur, "runs", "import", run, "--history", history], capture_output=True,
                                 text=True, check=True)
            if f"{steps * 2} points" not in out.stdout:
                sys.exit("spur runs import did not import every point: " + out.stdout + out.stderr)

        def accumulator():
            reader = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0})
            reader.Reload()
            count = sum(len(reader.Scalars(tag)) for tag in reader.Tags()["scalars"])
            if count != steps * 2:
                sys.exit(f"EventAccumulator read {count} scalars, not {steps * 2}")

        def loader():
            count = 0
            for path in files:
                for _ in event_file_loader.EventFileLoader(path).Load():
                    count += 1
            if count < steps:
                sys.exit(f"EventFileLoader read {count} events")

        spur = timed(spur_import, args.repeats)
        acc = timed(accumulator, args.repeats)
        raw = timed(loader, args.repeats)
    print(f"import of {steps * 2:,} scalars ({steps:,} events, {size / 1e6:.1f} MB), median of {args.repeats} "
          f"(min-max):")
    print(f"  spur runs import           {spur[0]:7.3f} s ({spur[1]:.3f}-{spur[2]:.3f})   target < 2 s")
    print(f"  TensorBoard EventAccumulator {acc[0]:5.3f} s ({acc[1]:.3f}-{acc[2]:.3f})   {acc[0] / spur[0]:.1f}x spur's")
    print(f"  TensorBoard EventFileLoader  {raw[0]:5.3f} s ({raw[1]:.3f}-{raw[2]:.3f})   its server's read, nothing kept")
    print(json.dumps({"bench": "import", "scalars": steps * 2, "bytes": size, "spur_s": spur[0],
                      "accumulator_s": acc[0], "loader_s": raw[0]}))


if __name__ == "__main__":
    main()
