#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Launch latency: time from starting `spur launch --num_processes 2 PROGRAM` to both ranks' first output line,
against the same through torchrun (`python -m torch.distributed.run` of the given Python: the torch wheel's) as the
baseline,
measured side by side (interleaved runs) in one process. Also the time until the launcher exits.
Debian's torchrun 1.13 on Python 3.11 crashes unless it is given --redirects and --tee; with `--redirects 1
--tee 1` it prefixes each line with its rank, as Spur does, so both sides do the same job.
Usage: launch_bench.py --spur build/app/spur --python ~/.cache/spur/python/bin/python [--repeats 5]
"""
import argparse
import os
import re
import selectors
import statistics
import subprocess
import sys
import tempfile
import time

# "[rank0] hi" (Spur) or "[default0]:hi" (torchrun's tee)
RANK_LINE = re.compile(r"^\[(?:rank|default)(\d+)\]:? ?hi$")


def time_launch(command, env, world=2, timeout=60):
    """Runs `command`; returns (seconds until every rank printed its line, seconds until it exited)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen, first_lines, buffer, output = set(), None, b"", []
    try:
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"{command[0]} took over {timeout} s:\n" + b"".join(output).decode())
            if not selector.select(timeout=1):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            output.append(chunk)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                match = RANK_LINE.match(line.decode(errors="replace").strip())
                if match:
                    seen.add(int(match.group(1)))
                    if len(seen) == world and first_lines is None:
                        first_lines = time.perf_counter() - start
        proc.wait(timeout=timeout)
        exited = time.perf_counter() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or first_lines is None:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}, ranks seen {sorted(seen)}:\n"
                           + b"".join(output).decode(errors="replace"))
    return first_lines, exited


def measure(spur, python, repeats):
    """Interleaved runs of both launchers; returns {name: [(first_lines_s, exit_s), ...]}."""
    with tempfile.TemporaryDirectory() as home:
        # No configuration file of the user's may change what either launcher does.
        env = dict(os.environ, XDG_CONFIG_HOME=home, HF_HOME=home, OMP_NUM_THREADS="1")
        commands = {
            "torchrun": [python, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--redirects", "1",
                         "--tee", "1", "--no_python", "/bin/echo", "hi"],
            "spur": [spur, "launch", "--num_processes", "2", "/bin/echo", "hi"],
        }
        runs = {name: [] for name in commands}
        for _ in range(repeats):
            for name, command in commands.items():
                runs[name].append(time_launch(command, env))
        return runs


def report(runs):
    torchrun = [statistics.median(r[i] for r in runs["torchrun"]) for i in range(2)]
    spur = [statistics.median(r[i] for r in runs["spur"]) for i in range(2)]
    for i, what in enumerate(("both ranks' first line", "launcher exited")):
        ratio = spur[i] / torchrun[i]
        print(f"launch 2 ranks, {what:23} torchrun {torchrun[i] * 1000:9.1f} ms  spur {spur[i] * 1000:9.1f} ms  "
              f"ratio {ratio:7.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spur", required=True, help="path to the spur command")
    parser.add_argument("--python", default="/usr/bin/python3", help="python3 with Debian's torch (baseline)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each launcher, interleaved; medians count")
    args = parser.parse_args()
    print(f"Launch latency: median of {args.repeats} interleaved runs, program /bin/echo hi")
    report(measure(args.spur, args.python, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
