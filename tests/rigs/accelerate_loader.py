#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Judges a run configuration with the installed Accelerate itself: its own loader
(accelerate.commands.config.config_args.load_config_from_file, which rejects unknown keys and bad enums), then for
a local file the checks `accelerate launch --config_file FILE` makes before it starts anything
(accelerate.commands.launch._validate_launch_command) and the precision it converts (PrecisionType). A SageMaker
file stops after the loader: every SageMaker `accelerate launch` fails in Accelerate itself (a missing
parallelism_config attribute), which says nothing about the file.
Usage: accelerate_loader.py FILE [FILE...]. Prints "FILE<TAB>accepted" or "FILE<TAB>rejected: reason" per file;
exit 0 when every file is accepted, else 1. `--version` prints Accelerate's version. `--serve` judges the file named
on each line of standard input and answers one such line at once, until the input ends (a test asks many times and
pays Accelerate's 3 s import once)."""
import sys

import accelerate
from accelerate.commands.config.config_args import SageMakerConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import PrecisionType


def judge(path):
    try:
        config = load_config_from_file(path)
        if isinstance(config, SageMakerConfig):
            PrecisionType(config.mixed_precision)
            return None
        args = launch_command_parser().parse_args(["--config_file", path, "--no_python", "/bin/true"])
        _validate_launch_command(args)
        PrecisionType(args.mixed_precision or "no")
    except Exception as error:  # Accelerate raises ValueError, TypeError or KeyError for what it refuses
        return f"{type(error).__name__}: {error}"
    return None


def main():
    if sys.argv[1:] == ["--version"]:
        print(accelerate.__version__)
        return 0
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            path = line.rstrip("\n")
            problem = judge(path)
            print(f"{path}\t" + (f"rejected: {problem}" if problem else "accepted"), flush=True)
        return 0
    refused = 0
    for path in sys.argv[1:]:
        problem = judge(path)
        print(f"{path}\t" + (f"rejected: {problem}" if problem else "accepted"))
        refused += problem is not None
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
