"""Section latency: commit time to the consumer holding the Commit, for single-row transactions
at a fixed rate: dblogd end to end against pg_recvlogical with test_decoding."""
import datetime
import os
import re
import subprocess
import threading
import time

from ..harness import (Dblogd, SqlError, alternated, consumer_in_background, interrupt, log,
                       pgbench_cmd, proc_hwm_kb, sql, tool, wait_for_quiet)
from ..workloads import next_marker

def latency_dblogd(ctx, rep, rate, seconds, script):
    wait_for_quiet(ctx.args.quiet_wait, ctx.args.quiet_load)
    name = f"lat_r{rep}"
    d = Dblogd(ctx, name, ["--default-scope=bench.lat,bench.marker", "--bootstrap=false"])
    t, holder = consumer_in_background(ctx, d.port, name, "bench.marker", latency=True)
    time.sleep(1.0)  # the slot is created and START_REPLICATION sent after Welcome
    try:
        subprocess.run(pgbench_cmd(rate, seconds, script), check=True, capture_output=True)
        next_marker()
        t.join(120)
        if "err" in holder:
            raise holder["err"]
        res = holder["res"]
        rss = proc_hwm_kb(d.proc.pid)
    finally:
        d.stop()
        sql(f"SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
            f" WHERE slot_name = 'dblog_{name}' AND NOT active;")
    return {"n": res["latency_n"], "p50_ms": res["latency_p50_us"] / 1000,
            "p99_ms": res["latency_p99_us"] / 1000, "max_ms": res["latency_max_us"] / 1000,
            "rss_kb": rss}

COMMIT_AT = re.compile(r"^COMMIT \d+ \(at (.+)\)$")

def parse_pg_timestamp_us(text):
    # e.g. 2024-05-01 10:00:00.123456+00 (server TimeZone is UTC in the bench cluster)
    m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?([+-]\d\d)(:?\d\d)?$", text)
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    tz = datetime.timezone(datetime.timedelta(hours=int(m.group(3))))
    us = int((m.group(2) or ".0")[1:].ljust(6, "0")[:6])
    return int(base.replace(tzinfo=tz).timestamp()) * 1_000_000 + us

def latency_recvlogical(ctx, rep, rate, seconds, script):
    wait_for_quiet(ctx.args.quiet_wait, ctx.args.quiet_load)
    slot = f"b_lat_td_r{rep}"
    sql(f"SELECT 1 FROM pg_create_logical_replication_slot('{slot}', 'test_decoding');")
    cmd = [tool("pg_recvlogical"), "-d", os.environ["PGDATABASE"], "--slot", slot, "--start",
           "--no-loop", "-F", "0", "-o", "include-timestamp=1", "-f", "-"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lat = []
    done = threading.Event()

    def reader():
        in_marker = False
        for raw in proc.stdout:
            now = time.time_ns() // 1000
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith("table bench.marker:"):
                in_marker = True
                continue
            m = COMMIT_AT.match(line)
            if m:
                if in_marker:
                    done.set()
                    return
                lat.append(now - parse_pg_timestamp_us(m.group(1)))

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    # wait until the walsender streams
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"
               " AND active") == "1":
            break
        time.sleep(0.1)
    time.sleep(1.0)
    try:
        subprocess.run(pgbench_cmd(rate, seconds, script), check=True, capture_output=True)
        next_marker()
        done.wait(120)
    finally:
        interrupt(proc, 15)
        for _ in range(100):
            try:
                sql(f"SELECT pg_drop_replication_slot('{slot}');")
                break
            except SqlError:
                time.sleep(0.1)
    if not done.is_set():
        raise RuntimeError("pg_recvlogical did not deliver the marker")
    lat.sort()
    return {"n": len(lat), "p50_ms": pct(lat, 50) / 1000, "p99_ms": pct(lat, 99) / 1000,
            "max_ms": lat[-1] / 1000 if lat else 0}

def pct(sorted_values, p):
    if not sorted_values:
        return 0
    k = min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))
    return sorted_values[k]

def section_latency(ctx):
    a = ctx.args
    sql("DROP TABLE IF EXISTS bench.lat; CREATE TABLE bench.lat (id bigserial PRIMARY KEY,"
        " ts timestamptz NOT NULL);")
    script = os.path.join(ctx.logdir, "latency.pgbench")
    with open(script, "w") as f:
        f.write("INSERT INTO bench.lat(ts) VALUES (clock_timestamp());\n")
    res = {"dblogd": [], "test_decoding": []}
    errors = {}
    for rep in range(a.reps_latency):
        order = alternated(["dblogd", "test_decoding"], rep)
        for key in order:
            try:
                fn = latency_dblogd if key == "dblogd" else latency_recvlogical
                r = fn(ctx, rep, a.latency_rate, a.latency_seconds, script)
                log(f"latency: rep {rep} {key}: n={r['n']} p50 {r['p50_ms']:.2f} ms, p99 "
                    f"{r['p99_ms']:.2f} ms, max {r['max_ms']:.2f} ms")
                res[key].append(r)
            except Exception as e:
                log(f"latency: rep {rep} {key} FAILED: {e}")
                errors[key] = str(e)
    return {"rate": a.latency_rate, "seconds": a.latency_seconds, "results": res,
            "errors": errors}
