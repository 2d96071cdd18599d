#!/usr/bin/python3
"""dblog_tail.py: a dblogd consumer in plain Python, as a worked example of the protocol.

It connects to dblogd, sends Hello, reads varint-delimited ServerMessage frames, prints one
JSON line per stream event on stdout, and acknowledges every Commit and BootstrapEnd (and
every Heartbeat) once the lines before it are flushed. docs/protocol.md explains each step.

Needs Debian's python3-protobuf and protoc (protobuf-compiler); scripts/install-deps.sh
installs both. Nothing generated is checked in: the Python modules for proto/dblog/v1/*.proto
are generated with `protoc --python_out` into a temporary directory at start.

    /usr/bin/python3 examples/python/dblog_tail.py --consumer demo [--host H] [--port P]
        [--token-file F | --token T] [--resume-after LSN:SEQ] [--until-lsn LSN] [--no-ack]
        [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]

With --tls (implied by the other --tls-* flags) the connection is TLS, as dblogd --tls-cert
wants: the server's certificate must chain to --tls-ca (default: the system's trusted CAs)
and name the host (or --tls-server-name); --tls-cert/--tls-key present a client certificate
(dblogd --tls-client-ca: its CN must be the consumer name).

With --until-lsn it exits once it is caught up with that LSN of the source: every transaction
committed before it has been printed (and acknowledged).

Exit status: 0 when dblogd closes the stream or on SIGINT/SIGTERM, 1 on an Error frame or
any other failure, 2 for a bad command line. On exit the last acknowledged position is
printed on stderr (`acked LSN:SEQ`): pass it as --resume-after to continue from there.
"""

import argparse
import atexit
import datetime
import json
import math
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import types
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def load_protocol(proto_dir):
    """Generates the Python modules for the .proto files and imports them."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        sys.exit("dblog_tail: needs python3-protobuf (apt-get install python3-protobuf) and "
                 "Debian's /usr/bin/python3; this is " + sys.executable)
    out = tempfile.mkdtemp(prefix="dblog-proto-py-")
    atexit.register(shutil.rmtree, out, True)
    files = [os.path.join(proto_dir, "dblog", "v1", name)
             for name in ("change.proto", "consumer.proto")]
    try:
        subprocess.run(["protoc", "-I", proto_dir, "--python_out=" + out] + files,
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        sys.exit("dblog_tail: protoc failed (apt-get install protobuf-compiler): %s %s"
                 % (e, detail.decode(errors="replace")))
    sys.path.insert(0, out)
    from dblog.v1 import change_pb2, consumer_pb2  # noqa: E402  (generated above)
    # both modules' messages and enums under one name: pb.Hello, pb.Change, ...
    return types.SimpleNamespace(**{name: obj for module in (change_pb2, consumer_pb2)
                                    for name, obj in vars(module).items()
                                    if not name.startswith("_")})


# ---- framing: a varint length, then that many bytes of one message -------------------------

def encode_varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class FrameReader:
    MAX_FRAME = (1 << 30) + (128 << 20)  # what dblogd's own client accepts: any legal row

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def next(self):
        """The next frame's bytes, or None when the server closed between frames."""
        while True:
            length, shift, used = 0, 0, 0
            complete = False
            for b in self.buf:
                used += 1
                length |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    complete = True
                    break
                if used == 10:
                    raise IOError("frame length is not a valid varint")
            if complete:
                if length > self.MAX_FRAME:
                    raise IOError("frame of %d bytes is over the limit" % length)
                if len(self.buf) - used >= length:
                    frame = bytes(self.buf[used:used + length])
                    del self.buf[:used + length]
                    return frame
            if not self._fill():
                if self.buf:
                    raise IOError("connection closed in the middle of a frame")
                return None


# ---- rendering -------------------------------------------------------------------------------

def lsn(n):
    return "%X/%X" % (n >> 32, n & 0xFFFFFFFF)


