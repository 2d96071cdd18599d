#!/usr/bin/env python3
"""bench/profile.py: where dblogd's end-to-end time goes (diagnostic; judges nothing).

Needs a cluster prepared as bench/run.sh prepares it (PG* and DBLOG_TEST_* exported, the bench
settings appended); DBLOG_KEEP_CLUSTER=1 bench/run.sh --only repair leaves one running, or:

  python3 bench/profile.py --dblogd BUILD/sidecar/dblogd \\
      --consumer BUILD/bench/dblog_bench_consumer --workload bulk|oltp|bootstrap|repair [--size N] \\
      [--perf] [--flags "--copy-workers=2"] [--preload /usr/lib/x86_64-linux-gnu/libjemalloc.so.2] \\
      [--load-clients 2]

It prepares the workload (bulk: N row changes in 3 transactions; oltp: N transactions of 1-5
rows; bootstrap: a table of N rows; repair: a whole-table repair of a table of N rows, with
--load-clients the repair section's pgbench updates running throughout), then runs dblogd and the bench consumer on it once while
sampling every 50 ms the CPU time of the server processes serving it (walsender or copy
backends), dblogd and the consumer: a timeline showing which of them is busy when (a pipeline on
2 cores is only as fast as its serial parts). It prints CPU seconds and context switches per
process. With --perf it records the whole machine with perf (software event cpu-clock: this VM
has no hardware counters) and prints, per process, the top functions by self time. --preload
runs dblogd and the consumer with that library in LD_PRELOAD (e.g. another malloc).
"""
import argparse
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dblog_bench import harness, workloads  # noqa: E402


