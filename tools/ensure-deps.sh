#!/usr/bin/env bash
# Installs what teamlog needs on Debian when it is missing: LMDB's headers and library (liblmdb-dev).
set -euo pipefail
if pkg-config --exists lmdb 2>/dev/null || [ -f /usr/include/lmdb.h ]; then
  exit 0
fi
echo "teamlog: installing liblmdb-dev" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq liblmdb-dev pkg-config >/dev/null