def parse_lsn(text):
    """'0/16B3748' -> int."""
    hi, sep, lo = text.partition("/")
    if not sep:
        raise argparse.ArgumentTypeError("not an LSN: %r (expected e.g. 0/16B3748)" % text)
    return (int(hi, 16) << 32) | int(lo, 16)


def parse_position(text, pb):
    """'0/16B3748:3' -> Position."""
    lsn_text, _, seq = text.rpartition(":")
    hi, _, lo = lsn_text.partition("/")
    return pb.Position(commit_lsn=(int(hi, 16) << 32) | int(lo, 16), seq=int(seq))


def position_of(ev):
    """(commit_lsn, seq) of a StreamEvent, or None (Relation, BootstrapBegin)."""
    kind = ev.WhichOneof("event")
    if kind == "begin":
        return (ev.begin.commit_lsn, 0)
    if kind in ("relation", "bootstrap_begin", None):
        return None
    member = getattr(ev, kind)
    return (member.commit_lsn, member.seq)


EPOCH = datetime.datetime(1970, 1, 1)


def value(v):
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "unchanged":
        return {"unchanged_toast": True}  # the WAL did not carry it: keep the value you have
    x = getattr(v, kind)
    if kind in ("float4_value", "float8_value") and (math.isnan(x) or math.isinf(x)):
        return str(x)
    if kind == "bytes_value":
        return "\\x" + x.hex()
    if kind == "uuid_value":
        return str(uuid.UUID(bytes=x))
    try:
        if kind == "date_value":
            return (EPOCH + datetime.timedelta(days=x)).date().isoformat()
        if kind == "timestamp_value":
            return (EPOCH + datetime.timedelta(microseconds=x)).isoformat()
        if kind == "timestamptz_value":
            return (EPOCH + datetime.timedelta(microseconds=x)).isoformat() + "Z"
    except OverflowError:
        return x  # outside Python's calendar: the raw number
    return x


class SplitValues:
    """Puts split values together: a Change whose long values come after it in ValuePiece
    events (Hello.split_values; change.proto, SplitValue) is handed on once its last piece has
    come, its values whole (docs/protocol.md, "Long values")."""

    MEMBERS = {7: "text_value", 8: "bytes_value", 13: "literal"}  # SplitValue.Kind

    def __init__(self):
        self.change = None  # the StreamEvent being put together
        self.due = []       # [Value, member, bytearray, length], in row order

    def feed(self, ev):
        """The event to handle for `ev`, or None while a Change waits for its pieces."""
        which = ev.WhichOneof("event")
        if which == "value_piece":
            data = ev.value_piece.data
            if not self.due or not data:
                raise IOError("a ValuePiece that no split value waits for")
            while data:
                if not self.due:
                    raise IOError("more ValuePiece bytes than the split values hold")
                part = self.due[0]
                take = part[3] - len(part[2])
                part[2] += data[:take]
                data = data[take:]
                if len(part[2]) == part[3]:
                    v, member, buf, _ = self.due.pop(0)
                    setattr(v, member, buf.decode("utf-8") if member != "bytes_value" else bytes(buf))
            if self.due:
                return None
            change, self.change = self.change, None
            return change
        if self.due:
            raise IOError("another event before the last ValuePiece of a Change")
        if which == "change" and any(v.WhichOneof("kind") == "split"
                                     for v in list(ev.change.old_key.values)
                                     + list(ev.change.old_row.values)):
            raise IOError("a split value outside a Change's new row")
        for v in ev.change.new_row.values if which == "change" else ():
            if v.WhichOneof("kind") == "split":
                if v.split.kind not in self.MEMBERS or not 0 < v.split.length <= 1 << 30:
                    raise IOError("a split value this client cannot put together")
                self.due.append([v, self.MEMBERS[v.split.kind], bytearray(), v.split.length])
        if self.due:
            self.change = ev
            return None
        return ev


