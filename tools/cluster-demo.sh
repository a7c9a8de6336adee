#!/usr/bin/env bash
# teamlog on NATS JetStream, end to end on this machine (docs/nats.md):
#   a 3-node JetStream cluster on loopback ports, streams with 3 replicas, 3 partition processes
#   (`teamlog serve --nats`), the router (`teamlog route`) feeding a generated workload, then per-partition
#   and total rates, a cross-partition query, and a clean stop (SIGTERM) with an audit of every partition.
#
# Usage: tools/cluster-demo.sh [OPS] [PARTITIONS]     (default 100000 ops, 3 partitions)
# Needs nats-server (Debian: nats-server) and libnats-dev; tools/ensure-deps.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=${1:-100000}
PARTS=${2:-3}
tools/ensure-deps.sh
swift build -c release --product teamlog >/dev/null
swift build -c release --product teamlog-gen >/dev/null
BIN=$(swift build -c release --show-bin-path)
DIR=$(mktemp -d /tmp/teamlog-cluster-demo-XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

echo "== 3-node JetStream cluster on loopback ($DIR)"
CLIENT=(); ROUTE=()
for i in 1 2 3; do CLIENT+=("$(free_port)"); ROUTE+=("$(free_port)"); done
URLS=""
for i in 0 1 2; do
  routes=""
  for j in 0 1 2; do [ "$j" != "$i" ] && routes="${routes:+$routes,}nats://127.0.0.1:${ROUTE[$j]}"; done
  nats-server -a 127.0.0.1 -p "${CLIENT[$i]}" -js --store_dir "$DIR/n$((i + 1))" --server_name "n$((i + 1))" \
    --cluster_name teamlog-demo --cluster "nats://127.0.0.1:${ROUTE[$i]}" --routes "$routes" \
    >"$DIR/n$((i + 1)).log" 2>&1 &
  PIDS+=($!)
  URLS="${URLS:+$URLS,}nats://127.0.0.1:${CLIENT[$i]}"
done
echo "   nodes: $URLS"

echo "== workload: $OPS mixed ops"
"$BIN/teamlog-gen" --ops "$OPS" --max-team 2000 >"$DIR/workload.jsonl"

echo "== route into $PARTS partitions (streams created with 3 replicas once the cluster has a leader)"
"$BIN/teamlog" route "$DIR/workload.jsonl" --nats "$URLS" --partitions "$PARTS" --replicas 3 --connect-attempts 10

echo "== $PARTS partitions consume (each: its own store, its own durable consumer)"
start=$(date +%s.%N)
for ((p = 0; p < PARTS; p++)); do
  "$BIN/teamlog" serve --store "$DIR/p$p" --listen 127.0.0.1:0 --nats "$URLS" --partition "$p" \
    --partitions "$PARTS" --replicas 3 >"$DIR/p$p.out" 2>"$DIR/p$p.err" &
  PIDS+=($!)
done
# Caught up: each partition's consumer has nothing pending, nothing in flight and nothing unpublished.
until "$BIN/teamlog" status --json --nats "$URLS" --partitions "$PARTS" 2>/dev/null >"$DIR/status.json" &&
  python3 -c 'import json,sys; sys.exit(0 if all(p["caughtUp"] for p in json.load(open(sys.argv[1]))) else 1)' "$DIR/status.json"; do
  sleep 0.2
done
end=$(date +%s.%N)
python3 - "$DIR/status.json" "$start" "$end" "$OPS" <<'PY'
import json, sys
statuses, start, end, ops = json.load(open(sys.argv[1])), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
seconds = end - start
for p in statuses:
    print(f"   partition {p['partition']}: {p['consumed']:,} ops consumed, {p['headSeq']:,} events, {p['published']:,} records published")
total = sum(p["consumed"] for p in statuses)
print(f"   total: {ops:,} input lines ({total:,} partition ops incl. broadcast copies) in {seconds:.2f} s: {ops / seconds:,.0f} input ops/s")
PY

echo "== a query across partitions: unread u1"
"$BIN/teamlog" unread u1 --nats "$URLS" --partitions "$PARTS" | head -6

echo "== SIGTERM every partition, then audit each store"
for ((p = 0; p < PARTS; p++)); do kill -TERM "${PIDS[$((3 + p))]}"; done
for ((p = 0; p < PARTS; p++)); do wait "${PIDS[$((3 + p))]}"; done
for ((p = 0; p < PARTS; p++)); do "$BIN/teamlog" audit --store "$DIR/p$p" | tail -1; done
