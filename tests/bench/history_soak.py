#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak test of the run history (issue 12): WRITERS writer processes (spur_history_rig, each appending points of
metric "x" in random batches at random pauses and printing "flushed K" after each commit) and READERS reader
processes (`spur runs list --json` and `spur runs export`) share one history for SECONDS, while writers are killed
with SIGKILL at random moments and replaced. Afterwards `PRAGMA integrity_check` must say ok, and every writer's
series must hold exactly the points 0..K-1 it reported as flushed (K or more: a commit may land just before the
kill, after its last report), in order. Prints one JSON summary line; exits 1 on any loss or corruption.
Run briefly by ctest (bench.soak) and for longer by hand:
  tests/bench/history_soak.py --rig build/tests/spur_history_rig --spur build/app/spur --seconds 600
"""
import argparse
import json
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time


class Writer:
    def __init__(self, rig, path, name, rng):
        self.name = name
        self.run_id = None
        self.flushed = 0
        self.process = subprocess.Popen(
            [rig, path, name, "1000000000", str(rng.randint(20, 400)), str(rng.randint(0, 3000))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.stdout:
            words = line.split()
            if len(words) == 2 and words[0] == "run":
                self.run_id = int(words[1])
            elif len(words) == 2 and words[0] == "flushed":
                self.flushed = int(words[1])

    def kill(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.thread.join(timeout=10)
        return self.process.stderr.read()


def reader_loop(spur, path, stop, counts, errors):
    env = dict(os.environ, SPUR_HISTORY=path)
    while not stop.is_set():
        listed = subprocess.run([spur, "runs", "list", "--json"], env=env, capture_output=True, text=True)
        if listed.returncode != 0:
            errors.append("runs list: " + listed.stdout + listed.stderr)
            return
        runs = json.loads(listed.stdout or "[]")
        counts["reads"] += 1
        if runs:
            run = random.choice(runs)
            exported = subprocess.run([spur, "runs", "export", str(run["id"]), "--format", "csv"], env=env,
                                      capture_output=True, text=True)
            # A run with no points yet has no metric to export; anything else must succeed.
            if exported.returncode != 0 and "no metric" not in exported.stdout + exported.stderr:
                errors.append("runs export: " + exported.stdout + exported.stderr)
                return
            counts["exports"] += 1


def series_steps(db, run_id):
    steps = []
    for count, data in db.execute(
            "SELECT p.count, p.data FROM points p JOIN series s ON p.series_id = s.id "
            "WHERE s.run_id = ? AND s.key = 'x' ORDER BY p.id", (run_id,)):
        for i in range(count):
            steps.append(struct.unpack_from("<q", data, i * 24)[0])
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rig", required=True, help="spur_history_rig")
    parser.add_argument("--spur", required=True, help="the spur command (readers)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--history", help="history file (default: a new one in a temporary directory)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        path = args.history or os.path.join(scratch, "history.db")
        writers, finished = [], []
        stop = threading.Event()
        counts = {"reads": 0, "exports": 0}
        errors = []
        readers = [threading.Thread(target=reader_loop, args=(args.spur, path, stop, counts, errors), daemon=True)
                   for _ in range(args.readers)]
        serial = 0
        kills = 0
        try:
            for _ in range(args.writers):
                serial += 1
                writers.append(Writer(args.rig, path, f"soak-{serial}", rng))
            for reader in readers:
                reader.start()
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline and not errors:
                time.sleep(rng.uniform(0.05, 0.5))
                victim = rng.randrange(len(writers))
                stderr = writers[victim].kill()
                if writers[victim].process.returncode not in (-signal.SIGKILL, 0):
                    errors.append(f"{writers[victim].name} exited {writers[victim].process.returncode}: {stderr}")
                finished.append(writers[victim])
                kills += 1
                serial += 1
                writers[victim] = Writer(args.rig, path, f"soak-{serial}", rng)
        finally:
            stop.set()
            for writer in writers:
                writer.kill()
                finished.append(writer)
            for reader in readers:
                reader.join(timeout=60)
        db = sqlite3.connect(path)
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        lost = []
        points = 0
        for writer in finished:
            if writer.run_id is None:
                continue  # killed before its run was created and reported
            steps = series_steps(db, writer.run_id)
            points += len(steps)
            if len(steps) < writer.flushed or steps != list(range(len(steps))):
                lost.append({"run": writer.run_id, "flushed": writer.flushed, "stored": len(steps)})
        db.close()
        ok = integrity == "ok" and not lost and not errors
        print(json.dumps({"seconds": args.seconds, "seed": args.seed, "writers": args.writers,
                          "readers": args.readers, "writer_processes": len(finished), "sigkills": kills,
                          "points": points, "reads": counts["reads"], "exports": counts["exports"],
                          "integrity_check": integrity, "lost": lost[:5], "errors": errors[:3], "ok": ok}))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
