#!/usr/bin/env bash
# Crash-and-resume soak on the real CLI, at sizes the test suite does not run: a seeded workload is
# ingested once cleanly, and once by a process that is killed with SIGKILL at random moments and restarted
# on the same input until a run completes; the two stores must then export byte-identical logs
# (`teamlog log`), both audit clean, and their audits must report the same tables with the same record
# counts and digests.
#
#   tools/crash-soak.sh [--mode batch|follow] [--ops N] [--seeds FIRST-LAST] [--bin DIR]
#
# `batch` restarts `ingest FILE`; `follow` pipes the file into `ingest - --follow --emit all`. Each
# restart takes a random batch size, checkpoint interval and flush window, and a working-set budget of
# 1 MiB, so checkpoints, evictions and reloads all happen between kills. The kills come every 0–0.3 s,
# spaced 40 ms further apart after each, so a run ends after a few dozen. Stores are made under $TMPDIR
# (else /tmp) and removed when a seed passes; a failing seed's directory is kept and named. Needs
# `teamlog` and `teamlog-gen` built in release (`--bin`, default `.build/release`). Exits 1 if a seed fails.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=batch ops=200000 seeds=1-5 bin=.build/release
while [ $# -gt 0 ]; do
  case "$1" in
    --mode) mode=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    *) echo "usage: $0 [--mode batch|follow] [--ops N] [--seeds FIRST-LAST] [--bin DIR]" >&2; exit 2 ;;
  esac
done
case "$mode" in batch | follow) ;; *) echo "--mode is batch or follow" >&2; exit 2 ;; esac
teamlog=$bin/teamlog gen=$bin/teamlog-gen
for tool in "$teamlog" "$gen"; do
  [ -x "$tool" ] || { echo "$tool is missing: swift build -c release --product $(basename "$tool")" >&2; exit 2; }
done
first=${seeds%-*} last=${seeds#*-}
failed=0

# A random delay in seconds: 0–0.3 s plus 40 ms per kill so far.
delay() { awk -v k="$1" -v r="$RANDOM" 'BEGIN { printf "%.3f", r / 32768 * 0.3 + k * 0.04 }'; }

# Starts one resumable run into store $1 in the background; its pid in $run_pid.
start_run() {
  local store=$1 dir=$2
  local batch=$((RANDOM % 700 + 50)) ckops=$((RANDOM % 3000 + 100)) ckms=$((RANDOM % 50)) flush=$((RANDOM % 20 + 1))
  if [ "$mode" = batch ]; then
    "$teamlog" ingest "$dir/w.jsonl" --store "$store" --emit none --batch-size $batch --checkpoint-ops $ckops \
      --checkpoint-ms $ckms --cache-mb 1 >/dev/null 2>"$dir/run.err" &
  else
    # A pipe, not a redirection: a follower waits for a regular file to grow; a pipe ends. `$!` is the
    # pipeline's last process, the one killed.
    cat "$dir/w.jsonl" | "$teamlog" ingest - --follow --store "$store" --emit all --flush-ms $flush \
      --batch-size $batch --checkpoint-ops $ckops --checkpoint-ms $ckms --cache-mb 1 >/dev/null 2>"$dir/run.err" &
  fi
  run_pid=$!
}

for seed in $(seq "$first" "$last"); do
  dir=$(mktemp -d "${TMPDIR:-/tmp}/teamlog-soak.XXXXXX")
  "$gen" --ops "$ops" --seed "$seed" --users 3000 --teams 60 --max-team 800 >"$dir/w.jsonl"
  if ! "$teamlog" ingest "$dir/w.jsonl" --store "$dir/clean" --emit none >/dev/null 2>"$dir/clean.err"; then
    echo "seed $seed: the clean run failed ($dir)"; failed=1; continue
  fi
  kills=0 outcome=""
  while [ -z "$outcome" ]; do
    start_run "$dir/killed" "$dir"
    sleep "$(delay $kills)"
    if kill -0 $run_pid 2>/dev/null; then
      kill -9 $run_pid
      wait $run_pid 2>/dev/null
      kills=$((kills + 1))
      [ $kills -gt 200 ] && outcome="no run completed in 200 restarts"
    else
      wait $run_pid
      status=$?
      if [ $status -eq 0 ]; then outcome=done; else outcome="a run exited $status: $(tail -1 "$dir/run.err")"; fi
    fi
  done
  if [ "$outcome" != done ]; then
    echo "seed $seed: $outcome ($dir)"; failed=1; continue
  fi
  "$teamlog" log --store "$dir/clean" >"$dir/clean.log"
  "$teamlog" log --store "$dir/killed" >"$dir/killed.log"
  "$teamlog" audit --store "$dir/clean" >"$dir/clean.audit" 2>&1
  clean_audit=$?
  "$teamlog" audit --store "$dir/killed" >"$dir/killed.audit" 2>&1
  killed_audit=$?
  # The tables' lines (name, records, digest, verdict); the rate and the replay's eviction counts vary.
  tables() { grep -E '^[a-zA-Z]+ +[0-9]+ +[0-9a-f]+ +' "$1"; }
  if [ $clean_audit -ne 0 ] || [ $killed_audit -ne 0 ]; then
    echo "seed $seed: audit exited $clean_audit (clean) / $killed_audit (killed) ($dir)"; failed=1
  elif ! cmp -s "$dir/clean.log" "$dir/killed.log"; then
    echo "seed $seed: the logs differ after $kills kills: $(cmp "$dir/clean.log" "$dir/killed.log" 2>&1 | head -1) ($dir)"
    failed=1
  elif ! diff <(tables "$dir/clean.audit") <(tables "$dir/killed.audit") >/dev/null || [ -z "$(tables "$dir/clean.audit")" ]; then
    echo "seed $seed: the audits' tables differ ($dir)"; failed=1
  else
    echo "seed $seed: OK after $kills kills ($mode, $(wc -l <"$dir/clean.log") events)"
    rm -rf "$dir"
  fi
done
exit $failed
