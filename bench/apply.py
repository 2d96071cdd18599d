#!/usr/bin/env python3
"""bench/apply.py: `dblog apply` against PostgreSQL's native logical replication (a
subscription), same cluster, same tables (issue 25, target 3; bench/apply.sh runs it, results in
docs/benchmarks.md, "dblog apply against native logical replication").

One throwaway PostgreSQL 15 cluster (tests/pg-cluster.sh, the bench's settings, fsync on unless
DBLOG_BENCH_FSYNC=off): the source database `postgres` holds ap.t (the bench's mixed-type table,
ROWS rows) and ap.marker; each contender applies into a target database of its own in the same
cluster, made afresh with the same two tables (primary keys, nothing else) for every run:

  native  CREATE SUBSCRIPTION (copy_data, its slot made beforehand: a subscription cannot make
          its slot in its own cluster) on a publication of the two tables
  dblog   dblogd (extension mode, scope ap.*) and `dblog apply` into the target

Per contender and repetition (the order alternates), measured with the wall clock and the
machine's busy CPU seconds (everything: server, walsender, apply worker, dblogd, dblog apply):

  copy    from CREATE SUBSCRIPTION / the start of `dblog apply` until the target holds the copy
          and a marker committed after it (native: every table `ready` in pg_subscription_rel;
          dblog: the consumer's slot made; then the marker, which comes after BootstrapEnd)
  bulk    the sink stopped (ALTER SUBSCRIPTION .. DISABLE / `dblog apply` interrupted), the
          source runs BULK row changes in 3 transactions (insert, update, delete), then a
          marker; timed from the sink's restart until the target holds the marker
  oltp    the same with OLTP transactions of 1-5 row changes each (the bench's OLTP mix)

The source is put back to its ROWS rows after each contender's run (not measured), and every
run ends with the target compared to the source (md5 of the rows, `equal`).
Prints one line per run, then medians and the same-run ratios dblog / native. Measures; judges
nothing.

  bench/apply.sh [ROWS] [REPETITIONS]          (default 5000000 3)
  DBLOG_BENCH_BULK=1000000 DBLOG_BENCH_OLTP=20000 DBLOG_BENCH_FSYNC=on
  DBLOG_APPLY_FLAGS='...'                      extra flags for `dblog apply`
  DBLOG_BASELINE_BUILD_DIR=DIR                 also an older build's dblogd and `dblog apply`
                                               (DIR/sidecar/dblogd, DIR/client/dblog): contender
                                               "baseline", same rotation
"""
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "bench"))
from dblog_bench.workloads import OLTP_PROC, TABLE_DDL, row_expr  # noqa: E402

BUILD = os.environ.get("DBLOG_BUILD_DIR", os.path.join(ROOT, "build"))
PG_CLUSTER = os.path.join(ROOT, "tests", "pg-cluster.sh")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The bench's own server settings (bench/postgresql.bench.conf) that matter here, and fsync.
SETTINGS = """
logical_decoding_work_mem = 64MB
shared_buffers = 256MB
max_wal_size = 8GB
min_wal_size = 1GB
checkpoint_timeout = 30min
autovacuum = off
wal_sender_timeout = 120s
max_logical_replication_workers = 8
max_worker_processes = 16
# The launcher starts a subscription's worker at most this often: at the default 5 s, ENABLE
# soon after the copy waits for it.
wal_retrieve_retry_interval = 100ms
fsync = {fsync}
"""


