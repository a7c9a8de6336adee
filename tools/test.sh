#!/usr/bin/env bash
# Runs the whole test suite: installs liblmdb-dev when missing, builds (the CLI too: crash tests run it
# as a child process), then `swift test`.
#
# A crash of the test process prints only the crashed thread's backtrace (not the forty idle threads of
# the pool, which push the fatal error's message out of a log's tail), and, when the run fails, the
# lines around any `Fatal error` or `crashed` are printed again at the very end.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh
swift build --build-tests
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=yes,threads=crashed,registers=none,images=none,sanitize=no}"
log=$(mktemp -t teamlog-test.XXXXXX)
trap 'rm -f "$log"' EXIT
status=0
swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
  echo "=== teamlog: the test run failed (exit $status); failures and crashes again:" >&2
  grep -n -E "✘|Fatal error|crashed|Crash|signal code|precondition|error:" "$log" | head -40 >&2 || true
  grep -n -A40 -E "Fatal error|\*\*\* .*crashed" "$log" | head -120 >&2 || true
fi
exit "$status"
