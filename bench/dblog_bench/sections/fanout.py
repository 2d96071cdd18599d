"""Section fanout: the two scenarios of an independent CDC benchmark, rebuilt from its description
(hardbyte/postgresql-job-queue-benchmarking: docs/cdc-harness-design.md, cdc_harness/loadgen.py,
results/cdc-sweep-long), with dblog and pg_recvlogical + pgoutput side by side:

  fanout_steady   four consumers at 200 events/s: the worst consumer's median rolling 30 s p99
                  of emit-to-receive latency over the clean phase
  dead_consumer   the same, with consumer 1 dead for the outage and then healed: the WAL its slot
                  retained, the time it took to receive the backlog a healthy consumer had, and
                  the events every consumer lost, got twice or got out of order

Their phases (steady: 2 min warmup + 15 min clean; dead: 2 min warmup + 5 min clean + 15 min
outage + 15 min heal) are multiplied by --fanout-scale (default 0.1; 1 is their full length).
The load is theirs: a single writer paced by rate credit on elapsed time, every 25 ms one
transaction of the operations due (70% inserts of new keys, 25% updates, 5% deletes of live
keys, at most 20,000 live keys, 128-byte payloads), each row stamped with the writer's clock
before the write (emitted_us). The writer keeps the ledger of what it committed; every consumer's
log (bench/fanout_receiver.cc) is checked against it.

Each arm has a slot per consumer, as their pgoutput-raw, supabase-etl and debezium-server arms:
  dblog     one dblogd, four consumers over TCP (dblog_bench_fanout_receiver --dblog-port)
  pgoutput  four pg_recvlogical -P pgoutput (proto 1), each piped into a receiver
A dead consumer is killed with SIGKILL (dblog: the receiver; pgoutput: pg_recvlogical, its receiver
logs what the pipe held and exits) and restarted where its log ends (dblog: Hello.resume_after;
pg_recvlogical: --startpos), as a sink that stores its position with its data does.
"""
import bisect
import os
import random
import signal
import subprocess
import threading
import time

from ..harness import Dblogd, SqlError, log, proc_hwm_kb, sql, tool, wait_for_quiet

TABLE = "bench.cdc_events"
PUBLICATION = "bench_fanout_pub"
CONSUMERS = 4
DEAD = 1                    # the consumer that dies (their "consumer 1")
RATE = 200.0                # events/s
KEYS = 20_000               # live keys at most
PAYLOAD_BYTES = 128
OP_MIX = (70, 25, 5)        # insert / update / delete, %
BATCH_S = 0.025             # the writer's period (their --batch-ms 25)
WINDOW_S = 30.0             # rolling p99 window

# Their phases in seconds (results/cdc-sweep-long's manifests), and the drain after the load.
PHASES = {
    "fanout_steady": [("warmup", 120), ("clean", 900)],
    "dead_consumer": [("warmup", 120), ("clean", 300), ("outage", 900), ("heal", 900)],
}
DRAIN_S = 300

# Their published figures (results/cdc-sweep-long/REPORT.md and SUMMARY.md, 2026-07-22), quoted
# beside ours: (system, steady worst-consumer p99 ms, dead: slot WAL clean -> peak MB,
# catch-up, lost/dup/reordered worst consumer, summed RSS peaks MB steady).
PUBLISHED = [
    ("pgoutput-raw (Python/Rust slot reader)", "70", "6.3 → 56.6", "~5 s (19k/s)", "0 / 0 / 0",
     "59.7"),
    ("supabase-etl", "26", "2.8 → 57.2", "<5 s (36k/s)", "0 / 0 / 0", "13.0"),
    ("debezium-server", "848", "4.5 → 57.3", "~5 s (30k/s)", "0 / 0 / 0", "1629.3"),
    ("debezium-kafka", "961", "9.8 → 11.0 (179,239 records Kafka lag)", "~10 s (18k/s)",
     "0 / 0 / 0", "1385.4"),
    ("sequin", "33", "6.5 → 642.0", "~530 s", "0 / ? / 20,693", "595.2"),
]
PUBLISHED_HOST = ("24 CPUs, 98.7 GB RAM, PostgreSQL 18.3 in Docker, one run per cell, full "
                  "length (15 min clean; 15 min outage)")


def setup():
    sql(f"""
DROP TABLE IF EXISTS {TABLE};
CREATE TABLE {TABLE} (pk bigint PRIMARY KEY, seq bigint NOT NULL, tx_id bigint NOT NULL,
                      payload bytea NOT NULL, wide text, emitted_us bigint NOT NULL);
DROP PUBLICATION IF EXISTS {PUBLICATION};
CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE};
""")