def busy_s():
    """CPU seconds the whole machine has been busy (all CPUs)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK_TCK


def psql(conninfo, sql, timeout=3600):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", conninfo,
                        "-c", sql], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"psql failed: {r.stderr.strip()}\n--- {sql[:500]}")
    return r.stdout.strip()


class Session:
    """One long-lived psql for the polls (a psql per poll, every 20 ms, cost a fifth of the
    machine's two cores): a query, then a line only this session prints, read back through
    a pipe."""

    def __init__(self, conninfo):
        self.proc = subprocess.Popen(["psql", "-X", "-q", "-At", "-d", conninfo],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)

    def query(self, sql):
        self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo __poll_end__\n")
        self.proc.stdin.flush()
        out = []
        for line in self.proc.stdout:
            if line.rstrip("\n") == "__poll_end__":
                return "\n".join(out).strip()
            out.append(line.rstrip("\n"))
        raise RuntimeError("psql session ended: " + "\n".join(out))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


def wait_for(what, check, timeout=1800, every=0.02):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


class Bench:
    def __init__(self, rows, bulk, oltp, fsync):
        self.rows, self.bulk, self.oltp = rows, bulk, oltp
        self.work = tempfile.mkdtemp(prefix="dblog-applybench-")
        self.dir, self.src = subprocess.run(
            [PG_CLUSTER, "start", "15"], check=True, capture_output=True,
            text=True).stdout.strip().split("\n")
        subprocess.run(["runuser", "-u", "postgres", "--", "tee", "-a",
                        os.path.join(self.dir, "data", "postgresql.conf")],
                       input=SETTINGS.format(fsync=fsync), text=True, check=True,
                       capture_output=True)
        subprocess.run([PG_CLUSTER, "restart", self.dir], check=True, capture_output=True)
        self.marker = 0
        self.procs = []
        self.sessions = {}
        ddl = (TABLE_DDL.format(name="ap.t") +
               "CREATE TABLE ap.marker (id bigint PRIMARY KEY);")
        self.ddl = "CREATE SCHEMA ap;" + ddl
        psql(self.src, "CREATE EXTENSION dblog;" + self.ddl +
             OLTP_PROC.replace("bench.oltp", "ap.oltp").replace("bench.o", "ap.t") +
             f"INSERT INTO ap.t SELECT {row_expr('i')} FROM generate_series(1::bigint, {rows}) i;"
             "CREATE PUBLICATION ap_pub FOR TABLE ap.t, ap.marker;")
        psql(self.src, "VACUUM ANALYZE ap.t")
        psql(self.src, "CHECKPOINT")

    def target(self, name):
        self.end_sessions()
        psql(self.src, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        psql(self.src, f"CREATE DATABASE {name}")
        conninfo = self.src.replace("dbname=postgres", f"dbname={name}")
        psql(conninfo, self.ddl)
        return conninfo

    def commit_marker(self):
        self.marker += 1
        psql(self.src, f"INSERT INTO ap.marker VALUES ({self.marker})")
        return self.marker

    def poll(self, conninfo, sql):
        """A query of a wait, through the database's long-lived session."""
        if conninfo not in self.sessions:
            self.sessions[conninfo] = Session(conninfo)
        return self.sessions[conninfo].query(sql)

    def has_marker(self, target, marker):
        return self.poll(target,
                         f"SELECT EXISTS (SELECT FROM ap.marker WHERE id = {marker})") == "t"

    def end_sessions(self):
        for session in self.sessions.values():
            session.close()
        self.sessions = {}

    def workload(self, kind):
        n = self.rows
        if kind == "bulk":
            ins = (2 * self.bulk) // 5
            upd = self.bulk - 2 * ins
            psql(self.src, f"INSERT INTO ap.t SELECT {row_expr('i')} FROM "
                           f"generate_series({n + 1}::bigint, {n + ins}) i")
            psql(self.src, f"UPDATE ap.t SET k = k + 1, price = price * 1.01, name = 'upd-' || "
                           f"md5(id::text), attrs = attrs || '{{\"u\": 1}}' WHERE id <= {upd}")
            psql(self.src, f"DELETE FROM ap.t WHERE id > {n}")
        else:
            psql(self.src, f"CALL ap.oltp({self.oltp}, {n})")

    def restore(self):
        psql(self.src, f"DELETE FROM ap.t WHERE id > {self.rows}")
        psql(self.src, "VACUUM ap.t")

    def equal(self, target):
        digest = ("SELECT count(*) || ' ' || md5(string_agg(t::text, ',' ORDER BY id)) "
                  "FROM ap.t t")
        return psql(self.src, digest) == psql(target, digest)

    def spawn(self, args, log):
        p = subprocess.Popen(args, stdout=open(os.path.join(self.work, log), "a"),
                             stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def timed(self, start, done):
        """Calls start(), waits for done(); returns (wall s, machine CPU s)."""
        b0, t0 = busy_s(), time.monotonic()
        start()
        wait_for("the sink", done)
        return time.monotonic() - t0, busy_s() - b0

    # ---- the contenders ----

    def run_native(self, rep):
        target = self.target("native")
        slot = f"native_r{rep}"
        psql(self.src, f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
        res = {}

        def ready():
            return self.poll(target, "SELECT count(*) = 2 AND bool_and(srsubstate = 'r') "
                                     "FROM pg_subscription_rel") == "t"

        def copy_done():
            if not ready():
                return False
            if not hasattr(copy_done, "marker"):
                copy_done.marker = self.commit_marker()
            return self.has_marker(target, copy_done.marker)

        res["copy"] = self.timed(lambda: psql(
            target, f"CREATE SUBSCRIPTION s CONNECTION '{self.src}' PUBLICATION ap_pub WITH "
                    f"(slot_name = '{slot}', create_slot = false)"), copy_done)
        for kind in ("bulk", "oltp"):
            psql(target, "ALTER SUBSCRIPTION s DISABLE")
            wait_for("the subscription to stop", lambda: psql(
                self.src, f"SELECT NOT active FROM pg_replication_slots WHERE slot_name = '{slot}'")
                == "t", every=0.1)
            self.workload(kind)
            m = self.commit_marker()
            res[kind] = self.timed(lambda: psql(target, "ALTER SUBSCRIPTION s ENABLE"),
                                   lambda: self.has_marker(target, m))
        res["equal"] = self.equal(target)
        psql(target, "ALTER SUBSCRIPTION s DISABLE")
        psql(target, "ALTER SUBSCRIPTION s SET (slot_name = NONE)")
        psql(target, "DROP SUBSCRIPTION s")
        wait_for("the slot to be released", lambda: psql(
            self.src, f"SELECT NOT active FROM pg_replication_slots WHERE slot_name = '{slot}'")
            == "t", every=0.1)
        psql(self.src, f"SELECT pg_drop_replication_slot('{slot}')")
        return res

    def run_baseline(self, rep):
        return self.run_dblog(rep, os.environ["DBLOG_BASELINE_BUILD_DIR"], "baseline")

    def run_dblog(self, rep, build=BUILD, name="dblog"):
        target = self.target(name)
        consumer = f"{name}_r{rep}"
        port = 20000 + (os.getpid() + 7 * rep + len(name)) % 20000
        dblogd = self.spawn([os.path.join(build, "sidecar", "dblogd"), "--source", self.src, "--consumer", f"{consumer}=ap.*",
                             "--listen", f"127.0.0.1:{port}", "--metrics-listen", "off"],
                            f"dblogd-{name}-r{rep}.log")
        time.sleep(0.5)
        flags = os.environ.get("DBLOG_APPLY_FLAGS", "").split()
        apply = []

        def start_apply():
            apply.append(self.spawn([os.path.join(build, "client", "dblog"), "apply",
                                     "--consumer", consumer, "--port", str(port),
                                     "--target", target, "--retry-min", "0.05",
                                     "--retry-max", "0.5"] + flags, f"apply-{name}-r{rep}.log"))

        def stop_apply():
            apply[-1].send_signal(2)
            apply[-1].wait(60)

        def copy_done():
            # A marker committed once the slot exists comes after BootstrapEnd in the stream
            # (the consumer's bootstrap_state turns done only when dblog apply acknowledged it,
            # which an idle stream does at the next heartbeat).
            if self.poll(self.src, "SELECT consistent_point IS NOT NULL FROM dblog.consumers "
                                   f"WHERE name = '{consumer}'") != "t":
                return False
            if not hasattr(copy_done, "marker"):
                copy_done.marker = self.commit_marker()
            return self.has_marker(target, copy_done.marker)

        res = {"copy": self.timed(start_apply, copy_done)}
        for kind in ("bulk", "oltp"):
            stop_apply()
            self.workload(kind)
            m = self.commit_marker()
            res[kind] = self.timed(start_apply, lambda: self.has_marker(target, m))
        res["equal"] = self.equal(target)
        stop_apply()
        dblogd.terminate()
        dblogd.wait(30)
        psql(self.src, f"SELECT pg_drop_replication_slot('dblog_{consumer}');"
                       f"DELETE FROM dblog.consumers WHERE name = '{consumer}'")
        return res

    def stop(self):
        self.end_sessions()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run([PG_CLUSTER, "stop", self.dir], capture_output=True)


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    bulk = int(os.environ.get("DBLOG_BENCH_BULK", "1000000"))
    oltp = int(os.environ.get("DBLOG_BENCH_OLTP", "20000"))
    fsync = os.environ.get("DBLOG_BENCH_FSYNC", "on")
    print(f"apply: {rows} rows copied, bulk {bulk} row changes, oltp {oltp} transactions, "
          f"fsync {fsync}, {reps} repetition(s), dblog apply flags "
          f"{os.environ.get('DBLOG_APPLY_FLAGS', '') or '(none)'}", flush=True)
    # SIGTERM ends it as Ctrl-C does: its processes and cluster are stopped (finally, below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench = Bench(rows, bulk, oltp, fsync)
    print(f"  logs in {bench.work}", flush=True)
    who_all = ["native", "dblog"] + (["baseline"] if os.environ.get("DBLOG_BASELINE_BUILD_DIR")
                                     else [])
    results = {w: [] for w in who_all}
    try:
        for rep in range(reps):
            order = who_all[rep % len(who_all):] + who_all[:rep % len(who_all)]
            for who in order:
                r = getattr(bench, f"run_{who}")(rep)
                bench.restore()
                results[who].append(r)
                print(f"  {who:6} rep {rep + 1}: " + ", ".join(
                    f"{k} {r[k][0]:.2f} s ({r[k][1]:.1f} CPU s)" for k in ("copy", "bulk", "oltp"))
                    + f", target equal: {'yes' if r['equal'] else 'NO'}", flush=True)
    finally:
        bench.stop()
    for k in ("copy", "bulk", "oltp"):
        med = {w: (statistics.median(r[k][0] for r in v), statistics.median(r[k][1] for r in v))
               for w, v in results.items()}
        pairs = [d[k][0] / n[k][0] for d, n in zip(results["dblog"], results["native"])]
        print(f"{k:5}: " + ", ".join(f"{w} {med[w][0]:.2f} s ({med[w][1]:.1f} CPU s)"
                                     for w in who_all) +
              f"; dblog / native {med['dblog'][0] / med['native'][0]:.2f}x wall (per repetition "
              f"{', '.join(f'{p:.2f}' for p in pairs)}), "
              f"{med['dblog'][1] / med['native'][1]:.2f}x CPU" +
              (f"; dblog / baseline {med['dblog'][0] / med['baseline'][0]:.2f}x wall"
               if "baseline" in med else ""))
    return 0 if all(r["equal"] for v in results.values() for r in v) else 1


if __name__ == "__main__":
    sys.exit(main())
