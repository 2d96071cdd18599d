"""The harness: how a run is driven and measured, whatever the section.

PostgreSQL access through psql (nothing but the client packages needed); the CPU accounting
(server CPU as what the postmaster reaped, the client's from wait4, others' load on the shared
machine) and the wait for a quiet machine; dblogd and the bench consumer as child processes; one
measured run of dblogd, of a client program or of a SQL peek; a description of the machine.
Nothing here knows a workload or judges a number.
"""
import datetime
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLK_TCK = os.sysconf("SC_CLK_TCK")

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

def alternated(keys, rep):
    """The contenders of repetition `rep` in the order they run: as given in even repetitions,
    reversed in odd ones, so that neither always runs first (a warm cache, a busier machine)."""
    keys = list(keys)
    return keys if rep % 2 == 0 else keys[::-1]

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

def interrupt(proc, timeout):
    """Stops a Popen child as Ctrl-C does (SIGINT); kills it if it has not exited after timeout
    seconds."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port

# ---- dblogd, the bench consumer and other client programs -------------------------------

class Ctx:
    def __init__(self, args):
        self.args = args
        self.pm = Postmaster(os.environ["DBLOG_TEST_PGDATA"])
        self.conninfo = os.environ["DBLOG_TEST_CONNINFO"]
        self.dblogd = args.dblogd
        self.consumer = args.consumer
        self.logdir = args.logdir
        os.makedirs(self.logdir, exist_ok=True)
        # An older dblogd (and its bench consumer; by default the current one) measured side by
        # side with the current one in the sections that take it (bench.py --baseline-dblogd).
        self.baseline_dblogd = getattr(args, "baseline_dblogd", None)
        self.baseline_consumer = getattr(args, "baseline_consumer", None) or self.consumer

    def binaries(self, baseline=False):
        """(dblogd, bench consumer) of the current build, or of the baseline."""
        if baseline:
            return self.baseline_dblogd, self.baseline_consumer
        return self.dblogd, self.consumer

def baseline_ident(path):
    """What a baseline dblogd is, for the report: the commit bench/baseline.sh wrote beside it
    (its file COMMIT), else its path."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(path)), "COMMIT")) as f:
            return f.read().strip()[:7] or path
    except OSError:
        return path

class Dblogd:
    """dblogd as a child process on free ports; its log goes to a file in the log dir."""

    def __init__(self, ctx, name, flags, binary=None):
        self.ctx = ctx
        self.port = free_port()
        self.mport = free_port()
        self.logpath = os.path.join(ctx.logdir, f"dblogd-{name}.log")
        self.logf = open(self.logpath, "w")
        cmd = [binary or ctx.dblogd, f"--source={ctx.conninfo}",
               f"--listen=127.0.0.1:{self.port}", f"--metrics-listen=127.0.0.1:{self.mport}",
               "--log-level=info"] + flags
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
                    self.proc.kill()  # not left running behind the failed run
                    self.proc.wait()
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
                 timeout=3600, linger=0, binary=None):
    cmd = [binary or ctx.consumer, "--port", str(port), "--consumer", consumer]
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

def measure_dblogd_stream(ctx, name, consumer, flags, until, expect, baseline=False):
    """One dblogd run: start dblogd, consume until the end condition, collect the numbers.
    baseline: run the baseline's dblogd and consumer (Ctx.binaries) instead of the current."""
    dblogd, consumer_bin = ctx.binaries(baseline)
    win = Window(ctx)
    d = Dblogd(ctx, name, flags, binary=dblogd)
    try:
        res = run_consumer(ctx, d.port, consumer, until, expect, binary=consumer_bin)
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

def pgbench_cmd(rate, seconds, script):
    return [tool("pgbench"), "-n", "-c", "1", "-j", "1", "-R", str(rate), "-T", str(seconds),
            "-f", script, os.environ["PGDATABASE"]]

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

# ---- the machine ---------------------------------------------------------------------------

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