# ---- the writer ---------------------------------------------------------------------------

class Writer:
    """Their events-mode load generator over one psql session: rate credit on elapsed time, every
    BATCH_S one transaction of the operations due; the ledger of every committed change, in
    commit order, as (op, pk, seq); for a DELETE, seq is the deleted row's."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.live, self.pos, self.seq = [], {}, {}
        self.next_pk, self.next_tx = 1, 1
        self.ledger = []
        self.payload = "\\x" + self.rng.randbytes(PAYLOAD_BYTES).hex()
        self.stop = threading.Event()
        self.proc = subprocess.Popen([tool("psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-f", "-"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.error = None

    def _remove(self, pk):
        i = self.pos.pop(pk)
        last = self.live.pop()
        if i < len(self.live):
            self.live[i] = last
            self.pos[last] = i

    def batch(self, n, emitted_us):
        tx = self.next_tx
        self.next_tx += 1
        ins, upd, dels = [], [], []
        for _ in range(n):
            roll = self.rng.randrange(100)
            full = len(self.live) >= KEYS
            if (roll < OP_MIX[0] and not full) or not self.live:
                pk = self.next_pk
                self.next_pk += 1
                self.pos[pk] = len(self.live)
                self.live.append(pk)
                self.seq[pk] = 1
                ins.append(pk)
            elif roll < OP_MIX[0] + OP_MIX[1] or full:
                pk = self.live[self.rng.randrange(len(self.live))]
                self.seq[pk] += 1
                upd.append((pk, self.seq[pk]))
            else:
                pk = self.live[self.rng.randrange(len(self.live))]
                self._remove(pk)
                dels.append(pk)
        stmts = ["BEGIN;"]
        if ins:
            rows = ",".join(f"({pk},1,{tx},'{self.payload}',{emitted_us})" for pk in ins)
            stmts.append(f"INSERT INTO {TABLE} (pk, seq, tx_id, payload, emitted_us) "
                         f"VALUES {rows};")
        for pk, s in upd:  # one statement per row, as theirs (executemany)
            stmts.append(f"UPDATE {TABLE} SET seq = {s}, tx_id = {tx}, emitted_us = {emitted_us}"
                         f" WHERE pk = {pk};")
        if dels:
            stmts.append(f"DELETE FROM {TABLE} WHERE pk = ANY('{{{','.join(map(str, dels))}}}');")
        stmts.append("COMMIT;")
        self.proc.stdin.write("\n".join(stmts) + "\n")
        self.proc.stdin.flush()
        self.ledger += [("I", pk, 1) for pk in ins]
        self.ledger += [("U", pk, s) for pk, s in upd]
        self.ledger += [("D", pk, self.seq.pop(pk)) for pk in dels]

    def run(self):
        try:
            credit, last = 0.0, time.monotonic()
            while not self.stop.is_set():
                now = time.monotonic()
                credit += RATE * (now - last)
                last = now
                whole = min(int(credit), 128)
                if whole > 0:
                    credit -= whole
                    self.batch(whole, time.time_ns() // 1000)
                time.sleep(BATCH_S)
        except Exception as e:  # a dead psql: the run fails in finish()
            self.error = e

    def start(self):
        self.thread.start()

    def finish(self):
        """Stops writing; returns once psql has committed everything it was given."""
        self.stop.set()
        self.thread.join()
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        if self.proc.wait() != 0 or self.error:
            raise RuntimeError(f"writer failed: {self.error or err.strip()}")


# ---- the arms -------------------------------------------------------------------------------

class Arm:
    """A slot per consumer; each consumer logs into logdir/fanout-<tag>-<i>.log."""

    def __init__(self, ctx, tag):
        self.ctx = ctx
        self.tag = tag
        self.receiver = os.path.join(os.path.dirname(ctx.consumer), "dblog_bench_fanout_receiver")
        self.logs = [os.path.join(ctx.logdir, f"fanout-{tag}-{i}.log") for i in range(CONSUMERS)]
        for p in self.logs:
            if os.path.exists(p):
                os.unlink(p)
        self.procs = [None] * CONSUMERS   # the processes of consumer i, receiver last
        self.rss_kb = {}                  # pid -> VmHWM of the system under test's processes

    def note_rss(self, pids):
        for pid in pids:
            try:
                self.rss_kb[pid] = max(self.rss_kb.get(pid, 0), proc_hwm_kb(pid))
            except OSError:
                pass

    def wait_active(self, timeout=60):
        names = ",".join(f"'{s}'" for s in self.slots)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ({names})"
                   " AND active") == str(len(self.slots)):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.tag}: the consumers' slots did not become active")

    def drop_slots(self):
        names = ",".join(f"'{s}'" for s in self.slots)
        for _ in range(100):
            try:
                sql(f"SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
                    f" WHERE slot_name IN ({names}) AND NOT active;")
                if sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ({names})")\
                        == "0":
                    return
            except SqlError:
                pass
            time.sleep(0.1)


class DblogArm(Arm):
    label = "dblog: dblogd, 4 consumers over TCP"

    def __init__(self, ctx, tag):
        super().__init__(ctx, tag)
        self.names = [f"fo_{tag}_{i}" for i in range(CONSUMERS)]
        self.slots = [f"dblog_{n}" for n in self.names]
        self.d = Dblogd(ctx, f"fanout-{tag}", [f"--default-scope={TABLE}", "--bootstrap=false"])

    def start(self, i):
        err = open(os.path.join(self.ctx.logdir, f"fanout-{self.tag}-{i}.err"), "a")
        p = subprocess.Popen([self.receiver, "--log", self.logs[i], "--table", TABLE,
                              "--dblog-port", str(self.d.port), "--consumer", self.names[i]],
                             stdout=subprocess.DEVNULL, stderr=err)
        self.procs[i] = [p]

    def sut_pids(self):
        return [self.d.proc.pid]

    def kill(self, i):
        self.note_rss(self.sut_pids())
        self.procs[i][0].kill()
        self.procs[i][0].wait()

    def stop(self):
        self.note_rss(self.sut_pids())
        for ps in self.procs:
            ps[0].send_signal(signal.SIGTERM)
            ps[0].wait()
        self.d.stop()
        self.drop_slots()


class PgoutputArm(Arm):
    label = "pg_recvlogical pgoutput (proto 1) ×4 → receiver"

    def __init__(self, ctx, tag):
        super().__init__(ctx, tag)
        self.slots = [f"b_fo_{tag}_{i}" for i in range(CONSUMERS)]
        for s in self.slots:
            sql(f"SELECT 1 FROM pg_create_logical_replication_slot('{s}', 'pgoutput');")

    def start(self, i):
        resume = subprocess.run([self.receiver, "--log", self.logs[i], "--print-resume"],
                                capture_output=True, text=True, check=True).stdout.strip()
        err = open(os.path.join(self.ctx.logdir, f"fanout-{self.tag}-{i}.err"), "a")
        cmd = [tool("pg_recvlogical"), "-d", os.environ["PGDATABASE"], "--slot", self.slots[i],
               "--start", "--no-loop", "-o", "proto_version=1", "-o",
               f"publication_names={PUBLICATION}", "-f", "-"]
        if resume:
            cmd += ["--startpos", resume]
        recv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        r = subprocess.Popen([self.receiver, "--log", self.logs[i], "--table", TABLE,
                              "--pgoutput-stdin"], stdin=recv.stdout, stdout=subprocess.DEVNULL,
                             stderr=err)
        recv.stdout.close()
        self.procs[i] = [recv, r]

    def sut_pids(self):
        return [ps[0].pid for ps in self.procs if ps and ps[0].poll() is None]

    def kill(self, i):
        self.note_rss(self.sut_pids())
        self.procs[i][0].kill()
        self.procs[i][0].wait()
        self.procs[i][1].wait(60)  # it logs what the pipe held, then sees its end

    def stop(self):
        self.note_rss(self.sut_pids())
        for recv, r in self.procs:
            recv.send_signal(signal.SIGINT)
            recv.wait(30)
            r.wait(60)
        self.drop_slots()


ARMS = {"dblog": DblogArm, "pgoutput": PgoutputArm}


# ---- one run of one scenario ----------------------------------------------------------------

def sample_slots(arm, samples, stop):
    names = ",".join(f"'{s}'" for s in arm.slots)
    while not stop.wait(1.0):
        try:
            out = sql(f"SELECT slot_name, coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(),"
                      f" restart_lsn), 0) FROM pg_replication_slots WHERE slot_name IN ({names})")
        except SqlError:
            continue
        now = time.time_ns() // 1000
        samples.append((now, {n: float(b) for n, b in
                              (line.split("|") for line in out.splitlines() if line)}))
        arm.note_rss(arm.sut_pids())


def read_log(path):
    """(op, pk, seq, emitted_us, received_us) per line; seq and emitted_us None for a DELETE."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            op, pk, seq, em, recv = line.split()[:5]
            out.append((op, int(pk), None if seq == "-" else int(seq),
                        None if em == "-" else int(em), int(recv)))
    return out


