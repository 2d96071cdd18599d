#!/usr/bin/env python3
"""bench/failover.py: a failover of a PostgreSQL 15 source under a fixed-rate workload, with
`dblog apply` as the sink, for dblogd's two answers to a slot the promoted standby does not have
(issue 24; bench/failover.sh runs it; results in docs/benchmarks.md and docs/operations.md,
"Failover"):

  reconcile   --on-slot-lost=reconcile: a new slot and a whole-table repair of every table in
              scope through watermark windows; the sink is not emptied
  bootstrap   --on-slot-lost=bootstrap (the default): a new slot and a new bootstrap; `dblog
              apply` empties its tables and applies the copy

Per mode and repetition, from scratch: a primary (tests/pg-cluster.sh start 15, the extension)
with table fb.t of ROWS rows, its asynchronous standby (tests/pg-cluster.sh standby), a target
cluster; dblogd given both hosts (target_session_attrs=read-write); `dblog apply
--create-tables` into the target until it holds the bootstrap and a marker. Then pgbench runs a
fixed-rate workload (RATE transactions/s: an update of a random row, every tenth an insert) on
the primary for HALF seconds, the primary dies (immediate), the standby is promoted, and the
same workload runs on it for HALF seconds more. Measured from the promotion:

  converged_s   until dblogd's answer is done (the reconcile's requests `done`, or the
                consumer's bootstrap `done`) and the sink applied a marker committed after
                that: the target then equals the new primary as of the marker
  sink_rows     rows the sink wrote from the promotion to the end (the target's
                pg_stat_user_tables n_tup_ins + n_tup_upd + n_tup_del, read after `dblog apply`
                stopped, minus their values at the promotion)
  equal         whether the target's fb.t equals the new primary's at the end (md5 of the rows)

Prints one line per run, then the medians and the same-run ratio. Measures; judges nothing.
"""
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("DBLOG_BUILD_DIR", os.path.join(ROOT, "build"))
DBLOGD = os.path.join(BUILD, "sidecar", "dblogd")
DBLOG = os.path.join(BUILD, "client", "dblog")
PG_CLUSTER = os.path.join(ROOT, "tests", "pg-cluster.sh")
PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"


def cluster(*args):
    out = subprocess.run([PG_CLUSTER, *args], check=True, capture_output=True, text=True).stdout
    return out.strip().split("\n")


def psql(conninfo, sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", conninfo,
                           "-c", sql], check=True, capture_output=True, text=True).stdout.strip()


def param(conninfo, key):
    return dict(kv.split("=", 1) for kv in conninfo.split())[key]


