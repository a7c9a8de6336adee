#!/usr/bin/env bash
# Installs what teamlog needs on Debian when it is missing: LMDB's headers and library (liblmdb-dev), and
# SQLite's (libsqlite3-dev), which only teamlog-bench's per-recipient-row baseline links; the NATS C client
# (libnats-dev) and nats-server, which the NATS target links and its tests run; jemalloc (libjemalloc-dev),
# the allocator the executables link (Package.swift); and python3's jsonschema and pyyaml (pip) for the
# OpenAPI test.
set -euo pipefail
missing=()
if ! pkg-config --exists lmdb 2>/dev/null && [ ! -f /usr/include/lmdb.h ]; then missing+=(liblmdb-dev); fi
if ! pkg-config --exists sqlite3 2>/dev/null && [ ! -f /usr/include/sqlite3.h ]; then missing+=(libsqlite3-dev); fi
if ! pkg-config --exists libnats 2>/dev/null; then missing+=(libnats-dev); fi
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then missing+=(nats-server); fi
if ! command -v pkg-config >/dev/null 2>&1; then missing+=(pkg-config); fi
if [ ! -e /usr/lib/x86_64-linux-gnu/libjemalloc.so ] && [ ! -e /usr/lib/aarch64-linux-gnu/libjemalloc.so ] \
  && ! pkg-config --exists jemalloc 2>/dev/null; then missing+=(libjemalloc-dev); fi
# TeamLogHTTPTests checks the server's responses against docs/openapi.yaml with python3's jsonschema.
if ! python3 -c 'import jsonschema, yaml' >/dev/null 2>&1; then
  echo "teamlog: installing jsonschema and pyyaml (pip)" >&2
  python3 -m pip install -q jsonschema pyyaml
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "teamlog: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
