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
failed=()   # the steps that failed, printed again last (a CI log shows its tail)
echo "== pg_regress and isolation tests"
if ! make -s installcheck; then
  status=1; failed+=("pg_regress/isolation")
  [ -f regression.diffs ] && head -n 200 regression.diffs
  [ -f output_iso/regression.diffs ] && head -n 200 output_iso/regression.diffs
fi

echo "== C++ tests"
ctest_log=build/ctest-output.log
ctest --test-dir build --output-on-failure -j 1 2>&1 | tee "$ctest_log" || { status=1; failed+=("ctest"); }

# The worked protocol example (examples/python/dblog_tail.py) against a real dblogd on this
# cluster (docs/protocol.md). /usr/bin/python3 on purpose: Debian's python3-protobuf is
# installed for it, not for a pyenv or venv python3 that may come first on PATH.
echo "== Python protocol example (tests/python)"
/usr/bin/python3 tests/python/test_protocol.py || { status=1; failed+=("python example"); }

# Every fenced block of README.md and docs/*.md: classified, and run when runnable
# (tests/docs/test_snippets.py explains the annotations). The self-test first: the runner
# reports an unannotated block and a failing snippet.
echo "== docs snippets (tests/docs)"
/usr/bin/python3 tests/docs/test_snippets.py --self-test || { status=1; failed+=("docs self-test"); }
/usr/bin/python3 tests/docs/test_snippets.py || { status=1; failed+=("docs snippets"); }

# libFuzzer harnesses for every parser of untrusted bytes (tests/fuzz/README.md): built with
# clang, ASan and UBSan in build-fuzz/, each run briefly from its checked-in corpus. Needs no
# cluster; a crash or a broken property fails the run.
echo "== fuzzing, short pass (tests/fuzz)"
DBLOG_FUZZ_SECONDS=${DBLOG_FUZZ_SECONDS:-10} DBLOG_JOBS=$jobs tests/fuzz/run.sh || { status=1; failed+=("fuzzing"); }

# The Debian packages (tests/packaging/test_packages.sh): builds them with debian/, lintian,
# installs them, runs the quick start on the installed files and purges them. Only with
# DBLOG_TEST_PACKAGES=1: it installs and removes system packages, takes about 12 minutes, and
# replaces (then removes) the extension files installed above. CI runs it from .ci/run.
if [ "${DBLOG_TEST_PACKAGES:-0}" = 1 ]; then
  echo "== Debian packages (tests/packaging)"
  DBLOG_JOBS=$jobs tests/packaging/test_packages.sh || { status=1; failed+=("packaging"); }
fi

# The summary, last: which steps failed and, for ctest, which tests and their failure lines
# (the whole output is above, and in build/ctest-output.log).
echo "== summary (tests/run.sh)"
if [ "$status" = 0 ]; then
  echo "all steps passed"
else
  echo "failed steps: ${failed[*]}"
  if [[ " ${failed[*]} " == *" ctest "* ]]; then
    echo "failed ctest tests:"
    sed 's/^/  /' build/Testing/Temporary/LastTestsFailed.log 2>/dev/null || true
    echo "their failure lines (first 80):"
    grep -E '^\[  FAILED  \]|: Failure$|^Expected|^  Actual|^Which is|^Value of|^  Which is|error:|Timeout|Exception|terminate called' \
      "$ctest_log" | grep -vE '^ *Start +[0-9]+: |Test +#[0-9]+: .* Passed ' | head -n 80 | sed 's/^/  /' || true
  fi
fi

exit $status
