#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Format and lint checks, as CI runs them (installer/setup.sh test):
#   clang-format (.clang-format) on every C++ file in the tree: it was formatted once, so any drift is a change's;
#   clang-tidy (.clang-tidy) on the C++ sources a change touches, with the compile commands of build/;
#   the house's floors (tests/lint/house.py --check): no include arrow runs back up (app/'s folders, ui/, engine/).
# Usage: tests/lint/check.sh [BASE]   BASE: the commit the change starts from (default: the commit named in
#                                      tests/lint/base, the last one whose tree was checked whole, so that a
#                                      landing of several commits is checked in all of them; HEAD~1 without it)
#        tests/lint/check.sh --fix    reformats every file in place (then review and commit)
# Debian's clang-format and clang-tidy (14 on Debian 12); exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/../.."
# (examples/ported: other projects' programs, kept in their authors' format so that their diffs stay small)
files() { git ls-files -- '*.cpp' '*.h' ':!:tests/fixtures/**' ':!:examples/ported/**'; }
if [ "${1:-}" = "--fix" ]; then
  files | xargs clang-format -i
  exit 0
fi
status=0
echo "clang-format: $(files | wc -l) files"
if ! files | xargs clang-format --dry-run -Werror 2>/tmp/spur-format.$$; then
  grep -E "error:" /tmp/spur-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  not formatted: /'
  echo "  (tests/lint/check.sh --fix formats them)"
  status=1
fi
rm -f /tmp/spur-format.$$
if ! python3 tests/lint/house.py --check; then
  echo "  (docs/architecture.md: the floors, and what each folder may include)"
  status=1
fi

recorded=$(grep -v '^#' tests/lint/base 2>/dev/null | head -n 1 | tr -d '[:space:]' || true)
if [ -z "${1:-}" ] && [ -n "$recorded" ] && git merge-base --is-ancestor "$recorded" HEAD 2>/dev/null; then
  base=$recorded
else
  base=${1:-HEAD~1}
fi
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "clang-tidy: no commit $base to compare with; nothing to check"
  exit $status
fi
# (files that must not compile, as tests/unit/objects_compile_fail.cpp, are left out)
mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- '*.cpp' ':!:tests/fixtures/**' ':!:tests/fuzz/**' ':!:examples/ported/**' \
  ':!:*compile_fail*')
if [ ! -f build/compile_commands.json ]; then
  echo "clang-tidy: build/compile_commands.json is missing: configure build/ first (cmake --preset default)"
  exit 1
fi
checked=()
for file in "${changed[@]}"; do
  # Only what build/ compiles (the fuzz targets build with their own project).
  grep -q "\"file\": \"$PWD/$file\"" build/compile_commands.json && checked+=("$file")
done
echo "clang-tidy: ${#checked[@]} changed source file(s) since $base"
# build/ precompiles headers with GCC (-include .../cmake_pch.hxx beside a GCC .gch), which clang cannot read: it
# stopped at "not a valid precompiled PCH file" on every such file, and until issue 40 that error passed as clean.
# clang-tidy reads a copy of the compile commands whose -include names a copy of the header with no .gch beside it,
# so it parses the same headers as text.
database=$(mktemp -d)
trap 'rm -rf "$database"' EXIT
python3 - build/compile_commands.json "$database" <<'PY'
import json, os, shutil, sys
entries, out = json.load(open(sys.argv[1])), sys.argv[2]
copies = {}
for entry in entries:
    words = entry["command"].split(" ")
    for i, word in enumerate(words):
        if i and words[i - 1] == "-include" and word.endswith("/cmake_pch.hxx"):
            if word not in copies:
                copies[word] = os.path.join(out, "pch", str(len(copies)), "cmake_pch.hxx")
                os.makedirs(os.path.dirname(copies[word]))
                shutil.copyfile(word, copies[word])
            words[i] = copies[word]
    entry["command"] = " ".join(words)
json.dump(entries, open(os.path.join(out, "compile_commands.json"), "w"))
PY
for file in "${checked[@]}"; do
  # clang-tidy exits non-zero on findings (warnings are errors here): keep its output apart from its status, or
  # pipefail would make every finding look like a clean file (it did until issue 15). A file it could not parse
  # ("error: ..." with no path, "Error while processing") fails too.
  report=$(clang-tidy -p "$database" --quiet "$file" 2>&1 || true)
  if grep -E -A3 "^$PWD/.*(warning|error):|^error:|^Error while processing" <<<"$report"; then
    status=1
  fi
done
exit $status
