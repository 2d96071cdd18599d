#!/usr/bin/env python3
"""bench/publish.py: `dblog publish` into a local single-node NATS JetStream, side by side with
direct dblogd consumers on the same WAL, in one run (bench/publish.sh runs it; results in
docs/benchmarks.md, "dblog publish").

Every reader is a dblogd consumer of the same scope with its own slot, all created (empty
bootstraps) before anything is written; each repetition then writes one workload (ROWS rows in
transactions of PER_TXN, then a marker transaction) and runs, one after the other:

  throughput   direct:        dblog_bench_consumer reads its slot until the marker
               publish, 1/msg: `dblog publish --batch-events 1` (one event per message, the
                              layout's cost before batches) until JetStream holds the marker
               publish:       `dblog publish` (batches, the default) until JetStream holds it
  source CPU   4 slots:       four dblog_bench_consumers, each its own slot, concurrently
               JetStream + 1: `dblog publish` (one slot) and one reader of the stream
                              (dblog_bench_nats_reader), concurrently, until the reader has the
                              marker
               JetStream + 4: the same with four readers

Source CPU is the PostgreSQL cluster's whole CPU time (postmaster and every child, living and
exited: /proc/<pid>/stat utime+stime, and the postmaster's cutime+cstime for children it reaped)
over the scenario; the bench tables have autovacuum off so that the walsenders are what runs.
Prints one line per scenario and repetition, then medians and same-run ratios. Measures; judges
nothing. DBLOG_BENCH_PERF=<consumer> runs that consumer's `dblog publish` under `perf record`
(/tmp/perf-<consumer>.data).
"""
import json
import os
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("DBLOG_BUILD_DIR", os.path.join(ROOT, "build"))
DBLOGD = os.path.join(BUILD, "sidecar", "dblogd")
DBLOG = os.path.join(BUILD, "client", "dblog")
CONSUMER = os.path.join(BUILD, "bench", "dblog_bench_consumer")
READER = os.path.join(BUILD, "bench", "dblog_bench_nats_reader")
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"
HZ = os.sysconf("SC_CLK_TCK")

PUBLISH_CONSUMERS = ["pb_one", "pb_batch", "pb_js1", "pb_js4"]
DIRECT_CONSUMERS = ["pb_direct", "pb_s1", "pb_s2", "pb_s3", "pb_s4"]


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def proc_cpu(pid, children=False):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    # after the name: state is fields[0]; utime 14, stime 15, cutime 16, cstime 17 (1-based)
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / HZ


def children(postmaster):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if ppid == postmaster:
            pids.append(int(entry))
    return pids


def cluster_cpu(postmaster, background):
    """The cluster's CPU seconds so far, once every child but the background processes has
    exited (a walsender's CPU is then in the postmaster's cutime: reading a child that exits
    while being read would lose it)."""
    deadline = time.monotonic() + 15
    while set(children(postmaster)) - background and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc_cpu(postmaster, children=True) + sum(
        proc_cpu(pid, children=True) for pid in children(postmaster))


