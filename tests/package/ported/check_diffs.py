#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Each port in examples/ported beside its original: the stored diff (PORT.diff) is `diff -u` of the two as they are,
# docs/porting.md's table names its true counts of added and removed lines, and the README's before and after is
# mnist's diff as stored.
#   check_diffs.py PORTED_DIR PORTING_MD README_MD [--write]   (--write: rewrites the stored diffs)
import re
import subprocess
import sys
from pathlib import Path

PORTS = {  # name: (original, port), relative to the port's folder
    "mnist": ("original/mnist.cpp", "mnist.cpp"),
    "dcgan": ("original/dcgan.cpp", "dcgan.cpp"),
    "feedforward": ("original/src/main.cpp", "src/main.cpp"),
}

ported, doc = Path(sys.argv[1]), Path(sys.argv[2]).read_text()
failed = False
for name, (original, port) in PORTS.items():
    folder = ported / name
    diff = subprocess.run(["diff", "-u", "--label", f"{name}/{original}", "--label", f"{name}/{port}",
                           str(folder / original), str(folder / port)], capture_output=True, text=True).stdout
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    stored = folder / f"{name}.diff"
    if "--write" in sys.argv:
        stored.write_text(diff)
    elif not stored.exists() or stored.read_text() != diff:
        print(f"{stored}: not the diff of {original} and {port} (check_diffs.py --write rewrites it)")
        failed = True
    row = re.search(rf"^\| `?{name}`? \|.*\| (\d+) \| (\d+) \|", doc, re.M)
    if not row or (int(row.group(1)), int(row.group(2))) != (added, removed):
        print(f"{sys.argv[2]}: the row of {name} should say {added} added and {removed} removed lines"
              f" (it says {row.groups() if row else 'nothing'})")
        failed = True
    print(f"{name}: {added} lines added, {removed} removed")
    if name == "mnist" and f"```diff\n{diff}```" not in Path(sys.argv[3]).read_text():
        print(f"{sys.argv[3]}: its before and after is not {stored} as it is")
        failed = True
sys.exit(1 if failed else 0)
