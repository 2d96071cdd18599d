#!/usr/bin/env bash
# tests/fuzz/run.sh: builds the libFuzzer harnesses (clang, ASan + UBSan, -DDBLOG_FUZZ=ON) in
# their own build directory and runs each for a bounded pass, starting from its checked-in
# corpus (tests/fuzz/corpus/<harness>/). Fails when a harness crashes, leaks, times out or
# breaks a property; the input that did it is left in $build/artifacts/<harness>/.
#
#   tests/fuzz/run.sh                     every harness, DBLOG_FUZZ_SECONDS (20) each
#   tests/fuzz/run.sh ndjson_fuzz         the named ones
#   DBLOG_FUZZ_RUNS=10000000 tests/fuzz/run.sh copy_rows_fuzz   a long run (executions, not time;
#                                         DBLOG_FUZZ_MAX_SECONDS bounds it too, 0 = no bound)
#
# New inputs a run finds go to $build/corpus/<harness>/, never into the source tree: copy the
# ones worth keeping (a regression input, say) into tests/fuzz/corpus/ by hand.
# DBLOG_FUZZ_BUILD: the build directory (build-fuzz). tests/fuzz/README.md describes the harnesses.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${DBLOG_FUZZ_BUILD:-build-fuzz}
seconds=${DBLOG_FUZZ_SECONDS:-20}
runs=${DBLOG_FUZZ_RUNS:-}
all=(frame_decoder_fuzz client_frames_fuzz metrics_http_fuzz client_stream_fuzz ndjson_fuzz
     plugin_batch_fuzz copy_rows_fuzz scope_match_fuzz pgoutput_decoder_fuzz
     pgoutput_values_fuzz pgoutput_copy_text_fuzz)
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=("${all[@]}")

echo "fuzz: building the harnesses in $build"
CC=${DBLOG_FUZZ_CC:-clang} CXX=${DBLOG_FUZZ_CXX:-clang++} \
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDBLOG_FUZZ=ON >/dev/null
cmake --build "$build" -j "${DBLOG_JOBS:-2}" --target "${harnesses[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in "${harnesses[@]}"; do
  corpus="$build/corpus/$h"
  artifacts="$build/artifacts/$h/"
  mkdir -p "$corpus" "$artifacts"
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs" -max_total_time="${DBLOG_FUZZ_MAX_SECONDS:-0}")
  # Inputs of a few KiB reach every state of these parsers; longer ones only run slower.
  # metrics_http_fuzz: the endpoint reads at most 8 KiB.
  case $h in
    frame_decoder_fuzz | client_frames_fuzz | copy_rows_fuzz) max_len=2048 ;;
    metrics_http_fuzz) max_len=8192 ;;
    *) max_len=4096 ;;
  esac
  log="$build/$h.log"
  start=$SECONDS
  if "$build/tests/fuzz/$h" "${limit[@]}" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$artifacts" \
       "$corpus" "tests/fuzz/corpus/$h" >"$log" 2>&1; then
    done_line=$(grep -E '^#[0-9]+.*DONE' "$log" | tail -n 1 || true)
    execs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
    echo "fuzz: $h ok in $((SECONDS - start)) s: ${execs:-?} executions; ${done_line#*DONE }"
  else
    status=1
    echo "fuzz: $h FAILED (log: $log, input: $artifacts)"
    grep -E -A 30 'ERROR: |fuzz property failed|runtime error' "$log" | head -n 60 || tail -n 40 "$log"
  fi
done
exit $status
