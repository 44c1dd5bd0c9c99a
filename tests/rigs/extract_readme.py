#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Extracts the tested code blocks of the README and the guides so that the test suite compiles and runs them as
# written:
#   extract_readme.py OUT_DIR README.md docs/porting.md ...
# Every block named in the CMake list (tests/CMakeLists.txt) must be found in one of the files. A block marked by a line "<!-- spur:test NAME ... -->" right before its fence becomes OUT_DIR/NAME.inc. From a
# ```diff block the "after" side is kept (lines starting with '+' or ' ', without that first character), minus
# #include lines and "..." lines; a ```cpp block is kept whole. The test harness includes the file inside a
# function that provides what the snippet assumes (train_set, make_mlp, net, adam, loader, loss_fn).
import re
import sys
from pathlib import Path


def extract(readme: str, where: str = "README") -> dict:
    blocks = {}
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        mark = re.match(r"\s*<!--\s*spur:test\s+(\w+)", lines[i])
        if not mark:
            i += 1
            continue
        name = mark.group(1)
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            raise SystemExit(f"{where}: the spur:test mark for {name} (line {i + 1}) is not right before a code fence")
        kind = lines[i + 1][3:].strip()
        body = []
        j = i + 2
        while j < len(lines) and not lines[j].startswith("```"):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            raise SystemExit(f"{where}: the code block of {name} (line {i + 2}) is not closed")
        numbered = list(zip(range(i + 3, j + 1), body))  # README line numbers, 1-based
        if kind == "diff":
            kept = [(n, line[1:]) for n, line in numbered if line[:1] in ("+", " ")]
        elif kind == "cpp":
            kept = numbered
        else:
            raise SystemExit(f"{where}: block {name} is ```{kind}; tested blocks are ```cpp or ```diff")
        kept = [(n, line) for n, line in kept if not line.strip().startswith("#include") and line.strip() != "..."]
        if name in blocks:
            raise SystemExit(f"{where}: two blocks are named {name}")
        blocks[name] = kept
        i = j + 1
    return blocks


def main() -> None:
    out_dir, pages = Path(sys.argv[1]), [Path(page) for page in sys.argv[2:]]
    out_dir.mkdir(parents=True, exist_ok=True)
    seen = {}
    for page in pages:
        for name, code in extract(page.read_text(), str(page)).items():
            if name in seen:
                raise SystemExit(f"{page}: a block named {name} is in {seen[name]} too")
            seen[name] = page
            # Each line keeps its line number in the page, so a compiler error points into the page.
            text = "".join(f'#line {n} "{page}"\n{line}\n' for n, line in code)
            target = out_dir / f"{name}.inc"
            if not target.exists() or target.read_text() != text:
                target.write_text(text)


if __name__ == "__main__":
    main()
