#!/usr/bin/env bash
# Runs the demo: a realistic generated workload of team operations ingested into a temporary store,
# a short report and a sample team. Extra arguments go to `teamlog demo` (e.g. --ops 500000 --seed 7).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh
swift run -c release teamlog demo "$@"