class Relations:
    def __init__(self):
        self.by_oid = {}

    def name(self, oid):
        r = self.by_oid.get(oid)
        return "%s.%s" % (r.schema, r.name) if r else oid

    def row(self, oid, row):
        r = self.by_oid.get(oid)
        vals = [value(v) for v in row.values]
        if not r:
            return vals
        return {r.columns[i].name if i < len(r.columns) else "$%d" % (i + 1): x
                for i, x in enumerate(vals)}

    def key(self, oid, key_row):
        """A key Row (key columns in key order)."""
        r = self.by_oid.get(oid)
        vals = [value(v) for v in key_row.values]
        if not r:
            return vals
        return {r.columns[k].name: vals[i] for i, k in enumerate(r.key_columns) if i < len(vals)}

    def key_of_row(self, oid, row):
        r = self.by_oid.get(oid)
        if not r:
            return None
        return {r.columns[k].name: value(row.values[k])
                for k in r.key_columns if k < len(row.values)}


def render(ev, rels, pb):
    kind = ev.WhichOneof("event")
    pos = position_of(ev)
    line = {"pos": "%s:%d" % (lsn(pos[0]), pos[1]) if pos else None, "op": kind}
    if kind == "begin":
        line.update(xid=ev.begin.xid, end_lsn=lsn(ev.begin.end_lsn))
    elif kind == "relation":
        r = ev.relation
        rels.by_oid[r.oid] = r
        line.update(table="%s.%s" % (r.schema, r.name), oid=r.oid,
                    columns=[c.name for c in r.columns],
                    key=[r.columns[k].name for k in r.key_columns])
    elif kind == "change":
        c = ev.change
        line["op"] = pb.Change.Kind.Name(c.kind).lower()
        line["table"] = rels.name(c.relation_oid)
        if c.HasField("new_row"):
            line["key"] = rels.key_of_row(c.relation_oid, c.new_row)
            line["row"] = rels.row(c.relation_oid, c.new_row)
        if c.HasField("old_key"):
            line["old_key"] = rels.key(c.relation_oid, c.old_key)
            if c.kind == pb.Change.DELETE:
                line["key"] = line.pop("old_key")
        if c.HasField("old_row"):
            line["old_row"] = rels.row(c.relation_oid, c.old_row)
    elif kind == "truncate":
        # dblogd sends the Relation of every table a Truncate names before it
        unknown = [o for o in ev.truncate.relation_oids if o not in rels.by_oid]
        if unknown:
            raise IOError("Truncate of relations %s before their Relation" % unknown)
        line["tables"] = [rels.name(o) for o in ev.truncate.relation_oids]
    elif kind == "message":
        m = ev.message
        line.update(transactional=m.transactional, prefix=m.prefix,
                    content=m.content.decode("utf-8", "replace"))
    elif kind == "commit":
        line.update(end_lsn=lsn(ev.commit.end_lsn))
    elif kind == "bootstrap_begin":
        # A complete image of exactly these tables follows: a sink empties them first
        # (restarted or not), then applies the READ rows.
        line.update(consistent_point=lsn(ev.bootstrap_begin.consistent_point),
                    restarted=ev.bootstrap_begin.restarted,
                    tables=["%s.%s" % (t.schema, t.name) for t in ev.bootstrap_begin.tables])
    elif kind == "bootstrap_end":
        line.update(rows={"%s.%s" % (t.schema, t.name): t.rows_copied
                          for t in ev.bootstrap_end.tables})
    elif kind == "chunk_begin":
        b = ev.chunk_begin
        line.update(request_id=b.request_id, table=rels.name(b.relation_oid),
                    is_range=b.is_range, chunk=b.chunk)
        if b.HasField("from_key"):
            line["from_key"] = rels.key(b.relation_oid, b.from_key)
            line["from_inclusive"] = b.from_inclusive
        if b.HasField("to_key"):
            line["to_key"] = rels.key(b.relation_oid, b.to_key)
            line["to_inclusive"] = b.to_inclusive
        if b.is_range:
            # bounds are whole keys; compare them, per key column, in this collation
            # ("" = the type's own order, "libc:C" = bytes; docs/protocol.md "Range chunks")
            line["key_collations"] = list(b.key_collations)
    elif kind == "chunk_end":
        e = ev.chunk_end
        line.update(request_id=e.request_id, rows=e.rows, deletes=e.deletes, last=e.last,
                    kept_keys=[rels.key(e.relation_oid, k) for k in e.kept_keys])
    else:
        # An event kind this client does not know could be a change: refuse rather than skip it.
        raise IOError("unknown stream event (a newer server?): %r" % ev)
    return line