def run_scenario(ctx, arm_key, scenario, scale, rep):
    wait_for_quiet(ctx.args.quiet_wait, ctx.args.quiet_load)
    sql(f"TRUNCATE {TABLE};")
    phases = [(name, max(2.0, secs * scale)) for name, secs in PHASES[scenario]]
    tag = f"{arm_key[:2]}{scenario[0]}{rep}"
    arm = ARMS[arm_key](ctx, tag)
    samples, stop_sampling = [], threading.Event()
    writer = Writer(seed=rep)
    bounds = {}
    try:
        for i in range(CONSUMERS):
            arm.start(i)
        arm.wait_active()
        sampler = threading.Thread(target=sample_slots, args=(arm, samples, stop_sampling),
                                   daemon=True)
        sampler.start()
        writer.start()
        for name, secs in phases:
            t0 = time.time_ns() // 1000
            if name == "outage":
                arm.kill(DEAD)
            elif name == "heal":
                arm.start(DEAD)
                t0 = time.time_ns() // 1000
            bounds[name] = (t0, t0 + int(secs * 1e6))
            time.sleep(max(0.0, (bounds[name][1] - time.time_ns() // 1000) / 1e6))
        writer.finish()
        load_end = time.time_ns() // 1000
        # the ledger is the truth the consumers are checked against: it must be the table's
        table = dict(tuple(map(int, line.split("|")))
                     for line in sql(f"SELECT pk, seq FROM {TABLE}").splitlines() if line)
        if table != final_state(writer.ledger):
            raise RuntimeError("the writer's ledger does not match the table")
        # drain: every consumer holds every committed change, or the time is up
        deadline = time.monotonic() + max(30.0, DRAIN_S * scale)
        want = len(writer.ledger)
        while time.monotonic() < deadline:
            if all(len(read_log(p)) >= want for p in arm.logs):
                break
            time.sleep(0.5)
        drained_s = (time.time_ns() // 1000 - load_end) / 1e6
    finally:
        stop_sampling.set()
        try:
            arm.stop()
        finally:
            if writer.proc.poll() is None:
                writer.proc.kill()
    logs = [read_log(p) for p in arm.logs]
    res = analyse(writer.ledger, logs, bounds, samples, arm.slots, scenario)
    res["drain_s"] = drained_s
    res["write_rate"] = len(writer.ledger) / ((load_end - bounds["warmup"][0]) / 1e6)
    res["sut_rss_mb"] = sum(arm.rss_kb.values()) / 1024
    res["phases_s"] = {n: s for n, s in phases}
    return res


# ---- the numbers ----------------------------------------------------------------------------

def pct(sorted_values, p):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def rolling_p99_ms(lat, a, b):
    """The median, over windows of WINDOW_S (one per second) inside [a, b) µs, of the p99 of
    the latencies received in the window; lat: [(received_us, latency_us)] sorted."""
    recv = [r for r, _ in lat]
    span = WINDOW_S * 1e6
    starts = [a] if b - a <= span else [int(a + k * 1e6)
                                        for k in range(int((b - a - span) / 1e6) + 1)]
    p99s = []
    for s in starts:
        e = min(b, s + span)
        w = sorted(x for _, x in lat[bisect.bisect_left(recv, s):bisect.bisect_left(recv, e)])
        if w:
            p99s.append(pct(w, 99) / 1000)
    return median(p99s)


def verify(ledger, log_lines):
    """Against the writer's ledger: changes lost, got more than once, got out of order (a key's
    seq going back, or a change after its key's DELETE), got that were never committed; and
    whether replaying what arrived gives the source's final state."""
    want = {}
    for op, pk, seq in ledger:
        want[(pk, "D" if op == "D" else seq)] = True
    seen, dup, extra, reorder = set(), 0, 0, 0
    last, deleted, state = {}, set(), {}
    for op, pk, seq, _, _ in log_lines:
        k = (pk, "D" if op == "D" else seq)
        if k not in want:
            extra += 1
            continue
        if k in seen:
            dup += 1
            continue
        seen.add(k)
        if pk in deleted or (op != "D" and seq < last.get(pk, 0)):
            reorder += 1
        if op == "D":
            deleted.add(pk)
            state.pop(pk, None)
        else:
            last[pk] = max(seq, last.get(pk, 0))
            state[pk] = seq
    return {"lost": len(want) - len(seen), "dup": dup, "reordered": reorder, "extra": extra,
            "converged": state == final_state(ledger)}


def final_state(ledger):
    """pk -> seq of the rows the ledger leaves."""
    final = {}
    for op, pk, seq in ledger:
        if op == "D":
            final.pop(pk, None)
        else:
            final[pk] = seq
    return final


def first_receipts(log_lines):
    """(key, received_us) of each change's first receipt, in order."""
    seen, out = set(), []
    for op, pk, seq, _, recv in log_lines:
        k = (pk, "D" if op == "D" else seq)
        if k not in seen:
            seen.add(k)
            out.append((k, recv))
    return out


def analyse(ledger, logs, bounds, samples, slots, scenario):
    clean_a, clean_b = bounds["clean"]
    per = []
    for lines in logs:
        lat = sorted((recv, recv - em) for op, pk, seq, em, recv in lines if em is not None)
        in_clean = sum(1 for _, r in first_receipts(lines) if clean_a <= r < clean_b)
        per.append({"p99_clean_ms": rolling_p99_ms(lat, clean_a, clean_b),
                    "rate_clean": in_clean / ((clean_b - clean_a) / 1e6),
                    "received": len(lines), **verify(ledger, lines)})
        if "outage" in bounds:
            per[-1]["p99_outage_ms"] = rolling_p99_ms(lat, *bounds["outage"])
    res = {"committed": len(ledger), "consumers": per,
           "worst_p99_clean_ms": max((c["p99_clean_ms"] or 0) for c in per),
           "clean_rate": median([c["rate_clean"] for c in per]),
           "lost": sum(c["lost"] for c in per), "dup": sum(c["dup"] for c in per),
           "reordered": sum(c["reordered"] for c in per), "extra": sum(c["extra"] for c in per),
           "converged": all(c["converged"] for c in per)}

    def slot_peak(a, b, names):
        vals = [v for t, s in samples if a <= t < b for n, v in s.items() if n in names]
        return max(vals) / 1e6 if vals else None

    res["slot_wal_clean_mb"] = slot_peak(clean_a, clean_b, slots)
    if scenario != "dead_consumer":
        return res
    heal_a = bounds["heal"][0]
    res["slot_wal_dead_mb"] = slot_peak(bounds["outage"][0], bounds["heal"][1], [slots[DEAD]])
    res["healthy_worst_p99_outage_ms"] = max(
        (c.get("p99_outage_ms") or 0) for i, c in enumerate(per) if i != DEAD)
    # the backlog: the changes the healthy consumer 0 had before the restart and the healed one
    # got after it; the catch-up: from the restart to the healed consumer holding all of them
    healthy = dict(first_receipts(logs[0]))
    backlog = [r for k, r in first_receipts(logs[DEAD])
               if r >= heal_a and healthy.get(k, heal_a) < heal_a]
    res["backlog"] = len(backlog)
    res["catchup_s"] = (max(backlog) - heal_a) / 1e6 if backlog else None
    res["replay_per_s"] = len(backlog) / res["catchup_s"] if res["catchup_s"] else None
    return res


def section_fanout(ctx):
    a = ctx.args
    setup()
    res = {"scale": a.fanout_scale, "rate": RATE, "consumers": CONSUMERS, "results": {},
           "errors": {}}
    for rep in range(a.reps_fanout):
        for scenario in PHASES:
            order = list(ARMS) if rep % 2 == 0 else list(reversed(ARMS))
            for arm_key in order:
                key = f"{scenario}/{arm_key}"
                try:
                    r = run_scenario(ctx, arm_key, scenario, a.fanout_scale, rep)
                    log(f"fanout: rep {rep} {key}: worst p99 {r['worst_p99_clean_ms']:.1f} ms, "
                        f"lost {r['lost']} dup {r['dup']} reordered {r['reordered']}, "
                        f"catch-up {r.get('catchup_s')} s, slot WAL "
                        f"{r.get('slot_wal_clean_mb')} -> {r.get('slot_wal_dead_mb')} MB")
                    res["results"].setdefault(key, []).append(r)
                except Exception as e:
                    log(f"fanout: rep {rep} {key} FAILED: {e}")
                    res["errors"][key] = str(e)
    return res
