#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The house at a glance: files and lines per folder, the largest files, and every include arrow between floors.
# `--check` fails (exit 1) when an arrow runs back up: a folder of app/ including one above it (the floors are
# listed below, bottom first), ui/ including the engine without app/ between, or the engine including app/ or ui/.
# Run by tests/lint/check.sh; `python3 tests/lint/house.py` prints the picture (docs/architecture.md shows it).
import argparse
import collections
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
# app/'s folders in floor order, bottom first: each is used only by the folders after it (and by ui/).
APP_FLOORS = ["config", "launch", "slurm", "sagemaker", "setup", "runs", "sweep", "studio", "cli"]
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]', re.M)
SOURCES = (".h", ".cpp")


def sources(top):
    return sorted(p for p in (ROOT / top).rglob("*") if p.suffix in SOURCES and p.is_file())


def arrows():
    """(file, included, why) for every arrow that runs back up."""
    wrong = []
    for path in sources("app"):
        here = path.relative_to(ROOT / "app").parts[0]
        if here not in APP_FLOORS:
            wrong.append((path, "", f"app/{here}/ is not one of app/'s floors ({', '.join(APP_FLOORS)})"))
            continue
        for included in INCLUDE.findall(path.read_text(errors="replace")):
            top = included.split("/")[0]
            if top in APP_FLOORS and APP_FLOORS.index(top) > APP_FLOORS.index(here):
                wrong.append((path, included, f"app/{here}/ is below app/{top}/"))
    for path in sources("ui"):
        for included in INCLUDE.findall(path.read_text(errors="replace")):
            if included.startswith("spur/"):
                wrong.append((path, included, "the Studio reaches the engine only through app/"))
    for path in sources("engine"):
        for included in INCLUDE.findall(path.read_text(errors="replace")):
            top = included.split("/")[0]
            if top in APP_FLOORS or top in ("ui", "main", "wizard", "dashboard"):
                wrong.append((path, included, "the engine includes nothing of app/ or ui/"))
    return wrong


def picture(largest):
    folders = collections.defaultdict(lambda: [0, 0])
    sizes = []
    for top in ("engine", "app", "ui"):
        for path in sources(top):
            lines = path.read_text(errors="replace").count("\n")
            folder = str(path.parent.relative_to(ROOT))
            folders[folder][0] += 1
            folders[folder][1] += lines
            sizes.append((lines, str(path.relative_to(ROOT))))
    print(f"{'folder':44} {'files':>5} {'lines':>6}")
    for folder in sorted(folders):
        files, lines = folders[folder]
        print(f"{folder:44} {files:5} {lines:6}")
    total = sum(lines for lines, _ in sizes)
    print(f"{'total':44} {len(sizes):5} {total:6}\n\nlargest files:")
    for lines, name in sorted(sizes, reverse=True)[:largest]:
        print(f"{lines:6} {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only check the arrows; exit 1 on one running back up")
    parser.add_argument("--largest", type=int, default=12, help="how many of the largest files to list")
    args = parser.parse_args()
    if not args.check:
        picture(args.largest)
        print()
    wrong = arrows()
    for path, included, why in wrong:
        print(f"{path.relative_to(ROOT)}: includes \"{included}\": {why}")
    print(f"arrows running back up: {len(wrong)}")
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