class Bench:
    def __init__(self, rows, per_txn):
        self.rows, self.per_txn = rows, per_txn
        self.work = tempfile.mkdtemp(prefix="dblog-pubbench-")
        self.port = random.randint(20000, 39999)
        self.nats_port = random.randint(40000, 49999)
        self.nats_url = f"nats://127.0.0.1:{self.nats_port}"
        self.procs = []
        data_dir = psql("SHOW data_directory")
        with open(os.path.join(data_dir, "postmaster.pid")) as f:
            self.postmaster = int(f.readline())
        self.rep = 0
        self.background = set()

    def spawn(self, args, log, **kw):
        p = subprocess.Popen(args, stdout=kw.pop("stdout", open(os.path.join(self.work, log), "a")),
                             stderr=open(os.path.join(self.work, log), "a"), **kw)
        self.procs.append(p)
        return p

    def setup(self):
        psql("CREATE EXTENSION IF NOT EXISTS dblog")
        psql("DROP SCHEMA IF EXISTS pubbench CASCADE")
        psql("CREATE SCHEMA pubbench")
        psql("CREATE TABLE pubbench.t (id int PRIMARY KEY, v int, s text) "
             "WITH (autovacuum_enabled = false)")
        psql("CREATE TABLE pubbench.marker (id int PRIMARY KEY) WITH (autovacuum_enabled = false)")
        for c in PUBLISH_CONSUMERS + DIRECT_CONSUMERS:
            psql(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                 f"WHERE slot_name = 'dblog_{c}'")
        args = [DBLOGD, "--source", f"dbname={os.environ.get('PGDATABASE', 'postgres')}",
                "--listen", f"127.0.0.1:{self.port}", "--metrics-listen", "off"]
        for c in PUBLISH_CONSUMERS + DIRECT_CONSUMERS:
            args += ["--consumer", f"{c}=pubbench.*"]
        self.dblogd = self.spawn(args, "dblogd.log")
        self.nats = self.spawn([NATS, "-js", "-a", "127.0.0.1", "-p", str(self.nats_port),
                                "-m", str(self.nats_port + 10000),
                                "-sd", os.path.join(self.work, "nats")], "nats.log")
        time.sleep(1)
        # every slot, created now (empty bootstraps): each then streams the same transactions
        for c in PUBLISH_CONSUMERS + DIRECT_CONSUMERS:
            subprocess.run([CONSUMER, "--port", str(self.port), "--consumer", c,
                            "--until-bootstrap-end"], check=True, stdout=subprocess.DEVNULL)
        time.sleep(2)  # every consumer gone: what is left of the cluster's children stays
        self.background = set(children(self.postmaster))

    def write_workload(self):
        self.rep += 1
        txns = self.rows // self.per_txn
        base = self.rep * self.rows
        psql(f"""DO $$ BEGIN FOR i IN 0..{txns - 1} LOOP
  INSERT INTO pubbench.t SELECT g, g, 'row ' || g FROM
    generate_series({base} + i * {self.per_txn}, {base} + (i + 1) * {self.per_txn} - 1) g;
  COMMIT;
END LOOP; END $$""")
        psql(f"INSERT INTO pubbench.marker VALUES ({self.rep})")
        psql("CHECKPOINT")
        return self.rows + 2 * txns + 3  # rows, each transaction's Begin and Commit, the marker's

    def stream_last_seq(self, stream):
        out = subprocess.run(["curl", "-s", f"http://127.0.0.1:{self.nats_port + 10000}/jsz?streams=true"],
                             capture_output=True, text=True).stdout
        d = json.loads(out)
        for a in d.get("account_details", []):
            for s in a.get("stream_detail", []):
                if s["name"] == stream:
                    return s["state"]["last_seq"]
        return 0

    def direct(self, consumers):
        """Direct consumers, concurrently, each until the marker: (wall s, source CPU s)."""
        cpu0, dblogd0 = cluster_cpu(self.postmaster, self.background), proc_cpu(self.dblogd.pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        ps = [subprocess.Popen([CONSUMER, "--port", str(self.port), "--consumer", c,
                                "--until-marker", "pubbench.marker"], stdout=subprocess.PIPE, text=True)
              for c in consumers]
        outs = [json.loads(p.communicate()[0]) for p in ps]
        wall = time.monotonic() - t0
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"wall_s": wall, "reader_wall_s": max(o["wall_s"] for o in outs),
                "reader_cpu_s": ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime,
                "source_cpu_s": cluster_cpu(self.postmaster, self.background) - cpu0,
                "dblogd_cpu_s": proc_cpu(self.dblogd.pid) - dblogd0}

    def publish(self, consumer, batch_events=None, readers=0):
        """`dblog publish` of `consumer` into stream PB_<CONSUMER> until JetStream holds the
        marker, with `readers` readers of the stream running concurrently (then until each has
        the marker)."""
        stream = "PB_" + consumer.upper()
        marker = f"dblog.{consumer}.table.pubbench.marker"
        start_seq = self.stream_last_seq(stream) + 1
        cpu0, dblogd0, nats0 = (cluster_cpu(self.postmaster, self.background), proc_cpu(self.dblogd.pid),
                                proc_cpu(self.nats.pid))
        t0 = time.monotonic()
        args = [DBLOG, "publish", "--consumer", consumer, "--port", str(self.port),
                "--to", self.nats_url, "--stream", stream]
        if batch_events:
            args += ["--batch-events", str(batch_events)]
        if os.environ.get("DBLOG_BENCH_PERF") == consumer:  # (a profile of that publisher)
            args = ["perf", "record", "-F", "2000", "-g", "-o", f"/tmp/perf-{consumer}.data"] + args
        pub = self.spawn(args, f"publish-{consumer}.log", stdout=subprocess.DEVNULL)
        rs = [subprocess.Popen([READER, "--server", self.nats_url, "--stream", stream,
                                "--marker", marker, "--start-seq", str(start_seq)],
                               stdout=subprocess.PIPE, text=True) for _ in range(readers)]
        # the publisher caught up: the last message on the marker's subject, written after
        # start_seq, holds a change
        waiter = subprocess.run([READER, "--server", self.nats_url, "--stream", stream,
                                 "--marker", marker, "--wait-only", "--start-seq", str(start_seq)],
                                stdout=subprocess.PIPE, text=True, check=True)
        publish_wall = time.monotonic() - t0
        outs = [json.loads(r.communicate()[0]) for r in rs]
        wall = time.monotonic() - t0
        publish_cpu = proc_cpu(pub.pid)
        pub.send_signal(signal.SIGTERM)
        pub.wait()
        result = {"publish_wall_s": publish_wall, "wall_s": wall,
                  "source_cpu_s": cluster_cpu(self.postmaster, self.background) - cpu0,
                  "dblogd_cpu_s": proc_cpu(self.dblogd.pid) - dblogd0,
                  "publish_cpu_s": publish_cpu,
                  "nats_cpu_s": proc_cpu(self.nats.pid) - nats0,
                  "messages": self.stream_last_seq(stream) - start_seq + 1}
        if outs:
            result["reader_events"] = [o["events"] for o in outs]
        del waiter
        return result

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(self.work, ignore_errors=True)


