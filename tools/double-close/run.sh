#!/usr/bin/env bash
# Runs the test suite (or `swift test` with the arguments given) with every close(2) that fails with
# EBADF logged, then prints each such close of a Swift process with its stack symbolized.
#   tools/double-close/run.sh [swift test options…]
# The suite's own pass or fail is printed as usual; this script exits 1 when a close failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d -t teamlog-double-close.XXXXXX)
gcc -O1 -shared -fPIC -o "$out/shim.so" tools/double-close/shim.c -ldl
swift build --build-tests
status=0
DOUBLE_CLOSE_DIR="$out" LD_PRELOAD="$out/shim.so" swift test --skip-build "$@" >"$out/test.txt" 2>&1 || status=$?
tail -2 "$out/test.txt"
found=0
for log in "$out"/log.*; do
  [ -s "$log" ] || continue
  # Shells close -1 on purpose; only the Swift processes' closes are ours.
  grep -q -E '\.xctest|/debug/|/release/' "$log" || continue
  found=1
  echo "== $log"
  while IFS= read -r line; do
    if [[ "$line" =~ ^(/[^\(]+)\(\+(0x[0-9a-f]+)\) ]]; then
      addr2line -f -C -i -e "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" 2>/dev/null | swift demangle --simplified | sed 's/^/    /'
    else
      echo "  $line"
    fi
  done <"$log"
done
[ "$found" -eq 0 ] && echo "no close failed with EBADF (test run exit $status; logs in $out)"
[ "$found" -eq 0 ] || { echo "closes failed with EBADF (logs in $out)"; exit 1; }