def wait_for(what, check, timeout=600):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except subprocess.CalledProcessError:
            pass  # a server going down or not up yet
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Run:
    def __init__(self, mode, rows, rate, half):
        self.mode, self.rows, self.rate, self.half = mode, rows, rate, half
        self.work = tempfile.mkdtemp(prefix="dblog-failbench-")
        self.procs, self.dirs = [], []
        self.marker = 0

    def spawn(self, args, log):
        p = subprocess.Popen(args, stdout=open(os.path.join(self.work, log), "a"),
                             stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def start(self):
        self.primary_dir, self.primary = cluster("start", "15")
        self.dirs.append(self.primary_dir)
        psql(self.primary, "CREATE EXTENSION dblog")
        psql(self.primary, "CREATE SCHEMA fb")
        psql(self.primary, "CREATE TABLE fb.t (id int PRIMARY KEY, v int, s text, at timestamptz)")
        psql(self.primary, "CREATE TABLE fb.marker (id int PRIMARY KEY)")
        psql(self.primary, f"INSERT INTO fb.t SELECT g, g, md5(g::text), now() "
                           f"FROM generate_series(1, {self.rows}) g")
        psql(self.primary, "VACUUM ANALYZE fb.t")
        self.standby_dir, self.standby = cluster("standby", self.primary_dir, "standby1")
        self.dirs.append(self.standby_dir)
        self.target_dir, self.target = cluster("start", "15")
        self.dirs.append(self.target_dir)
        both = (f"host={param(self.primary, 'host')},{param(self.standby, 'host')} "
                f"port={param(self.primary, 'port')},{param(self.standby, 'port')} "
                "user=postgres dbname=postgres target_session_attrs=read-write")
        self.port = random.randint(20000, 39999)
        self.dblogd = self.spawn([DBLOGD, "--source", both, "--consumer", "sink=fb.*",
                                  "--listen", f"127.0.0.1:{self.port}", "--metrics-listen", "off",
                                  "--on-slot-lost", self.mode, "--reconnect-max", "1"],
                                 "dblogd.log")
        time.sleep(0.5)
        self.apply = self.spawn([DBLOG, "apply", "--consumer", "sink", "--port", str(self.port),
                                 "--target", self.target, "--create-tables",
                                 "--retry-min", "0.05", "--retry-max", "0.5"], "apply.log")
        wait_for("the bootstrap in the target", lambda: psql(
            self.primary, "SELECT bootstrap_state FROM dblog.consumers WHERE name = 'sink'") == "done")
        self.applied(self.primary)

    def applied(self, source):
        """Commits a marker on `source` and waits until the target applied it."""
        self.marker += 1
        # the WAL's end inside the marker's transaction: its commit record comes after it
        lsn = subprocess.run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", source, "-c", "BEGIN",
             "-c", f"INSERT INTO fb.marker VALUES ({self.marker})",
             "-c", "SELECT pg_current_wal_insert_lsn()", "-c", "COMMIT"],
            check=True, capture_output=True, text=True).stdout.strip()
        wait_for("the sink to apply a marker", lambda: psql(
            self.target, "SELECT coalesce(bool_or(commit_lsn >= '" + lsn + "'::pg_lsn), false) "
            "FROM dblog_apply.progress WHERE consumer = 'sink'") == "t")

    def workload(self, conninfo, seconds):
        script = os.path.join(self.work, "workload.sql")
        with open(script, "w") as f:
            f.write(f"\\set id random(1, {self.rows})\n"
                    "\\set r random(1, 10)\n"
                    "UPDATE fb.t SET v = v + 1, at = now() WHERE id = :id;\n"
                    f"INSERT INTO fb.t SELECT {self.rows} + (random() * 1e9)::int, :r, 'new', now() "
                    "WHERE :r = 1 ON CONFLICT DO NOTHING;\n")
        return self.spawn([PGBENCH, "-n", "-c", "2", "-R", str(self.rate), "-T", str(seconds),
                           "-f", script, "-d", conninfo], "pgbench.log")

    def sink_rows(self):
        return int(psql(self.target, "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) "
                                     "FROM pg_stat_user_tables WHERE schemaname = 'fb'"))

    def failover(self):
        self.workload(self.primary, self.half).wait()
        rows0 = self.sink_rows()
        point = psql(self.primary, "SELECT consistent_point FROM dblog.consumers WHERE name = 'sink'")
        cluster("kill", self.primary_dir)
        cluster("promote", self.standby_dir)
        promoted = time.monotonic()
        load = self.workload(self.standby, self.half)
        if self.mode == "reconcile":
            wait_for("the reconcile's repairs", lambda: psql(
                self.standby, "SELECT count(*) > 0 AND bool_and(state = 'done') FROM dblog.requests "
                "WHERE consumer = 'sink' AND reason LIKE 'reconcile%'") == "t")
        else:  # a bootstrap from a new slot: another consistent point, then done
            wait_for("the new bootstrap", lambda: psql(
                self.standby, "SELECT bootstrap_state = 'done' AND consistent_point <> '" +
                point + "'::pg_lsn FROM dblog.consumers WHERE name = 'sink'") == "t")
        self.applied(self.standby)
        converged = time.monotonic() - promoted
        load.wait()
        self.applied(self.standby)
        self.apply.terminate()
        self.apply.wait()
        time.sleep(1)
        rows = self.sink_rows() - rows0
        digest = "SELECT count(*) || ' ' || md5(string_agg(t::text, ',' ORDER BY id)) FROM fb.t t"
        equal = psql(self.standby, digest) == psql(self.target, digest)
        return {"converged_s": converged, "sink_rows": rows, "equal": equal}

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        for d in self.dirs:
            subprocess.run([PG_CLUSTER, "stop", d], capture_output=True)


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rate = int(os.environ.get("DBLOG_BENCH_RATE", "500"))
    half = int(os.environ.get("DBLOG_BENCH_HALF", "10"))
    print(f"failover: {rows} rows, workload {rate} transactions/s for {half} s before and after "
          f"the promotion, {reps} repetition(s) per mode")
    results = {"reconcile": [], "bootstrap": []}
    for rep in range(reps):
        for mode in ("reconcile", "bootstrap"):
            run = Run(mode, rows, rate, half)
            try:
                run.start()
                r = run.failover()
            finally:
                run.stop()
            results[mode].append(r)
            print(f"  {mode:9} rep {rep + 1}: converged {r['converged_s']:.2f} s after the "
                  f"promotion, {r['sink_rows']} rows written to the sink, target equal: "
                  f"{'yes' if r['equal'] else 'NO'} (logs in {run.work})", flush=True)
    med = {m: (statistics.median(x["converged_s"] for x in v),
               statistics.median(x["sink_rows"] for x in v)) for m, v in results.items()}
    for m, (t, n) in med.items():
        print(f"median {m:9}: converged {t:.2f} s, {n:.0f} rows written to the sink")
    print(f"reconcile / bootstrap: time {med['reconcile'][0] / med['bootstrap'][0]:.2f}x, "
          f"rows written {med['reconcile'][1] / med['bootstrap'][1]:.2f}x")


if __name__ == "__main__":
    main()
