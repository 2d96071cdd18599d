#!/usr/bin/env python3
"""bench/bench.py: the measurements behind bench/run.sh (which builds, installs and starts the
throwaway cluster first, then runs this with PGHOST/PGPORT/... and DBLOG_TEST_* exported).

Every number is measured in this run on this machine; nothing here judges a timing. The method
is described in docs/benchmarks.md, which this script rewrites (see write_docs below).

This file is the command: its options, the sizes of a full and of a --smoke run, the order of
the sections, the --json and --docs outputs. The rest is the package dblog_bench/:
  harness.py    psql, CPU accounting, the quiet-machine wait, dblogd and the bench consumer as
                processes, one measured run
  workloads.py  the bench schema, the mixed-type table and the changes the sections generate
  sections/     one module per section (--only takes a comma-separated list of these names):
    bulk       log throughput, 1M row changes in 3 transactions
    oltp       log throughput, 100k transactions of 1-5 rows
    memory     dblogd through one transaction of 1M rows (peak RSS), and through 50 rows of a
               10 MB value each, the values in pieces and whole (wall, CPU, peak RSS)
    latency    commit-to-consumer latency at a fixed rate
    bootstrap  initial copy of a 5M-row table
    repair     whole-table repair of 1M rows under a pgbench-style load
    fanout     four consumers at 200 events/s, steady and with one dead for a while, dblog
               against pg_recvlogical + pgoutput (--fanout-scale: of the published lengths)
  (with --baseline-dblogd, bulk, oltp and bootstrap also run that older dblogd as a contender of
  their own, and the report adds the same-run ratios current / baseline)
  report.py     the markdown tables and the targets table
  targets.py    the targets' thresholds (issue 7), as data
"""
import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dblog_bench import sections  # noqa: E402
from dblog_bench.harness import Ctx, log, machine  # noqa: E402
from dblog_bench.report import report  # noqa: E402
from dblog_bench.sections import SECTIONS  # noqa: E402
from dblog_bench.workloads import setup_database  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--reps", type=int)
    p.add_argument("--only")
    p.add_argument("--contenders", help="log throughput: comma-separated contender keys")
    p.add_argument("--dblogd")
    p.add_argument("--consumer")
    p.add_argument("--baseline-dblogd", metavar="PATH",
                   help="bulk, oltp, bootstrap: also run this (older) dblogd, side by side with "
                        "--dblogd (bench/baseline.sh builds one)")
    p.add_argument("--baseline-consumer", metavar="PATH",
                   help="the bench consumer for --baseline-dblogd's runs (default: --consumer)")
    p.add_argument("--logdir")
    p.add_argument("--rerender", metavar="RESULTS_JSON",
                   help="measure nothing: rewrite --docs from an earlier run's --json file "
                        "(after editing bench/benchmarks.md.in)")
    p.add_argument("--command", default="bench/run.sh")
    p.add_argument("--docs", help="write the results here (docs/benchmarks.md)")
    p.add_argument("--json", help="also write the raw measurements here")
    p.add_argument("--quiet-wait", type=float,
                   help="seconds to wait at most, before each timed run, for the machine to be "
                        "quiet (default 30; --smoke: 0)")
    p.add_argument("--repair-chunk-size", type=int,
                   help="repair: dblogd --chunk-size (default: dblogd's own default)")
    p.add_argument("--fanout-scale", type=float,
                   help="fanout: the published scenarios' phase lengths times this (default 0.1, "
                        "about 12 minutes for both arms; 1: their full length, about 2 hours; "
                        "--smoke: 0.01)")
    p.add_argument("--fanout-reps", type=int, default=1,
                   help="fanout: repetitions (default 1, one run per cell as published; --reps "
                        "does not change it)")
    p.add_argument("--quiet-load", type=float, default=0.3,
                   help="cores of load by others below which the machine counts as quiet")
    a = p.parse_args()
    if a.smoke:
        a.bulk_changes, a.oltp_tx, a.oltp_pre, a.memory_rows = 30_000, 3_000, 3_000, 30_000
        a.bootstrap_rows, a.latency_rate, a.latency_seconds = 100_000, 200, 3
        a.repair_rows, a.repair_pre_s, a.repair_post_s = 20_000, 3, 2
        a.long_rows, a.long_mb = 4, 2
        a.reps_log = a.reps_bootstrap = a.reps_latency = 1
    else:
        a.bulk_changes, a.oltp_tx, a.oltp_pre, a.memory_rows = 1_000_000, 100_000, 100_000, 1_000_000
        a.bootstrap_rows, a.latency_rate, a.latency_seconds = 5_000_000, 500, 20
        a.repair_rows, a.repair_pre_s, a.repair_post_s = 1_000_000, 10, 10
        a.long_rows, a.long_mb = 50, 10
        a.reps_log, a.reps_bootstrap, a.reps_latency = 5, 3, 3
    if a.reps:
        a.reps_log = a.reps_bootstrap = a.reps_latency = a.reps
    a.reps_fanout = a.fanout_reps
    if a.fanout_scale is None:
        a.fanout_scale = 0.01 if a.smoke else 0.1
    if a.quiet_wait is None:
        a.quiet_wait = 0 if a.smoke else 30
    if a.rerender:
        with open(a.rerender) as f:
            saved = json.load(f)
        for k, v in saved.get("args", {}).items():
            if k in ("oltp_tx", "repair_chunk_size", "fanout_scale"):
                setattr(a, k, v)

        class Saved:
            args = a
        text = report(Saved, saved["data"], saved["machine"])
        print(text)
        if a.docs:
            write_docs(a.docs, text, saved["command"], saved.get("elapsed", 0))
        return 0
    if not (a.dblogd and a.consumer and a.logdir):
        p.error("--dblogd, --consumer and --logdir are required")
    if a.baseline_consumer and not a.baseline_dblogd:
        p.error("--baseline-consumer needs --baseline-dblogd")
    for path in (a.baseline_dblogd, a.baseline_consumer):
        if path and not os.access(path, os.X_OK):
            p.error(f"{path}: not an executable file")
    only = a.only.split(",") if a.only else SECTIONS
    for s in only:
        if s not in SECTIONS:
            p.error(f"--only: unknown section {s!r}; known: {', '.join(SECTIONS)}")

    ctx = Ctx(a)
    mach = machine()
    log(f"machine: {mach}")
    setup_database()
    data = {}
    t0 = time.monotonic()
    for s in SECTIONS:
        if s not in only:
            continue
        log(f"== {s}")
        data[s] = sections.run(ctx, s)
    elapsed = time.monotonic() - t0
    text = report(ctx, data, mach)
    print()
    print(text)
    print(f"\n(measured in {elapsed / 60:.1f} min)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": mach, "data": data, "command": a.command, "elapsed": elapsed,
                       "args": {"oltp_tx": a.oltp_tx, "repair_chunk_size": a.repair_chunk_size,
                                "fanout_scale": a.fanout_scale}},
                      f, indent=1, default=str)
    if a.docs:
        write_docs(a.docs, text, a.command, elapsed)
        log(f"results written to {a.docs}")
    failed = any(d.get("errors") for d in data.values() if isinstance(d, dict))
    return 1 if failed else 0


def write_docs(path, results, command, elapsed):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks.md.in")) as f:
        template = f.read()
    with open(path, "w") as f:
        f.write(template.replace("@COMMAND@", command)
                .replace("@ELAPSED@", f"{elapsed / 60:.0f}")
                .replace("@RESULTS@", results))


if __name__ == "__main__":
    sys.exit(main())
