#!/usr/bin/env bash
# bench/baseline.sh: builds the dblogd and the bench consumer of an older commit, for
# `bench/run.sh --baseline-dblogd PATH --baseline-consumer PATH` (the current dblogd side by side
# with an old one in the same run: docs/benchmarks.md, "Against an older dblogd").
#
#   bench/baseline.sh COMMIT      e.g. bench/baseline.sh e836aed
#
# Checks COMMIT out in a temporary git worktree (detached, removed at the end), builds the targets
# dblogd and dblog_bench_consumer there as bench/run.sh builds the current ones (cmake, Ninja,
# RelWithDebInfo, -j $DBLOG_JOBS, default 1: the machine is shared), copies the two binaries to
# $DBLOG_BASELINE_DIR (default /tmp/dblog-baseline-SHORTCOMMIT/) and prints their paths, last,
# as the run.sh options.
#
# The one patch: dblogd refuses to start unless the dblog extension in the source database is
# exactly its compiled-in kExtensionVersion, and the cluster bench/run.sh starts has the
# extension this checkout installs (dblog.control's default_version). If the two differ, the
# definition of kExtensionVersion in COMMIT's sidecar/ is changed to the installed version; the
# diff is printed and kept as baseline.patch beside the binaries. The check is a startup
# comparison of one string: the streaming, encoding and copying code is COMMIT's as it was, and
# it talks to the installed output plugin, as the current dblogd does. It is only meaningful if
# the versions in between changed nothing COMMIT's dblogd uses (see the extension's upgrade
# scripts plugin/dblog--*--*.sql): read them before trusting a baseline.
# Nothing else is patched: the bench consumer builds as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
commit=$(git rev-parse --verify "$1^{commit}")
short=$(git rev-parse --short "$commit")
out=${DBLOG_BASELINE_DIR:-/tmp/dblog-baseline-$short}
jobs=${DBLOG_JOBS:-1}
want=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" dblog.control)
[ -n "$want" ] || { echo "bench/baseline.sh: no default_version in dblog.control" >&2; exit 1; }

tmp=$(mktemp -d /tmp/dblog-baseline-src.XXXXXX)
cleanup() {
  git worktree remove --force "$tmp/src" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --detach "$tmp/src" "$commit" >/dev/null 2>&1
mkdir -p "$out"

# The definition, e.g. `inline constexpr const char* kExtensionVersion = "0.2";`
def=$(git -C "$tmp/src" grep -n 'kExtensionVersion = "' -- sidecar/ || true)
[ "$(printf '%s\n' "$def" | grep -c .)" -eq 1 ] || {
  echo "bench/baseline.sh: expected one definition of kExtensionVersion in $short's sidecar/," \
       "found: ${def:-none}" >&2; exit 1; }
file=${def%%:*}
have=$(printf '%s\n' "$def" | sed 's/.*kExtensionVersion = "\([^"]*\)".*/\1/')
if [ "$have" != "$want" ]; then
  sed -i "s/kExtensionVersion = \"$have\"/kExtensionVersion = \"$want\"/" "$tmp/src/$file"
  echo "== patched $file: kExtensionVersion \"$have\" -> \"$want\" (the installed extension)"
fi
git -C "$tmp/src" diff >"$out/baseline.patch"
cat "$out/baseline.patch"

echo "== building dblogd and dblog_bench_consumer of $short (-j $jobs)"
cmake -S "$tmp/src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$tmp/build" -j "$jobs" --target dblogd dblog_bench_consumer
cp "$tmp/build/sidecar/dblogd" "$tmp/build/bench/dblog_bench_consumer" "$out/"
printf '%s\n' "$commit" >"$out/COMMIT"
echo "== $short: $out/dblogd $out/dblog_bench_consumer"
echo "--baseline-dblogd $out/dblogd --baseline-consumer $out/dblog_bench_consumer"
