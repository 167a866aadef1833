#!/usr/bin/env bash
# CI: would a target need a package its install step does not install?
# pkg-config is shown only the .pc files of the packages a list installs (and
# what they pull in); then, in clean build folders:
#   build list, tests off:  configure + build + `attn --help` must work (`make run`)
#   build list, tests on:   configure must FAIL (the check sees test packages
#                            missing, so it can see a missing build package too)
#   build + test lists:     configure with tests on must work (`make test`)
# Usage: scripts/check-deps.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Installed packages a list pulls in (Depends, recursively).
closure() {
  apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "$@" 2>/dev/null | grep -v '^ ' | sed 's/:.*//' | sort -u
}
# A pkg-config folder with the .pc files those packages own (alternatives
# symlinks resolved to their owner).
pc_dir() { # out-dir, package-list-file
  mkdir -p "$1"
  local d f real
  # shellcheck disable=SC2046
  dpkg -L $(cat "$2") 2>/dev/null | grep '\.pc$' | sort -u > "$1.owned" || true
  for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
    [ -d "$d" ] || continue
    for f in "$d"/*.pc; do
      [ -e "$f" ] || continue
      real=$(readlink -f "$f")
      if grep -qxF "$real" "$1.owned" && [ ! -e "$1/$(basename "$f")" ]; then
        ln -s "$real" "$1/$(basename "$f")"
      fi
    done
  done
}
fails=0
mapfile -t build_pkgs < <(scripts/install-deps.sh --print build)
mapfile -t test_pkgs < <(scripts/install-deps.sh --print test)
closure "${build_pkgs[@]}" > "$tmp/build.list"
closure "${test_pkgs[@]}" > "$tmp/test.list"
pc_dir "$tmp/pc-build" "$tmp/build.list"
pc_dir "$tmp/pc-test" "$tmp/test.list"
echo "check-deps: build list sees: $(ls "$tmp/pc-build" | tr '\n' ' ')"
# Every library attn.pc names (libxxhash for the token files, ...) comes
# with the build list.
for m in $(sed -n 's/^Requires.private: //p' attn.pc.in); do
  if [ -e "$tmp/pc-build/$m.pc" ]; then
    echo "ok   - $m (attn.pc) comes with the build list"
  else
    echo "FAIL - attn.pc needs $m, which no package of the build list installs"; fails=$((fails + 1))
  fi
done

if PKG_CONFIG_LIBDIR=$tmp/pc-build cmake -S . -B "$tmp/run" -DATTN_BUILD_TESTS=OFF \
     > "$tmp/run.log" 2>&1 &&
   cmake --build "$tmp/run" -j "$jobs" >> "$tmp/run.log" 2>&1 &&
   "$tmp/run/attn" --help > /dev/null 2>&1; then
  echo "ok   - the run path configures and builds with only the build list"
else
  echo "FAIL - the run path needs more than the build list:"; tail -20 "$tmp/run.log"; fails=$((fails + 1))
fi
if PKG_CONFIG_LIBDIR=$tmp/pc-build cmake -S . -B "$tmp/neg" -DATTN_BUILD_TESTS=ON > "$tmp/neg.log" 2>&1; then
  echo "FAIL - tests configured without the test list: this check cannot see missing packages"
  fails=$((fails + 1))
else
  echo "ok   - tests need the test list (and the check notices a missing package)"
fi
if PKG_CONFIG_LIBDIR=$tmp/pc-test cmake -S . -B "$tmp/test" -DATTN_BUILD_TESTS=ON > "$tmp/test.log" 2>&1; then
  echo "ok   - the tests configure with the build + test lists"
else
  echo "FAIL - the tests need more than the test list:"; tail -20 "$tmp/test.log"; fails=$((fails + 1))
fi
[ $fails -eq 0 ] && exit 0
exit 1
