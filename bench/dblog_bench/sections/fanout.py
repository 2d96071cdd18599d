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
import math
import os
import random
import signal
import statistics
import subprocess
import threading
import time

from ..harness import Dblogd, alternated, SqlError, log, proc_hwm_kb, sql, tool, wait_for_quiet

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
    ("pgoutput-raw (their own slot reader, one per consumer)", "70", "6.3 → 56.6", "~5 s (19k/s)", "0 / 0 / 0",
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
SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots
 WHERE (slot_name LIKE 'b\\_fo\\_%' OR slot_name LIKE 'dblog\\_fo\\_%') AND NOT active;
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

    def __init__(self, seed, errfile):
        self.rng = random.Random(seed)
        self.errfile = errfile  # psql's stderr
        self.live, self.pos, self.seq = [], {}, {}
        self.next_pk, self.next_tx = 1, 1
        self.ledger = []
        self.payload = "\\x" + self.rng.randbytes(PAYLOAD_BYTES).hex()
        self.stop = threading.Event()
        with open(errfile, "w") as err:
            self.proc = subprocess.Popen([tool("psql"), "-XAtq", "-v", "ON_ERROR_STOP=1", "-f",
                                          "-"], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=err, text=True)
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
        """Stops writing; returns once psql has committed everything it was given. Raises with
        psql's own error when it failed (a broken pipe is only its consequence)."""
        self.stop.set()
        self.thread.join()
        self._close_stdin()
        if self.proc.wait() != 0 or self.error:
            with open(self.errfile) as f:
                err = f.read().strip()[-500:]
            raise RuntimeError(f"writer failed: {err or self.error}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close_stdin()

    def _close_stdin(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:  # psql is gone; what it said is in errfile
            pass


# ---- the arms -------------------------------------------------------------------------------

class Arm:
    """A slot per consumer; consumer i logs into logdir/fanout-<tag>-<i>.log. Its processes:
    procs[i], the receiver last; its stderr goes to fanout-<tag>-<i>.err."""

    def __init__(self, ctx, tag):
        self.ctx = ctx
        self.tag = tag
        self.receiver = os.path.join(os.path.dirname(ctx.consumer), "dblog_bench_fanout_receiver")
        self.logs = [os.path.join(ctx.logdir, f"fanout-{tag}-{i}.log") for i in range(CONSUMERS)]
        self.errs = [os.path.join(ctx.logdir, f"fanout-{tag}-{i}.err") for i in range(CONSUMERS)]
        for p in self.logs + self.errs:
            if os.path.exists(p):
                os.unlink(p)
        self.procs = [[] for _ in range(CONSUMERS)]
        self.rss_kb = {}  # pid -> VmHWM of the system under test's processes
        self.slots = []

    def note_rss(self, pids):
        for pid in pids:
            try:
                self.rss_kb[pid] = max(self.rss_kb.get(pid, 0), proc_hwm_kb(pid))
            except OSError:
                pass

    def spawn(self, i, cmd, **kwargs):
        with open(self.errs[i], "a") as err:
            p = subprocess.Popen(cmd, stdout=kwargs.pop("stdout", subprocess.DEVNULL),
                                 stderr=err, **kwargs)
        self.procs[i].append(p)
        return p

    def err_tail(self, i):
        try:
            with open(self.errs[i]) as f:
                return f.read().strip()[-300:]
        except OSError:
            return ""

    def check_running(self, dead=None):
        """Raises when a process of a consumer that should be running has exited."""
        for i, ps in enumerate(self.procs):
            if i != dead and any(p.poll() is not None for p in ps):
                raise RuntimeError(f"{self.tag}: consumer {i} exited: {self.err_tail(i)}")

    def wait_active(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_running()
            if sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name IN"
                   f" ({self.slot_list()}) AND active") == str(len(self.slots)):
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.tag}: the consumers' slots did not become active")

    def slot_list(self):
        return ",".join(f"'{s}'" for s in self.slots)

    def stop_consumers(self, first_signal):
        """Stops every consumer: first_signal to its first process, SIGKILL to any still running
        30 s later; raises if a receiver did not exit 0 (or of first_signal)."""
        failed = []
        for i, ps in enumerate(self.procs):
            if ps and ps[0].poll() is None:
                ps[0].send_signal(first_signal)  # pgoutput: its receiver then sees the end
            for p in ps:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if ps and ps[-1].returncode not in (0, -first_signal):
                failed.append(f"consumer {i}: receiver exit {ps[-1].returncode}: "
                              f"{self.err_tail(i)}")
            self.procs[i] = []
        if failed:
            raise RuntimeError(f"{self.tag}: " + "; ".join(failed))

    def drop_slots(self):
        """Drops the arm's slots (ending walsenders still holding them); raises if one stays,
        since a leftover slot would hold WAL for every later run."""
        if not self.slots:
            return
        for _ in range(100):
            try:
                sql(f"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                    f" WHERE slot_name IN ({self.slot_list()}) AND active_pid IS NOT NULL;"
                    f" SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
                    f" WHERE slot_name IN ({self.slot_list()}) AND NOT active;")
                if sql(f"SELECT count(*) FROM pg_replication_slots WHERE slot_name IN"
                       f" ({self.slot_list()})") == "0":
                    return
            except SqlError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.tag}: could not drop the slots {self.slot_list()}")


class DblogArm(Arm):
    def __init__(self, ctx, tag):
        super().__init__(ctx, tag)
        self.names = [f"fo_{tag}_{i}" for i in range(CONSUMERS)]
        self.slots = [f"dblog_{n}" for n in self.names]
        # (a dblogd that does not come up is not left running: harness.Dblogd)
        self.d = Dblogd(ctx, f"fanout-{tag}", [f"--default-scope={TABLE}", "--bootstrap=false"])

    def start(self, i):
        self.spawn(i, [self.receiver, "--log", self.logs[i], "--table", TABLE,
                       "--dblog-port", str(self.d.port), "--consumer", self.names[i]])

    def sut_pids(self):
        return [self.d.proc.pid] if self.d.proc.poll() is None else []

    def kill(self, i):
        self.note_rss(self.sut_pids())
        for p in self.procs[i]:
            p.kill()
            p.wait()
        self.procs[i] = []

    def stop(self):
        self.note_rss(self.sut_pids())
        try:
            self.stop_consumers(signal.SIGTERM)
        finally:
            self.d.stop()
            self.drop_slots()


class PgoutputArm(Arm):
    def __init__(self, ctx, tag):
        super().__init__(ctx, tag)
        try:
            for i in range(CONSUMERS):
                s = f"b_fo_{tag}_{i}"
                sql(f"SELECT 1 FROM pg_create_logical_replication_slot('{s}', 'pgoutput');")
                self.slots.append(s)
        except Exception:
            self.drop_slots()  # the ones made: they would hold WAL for every later run
            raise

    def start(self, i):
        resume = subprocess.run([self.receiver, "--log", self.logs[i], "--print-resume"],
                                capture_output=True, text=True, check=True).stdout.strip()
        # -s 1 -F 1: its position confirmed each second (the defaults, 10 s, would hold WAL
        # for longer than dblogd, which confirms within 100 ms of an acknowledgement)
        cmd = [tool("pg_recvlogical"), "-d", os.environ["PGDATABASE"], "--slot", self.slots[i],
               "--start", "--no-loop", "-s", "1", "-F", "1", "-o", "proto_version=1", "-o",
               f"publication_names={PUBLICATION}", "-f", "-"]
        if resume:
            cmd += ["--startpos", resume]
        recv = self.spawn(i, cmd, stdout=subprocess.PIPE)
        self.spawn(i, [self.receiver, "--log", self.logs[i], "--table", TABLE, "--pgoutput-stdin"],
                   stdin=recv.stdout)
        recv.stdout.close()

    def sut_pids(self):
        return [ps[0].pid for ps in self.procs if ps and ps[0].poll() is None]

    def kill(self, i):
        self.note_rss(self.sut_pids())
        recv, r = self.procs[i]
        recv.kill()
        recv.wait()
        try:
            r.wait(60)  # it logs what the pipe held, then sees its end
        except subprocess.TimeoutExpired:
            r.kill()
            r.wait()
        self.procs[i] = []
        if r.returncode != 0:
            raise RuntimeError(f"{self.tag}: consumer {i}'s receiver exited {r.returncode} "
                               f"after pg_recvlogical was killed: {self.err_tail(i)}")

    def stop(self):
        self.note_rss(self.sut_pids())
        try:
            self.stop_consumers(signal.SIGINT)  # pg_recvlogical exits; its receiver sees the end
        finally:
            self.drop_slots()


ARMS = {"dblog": DblogArm, "pgoutput": PgoutputArm}


# ---- one run of one scenario ----------------------------------------------------------------

def sample_slots(arm, samples, stop):
    while not stop.wait(1.0):
        try:
            out = sql(f"SELECT slot_name, coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(),"
                      f" restart_lsn), 0) FROM pg_replication_slots"
                      f" WHERE slot_name IN ({arm.slot_list()})")
        except SqlError:
            continue
        now = time.time_ns() // 1000
        samples.append((now, {n: float(b) for n, b in
                              (line.split("|") for line in out.splitlines() if line)}))
        arm.note_rss(arm.sut_pids())


class LogReader:
    """A consumer's log, read as it grows. Lines: a change "<op> <pk> <seq|-> <emitted_us|->
    <received_us>", then its transaction's "C <commit LSN> <commit seq> <end LSN>
    <received_us>"; only changes of transactions whose C line is there count."""

    def __init__(self, path):
        self.path, self.offset, self.pending = path, 0, []
        self.changes = []  # (op, pk, seq, emitted_us, received_us), seq/emitted_us None: DELETE

    def read(self):
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return self.changes
        whole = data[:data.rfind("\n") + 1]
        self.offset += len(whole.encode())
        for line in whole.splitlines():
            f = line.split()
            if f[0] == "C":
                self.changes += self.pending
                self.pending = []
            else:
                self.pending.append((f[0], int(f[1]), None if f[2] == "-" else int(f[2]),
                                     None if f[3] == "-" else int(f[3]), int(f[4])))
        return self.changes


def change_key(op, pk, seq):
    """What tells a change from every other of the run: pk and seq (keys are never reused)."""
    return (pk, "D" if op == "D" else seq)


def run_scenario(ctx, arm_key, scenario, scale, rep):
    wait_for_quiet(ctx.args.quiet_wait, ctx.args.quiet_load)
    sql(f"TRUNCATE {TABLE};")
    phases = [(name, phase_s(secs, scale)) for name, secs in PHASES[scenario]]
    tag = f"{arm_key[:2]}{scenario[0]}{rep}"
    samples, stop_sampling = [], threading.Event()
    sampler = threading.Thread(target=lambda: sample_slots(arm, samples, stop_sampling),
                               daemon=True)
    arm = writer = None
    bounds = {}
    try:
        arm = ARMS[arm_key](ctx, tag)
        for i in range(CONSUMERS):
            arm.start(i)
        arm.wait_active()
        writer = Writer(seed=rep, errfile=os.path.join(ctx.logdir, f"fanout-{tag}-writer.err"))
        sampler.start()
        writer.start()
        dead = None
        for name, secs in phases:
            t0 = time.time_ns() // 1000  # the heal's catch-up counts from before the restart
            if name == "outage":
                arm.kill(DEAD)
                dead = DEAD
            elif name == "heal":
                arm.start(DEAD)
                dead = None
            bounds[name] = (t0, t0 + int(secs * 1e6))
            while time.time_ns() // 1000 < bounds[name][1]:
                time.sleep(min(1.0, max(0.0, (bounds[name][1] - time.time_ns() // 1000) / 1e6)))
                if writer.error or writer.proc.poll() is not None:
                    writer.finish()  # raises with the cause
                arm.check_running(dead)
        writer.finish()
        load_end = time.time_ns() // 1000
        with open(os.path.join(ctx.logdir, f"fanout-{tag}-ledger.txt"), "w") as f:
            f.writelines(f"{op} {pk} {seq}\n" for op, pk, seq in writer.ledger)
        # the ledger is the truth the consumers are checked against: it must be the table's
        table = dict(tuple(map(int, line.split("|")))
                     for line in sql(f"SELECT pk, seq FROM {TABLE}").splitlines() if line)
        if table != final_state(writer.ledger):
            raise RuntimeError("the writer's ledger does not match the table")
        # drain: every consumer holds every committed change, or the time is up
        want = {change_key(*c) for c in writer.ledger}
        readers = [LogReader(p) for p in arm.logs]
        missing = [set(want) for _ in readers]
        deadline = time.monotonic() + max(30.0, DRAIN_S * scale)
        drained = False
        while not drained and time.monotonic() < deadline:
            time.sleep(0.5)
            arm.check_running()
            for r, m in zip(readers, missing):
                new = len(r.changes)
                for op, pk, seq, _, _ in r.read()[new:]:
                    m.discard(change_key(op, pk, seq))
            drained = not any(missing)
        drained_s = (time.time_ns() // 1000 - load_end) / 1e6
    except BaseException:
        cleanup(arm, writer, sampler, stop_sampling, quiet=True)  # the first error is the cause
        raise
    cleanup(arm, writer, sampler, stop_sampling, quiet=False)
    logs = [r.read() for r in readers]
    res = analyse(writer.ledger, logs, bounds, samples, arm.slots, scenario)
    res.update(drained=drained, drain_s=drained_s, sut_rss_mb=sum(arm.rss_kb.values()) / 1024,
               phases_s=dict(phases), bounds_us=bounds,
               write_rate=len(writer.ledger) / ((load_end - bounds["warmup"][0]) / 1e6))
    return res


def cleanup(arm, writer, sampler, stop_sampling, quiet):
    """Stops the sampler, the writer and the arm; quiet: an error on the way only logged (the
    run already failed with the error that matters)."""
    stop_sampling.set()
    if sampler.is_alive():
        sampler.join()
    try:
        if writer:
            writer.kill()
        if arm:
            arm.stop()
    except Exception as e:
        if not quiet:
            raise
        log(f"fanout: cleanup after a failed run: {e}")


def phase_s(secs, scale):
    """A phase's length at this scale: at least 2 s."""
    return max(2.0, secs * scale)


# ---- the numbers ----------------------------------------------------------------------------

def pct(sorted_values, p):
    """The nearest-rank percentile: the smallest value at or above p% of them."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


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
    want = {change_key(*c) for c in ledger}
    seen, dup, extra, reorder = set(), 0, 0, 0
    last, deleted, state = {}, set(), {}
    for op, pk, seq, _, _ in log_lines:
        k = change_key(op, pk, seq)
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
        k = change_key(op, pk, seq)
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
           "worst_p99_clean_ms": worst([c["p99_clean_ms"] for c in per]),
           "clean_rate": median([c["rate_clean"] for c in per]),
           "lost": sum(c["lost"] for c in per), "dup": sum(c["dup"] for c in per),
           "reordered": sum(c["reordered"] for c in per), "extra": sum(c["extra"] for c in per),
           "converged": all(c["converged"] for c in per)}

    def slot_peak(a, b, names):
        vals = [v for t, s in samples if a <= t < b for n, v in s.items() if n in names]
        return max(vals) / 1e6 if vals else None

    # the slot of the consumer that dies (in both scenarios, to compare)
    res["slot_wal_clean_mb"] = slot_peak(clean_a, clean_b, [slots[DEAD]])
    if scenario != "dead_consumer":
        return res
    heal_a = bounds["heal"][0]
    res["slot_wal_dead_mb"] = slot_peak(bounds["outage"][0], bounds["heal"][1], [slots[DEAD]])
    res["healthy_worst_p99_outage_ms"] = worst(
        [c.get("p99_outage_ms") for i, c in enumerate(per) if i != DEAD])
    # the backlog: the changes the healthy consumer 0 had before the restart and the healed one
    # got after it; the catch-up: from the restart to the healed consumer holding all of them
    healthy = dict(first_receipts(logs[0]))
    backlog = [r for k, r in first_receipts(logs[DEAD])
               if r >= heal_a and healthy.get(k, heal_a) < heal_a]
    res["backlog"] = len(backlog)
    res["catchup_s"] = (max(backlog) - heal_a) / 1e6 if backlog else None
    res["replay_per_s"] = len(backlog) / res["catchup_s"] if res["catchup_s"] else None
    return res


def worst(values):
    """The largest; None if any is None (a consumer without a number is not the best one)."""
    return None if not values or any(v is None for v in values) else max(values)


def section_fanout(ctx):
    a = ctx.args
    setup()
    res = {"scale": a.fanout_scale, "rate": RATE, "consumers": CONSUMERS, "results": {},
           "errors": {}}
    for rep in range(a.reps_fanout):
        for scenario in PHASES:
            order = alternated(ARMS, rep)
            for arm_key in order:
                key = f"{scenario}/{arm_key}"
                try:
                    r = run_scenario(ctx, arm_key, scenario, a.fanout_scale, rep)
                    log(f"fanout: rep {rep} {key}: worst p99 {r['worst_p99_clean_ms']} ms, "
                        f"lost {r['lost']} dup {r['dup']} reordered {r['reordered']}, "
                        f"drained {r['drained']}, "
                        f"catch-up {r.get('catchup_s')} s, slot WAL "
                        f"{r.get('slot_wal_clean_mb')} -> {r.get('slot_wal_dead_mb')} MB")
                    res["results"].setdefault(key, []).append(r)
                except Exception as e:
                    log(f"fanout: rep {rep} {key} FAILED: {e}")
                    res["errors"][key] = str(e)
    return res