def median(xs):
    return statistics.median(xs)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # (then close() stops what it started)
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    per_txn = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    b = Bench(rows, per_txn)
    runs = []
    try:
        b.setup()
        for rep in range(reps):
            events = b.write_workload()
            r = {"events": events}
            r["direct"] = b.direct(["pb_direct"])
            r["publish_one"] = b.publish("pb_one", batch_events=1)
            r["publish"] = b.publish("pb_batch")
            r["slots4"] = b.direct(["pb_s1", "pb_s2", "pb_s3", "pb_s4"])
            r["js1"] = b.publish("pb_js1", readers=1)
            r["js4"] = b.publish("pb_js4", readers=4)
            runs.append(r)
            d, p1, p = r["direct"], r["publish_one"], r["publish"]
            print(f"rep {rep + 1}: {events} events; direct {events / d['reader_wall_s']:,.0f}/s; "
                  f"publish 1/msg {events / p1['publish_wall_s']:,.0f}/s "
                  f"({100 * d['reader_wall_s'] / p1['publish_wall_s']:.0f}%); publish "
                  f"{events / p['publish_wall_s']:,.0f}/s "
                  f"({100 * d['reader_wall_s'] / p['publish_wall_s']:.0f}%, {p['messages']} messages); "
                  f"source CPU s: 4 slots {r['slots4']['source_cpu_s']:.2f}, JetStream+1 "
                  f"{r['js1']['source_cpu_s']:.2f}, JetStream+4 {r['js4']['source_cpu_s']:.2f}",
                  flush=True)
            print("  " + json.dumps(r), flush=True)
    finally:
        b.close()
    ev = [r["events"] for r in runs]
    rate = lambda key, wall: [e / r[key][wall] for e, r in zip(ev, runs)]
    direct, one, batch = rate("direct", "reader_wall_s"), rate("publish_one", "publish_wall_s"), \
        rate("publish", "publish_wall_s")
    ratio = lambda a, b_: [x / y if y else float("nan") for x, y in zip(a, b_)]
    print(f"\nmedians over {reps} repetitions of {ev[0]} events:")
    print(f"  direct from dblogd:            {median(direct):,.0f} events/s")
    print(f"  publish, one event per message: {median(one):,.0f} events/s, "
          f"{100 * median(ratio(one, direct)):.0f}% of direct (same-run ratios: "
          f"{', '.join(f'{100 * x:.0f}%' for x in ratio(one, direct))})")
    print(f"  publish, batches:               {median(batch):,.0f} events/s, "
          f"{100 * median(ratio(batch, direct)):.0f}% of direct (same-run ratios: "
          f"{', '.join(f'{100 * x:.0f}%' for x in ratio(batch, direct))}); "
          f"{median([r['publish']['messages'] for r in runs]):,.0f} messages; CPU: publish "
          f"{median([r['publish']['publish_cpu_s'] for r in runs]):.2f} s, nats-server "
          f"{median([r['publish']['nats_cpu_s'] for r in runs]):.2f} s "
          f"(1/msg: {median([r['publish_one']['publish_cpu_s'] for r in runs]):.2f} s, "
          f"{median([r['publish_one']['nats_cpu_s'] for r in runs]):.2f} s); direct consumer "
          f"{median([r['direct']['reader_cpu_s'] for r in runs]):.2f} s")
    s4 = [r["slots4"]["source_cpu_s"] for r in runs]
    j1 = [r["js1"]["source_cpu_s"] for r in runs]
    j4 = [r["js4"]["source_cpu_s"] for r in runs]
    d1 = [r["direct"]["source_cpu_s"] for r in runs]
    print(f"  source CPU s: 1 slot (direct) {median(d1):.2f}; 4 slots {median(s4):.2f}; "
          f"JetStream + 1 reader {median(j1):.2f}; JetStream + 4 readers {median(j4):.2f}")
    print(f"  same-run ratios, JetStream + 4 readers / 4 slots: "
          f"{', '.join(f'{x:.2f}' for x in ratio(j4, s4))} (median {median(ratio(j4, s4)):.2f}); "
          f"JetStream + 1 / 4 slots: median {median(ratio(j1, s4)):.2f}; "
          f"JetStream + 4 / JetStream + 1: median {median(ratio(j4, j1)):.2f}")
    print(f"  dblogd CPU s: 4 slots {median([r['slots4']['dblogd_cpu_s'] for r in runs]):.2f}, "
          f"JetStream + 4 {median([r['js4']['dblogd_cpu_s'] for r in runs]):.2f}; "
          f"publish + nats-server CPU s with 4 readers: "
          f"{median([r['js4']['publish_cpu_s'] + r['js4']['nats_cpu_s'] for r in runs]):.2f}")


if __name__ == "__main__":
    main()
