#!/usr/bin/env bash
# bench/setup.sh: what bench/run.sh needs beyond scripts/install-deps.sh (which CI runs): the
# anchors' output plugins, perf and valgrind for looking into a missed target, and jemalloc for
# bench/profile.py --preload experiments. Debian 12, as root (or with sudo).
set -euo pipefail
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" apt-get install -y --no-install-recommends \
  postgresql-15-decoderbufs postgresql-15-wal2json \
  linux-perf valgrind libjemalloc2 python3
