#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages as a user gets them: builds them with CPack, checks their metadata and file lists
# (dpkg-deb, desktop-file-validate, appstreamcli, man pages, bash completion), unpacks them into a temporary root
# and from there runs `spur --version`, a 2-rank `spur launch` of the example, `spur-studio --version`, and
# builds an out-of-tree training program against the unpacked CMake package.
#   deb_test.sh BUILD_DIR CONSUMER_DIR WORK_DIR VERSION CPACK STUDIO(1: the Studio was built, its package is due)
set -euo pipefail
build=$1 consumer=$2 work=$3 version=$4 cpack=$5 with_studio=$6
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
step() { echo "deb_test: $*"; }

rm -rf "$work"
mkdir -p "$work"
step "cpack (packages into $work/packages)"
(cd "$build" && "$cpack" -B "$work/packages" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack failed"; }
engine="$work/packages/spur_${version}_amd64.deb"
studio="$work/packages/spur-studio_${version}_amd64.deb"
[ -f "$engine" ] || fail "no $engine (cpack made: $(ls "$work/packages"))"
if [ "$with_studio" = 1 ] && [ ! -f "$studio" ]; then fail "the Studio was built but cpack made no $studio"; fi

field() { dpkg-deb -f "$1" "$2"; }
expect_field() {  # package field pattern
  local value
  value=$(field "$1" "$2")
  [[ "$value" =~ $3 ]] || fail "$(basename "$1"): $2 is '$value', expected /$3/"
}
step "metadata"
expect_field "$engine" Package '^spur$'
expect_field "$engine" Version "^${version//./\\.}$"
expect_field "$engine" Architecture '^amd64$'
expect_field "$engine" Depends 'libtorch1\.13'          # from dpkg-shlibdeps
expect_field "$engine" Depends 'libtorch-dev'           # building against the headers
expect_field "$engine" Depends 'libqt6core6'
expect_field "$engine" Depends 'libsqlite3-0'
expect_field "$engine" Depends 'libgloo-dev'
expect_field "$engine" Depends 'libopenblas0'
expect_field "$engine" Depends 'libtorch-dev \(<< '
expect_field "$engine" Maintainer '.+<.+@.+>'
expect_field "$engine" Description '^Accelerate-style distributed training for LibTorch programs'
# Every dependency (one of each alternative) is a package Debian's archive offers.
resolvable() {  # package
  local groups offered
  groups=$(field "$1" Depends | tr ',' '\n' | sed 's/([^)]*)//g; s/^ *//; s/ *$//' | grep -v '^spur$')
  # One apt-cache call for every name (each call costs about a second): the names that have a candidate.
  # shellcheck disable=SC2046
  offered=$(apt-cache policy $(tr '|' ' ' <<<"$groups") 2>/dev/null |
            awk '/^[^ ].*:$/ {name = substr($0, 1, length($0) - 1)} /Candidate: [^(]/ {print name}')
  while read -r alternatives; do
    local found=""
    for name in ${alternatives//|/ }; do
      grep -qx "$name" <<<"$offered" && found=$name
    done
    [ -n "$found" ] || fail "$(basename "$1"): no candidate for dependency '$alternatives'"
  done <<<"$groups"
}
resolvable "$engine"

files() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
expect_files() {  # package paths...
  local package=$1 list
  shift
  list=$(files "$package")
  for path in "$@"; do
    grep -qxF "$path" <<<"$list" || fail "$(basename "$package") lacks $path"
  done
}
step "file lists"
expect_files "$engine" /usr/bin/spur /usr/lib/libspur.so /usr/include/spur/spur.h /usr/include/spur/version.h \
  /usr/lib/cmake/Spur/SpurConfig.cmake /usr/lib/cmake/Spur/SpurConfigVersion.cmake /usr/libexec/spur/spur-check \
  /usr/libexec/spur/examples/train_mlp /usr/libexec/spur/examples/train_fashion_mnist \
  /usr/libexec/spur/examples/train_gpt /usr/share/bash-completion/completions/spur /usr/share/man/man1/spur.1.gz \
  /usr/share/doc/spur/copyright
if grep -q 'spur-studio\|/usr/share/applications' <<<"$(files "$engine")"; then fail "the engine package holds Studio files"; fi

if [ -f "$studio" ]; then
  expect_field "$studio" Package '^spur-studio$'
  expect_field "$studio" Version "^${version//./\\.}$"
  expect_field "$studio" Depends "spur \\(= ${version//./\\.}\\)"
  expect_field "$studio" Depends 'libqt6widgets6'
  expect_field "$studio" Recommends '^dataset-fashion-mnist$'
  expect_field "$studio" Depends 'libqcustomplot'
  expect_field "$studio" Description '^desktop app to set up, launch and watch Spur training runs'
  resolvable "$studio"
  expect_files "$studio" /usr/bin/spur-studio /usr/share/applications/dev.spur.Studio.desktop \
    /usr/share/metainfo/dev.spur.Studio.metainfo.xml /usr/share/icons/hicolor/scalable/apps/dev.spur.Studio.svg \
    /usr/share/man/man1/spur-studio.1.gz /usr/share/doc/spur-studio/copyright
  for size in 16 24 32 48 64 128 256; do
    expect_files "$studio" /usr/share/icons/hicolor/${size}x${size}/apps/dev.spur.Studio.png
  done
  if grep -q '/usr/lib/libspur\|/usr/bin/spur$' <<<"$(files "$studio")"; then fail "the Studio package holds engine files"; fi
else
  step "no Studio package (built without QCustomPlot): its checks are skipped"
fi

root="$work/root"
step "unpacking into $root"
dpkg-deb -x "$engine" "$root"
[ -f "$studio" ] && dpkg-deb -x "$studio" "$root"
# No packaged program may look for libraries in the build tree (LD_LIBRARY_PATH below would hide it).
while IFS= read -r -d '' binary; do
  if head -c 4 "$binary" | grep -q 'ELF'; then
    dynamic=$(readelf -d "$binary" 2>/dev/null || true)
    if grep -q 'RPATH\|RUNPATH' <<<"$dynamic"; then fail "$binary carries an RPATH/RUNPATH: $(grep 'PATH' <<<"$dynamic")"; fi
  fi
done < <(find "$root" -type f -print0)

if [ -f "$studio" ]; then
  step "desktop entry, AppStream metainfo, icons"
  desktop-file-validate "$root/usr/share/applications/dev.spur.Studio.desktop" || fail "desktop-file-validate"
  appstreamcli validate --no-net "$root/usr/share/metainfo/dev.spur.Studio.metainfo.xml" || fail "appstreamcli validate"
  grep -q "<release version=\"$version\"" "$root/usr/share/metainfo/dev.spur.Studio.metainfo.xml" ||
    fail "the metainfo does not name release $version"
  grep -qx 'Icon=dev.spur.Studio' "$root/usr/share/applications/dev.spur.Studio.desktop" || fail "desktop Icon="
  for size in 16 24 32 48 64 128 256; do
    kind=$(file "$root/usr/share/icons/hicolor/${size}x${size}/apps/dev.spur.Studio.png")
    grep -q "PNG image data, $size x $size" <<<"$kind" ||
      fail "icon ${size}x${size} is not a ${size}x${size} PNG"
  done
fi

step "man pages and bash completion"
for page in "$root"/usr/share/man/man1/*.1.gz; do
  gzip -t "$page" || fail "$page is not gzip"
  warnings=$(zcat "$page" | groff -man -ww -z 2>&1 || true)
  [ -z "$warnings" ] || fail "$(basename "$page"): groff says: $warnings"
  grep -q "$version" <<<"$(zcat "$page")" || fail "$(basename "$page") does not carry version $version"
done
completions=$(bash -c 'source "$1"; COMP_WORDS=(spur la); COMP_CWORD=1; _spur; echo "${COMPREPLY[*]}";
                       COMP_WORDS=(spur launch --num_p); COMP_CWORD=2; _spur; echo "${COMPREPLY[*]}"' _ \
              "$root/usr/share/bash-completion/completions/spur")
[ "$completions" = $'launch\n--num_processes' ] || fail "bash completion gave: $completions"

# The unpacked tree is not in the loader's path: point it there, as /usr would be.
export LD_LIBRARY_PATH="$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export XDG_CONFIG_HOME="$work/config" SPUR_HISTORY="$work/history.db"
unset SPUR_CHECK_PROGRAM SPUR_PROGRAM  # the packaged programs find their own helpers
step "spur --version from the unpacked tree"
out=$("$root/usr/bin/spur" --version) || fail "spur --version failed"
[ "$out" = "spur $version" ] || fail "spur --version said '$out'"
if [ -f "$studio" ]; then
  out=$("$root/usr/bin/spur-studio" --version) || fail "spur-studio --version failed"
  [ "$out" = "spur-studio $version" ] || fail "spur-studio --version said '$out'"
  out=$("$root/usr/bin/spur-studio" --help) || fail "spur-studio --help failed"
  grep -q -- '--demo' <<<"$out" || fail "spur-studio --help said: $out"
fi
# The example and spur-check link the engine (the spur command itself never links LibTorch).
for program in "$root/usr/libexec/spur/examples/train_mlp" "$root/usr/libexec/spur/spur-check"; do
  libraries=$(ldd "$program") || fail "ldd $program"  # (not piped into grep -q: pipefail would see ldd's SIGPIPE)
  grep -q "$root/usr/lib/libspur.so" <<<"$libraries" || fail "$(basename "$program") does not load the unpacked libspur"
done

step "a 2-rank spur launch of the packaged example"
out=$("$root/usr/bin/spur" launch --num_processes 2 "$root/usr/libexec/spur/examples/train_mlp" --epochs 1 2>&1) ||
  fail "spur launch failed: $out"
grep -q '^\[rank0\] epoch 1 accuracy' <<<"$out" || fail "no accuracy line from rank 0: $out"
grep -q 'recorded as run' <<<"$out" || fail "the launch was not recorded: $out"
out=$("$root/usr/bin/spur" runs list) || fail "spur runs list failed"
grep -q finished <<<"$out" || fail "the run is not recorded as finished: $out"
out=$("$root/usr/bin/spur" test --num_processes 2 --cpu 2>&1) || fail "spur test: $out"
grep -q 'the setup works' <<<"$out" || fail "spur test said: $out"

step "an out-of-tree program built against the unpacked CMake package"
cmake -S "$consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$root/usr" \
  >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "configure against the package"; }
cmake --build "$work/consumer" >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "build against the package"; }
grep -q "$root/usr/lib/cmake/Spur" "$work/consumer/CMakeCache.txt" || fail "the consumer did not find the unpacked Spur"
out=$("$work/consumer/train") || fail "the consumer failed: $out"
grep -q "consumer built against spur $version" <<<"$out" || fail "consumer said: $out"
step "ok"