def cpu_of(pid):
    try:
        return harness.proc_cpu(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None


def ctxsw(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    k, v = line.split(":")
                    out[k.split("_")[0]] = int(v)
    except FileNotFoundError:
        pass
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dblogd", required=True)
    p.add_argument("--consumer", required=True)
    p.add_argument("--workload", default="bulk", choices=["bulk", "oltp", "bootstrap", "repair"])
    p.add_argument("--size", type=int)
    p.add_argument("--perf", action="store_true")
    p.add_argument("--outdir", default="/tmp/dblog-profile")
    p.add_argument("--flags", default="", help="extra dblogd flags, space separated")
    p.add_argument("--preload", help="LD_PRELOAD for dblogd and the consumer")
    p.add_argument("--reuse", action="store_true", help="bootstrap: keep an existing bench.big")
    p.add_argument("--ack-every", type=int, default=0,
                   help="consumer: ack every Nth commit (0: the last one, when caught up)")
    p.add_argument("--load-clients", type=int, default=0,
                   help="repair: pgbench clients running the repair section's updates, "
                        "unthrottled, from 2 s before the request to the end")
    a = p.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    if a.preload:
        os.environ["LD_PRELOAD"] = a.preload  # inherited by dblogd and the consumer only:
        # the driver's own children (psql) are started with it too, which is harmless

    class Args:
        contenders = None
    args = Args()
    args.dblogd, args.consumer, args.logdir = a.dblogd, a.consumer, a.outdir
    ctx = harness.Ctx(args)
    name = "prof"
    harness.sql("CREATE EXTENSION IF NOT EXISTS dblog; CREATE SCHEMA IF NOT EXISTS bench;"
                " CREATE TABLE IF NOT EXISTS bench.marker (id bigserial PRIMARY KEY,"
                " at timestamptz DEFAULT clock_timestamp());"
                "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
                f" WHERE slot_name = 'dblog_{name}';"
                f" DELETE FROM dblog.consumers WHERE name = '{name}';")
    flags = ["--bootstrap=false", "--default-scope=bench.*"]
    until, expect = "bench.marker", None
    if a.workload == "bulk":
        harness.sql("DROP TABLE IF EXISTS bench.t;" + workloads.TABLE_DDL.format(name="bench.t"))
        harness.sql(f"SELECT 1 FROM pg_create_logical_replication_slot('dblog_{name}', 'dblog')")
        expect = workloads.gen_bulk(a.size or 1_000_000)()
        workloads.next_marker()
    elif a.workload == "oltp":
        harness.sql("DROP TABLE IF EXISTS bench.o;" + workloads.TABLE_DDL.format(name="bench.o") +
                    f" INSERT INTO bench.o SELECT {workloads.row_expr('i')} FROM "
                    f"generate_series(1::bigint, 100000) i;" + workloads.OLTP_PROC)
        harness.sql(f"SELECT 1 FROM pg_create_logical_replication_slot('dblog_{name}', 'dblog')")
        expect = workloads.gen_oltp(a.size or 100_000, 100000)()
        workloads.next_marker()
    elif a.workload == "repair":
        n = a.size or 1_000_000
        have = harness.sql("SELECT count(*) FROM bench.r" if harness.sql(
            "SELECT to_regclass('bench.r') IS NOT NULL") == "t" else "SELECT 0")
        if not (a.reuse and int(have) == n):
            harness.sql("DROP TABLE IF EXISTS bench.r;"
                        + workloads.TABLE_DDL.format(name="bench.r")
                        + f"INSERT INTO bench.r SELECT {workloads.row_expr('i')} FROM "
                        f"generate_series(1::bigint, {n}) i; VACUUM ANALYZE bench.r; CHECKPOINT;")
        expect = n
        flags = [f"--consumer={name}=bench.r", "--bootstrap=false"]
        until = "repair"
    else:
        n = a.size or 5_000_000
        have = harness.sql("SELECT to_regclass('bench.big') IS NOT NULL")
        if not (a.reuse and have == "t"):
            harness.sql("DROP TABLE IF EXISTS bench.big;"
                        + workloads.TABLE_DDL.format(name="bench.big")
                        + f"INSERT INTO bench.big SELECT {workloads.row_expr('i')} FROM "
                        f"generate_series(1::bigint, {n}) i; VACUUM ANALYZE bench.big; CHECKPOINT;")
        expect = int(harness.sql("SELECT count(*) FROM bench.big"))
        flags = [f"--consumer={name}=bench.big"]
        until = "bootstrap"
    print(f"workload: {a.workload}, {expect} rows/changes", flush=True)

    ctx.pm.settle()
    d = harness.Dblogd(ctx, name, flags + a.flags.split())
    perf = None
    if a.perf:
        perf_path = os.path.join(a.outdir, f"perf-{a.workload}.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-F", "1000",
                                 "-o", perf_path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    cmd = [a.consumer, "--port", str(d.port), "--consumer", name]
    if until == "repair":
        cmd += ["--until-repair-done", "--ready"]
    else:
        cmd += ["--until-bootstrap-end"] if until == "bootstrap" else ["--until-marker", until]
        cmd += ["--expect-changes", str(expect)]
    cmd += ["--ack-every", str(a.ack_every)]
    load = None
    if until == "repair" and a.load_clients:
        script = os.path.join(a.outdir, "repair.pgbench")
        with open(script, "w") as f:
            f.write(workloads.REPAIR_SCRIPT)
        load = subprocess.Popen([harness.tool("pgbench"), "-n", "-c", str(a.load_clients), "-j",
                                 str(a.load_clients), "-T", "3600", "-D", f"n={expect}", "-f",
                                 script, os.environ["PGDATABASE"]],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
    t0 = time.monotonic()
    cons = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if until == "repair":
        cons.stderr.readline()  # --ready: "ready" once the consumer has its Welcome
        t0 = time.monotonic()
        harness.sql(f"SELECT dblog.repair('bench.r', '{name}');")
    server_pids = {}  # pid -> last CPU seen
    fixed = {"dblogd": d.proc.pid, "consumer": cons.pid}
    last = {k: cpu_of(v) for k, v in fixed.items()}
    last["server"] = 0.0
    switches = {}
    timeline = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            time.sleep(0.05)
            row = {}
            for k, pid in fixed.items():
                c = cpu_of(pid)
                row[k] = (c - last[k]) / 0.05 if c is not None and last[k] is not None else None
                if c is not None:
                    last[k] = c
                    switches[k] = ctxsw(pid)
            total = 0.0
            for pid in ctx.pm.children() - ctx.pm.aux:
                c = cpu_of(pid)
                if c is None:
                    continue
                total += c - server_pids.get(pid, 0.0)
                server_pids[pid] = c
                switches[f"server {pid}"] = ctxsw(pid)
            row["server"] = total / 0.05
            timeline.append((time.monotonic() - t0, row))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out = cons.stdout.read()
    cons.wait()
    wall = time.monotonic() - t0
    stop.set()
    th.join()
    if load:
        harness.interrupt(load, 30)
    if perf:
        perf.send_signal(2)
        perf.wait()
    if cons.returncode != 0:
        print("consumer failed:", cons.stderr.read())
    print(f"consumer: {out.strip()}")
    print(f"wall {wall:.2f} s; CPU s: server {sum(server_pids.values()):.2f} "
          f"({len(server_pids)} backends), dblogd {last['dblogd']:.2f}, "
          f"consumer {last['consumer']:.2f}")
    print("context switches (voluntary, nonvoluntary): " + "; ".join(
        f"{k} {v.get('voluntary', 0)}, {v.get('nonvoluntary', 0)}" for k, v in switches.items()))
    d.stop()
    print("\ntimeline (share of one core busy; '.' below 10%):")
    print("   t s     server    dblogd  consumer")
    step = max(1, len(timeline) // 50)
    for i in range(0, len(timeline), step):
        chunk = timeline[i:i + step]
        cols = []
        for k in ("server", "dblogd", "consumer"):
            vals = [c[1][k] for c in chunk if c[1].get(k) is not None]
            v = sum(vals) / len(vals) if vals else 0
            cols.append(f"{v * 100:8.0f}%" if v >= 0.1 else "        .")
        print(f"{chunk[0][0]:6.2f} " + " ".join(cols))
    if perf:
        groups = [("server", ",".join(str(x) for x in server_pids)),
                  ("dblogd", str(d.proc.pid)), ("consumer", str(cons.pid))]
        for label, pids in groups:
            for sort in ("dso", "dso,sym"):
                print(f"\n== perf, {label}: self time by {sort}")
                r = subprocess.run(["perf", "report", "-i", perf_path, "--stdio", "--no-children",
                                    "--percentage", "relative",
                                    "--pid", pids, "--sort", sort, "--percent-limit",
                                    "2" if sort == "dso" else "1"],
                                   capture_output=True, text=True)
                print("\n".join(line for line in r.stdout.splitlines()
                                if line.strip() and not line.startswith("#")))
    harness.sql("SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
                f" WHERE slot_name = 'dblog_{name}' AND NOT active;"
                f" DELETE FROM dblog.consumers WHERE name = '{name}';")


if __name__ == "__main__":
    main()
