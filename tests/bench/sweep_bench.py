#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The sweep controller's own cost per run (issue 39): `spur sweep run` of an N-point grid, one run at a time,
against the same N runs launched one after another with `spur launch` directly, in one sitting; the difference
divided by N is what the sweep adds to each run (expanding, recording the sweep file, finding the run in the
history, recording its parameters, starting the next). The program is tests' sweep_rig logging one value.
Rounds alternate sweep and direct; the median per-run cost is reported.

  sweep_bench.py --spur build/app/spur --rig build/tests/spur_sweep_rig [--runs 40] [--rounds 3]"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spur", required=True)
    parser.add_argument("--rig", required=True)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    costs, directs, sweeps = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, SPUR_HISTORY=os.path.join(folder, "history.db"),
                   XDG_CONFIG_HOME=os.path.join(folder, "config"), HF_HOME=os.path.join(folder, "hf"))
        sweep_file = os.path.join(folder, "bench.yaml")
        with open(sweep_file, "w") as f:
            f.write(f"program: {os.path.abspath(args.rig)}\nmethod: grid\nparameters:\n"
                    f"  lr: {{values: [{', '.join(str(0.001 * (i + 1)) for i in range(args.runs))}]}}\n"
                    "  steps: {value: 1}\n  interval_ms: {value: 0}\n")
        for _ in range(args.rounds):
            start = time.perf_counter()
            for i in range(args.runs):
                subprocess.run([args.spur, "launch", "--run_name", f"direct-{i}", "--tag", "sweep:direct",
                                os.path.abspath(args.rig), f"--lr={0.001 * (i + 1)}", "--steps=1", "--interval_ms=0"],
                               env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            direct = time.perf_counter() - start
            start = time.perf_counter()
            subprocess.run([args.spur, "sweep", "run", sweep_file], env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            sweep = time.perf_counter() - start
            directs.append(direct / args.runs)
            sweeps.append(sweep / args.runs)
            costs.append((sweep - direct) / args.runs)
    print(f"runs per round        {args.runs}, {args.rounds} rounds")
    print(f"spur launch, direct   {statistics.median(directs) * 1000:.1f} ms a run (median of rounds)")
    print(f"spur sweep run        {statistics.median(sweeps) * 1000:.1f} ms a run")
    print(f"the sweep's own cost  {statistics.median(costs) * 1000:.1f} ms a run "
          f"(rounds: {', '.join(f'{c * 1000:.1f}' for c in costs)})")
    return 0


sys.exit(main())
