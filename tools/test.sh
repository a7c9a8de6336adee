#!/usr/bin/env bash
# Runs the whole test suite: installs liblmdb-dev when missing, builds (the CLI too: crash tests run it
# as a child process), then `swift test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure-deps.sh
swift build --build-tests
swift test --skip-build "$@"
