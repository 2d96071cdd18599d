"""Section repair: a whole-table repair under a pgbench-style update load, alone, under the load
as fast as it goes, under the load at a fixed rate, and paced."""
import os
import re
import subprocess
import threading
import time

from ..harness import (Dblogd, alternated, consumer_in_background, interrupt, log, proc_hwm_kb,
                       sql, tool, wait_for_quiet)
from ..workloads import REPAIR_SCRIPT, TABLE_DDL, row_expr

def repair_run(ctx, rep, n, pre_s, post_s, clients, rate=None, cap=None, binary=None):
    """One run: dblogd streams the table's changes to the consumer while pgbench-style updates
    run (as fast as they go, or at `rate` tps); after pre_s seconds a whole-table repair is
    requested (paced at `cap` rows/s when given); post_s seconds after the consumer got the
    request's last chunk, the load stops. pgbench's per-second progress (Unix timestamps)
    gives the workload's tps and mean latency before/after the repair and during it."""
    wait_for_quiet(ctx.args.quiet_wait, ctx.args.quiet_load)
    name = f"rep_r{rep}"
    idle = clients == 0  # the repair alone: no load (pgbench only sleeps, for its clock)
    if idle:
        pre_s = post_s = 0
    flags = [f"--consumer={name}=bench.r", "--bootstrap=false"]
    if ctx.args.repair_chunk_size:
        flags.append(f"--chunk-size={ctx.args.repair_chunk_size}")
    if cap:
        flags.append(f"--repair-rows-per-second={cap}")
    d = Dblogd(ctx, name, flags, binary)
    # the stream goes on after the repair: the workload "after" is streamed too
    t, holder = consumer_in_background(ctx, d.port, name, "repair", linger=post_s)
    if "err" in holder:
        d.stop()
        raise holder["err"]
    time.sleep(1.0)
    script = os.path.join(ctx.logdir, "repair.pgbench")
    with open(script, "w") as f:
        f.write(REPAIR_SCRIPT)
    if idle:
        script = os.path.join(ctx.logdir, "idle.pgbench")
        with open(script, "w") as f:
            f.write("\\sleep 100 ms\n")
        clients = 1
    pgb = subprocess.Popen([tool("pgbench"), "-n", "-c", str(clients), "-j", str(clients), "-T",
                            "3600", "-P", "1", "--progress-timestamp", "-D", f"n={n}", "-f",
                            script] + (["-R", str(rate)] if rate else []) +
                           [os.environ["PGDATABASE"]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    progress = []  # (unix time at the end of the interval, tps, mean latency ms)

    def read_progress():
        for line in pgb.stderr:
            m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms", line)
            if m:
                progress.append((float(m.group(1)), float(m.group(2)), float(m.group(3))))

    tp = threading.Thread(target=read_progress, daemon=True)
    tp.start()
    try:
        time.sleep(pre_s)
        requested = time.time()
        sql(f"SELECT dblog.repair('bench.r', '{name}');")
        t.join(3600)
        if "err" in holder:
            raise holder["err"]
        res = holder["res"]
        done = res["done_us"] / 1e6  # the consumer lingered post_s seconds after it
        rss = proc_hwm_kb(d.proc.pid)
    finally:
        interrupt(pgb, 30)
        tp.join(5)
        d.stop()
        sql(f"SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
            f" WHERE slot_name = 'dblog_{name}' AND NOT active;"
            f" DELETE FROM dblog.consumers WHERE name = '{name}';")
    # tps weighted by how much of each 1 s interval lies inside / outside [requested, done];
    # the first 2 s are warm-up
    start = progress[0][0] + 1 if progress else 0
    w_in = w_out = s_in = s_out = l_in = l_out = 0.0
    for end, tps, lat in progress:
        lo, hi = max(end - 1, start), end
        if hi <= lo:
            continue
        inside = max(0.0, min(hi, done) - max(lo, requested))
        outside = (hi - lo) - inside
        w_in, s_in, l_in = w_in + inside, s_in + inside * tps, l_in + inside * lat
        w_out, s_out, l_out = w_out + outside, s_out + outside * tps, l_out + outside * lat
    duration = done - requested
    return {"duration_s": duration, "rows_per_s": n / duration if duration > 0 else 0,
            "chunks": res["chunks"], "chunk_rows": res["chunk_rows"],
            "tps_without": s_out / w_out if w_out else 0,
            "tps_with": s_in / w_in if w_in else 0,
            "lat_without_ms": l_out / w_out if w_out else 0,
            "lat_with_ms": l_in / w_in if w_in else 0,
            "rss_kb": rss, "log_changes": res["changes"] - res["reads"],
            "progress": progress, "requested": requested, "done": done}

def section_repair(ctx):
    """Four kinds of run, alternated: the repair alone; under a workload as fast as it goes
    (every CPU second the repair takes comes out of it: the worst case); under a workload at a
    fixed rate, half of what the unthrottled one reached in this run (a source with headroom,
    as production sources run); and under the unthrottled workload again with the repair paced
    (--repair-rows-per-second, at a quarter of its unloaded rate). With --baseline-dblogd, the
    older dblogd also runs the repair alone and under the unthrottled workload, in the same
    rotation (same table, same WAL), for same-run ratios."""
    a = ctx.args
    n = a.repair_rows
    sql("DROP TABLE IF EXISTS bench.r;" + TABLE_DDL.format(name="bench.r") +
        f"INSERT INTO bench.r SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;"
        " VACUUM ANALYZE bench.r; CHECKPOINT;")
    kinds = ["idle", "full", "rate", "paced"]
    if ctx.baseline_dblogd:
        kinds = ["idle", "idle_base", "full", "full_base", "rate", "paced"]
    results = {k: [] for k in kinds}
    errors = {}
    fixed_rate = cap = None
    run_no = 0
    for rep in range(a.reps_bootstrap):
        order = alternated(kinds, rep)
        if rep == 0:
            order = kinds  # the rate and the cap come from the first idle and full runs
        for kind in order:
            if kind == "rate" and not fixed_rate or kind == "paced" and not cap:
                continue
            try:
                r = repair_run(ctx, run_no, n, a.repair_pre_s, a.repair_post_s,
                               0 if kind.startswith("idle") else 2,
                               rate=fixed_rate if kind == "rate" else None,
                               cap=cap if kind == "paced" else None,
                               binary=ctx.baseline_dblogd if kind.endswith("_base") else None)
                run_no += 1
                log(f"repair: rep {rep}, {kind}: {n} rows in {r['duration_s']:.2f} s "
                    f"({r['rows_per_s']:,.0f} rows/s, {r['chunks']} chunks); workload "
                    f"{r['tps_without']:.0f} tps / {r['lat_without_ms']:.2f} ms without, "
                    f"{r['tps_with']:.0f} tps / {r['lat_with_ms']:.2f} ms with")
                results[kind].append(r)
                if kind == "idle" and cap is None:
                    cap = max(1000, int(r["rows_per_s"] / 4))
                if kind == "full" and fixed_rate is None:
                    fixed_rate = max(100, int(r["tps_without"] / 2))
            except Exception as e:
                run_no += 1
                log(f"repair: rep {rep}, {kind} FAILED: {e}")
                errors[kind] = str(e)
    return {"rows": n, "runs": results["full"], "idle": results["idle"],
            "rate_runs": results["rate"], "paced_runs": results["paced"],
            "baseline_idle": results.get("idle_base", []),
            "baseline_runs": results.get("full_base", []),
            "fixed_rate": fixed_rate, "cap": cap, "errors": errors}
