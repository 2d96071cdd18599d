#!/usr/bin/env python3
"""bench/bench.py: the measurements behind bench/run.sh (which builds, installs and starts the
throwaway cluster first, then runs this with PGHOST/PGPORT/... and DBLOG_TEST_* exported).

Every number is measured in this run on this machine; nothing here judges a timing. The method
is described in docs/benchmarks.md, which this script rewrites (see write_docs below).

Sections (--only takes a comma-separated list of these names):
  bulk       log throughput, 1M row changes in 3 transactions
  oltp       log throughput, 100k transactions of 1-5 rows
  memory     dblogd through one transaction of 1M rows (peak RSS)
  latency    commit-to-consumer latency at a fixed rate
  bootstrap  initial copy of a 5M-row table
  repair     whole-table repair of 1M rows under a pgbench-style load
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
SECTIONS = ["bulk", "oltp", "memory", "latency", "bootstrap", "repair"]


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- PostgreSQL access (psql, so that nothing but the client packages is needed) ----------

BINDIR = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                        check=True).stdout.strip()


def tool(name):
    return os.path.join(BINDIR, name)


class SqlError(RuntimeError):
    pass


def sql(query, timeout=3600):
    """Runs one or more statements with psql; returns stdout (unaligned, tuples only)."""
    r = subprocess.run([tool("psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                       input=query, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SqlError(f"psql failed ({r.returncode}): {r.stderr.strip()}\n--- query:\n{query[:2000]}")
    return r.stdout.strip()


def sql_with_notices(query, timeout=3600):
    r = subprocess.run([tool("psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                       input=query, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SqlError(f"psql failed ({r.returncode}): {r.stderr.strip()}\n--- query:\n{query[:2000]}")
    return r.stdout.strip(), r.stderr


def lsn_to_int(text):
    hi, lo = text.split("/")
    return int(hi, 16) << 32 | int(lo, 16)


# ---- server-side CPU: what the postmaster reaped ----------------------------------------
#
# Every backend that serves a contender (the walsender of a replication connection, the
# backend of a SQL peek, the COPY backends, dblogd's copy workers) is a child of the
# postmaster. When it exits, the postmaster reaps it and the kernel adds its user+system time
# to the postmaster's cutime+cstime. The growth of that sum from before a contender starts to
# after all of its connections are gone is exactly the server CPU it cost, with no sampling.
# This needs that nothing else exits meanwhile: the bench cluster runs without autovacuum and
# the driver opens no connection while a contender runs.

class Postmaster:
    def __init__(self, pgdata):
        with open(os.path.join(pgdata, "postmaster.pid")) as f:
            self.pid = int(f.readline())
        self.aux = self.children()

    def children(self):
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
                return set(int(x) for x in f.read().split())
        except FileNotFoundError:
            return set()

    def reaped_cpu(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[13]) + int(fields[14])) / CLK_TCK  # cutime + cstime

    def settle(self, timeout=60):
        """Waits until only the auxiliary processes are left (every backend reaped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.children() <= self.aux:
                return True
            time.sleep(0.02)
        log(f"warning: postmaster children did not settle: {self.children() - self.aux}")
        return False


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def proc_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def machine_busy_s():
    """CPU seconds the whole machine has been busy (all CPUs, /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK_TCK  # minus idle and iowait


def wait_for_quiet(max_wait, max_load):
    """Other engineers share this machine: before a timed run, wait (at most max_wait seconds)
    until the machine's load over half a second is below max_load cores. Returns the wait."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_wait:
        b0 = machine_busy_s()
        time.sleep(0.5)
        if (machine_busy_s() - b0) / 0.5 < max_load:
            break
    return time.monotonic() - t0


class Window:
    """The span of one measured run: server CPU (reaped by the postmaster) and how busy the
    machine was with everything else (other engineers' work) meanwhile."""

    def __init__(self, ctx):
        self.ctx = ctx
        a = ctx.args
        wait_for_quiet(a.quiet_wait, a.quiet_load)
        ctx.pm.settle()
        self.cpu0 = ctx.pm.reaped_cpu()
        self.busy0 = machine_busy_s()
        self.t0 = time.monotonic()

    def close(self, result, client_cpu):
        """After every backend of the run exited: fills server CPU and others' load."""
        self.ctx.pm.settle()
        result["server_cpu_s"] = self.ctx.pm.reaped_cpu() - self.cpu0
        span = time.monotonic() - self.t0
        others = machine_busy_s() - self.busy0 - result["server_cpu_s"] - client_cpu
        result["others_load"] = max(0.0, others) / span
        return result


def wait_rusage(proc, timeout=None):
    """Waits for a Popen child; returns (exit status, user+system CPU seconds)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru.ru_utime + ru.ru_stime
        if deadline and time.monotonic() > deadline:
            raise TimeoutError(f"{proc.args[0]} did not finish in {timeout} s")
        time.sleep(0.005)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- the workloads -------------------------------------------------------------------------

TABLE_DDL = """
CREATE TABLE {name} (
  id bigint PRIMARY KEY,
  k integer NOT NULL,
  qty smallint,
  amount numeric(12,2),
  price double precision,
  flag boolean,
  name text,
  code varchar(32),
  created timestamptz,
  day date,
  uid uuid,
  attrs jsonb
);"""


def row_expr(i):
    """The select list of one row of the mixed-type table, for the bigint expression i."""
    return (f"{i}, ({i} * 7919 % 100000)::int, ({i} % 1000)::int2, "
            f"(({i} % 100000) / 100.0)::numeric(12,2), {i} * 0.001, {i} % 2 = 0, "
            f"'name-' || md5({i}::text), 'code-' || ({i} % 5000), "
            f"timestamptz '2024-01-01 00:00:00+00' + {i} * interval '1 second', "
            f"date '2024-01-01' + ({i} % 3650)::int, md5({i}::text)::uuid, "
            f"jsonb_build_object('n', {i}, 'tag', 't' || ({i} % 17), 'ok', {i} % 3 = 0)")


OLTP_PROC = """
CREATE OR REPLACE PROCEDURE bench.oltp(ntx int, npre bigint) LANGUAGE plpgsql AS $$
DECLARE
  n int; r int; cnt bigint := 0; rc bigint;
  next_id bigint := npre + 1;   -- ids of new rows
  del_id bigint := npre + 1;    -- the oldest new row not yet deleted
BEGIN
  FOR i IN 1..ntx LOOP
    n := 1 + i % 5;
    FOR j IN 1..n LOOP
      r := (i * 31 + j * 17) % 20;
      IF r >= 17 AND del_id < next_id THEN
        DELETE FROM bench.o WHERE id = del_id;
        del_id := del_id + 1;
      ELSIF r >= 10 THEN
        UPDATE bench.o SET k = k + 1, price = price + 1, created = clock_timestamp()
         WHERE id = 1 + (i::bigint * 7919 + j) % npre;
      ELSE
        INSERT INTO bench.o SELECT ROW_EXPR_NEXT_ID;
        next_id := next_id + 1;
      END IF;
      GET DIAGNOSTICS rc = ROW_COUNT;
      cnt := cnt + rc;
    END LOOP;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'bench changes=%', cnt;
END $$;
""".replace("ROW_EXPR_NEXT_ID", row_expr("next_id"))


def setup_database():
    sql("""
CREATE EXTENSION IF NOT EXISTS dblog;
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
CREATE TABLE bench.marker (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp());
DROP PUBLICATION IF EXISTS bench_pub;
CREATE PUBLICATION bench_pub FOR ALL TABLES;
""")


def next_marker():
    """Commits a marker row; returns the WAL insert position inside its transaction (the marker's
    commit record comes after it, every earlier transaction's before it)."""
    out = sql("BEGIN; INSERT INTO bench.marker DEFAULT VALUES;"
              " SELECT pg_current_wal_insert_lsn(); COMMIT;")
    return out.strip().splitlines()[-1]


# ---- contenders --------------------------------------------------------------------------

class Ctx:
    def __init__(self, args):
        self.args = args
        self.pm = Postmaster(os.environ["DBLOG_TEST_PGDATA"])
        self.conninfo = os.environ["DBLOG_TEST_CONNINFO"]
        self.dblogd = args.dblogd
        self.consumer = args.consumer
        self.logdir = args.logdir
        os.makedirs(self.logdir, exist_ok=True)


class Dblogd:
    """dblogd as a child process on free ports; its log goes to a file in the log dir."""

    def __init__(self, ctx, name, flags):
        self.ctx = ctx
        self.port = free_port()
        self.mport = free_port()
        self.logpath = os.path.join(ctx.logdir, f"dblogd-{name}.log")
        self.logf = open(self.logpath, "w")
        cmd = [ctx.dblogd, f"--source={ctx.conninfo}", f"--listen=127.0.0.1:{self.port}",
               f"--metrics-listen=127.0.0.1:{self.mport}", "--log-level=info"] + flags
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"dblogd exited at start: {self.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dblogd did not listen: {self.log_tail()}")
                time.sleep(0.02)

    def log_tail(self, n=15):
        self.logf.flush()
        with open(self.logpath) as f:
            return "".join(f.readlines()[-n:])

    def metric(self, name, consumer):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/metrics", timeout=10) as r:
            body = r.read().decode()
        m = re.search(rf'^{name}\{{[^}}]*consumer="{consumer}"[^}}]*\}} (\S+)$', body, re.M)
        return float(m.group(1)) if m else None

    def stats(self):
        return {"rss_kb": proc_hwm_kb(self.proc.pid)}

    def stop(self):
        """SIGTERM (graceful: dblogd waits ~2 s for final frames), then its CPU seconds."""
        if self.proc.returncode is not None:
            return 0.0
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, cpu = wait_rusage(self.proc, timeout=15)
        except TimeoutError:
            self.proc.kill()
            _, cpu = wait_rusage(self.proc)
        self.logf.close()
        return cpu


def consumer_in_background(ctx, port, consumer, until, **kwargs):
    """run_consumer in a thread; returns once the consumer has its Welcome (or failed), with the
    thread and a dict that gets "res" (its result) or "err" (its exception)."""
    ready = threading.Event()
    holder = {}

    def consume():
        try:
            holder["res"] = run_consumer(ctx, port, consumer, until, ready_cb=ready.set, **kwargs)
        except Exception as e:
            holder["err"] = e
            ready.set()

    t = threading.Thread(target=consume)
    t.start()
    ready.wait(60)
    return t, holder


def run_consumer(ctx, port, consumer, until, expect=None, latency=False, ready_cb=None,
                 timeout=3600, linger=0):
    cmd = [ctx.consumer, "--port", str(port), "--consumer", consumer]
    if until == "bootstrap":
        cmd += ["--until-bootstrap-end"]
    elif until == "repair":
        cmd += ["--until-repair-done"]
    else:
        cmd += ["--until-marker", until]
    if expect is not None:
        cmd += ["--expect-changes", str(expect)]
    if latency:
        cmd += ["--latency"]
    if ready_cb:
        cmd += ["--ready"]
    if linger:
        cmd += ["--linger", str(linger)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []

    def read_err():
        for line in proc.stderr:
            if line.strip() == "ready" and ready_cb:
                ready_cb()
            else:
                err_lines.append(line)

    t = threading.Thread(target=read_err, daemon=True)
    t.start()
    out = proc.stdout.read()
    status, cpu = wait_rusage(proc, timeout=timeout)
    t.join(5)
    wall = time.monotonic() - t0
    if status != 0:
        raise RuntimeError(f"consumer failed ({status}): {''.join(err_lines).strip()}")
    res = json.loads(out)
    res["process_wall_s"] = wall
    res["cpu_s"] = cpu
    return res


def measure_dblogd_stream(ctx, name, consumer, flags, until, expect):
    """One dblogd run: start dblogd, consume until the end condition, collect the numbers."""
    win = Window(ctx)
    d = Dblogd(ctx, name, flags)
    try:
        res = run_consumer(ctx, d.port, consumer, until, expect)
        st = d.stats()
        out_bytes = d.metric("dblog_consumer_bytes_sent_total", consumer)
    except Exception:
        log(f"dblogd log ({d.logpath}):\n{d.log_tail()}")
        d.stop()
        raise
    dcpu = d.stop()
    return win.close({
        "wall_s": res["wall_s"],
        "client_cpu_s": dcpu + res["cpu_s"],
        "dblogd_cpu_s": dcpu,
        "consumer_cpu_s": res["cpu_s"],
        "out_bytes": out_bytes,
        "rss_kb": st["rss_kb"],
        "changes_seen": res["changes"],
        "first_event_s": res["first_event_s"],
    }, dcpu + res["cpu_s"])


def measure_process(ctx, cmd, stdout=subprocess.DEVNULL, timeout=3600):
    """Wall, server CPU and client CPU of one client program run to its end."""
    win = Window(ctx)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    status, ccpu = wait_rusage(proc, timeout=timeout)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace")
    if status != 0:
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed ({status}): {err.strip()[-2000:]}")
    return win.close({"wall_s": wall, "client_cpu_s": ccpu}, ccpu)


def measure_peek(ctx, slot, fn, options, endpos):
    opts = "".join(f", '{k}', '{v}'" for k, v in options)
    q = (f"SELECT count(*), coalesce(sum(length(data)), 0) FROM {fn}('{slot}', '{endpos}', NULL"
         f"{opts});")
    win = Window(ctx)
    t0 = time.monotonic()
    proc = subprocess.Popen([tool("psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", q],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    status, ccpu = wait_rusage(proc)
    wall = time.monotonic() - t0
    if status != 0:
        raise RuntimeError(f"peek failed: {proc.stderr.read().strip()}")
    n, b = out.strip().split("|")
    return win.close({"wall_s": wall, "client_cpu_s": ccpu, "out_bytes": int(b),
                      "messages": int(n)}, ccpu)


# Log throughput contenders: (key, label, plugin, kind, plugin options)
PUB_OPTS = [("proto_version", "1"), ("publication_names", "bench_pub")]
LOG_CONTENDERS = [
    ("dblogd", "dblogd → TCP consumer (parses every frame, acks when caught up)", "dblog", "dblogd",
     []),
    ("dblog_peek", "dblog plugin, SQL peek (binary)", "dblog", "peek",
     [("include_tables", "bench.*")]),
    ("pgoutput_peek", "pgoutput (binary, proto 1), SQL peek", "pgoutput", "peek", PUB_OPTS),
    ("pgoutput_stream", "pg_recvlogical pgoutput (proto 1) → /dev/null", "pgoutput", "recv",
     PUB_OPTS),
    ("test_decoding", "pg_recvlogical test_decoding → /dev/null", "test_decoding", "recv", []),
    ("decoderbufs", "pg_recvlogical decoderbufs → /dev/null", "decoderbufs", "recv", []),
    ("wal2json", "pg_recvlogical wal2json format 2 → /dev/null", "wal2json", "recv",
     [("format-version", "2")]),
]
BINARY_PLUGINS = {"dblog", "pgoutput", "decoderbufs"}


def slot_name(workload, key, rep):
    if key == "dblogd":
        return f"dblog_{workload}_r{rep}"  # dblogd's slot for consumer "<workload>_r<rep>"
    return f"b_{workload}_{key}_r{rep}"


def run_log_workload(ctx, workload, reps, generate, expect_check=True):
    """Creates one slot per contender and repetition, generates the workload once, then lets
    every contender consume its own slots, rotating the order each repetition."""
    contenders = LOG_CONTENDERS
    if ctx.args.contenders:
        keep = ctx.args.contenders.split(",")
        contenders = [c for c in contenders if c[0] in keep]
    stmts = []
    for rep in range(reps):
        for key, _, plugin, _, _ in contenders:
            stmts.append(f"SELECT 1 FROM pg_create_logical_replication_slot("
                         f"'{slot_name(workload, key, rep)}', '{plugin}');")
    sql("\n".join(stmts))
    log(f"{workload}: {len(stmts)} slots created; generating the workload")
    t0 = time.monotonic()
    changes = generate()
    endpos = next_marker()
    gen_s = time.monotonic() - t0
    wal_bytes = int(sql(f"SELECT pg_wal_lsn_diff('{endpos}', min(restart_lsn)) FROM "
                        f"pg_replication_slots WHERE slot_name LIKE '%{workload}%'"))
    log(f"{workload}: {changes} row changes in {gen_s:.1f} s, {wal_bytes / 1e6:.0f} MB of WAL, "
        f"marker at {endpos}")

    # Output size of the pg_recvlogical contenders (untimed): what they would write, from a
    # SQL peek of the same slot (a peek consumes nothing). pg_recvlogical adds a newline per
    # message.
    sizes = {}
    for key, _, plugin, kind, opts in contenders:
        if kind != "recv":
            continue
        fn = ("pg_logical_slot_peek_binary_changes" if plugin in BINARY_PLUGINS
              else "pg_logical_slot_peek_changes")
        r = measure_peek(ctx, slot_name(workload, key, 0), fn, opts, endpos)
        sizes[key] = (r["messages"], r["out_bytes"] + r["messages"])
    results = {c[0]: [] for c in contenders}
    errors = {}
    for rep in range(reps):
        order = contenders[rep % len(contenders):] + contenders[:rep % len(contenders)]
        for key, label, plugin, kind, opts in order:
            slot = slot_name(workload, key, rep)
            try:
                if kind == "dblogd":
                    r = measure_dblogd_stream(
                        ctx, f"{workload}_r{rep}", f"{workload}_r{rep}",
                        ["--default-scope=bench.*", "--bootstrap=false",
                         "--status-interval=1"],
                        "bench.marker", changes if expect_check else None)
                elif kind == "peek":
                    fn = "pg_logical_slot_peek_binary_changes"
                    r = measure_peek(ctx, slot, fn, opts, endpos)
                else:
                    cmd = [tool("pg_recvlogical"), "-d", os.environ["PGDATABASE"], "--slot", slot,
                           "--start", "--endpos", endpos, "--no-loop", "-F", "0", "-f",
                           "/dev/null"]
                    for k, v in opts:
                        cmd += ["-o", f"{k}={v}"]
                    r = measure_process(ctx, cmd)
                    r["messages"], r["out_bytes"] = sizes[key]
            except Exception as e:  # a failing contender is reported, the others still run
                log(f"{workload}: {key} rep {rep} FAILED: {e}")
                errors.setdefault(key, str(e))
                continue
            log(f"{workload}: rep {rep} {key}: {r['wall_s']:.2f} s, server CPU "
                f"{r['server_cpu_s']:.2f} s, client CPU {r['client_cpu_s']:.2f} s")
            results[key].append(r)
    sql("SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
        f" WHERE slot_name LIKE '%\\_{workload}\\_%' AND NOT active;")
    return {"workload": workload, "changes": changes, "generate_s": gen_s, "wal_bytes": wal_bytes,
            "results": results, "errors": errors, "contenders": contenders}


def gen_bulk(n):
    ins = (2 * n) // 5
    upd = ins
    dele = n - ins - upd

    def generate():
        sql(f"INSERT INTO bench.t SELECT {row_expr('i')} FROM generate_series(1::bigint, {ins}) i;")
        sql(f"UPDATE bench.t SET k = k + 1, price = price * 1.01, name = 'upd-' || md5(id::text),"
            f" attrs = attrs || '{{\"u\": 1}}' WHERE id <= {upd};")
        sql(f"DELETE FROM bench.t WHERE id <= {dele};")
        return ins + upd + dele
    return generate


def gen_oltp(ntx, npre):
    def generate():
        _, notices = sql_with_notices(f"CALL bench.oltp({ntx}, {npre});")
        m = re.search(r"bench changes=(\d+)", notices)
        return int(m.group(1))
    return generate


def section_log(ctx, name):
    a = ctx.args
    if name == "bulk":
        sql("DROP TABLE IF EXISTS bench.t;" + TABLE_DDL.format(name="bench.t"))
        return run_log_workload(ctx, "bulk", a.reps_log, gen_bulk(a.bulk_changes))
    sql(f"DROP TABLE IF EXISTS bench.o;{TABLE_DDL.format(name='bench.o')}"
        f" INSERT INTO bench.o SELECT {row_expr('i')} FROM generate_series(1::bigint, {a.oltp_pre}) i;"
        f" VACUUM ANALYZE bench.o; CHECKPOINT;" + OLTP_PROC)
    return run_log_workload(ctx, "oltp", a.reps_log, gen_oltp(a.oltp_tx, a.oltp_pre))


def section_memory(ctx):
    """dblogd through one transaction of N rows (peak RSS); one run per repetition."""
    a = ctx.args
    n = a.memory_rows
    sql("DROP TABLE IF EXISTS bench.m;" + TABLE_DDL.format(name="bench.m"))
    reps = max(1, min(a.reps_log, 3))
    sql("\n".join(f"SELECT 1 FROM pg_create_logical_replication_slot('dblog_mem_r{r}', 'dblog');"
                  for r in range(reps)))
    sql(f"INSERT INTO bench.m SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;")
    next_marker()
    runs, errors = [], {}
    for rep in range(reps):
        try:
            r = measure_dblogd_stream(ctx, f"mem_r{rep}", f"mem_r{rep}",
                                      ["--default-scope=bench.*", "--bootstrap=false"],
                                      "bench.marker", n)
            log(f"memory: rep {rep}: {r['wall_s']:.2f} s, peak RSS {r['rss_kb'] / 1024:.1f} MB")
            runs.append(r)
        except Exception as e:
            log(f"memory: rep {rep} FAILED: {e}")
            errors["dblogd"] = str(e)
    sql("SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
        " WHERE slot_name LIKE 'dblog\\_mem\\_%' AND NOT active;")
    return {"rows": n, "runs": runs, "errors": errors}


# ---- latency -----------------------------------------------------------------------------

def pgbench_cmd(rate, seconds, script):
    return [tool("pgbench"), "-n", "-c", "1", "-j", "1", "-R", str(rate), "-T", str(seconds),
            "-f", script, os.environ["PGDATABASE"]]


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
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
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
        order = ["dblogd", "test_decoding"] if rep % 2 == 0 else ["test_decoding", "dblogd"]
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


# ---- bootstrap ---------------------------------------------------------------------------

def count_output(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = 0
    while True:
        b = proc.stdout.read(1 << 20)
        if not b:
            break
        n += len(b)
    proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {proc.stderr.read().decode()}")
    return n


def section_bootstrap(ctx):
    a = ctx.args
    n = a.bootstrap_rows
    log(f"bootstrap: loading {n} rows")
    t0 = time.monotonic()
    sql("DROP TABLE IF EXISTS bench.big;" + TABLE_DDL.format(name="bench.big") +
        f"INSERT INTO bench.big SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;"
        " VACUUM ANALYZE bench.big; CHECKPOINT;")
    heap = int(sql("SELECT pg_relation_size('bench.big')"))
    total = int(sql("SELECT pg_total_relation_size('bench.big')"))
    log(f"bootstrap: loaded in {time.monotonic() - t0:.1f} s, heap {heap / 1e6:.0f} MB")
    q = "SELECT * FROM bench.big"
    sizes = {
        "copy_text": count_output([tool("psql"), "-XAtq", "-c", f"COPY ({q}) TO STDOUT"]),
        "copy_binary": count_output([tool("psql"), "-XAtq", "-c",
                                     f"COPY ({q}) TO STDOUT (FORMAT binary)"]),
        "pg_dump": count_output([tool("pg_dump"), "--data-only", "-t", "bench.big",
                                 os.environ["PGDATABASE"]]),
    }
    contenders = [
        ("dblogd_w1", "dblogd bootstrap, --copy-workers=1 → consumer"),
        ("dblogd_w2", "dblogd bootstrap, --copy-workers=2 → consumer"),
        ("copy_text", "psql \\copy (SELECT * FROM t) TO /dev/null (text)"),
        ("copy_binary", "psql \\copy (SELECT * FROM t) TO /dev/null (FORMAT binary)"),
        ("pg_dump", "pg_dump --data-only -t t > /dev/null"),
    ]
    results = {c[0]: [] for c in contenders}
    errors = {}
    for rep in range(a.reps_bootstrap):
        order = contenders[rep % len(contenders):] + contenders[:rep % len(contenders)]
        for key, _ in order:
            try:
                if key.startswith("dblogd"):
                    workers = key[-1]
                    name = f"boot_w{workers}_r{rep}"
                    r = measure_dblogd_stream(
                        ctx, name, name, [f"--consumer={name}=bench.big",
                                          f"--copy-workers={workers}"], "bootstrap", n)
                    sql(f"SELECT count(pg_drop_replication_slot(slot_name)) FROM "
                        f"pg_replication_slots WHERE slot_name = 'dblog_{name}' AND NOT active;"
                        f" DELETE FROM dblog.consumers WHERE name = '{name}';")
                elif key == "pg_dump":
                    r = measure_process(ctx, [tool("pg_dump"), "--data-only", "-t", "bench.big",
                                              "-f", "/dev/null", os.environ["PGDATABASE"]])
                    r["out_bytes"] = sizes[key]
                else:
                    fmt = " (FORMAT binary)" if key == "copy_binary" else ""
                    r = measure_process(ctx, [tool("psql"), "-XAtq", "-c",
                                              f"\\copy ({q}) TO '/dev/null'{fmt}"])
                    r["out_bytes"] = sizes[key]
            except Exception as e:
                log(f"bootstrap: rep {rep} {key} FAILED: {e}")
                errors.setdefault(key, str(e))
                continue
            log(f"bootstrap: rep {rep} {key}: {r['wall_s']:.2f} s, server CPU "
                f"{r['server_cpu_s']:.2f} s, client CPU {r['client_cpu_s']:.2f} s"
                + (f", RSS {r['rss_kb'] / 1024:.0f} MB" if "rss_kb" in r else ""))
            results[key].append(r)
    return {"rows": n, "heap_bytes": heap, "total_bytes": total, "results": results,
            "errors": errors, "contenders": contenders}


# ---- repair ------------------------------------------------------------------------------

REPAIR_SCRIPT = """\\set id random(1, :n)
UPDATE bench.r SET k = k + 1, price = price + 1, created = clock_timestamp() WHERE id = :id;
"""


def repair_run(ctx, rep, n, pre_s, post_s, clients, rate=None, cap=None):
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
    d = Dblogd(ctx, name, flags)
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
        pgb.send_signal(signal.SIGINT)
        try:
            pgb.wait(30)
        except subprocess.TimeoutExpired:
            pgb.kill()
            pgb.wait()
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
    (--repair-rows-per-second, at a quarter of its unloaded rate)."""
    a = ctx.args
    n = a.repair_rows
    sql("DROP TABLE IF EXISTS bench.r;" + TABLE_DDL.format(name="bench.r") +
        f"INSERT INTO bench.r SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;"
        " VACUUM ANALYZE bench.r; CHECKPOINT;")
    kinds = ["idle", "full", "rate", "paced"]
    results = {k: [] for k in kinds}
    errors = {}
    fixed_rate = cap = None
    run_no = 0
    for rep in range(a.reps_bootstrap):
        order = kinds if rep % 2 == 0 else list(reversed(kinds))
        if rep == 0:
            order = kinds  # the rate and the cap come from the first idle and full runs
        for kind in order:
            if kind == "rate" and not fixed_rate or kind == "paced" and not cap:
                continue
            try:
                r = repair_run(ctx, run_no, n, a.repair_pre_s, a.repair_post_s,
                               0 if kind == "idle" else 2,
                               rate=fixed_rate if kind == "rate" else None,
                               cap=cap if kind == "paced" else None)
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
            "fixed_rate": fixed_rate, "cap": cap, "errors": errors}


# ---- reporting ---------------------------------------------------------------------------

def med(values):
    return statistics.median(values) if values else None


def fmt_range(values, digits=2):
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{med(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def fmt_num(v, digits=0):
    if v is None:
        return "—"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem_gb = int(line.split()[1]) / 1024 / 1024
    pgver = sql("SHOW server_version")
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        commit += " + uncommitted changes" if dirty else ""
    except OSError:
        commit = "unknown"
    load = open("/proc/loadavg").read().split()[:3]
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gb": mem_gb, "pg": pgver,
            "kernel": platform.release(), "commit": commit, "load_before": " ".join(load),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def report_log(w):
    """Markdown for one log-throughput workload."""
    res, n = w["results"], w["changes"]
    lines = []
    lines.append("| contender | wall s, median (min–max) | changes/s | output MB | output MB/s "
                 "| plugin msgs | server CPU s | client CPU s | dblogd peak RSS MB "
                 "| others' load, cores |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    walls = {}
    peek_msgs = None
    if res.get("dblog_peek"):
        peek_msgs = res["dblog_peek"][0].get("messages")
    for key, label, _, kind, _ in w["contenders"]:
        runs = res.get(key, [])
        if not runs:
            err = w["errors"].get(key, "no runs")
            lines.append(f"| {label} | FAILED: {err[:160]} | | | | | | | | |")
            continue
        wall = [r["wall_s"] for r in runs]
        walls[key] = med(wall)
        out = med([r["out_bytes"] for r in runs if r.get("out_bytes") is not None])
        msgs = runs[0].get("messages", peek_msgs if kind == "dblogd" else None)
        client = fmt_range([r["client_cpu_s"] for r in runs])
        if kind == "dblogd":
            client += (f" (dblogd {med([r['dblogd_cpu_s'] for r in runs]):.2f}, consumer "
                       f"{med([r['consumer_cpu_s'] for r in runs]):.2f})")
        rss = fmt_num(med([r["rss_kb"] / 1024 for r in runs]), 1) if kind == "dblogd" else ""
        lines.append(
            f"| {label} | {fmt_range(wall)} | {fmt_num(n / walls[key])} | "
            f"{fmt_num(out / 1e6 if out else None, 1)} | "
            f"{fmt_num(out / 1e6 / walls[key] if out else None, 1)} | {fmt_num(msgs)} | "
            f"{fmt_range([r['server_cpu_s'] for r in runs])} | {client} | {rss} | "
            f"{fmt_range([r['others_load'] for r in runs], 1)} |")
    lines.append("")
    anchors = [("pgoutput_peek", "pgoutput peek"), ("pgoutput_stream", "pgoutput streamed"),
               ("test_decoding", "test_decoding"), ("decoderbufs", "decoderbufs"),
               ("wal2json", "wal2json v2")]
    lines.append("Wall-time ratios (median dblog / median anchor; below 1 means dblog is faster):")
    lines.append("")
    lines.append("| | " + " | ".join(a[1] for a in anchors) + " |")
    lines.append("|---|" + "---|" * len(anchors))
    for key, label in [("dblogd", "dblogd → consumer"), ("dblog_peek", "dblog plugin peek")]:
        lines.append(f"| {label} | " + " | ".join(ratio(walls.get(key), walls.get(a[0]))
                                                   for a in anchors) + " |")
    return "\n".join(lines), walls


def report(ctx, data, mach):
    a = ctx.args
    out = []
    out.append(f"Machine: {mach['nproc']} CPUs ({mach['cpu']}), {mach['ram_gb']:.1f} GB RAM, "
               f"PostgreSQL {mach['pg']}, Linux {mach['kernel']}; dblog {mach['commit']}; "
               f"{mach['date']}; load average before the run {mach['load_before']}.")
    out.append("")
    targets = []
    for w in ("bulk", "oltp"):
        if w not in data:
            continue
        d = data[w]
        title = {"bulk": f"### 1a. Log throughput, bulk: {d['changes']:,} row changes in 3 "
                         f"transactions ({d['wal_bytes'] / 1e6:.0f} MB of WAL)",
                 "oltp": f"### 1b. Log throughput, OLTP: {a.oltp_tx:,} transactions of 1–5 rows"
                         f" ({d['changes']:,} row changes, {d['wal_bytes'] / 1e6:.0f} MB of WAL)"
                 }[w]
        out.append(title)
        out.append("")
        out.append(f"{len(d['results'].get('dblogd', []))} repetition(s) per contender.")
        out.append("")
        text, walls = report_log(d)
        out.append(text)
        out.append("")
        limit = 1.25 if w == "bulk" else 2.0
        if walls.get("dblogd") and walls.get("pgoutput_peek"):
            r = walls["dblogd"] / walls["pgoutput_peek"]
            targets.append((f"{w}: dblogd end to end within {limit}× of pgoutput peek",
                            f"{r:.2f}×", "met" if r <= limit else "missed"))
        if w == "bulk" and walls.get("dblogd") and walls.get("decoderbufs"):
            r = walls["decoderbufs"] / walls["dblogd"]
            targets.append(("bulk: about 3× faster than decoderbufs streamed (follows from the "
                            "above)", f"{r:.2f}× faster", "met" if r >= 2.9 else "missed"))
        if d["results"].get("dblogd"):
            rss = max(r["rss_kb"] for r in d["results"]["dblogd"]) / 1024
            targets.append((f"{w}: dblogd peak RSS under 100 MB", f"{rss:.1f} MB",
                            "met" if rss < 100 else "missed"))
    if "bootstrap" in data:
        d = data["bootstrap"]
        out.append(f"### 2. Bootstrap: {d['rows']:,} rows, heap {d['heap_bytes'] / 1e6:.0f} MB "
                   f"({d['total_bytes'] / 1e6:.0f} MB with its index)")
        out.append("")
        out.append("| contender | wall s, median (min–max) | rows/s | heap MB/s | output MB "
                   "| output MB/s | server CPU s | client CPU s | dblogd peak RSS MB "
                   "| others' load, cores |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        walls = {}
        for key, label in d["contenders"]:
            runs = d["results"].get(key, [])
            if not runs:
                out.append(f"| {label} | FAILED: {d['errors'].get(key, 'no runs')[:160]} "
                           "| | | | | | | | |")
                continue
            wall = [r["wall_s"] for r in runs]
            m = walls[key] = med(wall)
            ob = med([r["out_bytes"] for r in runs if r.get("out_bytes") is not None])
            client = fmt_range([r["client_cpu_s"] for r in runs])
            rss = ""
            if key.startswith("dblogd"):
                client += (f" (dblogd {med([r['dblogd_cpu_s'] for r in runs]):.2f}, consumer "
                           f"{med([r['consumer_cpu_s'] for r in runs]):.2f})")
                rss = fmt_num(med([r["rss_kb"] / 1024 for r in runs]), 1)
            out.append(f"| {label} | {fmt_range(wall)} | {fmt_num(d['rows'] / m)} | "
                       f"{fmt_num(d['heap_bytes'] / 1e6 / m, 1)} | "
                       f"{fmt_num(ob / 1e6 if ob else None, 1)} | "
                       f"{fmt_num(ob / 1e6 / m if ob else None, 1)} | "
                       f"{fmt_range([r['server_cpu_s'] for r in runs])} | {client} | {rss} | "
                       f"{fmt_range([r['others_load'] for r in runs], 1)} |")
        out.append("")
        anchors = [("copy_text", "COPY text"), ("copy_binary", "COPY binary"),
                   ("pg_dump", "pg_dump")]
        out.append("Wall-time ratios (median dblogd / median anchor; below 1 means dblogd is "
                   "faster):")
        out.append("")
        out.append("| | " + " | ".join(x[1] for x in anchors) + " |")
        out.append("|---|" + "---|" * len(anchors))
        for key in ("dblogd_w1", "dblogd_w2"):
            out.append(f"| {key.replace('_w', ', workers=')} | " +
                       " | ".join(ratio(walls.get(key), walls.get(x[0])) for x in anchors) + " |")
        out.append("")
        if walls.get("dblogd_w2") and walls.get("copy_text"):
            r = walls["dblogd_w2"] / walls["copy_text"]
            targets.append(("bootstrap: 2 workers at least as fast as one COPY text",
                            f"{r:.2f}× COPY text's time", "met" if r <= 1.0 else "missed"))
        for key in ("dblogd_w1", "dblogd_w2"):
            if d["results"].get(key):
                rss = max(r["rss_kb"] for r in d["results"][key]) / 1024
                targets.append((f"bootstrap ({key[-2:]}): dblogd peak RSS under 100 MB",
                                f"{rss:.1f} MB", "met" if rss < 100 else "missed"))
    if "memory" in data:
        d = data["memory"]
        out.append(f"### 3. Memory: dblogd through one transaction of {d['rows']:,} rows")
        out.append("")
        out.append("| | wall s | peak RSS MB (VmHWM) | dblogd CPU s | server CPU s |")
        out.append("|---|---|---|---|---|")
        if d["runs"]:
            runs = d["runs"]
            out.append(f"| dblogd → consumer | {fmt_range([r['wall_s'] for r in runs])} | "
                       f"{fmt_range([r['rss_kb'] / 1024 for r in runs], 1)} | "
                       f"{fmt_range([r['dblogd_cpu_s'] for r in runs])} | "
                       f"{fmt_range([r['server_cpu_s'] for r in runs])} |")
            rss = max(r["rss_kb"] for r in runs) / 1024
            targets.append(("one 1M-row transaction: dblogd peak RSS under 100 MB",
                            f"{rss:.1f} MB", "met" if rss < 100 else "missed"))
        else:
            out.append(f"| dblogd → consumer | FAILED: {d['errors'].get('dblogd', '')[:160]} "
                       "| | | |")
        out.append("")
        out.append("Peak RSS of dblogd in the other sections is in their tables.")
        out.append("")
    if "latency" in data:
        d = data["latency"]
        out.append(f"### 4. Latency: single-row transactions at {d['rate']}/s for "
                   f"{d['seconds']} s, commit time to the consumer holding the Commit")
        out.append("")
        out.append("| contender | transactions | p50 ms | p99 ms | max ms |")
        out.append("|---|---|---|---|---|")
        p99 = {}
        for key, label in [("dblogd", "dblogd → consumer"),
                           ("test_decoding", "pg_recvlogical test_decoding → pipe")]:
            runs = d["results"][key]
            if not runs:
                out.append(f"| {label} | FAILED: {d['errors'].get(key, '')[:160]} | | | |")
                continue
            p99[key] = med([r["p99_ms"] for r in runs])
            out.append(f"| {label} | {fmt_num(med([r['n'] for r in runs]))} | "
                       f"{fmt_range([r['p50_ms'] for r in runs])} | "
                       f"{fmt_range([r['p99_ms'] for r in runs])} | "
                       f"{fmt_range([r['max_ms'] for r in runs])} |")
        out.append("")
        if p99.get("dblogd") and p99.get("test_decoding"):
            r = p99["dblogd"] / p99["test_decoding"]
            targets.append(("latency: p99 within 1.5× of pg_recvlogical's", f"{r:.2f}×",
                            "met" if r <= 1.5 else "missed"))
    if "repair" in data:
        d = data["repair"]
        out.append(f"### 5. Repair: whole table of {d['rows']:,} rows under a pgbench-style "
                   "update load (2 clients)")
        out.append("")
        out.append("| | repair s | repair rows/s | chunks | workload tps without repair "
                   "| workload tps during repair | workload cost | workload latency ms, without "
                   "→ during | dblogd peak RSS MB |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        chunk = a.repair_chunk_size or 2000

        def repair_row(label, runs, loaded=True):
            if not runs:
                return None
            cost = [1 - r["tps_with"] / r["tps_without"] for r in runs if r["tps_without"]]
            load_cols = (f"{fmt_range([r['tps_without'] for r in runs], 0)} | "
                         f"{fmt_range([r['tps_with'] for r in runs], 0)} | "
                         f"{med(cost) * 100:.0f}% | "
                         f"{med([r['lat_without_ms'] for r in runs]):.2f} → "
                         f"{med([r['lat_with_ms'] for r in runs]):.2f}") if loaded else " | | "
            out.append(f"| {label} | {fmt_range([r['duration_s'] for r in runs])} | "
                       f"{fmt_num(med([r['rows_per_s'] for r in runs]))} | "
                       f"{fmt_num(med([r['chunks'] for r in runs]))} | {load_cols} | "
                       f"{fmt_num(med([r['rss_kb'] / 1024 for r in runs]), 1)} |")
            return med(cost) if loaded else None

        repair_row(f"`--chunk-size` {chunk}, no load", d.get("idle", []), loaded=False)
        cost_full = repair_row(f"`--chunk-size` {chunk}, workload unthrottled",
                               d.get("runs", []))
        cost_rate = repair_row(f"`--chunk-size` {chunk}, workload at {fmt_num(d.get('fixed_rate'))}"
                               " tps (half its unthrottled rate)", d.get("rate_runs", []))
        cost_paced = repair_row(f"`--chunk-size` {chunk} `--repair-rows-per-second` "
                                f"{fmt_num(d.get('cap'))}, workload unthrottled",
                                d.get("paced_runs", []))
        for kind, msg in sorted(d.get("errors", {}).items()):
            out.append(f"| {kind} | FAILED: {msg[:160]} | | | | | | | |")
        out.append("")
        boot = data.get("bootstrap", {}).get("results", {}).get("dblogd_w2")
        brate = (data["bootstrap"]["rows"] / med([r["wall_s"] for r in boot])) if boot else None
        for label, runs, cost in (("unthrottled workload", d.get("runs", []), cost_full),
                                  ("workload at a fixed rate", d.get("rate_runs", []), cost_rate),
                                  ("unthrottled workload, paced repair", d.get("paced_runs", []),
                                   cost_paced)):
            if not runs:
                continue
            rate = med([r["rows_per_s"] for r in runs])
            if brate:
                targets.append((f"repair ({label}): at least half the bootstrap rate (2 workers)",
                                f"{rate / brate:.2f}× the bootstrap rate",
                                "met" if rate >= brate / 2 else "missed"))
            targets.append((f"repair ({label}): costs the workload at most 10% of its tps",
                            f"{cost * 100:.0f}%", "met" if cost <= 0.10 else "missed"))
        all_runs = d.get("runs", []) + d.get("rate_runs", []) + d.get("paced_runs", [])
        if all_runs:
            rss = max(r["rss_kb"] for r in all_runs) / 1024
            targets.append(("repair: dblogd peak RSS under 100 MB", f"{rss:.1f} MB",
                            "met" if rss < 100 else "missed"))
        out.append("Repair s: from the request (`dblog.repair(...)`) to the consumer holding the "
                   "last chunk. Workload tps and mean latency from pgbench's per-second progress "
                   "(`-P 1 --progress-timestamp`), each second weighted by how much of it lies "
                   "outside the repair (before the request, after the end; first 2 s excluded) "
                   "or inside it. dblogd streams the workload's changes to the consumer "
                   "throughout. The fixed rate is half the tps the unthrottled workload reached "
                   "in this run's first loaded run; the pace is a quarter of the unloaded "
                   "repair's rate in its first run.")
        out.append("")
    if targets:
        out.append("### Targets (issue 7), from the medians above")
        out.append("")
        out.append("| target | measured | |")
        out.append("|---|---|---|")
        for t in targets:
            out.append(f"| {t[0]} | {t[1]} | {t[2]} |")
        out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--reps", type=int)
    p.add_argument("--only")
    p.add_argument("--contenders", help="log throughput: comma-separated contender keys")
    p.add_argument("--dblogd")
    p.add_argument("--consumer")
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
    p.add_argument("--quiet-load", type=float, default=0.3,
                   help="cores of load by others below which the machine counts as quiet")
    a = p.parse_args()
    if a.smoke:
        a.bulk_changes, a.oltp_tx, a.oltp_pre, a.memory_rows = 30_000, 3_000, 3_000, 30_000
        a.bootstrap_rows, a.latency_rate, a.latency_seconds = 100_000, 200, 3
        a.repair_rows, a.repair_pre_s, a.repair_post_s = 20_000, 3, 2
        a.reps_log = a.reps_bootstrap = a.reps_latency = 1
    else:
        a.bulk_changes, a.oltp_tx, a.oltp_pre, a.memory_rows = 1_000_000, 100_000, 100_000, 1_000_000
        a.bootstrap_rows, a.latency_rate, a.latency_seconds = 5_000_000, 500, 20
        a.repair_rows, a.repair_pre_s, a.repair_post_s = 1_000_000, 10, 10
        a.reps_log, a.reps_bootstrap, a.reps_latency = 5, 3, 3
    if a.reps:
        a.reps_log = a.reps_bootstrap = a.reps_latency = a.reps
    if a.quiet_wait is None:
        a.quiet_wait = 0 if a.smoke else 30
    if a.rerender:
        with open(a.rerender) as f:
            saved = json.load(f)
        for k, v in saved.get("args", {}).items():
            if k in ("oltp_tx", "repair_chunk_size"):
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
        if s in ("bulk", "oltp"):
            data[s] = section_log(ctx, s)
        elif s == "memory":
            data[s] = section_memory(ctx)
        elif s == "latency":
            data[s] = section_latency(ctx)
        elif s == "bootstrap":
            data[s] = section_bootstrap(ctx)
        elif s == "repair":
            data[s] = section_repair(ctx)
    elapsed = time.monotonic() - t0
    text = report(ctx, data, mach)
    print()
    print(text)
    print(f"\n(measured in {elapsed / 60:.1f} min)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": mach, "data": data, "command": a.command, "elapsed": elapsed,
                       "args": {"oltp_tx": a.oltp_tx, "repair_chunk_size": a.repair_chunk_size}},
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