# ---- the session -----------------------------------------------------------------------------

class Stop(Exception):
    pass


def run(args):
    pb = load_protocol(args.proto_dir)
    stop = {"asked": False}

    def on_signal(signo, frame):
        if stop["asked"]:
            os._exit(128 + signo)  # asked twice: stop now
        stop["asked"] = True
        raise Stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    try:
        sock = connect(args)
    except (OSError, ssl.SSLError) as e:
        print("dblog_tail: cannot connect to dblogd at %s:%d: %s" % (args.host, args.port, e),
              file=sys.stderr)
        return 1
    frames = FrameReader(sock)
    acked = None

    def send(msg):
        data = msg.SerializeToString()
        sock.sendall(encode_varint(len(data)) + data)

    def ack(position):
        nonlocal acked
        if args.no_ack:
            return
        key = (position.commit_lsn, position.seq)
        if acked is not None and key <= acked:
            return  # acks must not go backwards; an equal one is pointless
        sys.stdout.flush()  # acknowledge only what is written
        send(pb.ClientMessage(ack=pb.Ack(position=position)))
        acked = key

    def read_server_message():
        frame = frames.next()
        if frame is None:
            return None
        msg = pb.ServerMessage()
        msg.ParseFromString(frame)
        if msg.WhichOneof("msg") == "error":
            raise ServerRefused(pb.Error.Code.Name(msg.error.code), msg.error.message)
        return msg

    status = 0
    through = 0
    try:
        hello = pb.Hello(protocol_version=pb.PROTOCOL_VERSION_1, consumer=args.consumer,
                         token=args.token or "", client_name="dblog_tail.py/0.1",
                         split_values=True)
        if args.resume_after:
            hello.resume_after.CopyFrom(parse_position(args.resume_after, pb))
            acked = (hello.resume_after.commit_lsn, hello.resume_after.seq)
        send(pb.ClientMessage(hello=hello))

        first = read_server_message()
        # A new consumer's slot may wait for transactions open in the source: until Welcome,
        # dblogd says so once a second (Progress phase "creating_slot"). Keep waiting.
        while (first is not None and first.WhichOneof("msg") == "progress"
               and first.progress.phase == "creating_slot"):
            if first.progress.waiting_ms // 1000 % 30 == 1:
                print("waiting: dblogd is creating the slot (%d s): %s"
                      % (first.progress.waiting_ms // 1000, first.progress.waiting_for),
                      file=sys.stderr, flush=True)
            first = read_server_message()
        if first is None or first.WhichOneof("msg") != "welcome":
            raise IOError("expected Welcome, got %s" % (first and first.WhichOneof("msg")))
        w = first.welcome
        print("welcome slot=%s slot_created=%s resume_from=%s:%d confirmed_flush_lsn=%s"
              " scope=%s server=%s" % (w.slot, w.slot_created, lsn(w.resume_from.commit_lsn),
                                       w.resume_from.seq, lsn(w.confirmed_flush_lsn),
                                       ",".join(w.scope), w.server_name),
              file=sys.stderr, flush=True)

        rels = Relations()
        split = SplitValues()
        last = (w.resume_from.commit_lsn, w.resume_from.seq)
        if acked and acked > last:
            last = acked
        positioned = False  # a positioned event arrived on this connection
        # Caught up: every transaction the source committed before `through` has been printed
        # (docs/protocol.md, "Caught up"). What we had before: everything before resume_from.
        through = w.resume_from.commit_lsn
        in_bootstrap = False
        while not (args.until_lsn is not None and through >= args.until_lsn):
            msg = read_server_message()
            if msg is None:
                break  # dblogd closed the stream cleanly
            kind = msg.WhichOneof("msg")
            if kind == "events":
                for ev in msg.events.events:
                    ev = split.feed(ev)
                    if ev is None:
                        continue  # a Change waiting for the rest of its values
                    pos = position_of(ev)
                    if pos is not None:
                        # Resuming inside a transaction: its Begin comes first, at its own
                        # position (commit_lsn, 0), at or before the resume point.
                        resumed_begin = (not positioned and ev.WhichOneof("event") == "begin"
                                         and last[0] != 0 and pos[0] == last[0])
                        positioned = True
                        if pos <= last and not resumed_begin:
                            raise IOError("position %s:%d is not after %s:%d"
                                          % (lsn(pos[0]), pos[1], lsn(last[0]), last[1]))
                        last = max(last, pos)
                    print(json.dumps(render(ev, rels, pb), separators=(",", ":")))
                    which = ev.WhichOneof("event")
                    if which in ("commit", "bootstrap_end"):
                        ack(pb.Position(commit_lsn=pos[0], seq=pos[1]))
                    # commit order: an event of the transaction committed at C means every
                    # earlier one was sent; a Commit, that it is complete (up to its end_lsn);
                    # the bootstrap counts at its end, up to its consistent point
                    if which == "bootstrap_begin":
                        in_bootstrap = True
                    elif which == "bootstrap_end":
                        in_bootstrap = False
                        through = max(through, ev.bootstrap_end.consistent_point)
                    elif which == "commit":
                        through = max(through, ev.commit.end_lsn or ev.commit.commit_lsn)
                    elif pos is not None and not in_bootstrap:
                        through = max(through, pos[0])
            elif kind == "heartbeat":
                # absent before anything can be acknowledged; else the last position sent (or
                # the resume point): everything before it was printed (not while a Change
                # waits for its pieces: dblogd leaves the position out then; do not rely on it)
                if msg.heartbeat.HasField("position") and not split.due:
                    ack(msg.heartbeat.position)
                if not in_bootstrap:  # everything committed before source_lsn was sent
                    through = max(through, msg.heartbeat.source_lsn)
            elif kind == "progress":
                t = msg.progress.tables
                print("progress %s: %d of ~%d rows" % (
                    msg.progress.phase, sum(x.rows_copied for x in t),
                    sum(x.rows_estimated for x in t)), file=sys.stderr, flush=True)
            else:
                raise IOError("unexpected server message %r" % kind)
    except Stop:
        pass
    except ServerRefused as e:
        print("dblog_tail: dblogd error %s: %s" % (e.code, e.message), file=sys.stderr)
        status = 1
    except (OSError, IOError) as e:
        print("dblog_tail: %s" % e, file=sys.stderr)
        status = 1
    finally:
        try:
            sys.stdout.flush()
        except OSError:
            pass
        sock.close()
    if acked is not None:
        print("acked %s:%d" % (lsn(acked[0]), acked[1]), file=sys.stderr)
    if status == 0 and args.until_lsn is not None and through >= args.until_lsn:
        print("caught up with %s" % lsn(args.until_lsn), file=sys.stderr)
    return status


def connect(args):
    """A TCP connection to dblogd, wrapped in TLS when asked for."""
    sock = socket.create_connection((args.host, args.port), timeout=10)
    if args.tls:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=args.tls_ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if args.tls_cert:
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
        # check_hostname (on by default) matches DNS names and IP addresses in subjectAltName.
        # dblogd closes without close_notify: recv() returns b"" then (suppress_ragged_eofs),
        # and FrameReader still catches a frame cut in half.
        try:
            sock = ctx.wrap_socket(sock, server_hostname=args.tls_server_name or args.host)
        except BaseException:
            sock.close()
            raise
    sock.settimeout(None)
    return sock


class ServerRefused(Exception):
    def __init__(self, code, message):
        super().__init__(code + ": " + message)
        self.code, self.message = code, message


def main():
    p = argparse.ArgumentParser(description="Print a dblogd consumer's stream as JSON lines.")
    p.add_argument("--consumer", required=True, help="consumer name; its slot is dblog_NAME")
    p.add_argument("--host", default=os.environ.get("DBLOG_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("DBLOG_PORT", "7654")))
    tokens = p.add_mutually_exclusive_group()
    tokens.add_argument("--token",
                        help="the consumer's token, when dblogd requires one (default "
                             "$DBLOG_TOKEN); other users can see command lines: prefer "
                             "--token-file")
    tokens.add_argument("--token-file", metavar="FILE",
                        help="read the token from FILE, trailing whitespace removed (default "
                             "$DBLOG_TOKEN_FILE)")
    env_tls = os.environ.get("DBLOG_TLS", "")
    if env_tls not in ("", "0", "1", "true", "false", "yes", "no", "on", "off"):
        p.error("invalid DBLOG_TLS %r: expected 1 or 0" % env_tls)
    p.add_argument("--tls", action="store_true",
                   default=env_tls in ("1", "true", "yes", "on"),
                   help="connect with TLS (dblogd --tls-cert); implied by the other --tls-* "
                        "flags (default $DBLOG_TLS)")
    p.add_argument("--tls-ca", metavar="FILE", default=os.environ.get("DBLOG_TLS_CA") or None,
                   help="PEM CA certificate(s) the server's certificate must chain to "
                        "(default $DBLOG_TLS_CA, else the system's trusted CAs)")
    p.add_argument("--tls-cert", metavar="FILE",
                   default=os.environ.get("DBLOG_TLS_CERT") or None,
                   help="PEM client certificate, for dblogd --tls-client-ca: its CN must be "
                        "the consumer name (default $DBLOG_TLS_CERT)")
    p.add_argument("--tls-key", metavar="FILE", default=os.environ.get("DBLOG_TLS_KEY") or None,
                   help="PEM private key of --tls-cert (default $DBLOG_TLS_KEY)")
    p.add_argument("--tls-server-name", metavar="NAME",
                   default=os.environ.get("DBLOG_TLS_SERVER_NAME") or None,
                   help="the DNS name or IP address the server's certificate must name "
                        "(default $DBLOG_TLS_SERVER_NAME, else --host)")
    p.add_argument("--resume-after", metavar="LSN:SEQ",
                   help="the last position you applied, e.g. 0/16B3748:4")
    p.add_argument("--no-ack", action="store_true",
                   help="acknowledge nothing: look at the stream without moving the slot")
    p.add_argument("--until-lsn", metavar="LSN", type=parse_lsn,
                   help="exit (0) once every transaction the source committed before LSN has "
                        "been printed, e.g. the source's pg_current_wal_lsn() taken after "
                        "the commits you wait for")
    p.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR,
                   help="directory holding dblog/v1/*.proto (default: the repository's)")
    args = p.parse_args()
    # flags win over the environment
    if args.token is None and args.token_file is None:
        args.token = os.environ.get("DBLOG_TOKEN")
        args.token_file = os.environ.get("DBLOG_TOKEN_FILE")
        if args.token is not None and args.token_file is not None:
            p.error("DBLOG_TOKEN and DBLOG_TOKEN_FILE exclude each other")
    if args.token_file is not None:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                args.token = f.read().rstrip()
        except OSError as e:
            p.error("cannot read token file %s: %s" % (args.token_file, e.strerror))
        if not args.token:
            p.error("token file %s is empty" % args.token_file)
    if (args.tls_cert is None) != (args.tls_key is None):
        p.error("--tls-cert and --tls-key go together (a client certificate and its key)")
    for flag in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, flag)
        if path is not None and not os.access(path, os.R_OK):
            p.error("cannot read --%s %s" % (flag.replace("_", "-"), path))
    args.tls = bool(args.tls or args.tls_ca or args.tls_cert or args.tls_server_name)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
