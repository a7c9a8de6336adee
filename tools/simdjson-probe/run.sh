#!/usr/bin/env bash
# The JSON parser decision, measured: Debian's simdjson (On-Demand, every field visited, strings copied)
# against teamlog's own op parser (bytes to a validated Op), on the same seeded file, alternating twice.
#   tools/simdjson-probe/run.sh [OPS]      (installs libsimdjson-dev when missing; not used by the build)
#   SWIFT_SCRATCH=.build-release tools/simdjson-probe/run.sh   to reuse another build folder
set -euo pipefail
cd "$(dirname "$0")/../.."
ops="${1:-200000}"
if [ ! -f /usr/include/simdjson.h ]; then
  SUDO=""; if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libsimdjson-dev >/dev/null
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
scratch=(${SWIFT_SCRATCH:+--scratch-path "$SWIFT_SCRATCH"})   # e.g. SWIFT_SCRATCH=.build-release
swift build -c release "${scratch[@]}" --product teamlog-gen >/dev/null
swift build -c release "${scratch[@]}" --product teamlog-bench >/dev/null
bin="$(swift build -c release "${scratch[@]}" --show-bin-path)"
"$bin/teamlog-gen" --ops "$ops" --max-team 20000 > "$work/ops.jsonl"
g++ -O2 -std=c++17 tools/simdjson-probe/probe.cpp -lsimdjson -o "$work/probe"
for _ in 1 2; do
  "$work/probe" "$work/ops.jsonl"
  "$bin/teamlog-bench" --parse-file "$work/ops.jsonl"
done
