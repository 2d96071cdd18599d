#!/usr/bin/env bash
# tests/run.sh: the one test command (README, .ci/run). Builds and installs the extension,
# builds the C++ side, starts a throwaway cluster, runs pg_regress + isolation specs
# (make installcheck), the C++ tests (ctest), the Python protocol example and the docs'
# snippets, and stops the cluster, also on failure; then a short pass of the fuzzers; with
# DBLOG_TEST_PACKAGES=1, last, the Debian packages (tests/packaging/test_packages.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/cluster.sh

jobs=${DBLOG_JOBS:-$(nproc)}
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

echo "== build and install the extension"
make -s -j"$jobs"
"${sudo_cmd[@]}" make -s install

echo "== build the C++ side"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"

trap cluster_stop EXIT
cluster_start

status=0
echo "== pg_regress and isolation tests"
if ! make -s installcheck; then
  status=1
  [ -f regression.diffs ] && head -n 200 regression.diffs
  [ -f output_iso/regression.diffs ] && head -n 200 output_iso/regression.diffs
fi

echo "== C++ tests"
ctest --test-dir build --output-on-failure -j 1 || status=1

# The worked protocol example (examples/python/dblog_tail.py) against a real dblogd on this
# cluster (docs/protocol.md). /usr/bin/python3 on purpose: Debian's python3-protobuf is
# installed for it, not for a pyenv or venv python3 that may come first on PATH.
echo "== Python protocol example (tests/python)"
/usr/bin/python3 tests/python/test_protocol.py || status=1

# Every fenced block of README.md and docs/*.md: classified, and run when runnable
# (tests/docs/test_snippets.py explains the annotations). The self-test first: the runner
# reports an unannotated block and a failing snippet.
echo "== docs snippets (tests/docs)"
/usr/bin/python3 tests/docs/test_snippets.py --self-test || status=1
/usr/bin/python3 tests/docs/test_snippets.py || status=1

# libFuzzer harnesses for every parser of untrusted bytes (tests/fuzz/README.md): built with
# clang, ASan and UBSan in build-fuzz/, each run briefly from its checked-in corpus. Needs no
# cluster; a crash or a broken property fails the run.
echo "== fuzzing, short pass (tests/fuzz)"
DBLOG_FUZZ_SECONDS=${DBLOG_FUZZ_SECONDS:-10} DBLOG_JOBS=$jobs tests/fuzz/run.sh || status=1

# The Debian packages (tests/packaging/test_packages.sh): builds them with debian/, lintian,
# installs them, runs the quick start on the installed files and purges them. Only with
# DBLOG_TEST_PACKAGES=1: it installs and removes system packages, takes about 12 minutes, and
# replaces (then removes) the extension files installed above. CI runs it from .ci/run.
if [ "${DBLOG_TEST_PACKAGES:-0}" = 1 ]; then
  echo "== Debian packages (tests/packaging)"
  DBLOG_JOBS=$jobs tests/packaging/test_packages.sh || status=1
fi

exit $status
