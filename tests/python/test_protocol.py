#!/usr/bin/python3
"""tests/python/test_protocol.py: the Python example client (examples/python/dblog_tail.py)
against a real dblogd on the test cluster.

Starts build/sidecar/dblogd with a consumer whose scope is a fresh schema, runs the example
client, makes changes with psql and checks that the client printed them in order (positions
strictly increasing, a key change as DELETE + INSERT), that its acknowledgements moved the
slot's confirmed_flush_lsn, that a repair requested from SQL arrives as one chunk and is
recorded as done (progress is recorded only once the client acknowledged it), that a second
connection resuming after the acknowledged position gets nothing old again and picks up a
repair requested while it was away, that a refused handshake is reported, and that a
consumer's own token is read from --token-file or DBLOG_TOKEN_FILE, and that the client
speaks TLS (--tls-ca, a client certificate for --tls-client-ca; certificates made with the
openssl command) and refuses a server it does not trust. Also reads /metrics. And the rules
a consumer relies on (docs/protocol.md): caught up with an LSN (--until-lsn, through events
and heartbeats), BootstrapBegin's tables, resuming inside a transaction (its Begin first).

Run by tests/run.sh after the C++ tests, with Debian's /usr/bin/python3 (python3-protobuf).
Needs the environment tests/cluster.sh exports (DBLOG_TEST_CONNINFO, PGHOST, PGPORT, ...);
DBLOGD overrides the daemon's path.
"""

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "python", "dblog_tail.py")
DBLOGD = os.environ.get("DBLOGD", os.path.join(ROOT, "build", "sidecar", "dblogd"))
CONSUMER = "py_protocol"
SCHEMA = "py_protocol"
TIMEOUT = 60


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def psql(sql):
    """Runs SQL with psql (PGHOST etc. from tests/cluster.sh); returns unaligned output."""
    out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return out.stdout.strip()


def lsn_value(text):
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def pos_value(text):
    lsn, _, seq = text.rpartition(":")
    return (lsn_value(lsn), int(seq))


class Lines:
    """The example client's stdout, line by line, read by a thread."""

    def __init__(self, proc):
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.q.put(line)
        self.q.put(None)

    def until(self, predicate, what):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            try:
                line = self.q.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("the client exited while waiting for " + what)
            event = json.loads(line)
            self.seen.append(event)
            if predicate(event):
                return event
        raise AssertionError("timed out waiting for " + what)


@unittest.skipUnless(os.environ.get("DBLOG_TEST_CONNINFO"),
                     "DBLOG_TEST_CONNINFO is not set (tests/run.sh sets it)")
