#!/usr/bin/env bash
# Runs a command in a memory cgroup with a limit, as a container would (page cache counted): how the
# twenty-fifth session measured a store larger than its memory (BENCHMARKS.md, "A store larger than its
# memory"). Needs root and a writable memory controller (cgroup v1's /sys/fs/cgroup/memory, or v2 with
# `memory` in the root's cgroup.subtree_control). Prints the cgroup's peak usage (and, on v1, how often
# the limit was hit) to stderr at the end; exits with the command's status. Run on cgroup v1 only (the
# machines here); the v2 branch follows the kernel's interface (memory.max, memory.peak) untried.
#
#   tools/memory-limited.sh MIB COMMAND [ARG...]
#   e.g. sync; echo 3 > /proc/sys/vm/drop_caches; tools/memory-limited.sh 1536 .build/release/teamlog ingest …
set -uo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 MIB COMMAND [ARG...]" >&2; exit 2; fi
mib=$1; shift
bytes=$((mib * 1024 * 1024))
name=teamlog-limited-$$
if [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then
  dir=/sys/fs/cgroup/memory/$name version=1
  mkdir "$dir" || exit 1
  echo "$bytes" > "$dir/memory.limit_in_bytes"
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  dir=/sys/fs/cgroup/$name version=2
  mkdir "$dir" || exit 1
  echo "$bytes" > "$dir/memory.max"
else
  echo "$0: no writable memory cgroup controller here" >&2
  exit 1
fi
cleanup() { echo $$ > "$(dirname "$dir")/cgroup.procs" 2>/dev/null || echo $$ > "$(dirname "$dir")/tasks"; rmdir "$dir" 2>/dev/null; }
trap cleanup EXIT
echo $$ > "$dir/cgroup.procs"  # this shell, then the command it runs, in the cgroup
"$@"
status=$?
if [ $version = 1 ]; then
  echo "cgroup v1, ${mib} MiB: peak $(( $(cat "$dir/memory.max_usage_in_bytes") / 1048576 )) MiB, limit hit $(cat "$dir/memory.failcnt") times" >&2
else
  echo "cgroup v2, ${mib} MiB: peak $(( $(cat "$dir/memory.peak" 2>/dev/null || echo 0) / 1048576 )) MiB" >&2
fi
exit $status