class ProtocolTest(unittest.TestCase):
    def setUp(self):
        self.procs = []
        self.drop()
        psql("CREATE EXTENSION IF NOT EXISTS dblog")
        psql("CREATE SCHEMA %s" % SCHEMA)
        psql("CREATE TABLE %s.items (id int PRIMARY KEY, name text)" % SCHEMA)
        psql("INSERT INTO %s.items VALUES (1, 'one')" % SCHEMA)
        self.start_dblogd()

    def start_dblogd(self, *extra):
        self.port, self.metrics_port = free_port(), free_port()
        self.log = tempfile.NamedTemporaryFile(mode="w+", prefix="dblogd-py-protocol-",
                                               suffix=".log", delete=False)
        self.dblogd = subprocess.Popen(
            [DBLOGD, "--source=" + os.environ["DBLOG_TEST_CONNINFO"],
             "--listen=127.0.0.1:%d" % self.port,
             "--metrics-listen=127.0.0.1:%d" % self.metrics_port,
             "--consumer=%s=%s.*" % (CONSUMER, SCHEMA),
             "--heartbeat-interval=0.5", "--status-interval=0.5"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.procs.append(self.dblogd)
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.dblogd.poll() is not None or time.time() > deadline:
                    self.fail("dblogd did not start:\n" + self.dblogd_log())
                time.sleep(0.05)

    def stop_dblogd(self):
        self.dblogd.send_signal(signal.SIGTERM)
        self.dblogd.wait(timeout=20)
        self.log.close()
        os.unlink(self.log.name)

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            for stream in (p.stdout, p.stderr):
                if stream:
                    stream.close()
        self.log.close()
        os.unlink(self.log.name)  # printed by run_showing_log when a test failed
        # the walsender may hold the slot for a moment after dblogd stopped
        for _ in range(100):
            try:
                self.drop()
                break
            except subprocess.CalledProcessError:
                time.sleep(0.1)

    def drop(self):
        psql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
             " WHERE slot_name = 'dblog_%s'" % CONSUMER)
        if psql("SELECT count(*) FROM pg_extension WHERE extname = 'dblog'") == "1":
            psql("DELETE FROM dblog.consumers WHERE name = '%s'" % CONSUMER)
            psql("DELETE FROM dblog.request_queue WHERE table_name LIKE '%s.%%'" % SCHEMA)
        psql("DROP SCHEMA IF EXISTS %s CASCADE" % SCHEMA)

    def dblogd_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def client(self, consumer=CONSUMER, resume_after=None, extra=(), env=None):
        args = [sys.executable, EXAMPLE, "--consumer", consumer, "--port", str(self.port)]
        if resume_after:
            args += ["--resume-after", resume_after]
        p = subprocess.Popen(args + list(extra), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def wait_done(self, request):
        deadline = time.time() + TIMEOUT
        while psql("SELECT state FROM dblog.requests WHERE id = %d" % request) != "done":
            self.assertLess(time.time(), deadline, "request %d was not recorded as done" % request)
            time.sleep(0.1)

    def confirmed_flush(self):
        v = psql("SELECT confirmed_flush_lsn FROM pg_replication_slots"
                 " WHERE slot_name = 'dblog_%s'" % CONSUMER)
        return lsn_value(v) if v else 0

    def run_showing_log(self, body):
        try:
            body()
        except BaseException:
            sys.stderr.write("---- dblogd log ----\n" + self.dblogd_log())
            raise

    def test_stream_acks_and_repair(self):
        self.run_showing_log(self.stream_acks_and_repair)

    def test_refused_handshake(self):
        self.run_showing_log(self.refused_handshake)

    def stream_acks_and_repair(self):
        proc = self.client()
        lines = Lines(proc)

        # 1. the bootstrap: the existing row as a READ, then BootstrapEnd (acknowledged)
        lines.until(lambda e: e["op"] == "bootstrap_end", "the end of the bootstrap")
        reads = [e for e in lines.seen if e["op"] == "read"]
        self.assertEqual(reads[0]["row"], {"id": 1, "name": "one"})
        self.assertTrue(lines.seen[0]["op"] == "bootstrap_begin")

        # 2. live changes, each statement its own transaction
        t = SCHEMA + ".items"
        for sql in ["INSERT INTO %s VALUES (2, 'two')" % t,
                    "UPDATE %s SET name = 'TWO' WHERE id = 2" % t,
                    "UPDATE %s SET id = 3 WHERE id = 2" % t,
                    "DELETE FROM %s WHERE id = 1" % t,
                    "INSERT INTO %s VALUES (100, 'end')" % t]:
            psql(sql)
        lines.until(lambda e: e["op"] == "insert" and e["key"] == {"id": 100}, "the last insert")
        last_commit = lines.until(lambda e: e["op"] == "commit", "its commit")

        changes = [(e["op"], e.get("key")) for e in lines.seen
                   if e["op"] in ("insert", "update", "delete")]
        self.assertEqual(changes, [("insert", {"id": 2}), ("update", {"id": 2}),
                                   ("delete", {"id": 2}), ("insert", {"id": 3}),
                                   ("delete", {"id": 1}), ("insert", {"id": 100})])
        positions = [pos_value(e["pos"]) for e in lines.seen if e["pos"] is not None]
        self.assertEqual(positions, sorted(set(positions)), "positions strictly increase")
        for e in lines.seen:
            if e["op"] == "begin":
                self.assertEqual(pos_value(e["pos"])[1], 0, "a Begin sits at (commit_lsn, 0)")

        # 3. the client acknowledged the last commit: the slot follows past it
        commit_lsn = pos_value(last_commit["pos"])[0]
        deadline = time.time() + TIMEOUT
        while self.confirmed_flush() <= commit_lsn:
            self.assertLess(time.time(), deadline, "confirmed_flush_lsn did not move")
            time.sleep(0.1)
        self.assertGreaterEqual(self.confirmed_flush(), lsn_value(last_commit["end_lsn"]))

        # 4. a repair requested from SQL while the client is connected: one chunk inside the
        #    high watermark's transaction, recorded as done once the client acknowledged it
        live = int(psql("SELECT dblog.repair('%s')" % t))
        lines.until(lambda e: e["op"] == "chunk_end" and e["request_id"] == live and e["last"],
                    "the live repair's last chunk")
        last_commit = lines.until(lambda e: e["op"] == "commit", "the high watermark's commit")
        begin = [e for e in lines.seen if e["op"] == "chunk_begin"][0]
        self.assertEqual((begin["request_id"], begin["is_range"]), (live, True))
        self.assertEqual(sorted(e["row"]["id"] for e in lines.seen
                                if e["op"] == "read" and pos_value(e["pos"]) > pos_value(begin["pos"])),
                         [3, 100])
        self.wait_done(live)

        # 5. SIGTERM: a clean stop that reports the last acknowledged position
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)
        acked = [l for l in proc.stderr.read().splitlines() if l.startswith("acked ")]
        self.assertTrue(acked, "the client reports what it acknowledged")
        resume = acked[-1].split()[1]
        self.assertGreaterEqual(pos_value(resume), pos_value(last_commit["pos"]))

        # 6. a repair requested while the consumer is away, then a second connection that
        #    resumes after what the first one acknowledged: nothing old is sent again, and the
        #    pending request is picked up when the connection starts
        request = int(psql("SELECT dblog.repair('%s')" % t))
        for attempt in range(50):
            proc = self.client(resume_after=resume)
            lines = Lines(proc)
            try:
                lines.until(lambda e: e["op"] == "chunk_end" and e["request_id"] == request
                            and e["last"], "the repair's last chunk")
                break
            except AssertionError:
                # the walsender of the first connection may hold the slot for a moment
                proc.wait(timeout=20)
                if "in use by another process" not in proc.stderr.read() or attempt == 49:
                    raise
                time.sleep(0.2)
        self.assertTrue(all(pos_value(e["pos"]) > pos_value(resume)
                            for e in lines.seen if e["pos"] is not None))
        begin = [e for e in lines.seen if e["op"] == "chunk_begin"][0]
        self.assertEqual(begin["request_id"], request)
        self.assertTrue(begin["is_range"])
        self.assertEqual(sorted(e["row"]["id"] for e in lines.seen if e["op"] == "read"),
                         [3, 100])
        lines.until(lambda e: e["op"] == "commit", "the high watermark's commit")
        self.wait_done(request)

        # 7. /metrics knows the consumer
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                    timeout=10) as r:
            metrics = r.read().decode()
        self.assertIn('dblog_consumer_connected{consumer="%s"} 1' % CONSUMER, metrics)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)

    def test_rules_a_consumer_relies_on(self):
        self.run_showing_log(self.rules_a_consumer_relies_on)

    def run_until_exit(self, what, **kwargs):
        """Runs the client until it exits by itself (retrying while dblogd still ends the last
        connection, or its walsender still holds the slot); returns (lines, stderr)."""
        for attempt in range(50):
            proc = self.client(**kwargs)
            out, err = proc.communicate(timeout=TIMEOUT)
            if proc.returncode == 0:
                return [json.loads(l) for l in out.splitlines()], err
            busy = "in use by another process" in err or "ALREADY_CONNECTED" in err
            if not busy or attempt == 49:
                self.fail("%s: exit %d: %s" % (what, proc.returncode, err))
            time.sleep(0.2)

    def rules_a_consumer_relies_on(self):
        """docs/protocol.md, "Rules a consumer relies on", as the example client follows them."""
        t = SCHEMA + ".items"
        # caught up (--until-lsn): everything the source committed before the LSN is printed,
        # then the client exits on its own; after a bootstrap, at its consistent point
        psql("INSERT INTO %s VALUES (2, 'two'), (3, 'three'), (4, 'four')" % t)  # one transaction
        until = psql("SELECT pg_current_wal_lsn()")
        lines, err = self.run_until_exit("first run", extra=["--until-lsn", until])
        self.assertIn("caught up with %s" % until, err)
        self.assertEqual(sorted(e["key"]["id"] for e in lines if e["op"] in ("read", "insert")),
                         [1, 2, 3, 4])
        begin = [e for e in lines if e["op"] == "bootstrap_begin"][0]
        self.assertEqual(begin["tables"], [t])  # the tables the image covers, to clear first
        resume = [l for l in err.splitlines() if l.startswith("acked ")][-1].split()[1]

        # a transaction of three inserts, then a quiet stream: caught up by heartbeats
        psql("INSERT INTO %s VALUES (5, 'five'), (6, 'six'), (7, 'seven')" % t)
        psql("CREATE TABLE public.py_protocol_out (id int)")
        self.addCleanup(psql, "DROP TABLE IF EXISTS public.py_protocol_out")
        psql("INSERT INTO public.py_protocol_out VALUES (1)")  # out of scope
        until = psql("SELECT pg_current_wal_lsn()")
        lines, err = self.run_until_exit("second run", resume_after=resume,
                                         extra=["--until-lsn", until, "--no-ack"])
        inserts = [e for e in lines if e["op"] == "insert"]
        self.assertEqual([e["key"]["id"] for e in inserts], [5, 6, 7])
        self.assertIn("caught up with %s" % until, err)
        self.assertNotIn("Error", err)

        # resuming inside that transaction (after its second insert): its Begin comes first,
        # at (commit_lsn, 0), before the resume point; then only what follows the resume point
        inside = inserts[1]["pos"]
        lines, err = self.run_until_exit("resumed inside a transaction", resume_after=inside,
                                         extra=["--until-lsn", until])
        positioned = [e for e in lines if e["pos"] is not None]
        self.assertEqual(positioned[0]["op"], "begin")
        self.assertEqual(pos_value(positioned[0]["pos"]), (pos_value(inside)[0], 0))
        self.assertEqual([(e["op"], e.get("key")) for e in positioned[1:3]],
                         [("insert", {"id": 7}), ("commit", None)])
        self.assertTrue(all(pos_value(e["pos"]) > pos_value(inside) for e in positioned[1:]))

        # nothing new (out-of-scope writes only): caught up by heartbeats, nothing printed, and
        # the position stays the resume point
        psql("INSERT INTO public.py_protocol_out VALUES (2)")
        until = psql("SELECT pg_current_wal_lsn()")
        end = [e for e in lines if e["op"] == "commit"][0]["pos"]
        lines, err = self.run_until_exit("resumed at the end", resume_after=end,
                                         extra=["--until-lsn", until])
        self.assertEqual(lines, [])
        self.assertIn("acked %s" % end, err)

    def test_long_values_in_pieces(self):
        self.run_showing_log(self.long_values_in_pieces)

    def long_values_in_pieces(self):
        """docs/protocol.md, "Long values": the example asks for pieces and puts them together."""
        self.stop_dblogd()
        self.start_dblogd("--value-piece-bytes=1024")
        t = SCHEMA + ".items"
        psql("ALTER TABLE %s ADD COLUMN b bytea" % t)
        until = psql("SELECT pg_current_wal_lsn()")
        lines, err = self.run_until_exit("bootstrap", extra=["--until-lsn", until])
        resume = [l for l in err.splitlines() if l.startswith("acked ")][-1].split()[1]
        # only a log change's values come in pieces: these come after the bootstrap
        # 'é' and '€' are 2 and 3 bytes: 1024-byte pieces end inside characters
        psql("INSERT INTO %s VALUES (2, repeat('aé€', 1000), decode(repeat('00ff', 900), 'hex'))"
             % t)
        psql("UPDATE %s SET name = name || '!' WHERE id = 2" % t)
        until = psql("SELECT pg_current_wal_lsn()")
        lines, err = self.run_until_exit("long values", resume_after=resume,
                                         extra=["--until-lsn", until])
        changes = [e for e in lines if e["op"] in ("insert", "update")]
        self.assertEqual([e["op"] for e in changes], ["insert", "update"])
        self.assertEqual(changes[0]["row"]["name"], "aé€" * 1000)
        self.assertEqual(changes[0]["row"]["b"], "\\x" + "00ff" * 900)
        self.assertEqual(changes[1]["row"]["name"], "aé€" * 1000 + "!")
        self.assertIn("split_values=true", self.dblogd_log())

    def test_waits_while_the_slot_is_created(self):
        self.run_showing_log(self.waits_while_the_slot_is_created)

    def waits_while_the_slot_is_created(self):
        """docs/protocol.md, "Waiting for the slot": Progress{creating_slot} frames before
        Welcome while CREATE_REPLICATION_SLOT waits for an open transaction; the client keeps
        waiting and streams once it ends."""
        holder = subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.procs.append(holder)
        holder.stdin.write("BEGIN; SELECT txid_current();\n")
        holder.stdin.flush()
        until = psql("SELECT pg_current_wal_lsn()")
        proc = self.client(extra=["--until-lsn", until])
        deadline = time.time() + TIMEOUT
        while psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                   " AND query LIKE 'CREATE_REPLICATION_SLOT%%dblog_%s%%'" % CONSUMER) == "0":
            self.assertLess(time.time(), deadline, "the slot creation never waited")
            time.sleep(0.05)
        time.sleep(2.5)  # the first report comes after a second of waiting
        self.assertIsNone(proc.poll(), "the client gave up while the slot was being created")
        holder.stdin.write("COMMIT;\n")
        holder.stdin.close()
        holder.wait(timeout=TIMEOUT)
        out, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("waiting: dblogd is creating the slot", err)
        self.assertIn("welcome slot=dblog_%s slot_created=True" % CONSUMER, err)
        self.assertIn("caught up with %s" % until, err)

    def test_consumer_token_from_a_file(self):
        self.run_showing_log(self.consumer_token_from_a_file)

    def consumer_token_from_a_file(self):
        # dblogd again, now with a token for the consumer, read from a file by both sides
        self.stop_dblogd()
        with tempfile.NamedTemporaryFile(mode="w", prefix="dblog-token-", delete=False) as f:
            f.write("py-secret\n")
        self.addCleanup(os.unlink, f.name)
        self.start_dblogd("--consumer-token-file=%s=%s" % (CONSUMER, f.name))

        proc = self.client()  # no token
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("AUTH_FAILED", err)
        proc = self.client(extra=["--token", "py-secret-not"])
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertIn("AUTH_FAILED", err)

        env = dict(os.environ, DBLOG_TOKEN_FILE=f.name)
        env.pop("DBLOG_TOKEN", None)
        proc = self.client(env=env)
        Lines(proc).until(lambda e: e["op"] == "bootstrap_end", "the end of the bootstrap")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)
        proc = self.client(extra=["--token-file", f.name])
        psql("INSERT INTO %s.items VALUES (7, 'seven')" % SCHEMA)
        # an insert, or a read when the first client was stopped before dblogd recorded its
        # acknowledgement of the bootstrap (then this connection bootstraps again)
        Lines(proc).until(lambda e: e["op"] in ("insert", "read") and e["key"] == {"id": 7},
                          "row 7")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)

    def test_tls(self):
        self.run_showing_log(self.tls)

    def tls(self):
        if subprocess.run(["sh", "-c", "command -v openssl"], stdout=subprocess.DEVNULL).returncode:
            self.skipTest("the openssl command is not installed")
        d = tempfile.mkdtemp(prefix="dblog-py-tls-")
        self.addCleanup(subprocess.run, ["rm", "-rf", d])

        def sh(cmd):
            subprocess.run(["sh", "-c", cmd], cwd=d, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        sh("printf '[req]\\ndistinguished_name=dn\\n[dn]\\n[ca]\\n"
           "basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign\\n' > o.cnf")
        for ca in ("ca", "other"):
            sh("openssl req -config o.cnf -extensions ca -x509 -newkey ec -pkeyopt "
               "ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=%s -keyout %s.key -out %s.pem"
               % (ca, ca, ca))
        for name, cn, ext in (("server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                              ("client", CONSUMER, "extendedKeyUsage=clientAuth")):
            sh("printf '%s\\n' > %s.ext && openssl req -config o.cnf -newkey ec -pkeyopt "
               "ec_paramgen_curve:P-256 -nodes -subj /CN=%s -keyout %s.key -out %s.csr && "
               "openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
               "-extfile %s.ext -out %s.pem" % (ext, name, cn, name, name, name, name, name))
        path = lambda f: os.path.join(d, f)
        self.stop_dblogd()
        self.start_dblogd("--tls-cert=" + path("server.pem"), "--tls-key=" + path("server.key"),
                          "--tls-client-ca=" + path("ca.pem"))

        # a server whose certificate does not chain to --tls-ca: refused by the client
        proc = self.client(extra=["--tls-ca", path("other.pem"),
                                  "--tls-cert", path("client.pem"), "--tls-key", path("client.key")])
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", err)
        # plaintext to a TLS dblogd: told so
        proc = self.client()
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("requires TLS", err)

        # TLS from the environment, verifying the name "localhost"
        env = dict(os.environ, DBLOG_TLS_CA=path("ca.pem"), DBLOG_TLS_CERT=path("client.pem"),
                   DBLOG_TLS_KEY=path("client.key"), DBLOG_HOST="localhost")
        proc = self.client(env=env)
        lines = Lines(proc)
        lines.until(lambda e: e["op"] == "bootstrap_end", "the end of the bootstrap")
        psql("INSERT INTO %s.items VALUES (8, 'eight')" % SCHEMA)
        lines.until(lambda e: e["op"] == "insert" and e["key"] == {"id": 8}, "row 8 over TLS")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 0)

    def refused_handshake(self):
        proc = self.client(consumer="nobody")
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("UNKNOWN_CONSUMER", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
