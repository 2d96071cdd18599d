#!/usr/bin/python3
"""tests/docs/test_snippets.py: every fenced code block of README.md and docs/*.md is
classified, and every runnable one is run against the test cluster.

Owns the docs' snippets: it makes "every command and SQL snippet in the docs is exercised by a
test or by the quick start" checkable. It must not change the docs, and it never rewrites a
snippet's text: what runs is what a reader copies.

Annotations. The last non-blank line before every fence is an HTML comment (invisible when
rendered) saying what the block is:

  <!-- snippet: sh [setup=NAME] [timeout=N] -->
      Shell commands, run with bash from the repository root. Without timeout=N every command
      must succeed (set -e, pipefail). With timeout=N the block is a command that runs until
      stopped (dblogd, pg_recvlogical, a client): it passes if it was still running after N
      seconds (it is then stopped with SIGINT, as Ctrl-C would) or had exited 0, and wrote no
      "error" on stderr.
  <!-- snippet: sql [setup=NAME] -->
      SQL, run with psql -X -v ON_ERROR_STOP=1 -f: every statement must succeed.
  <!-- snippet: dblogd-config -->
      A dblogd config file: build/sidecar/dblogd --config FILE must start with it (checked as
      a timeout=2 shell snippet).
  <!-- snippet: output -->
      What the command before it prints; not a command.
  <!-- snippet: covered by PATH -->
      Run by another test or CI step: every command line of the block (comments and a leading
      `sudo` stripped) must occur verbatim in PATH (e.g. .ci/run).
  <!-- snippet: not run: REASON -->
      Cannot run here (installs packages, needs systemd, a diagram, ...); the reason is
      mandatory.

setup=NAME runs tests/docs/setup/NAME.sql (psql) or sources tests/docs/setup/NAME.sh just
before the snippet: the fixture the snippet needs (a table, a registered consumer, a running
dblogd). Fixtures create what the docs name; they never edit the snippet.

How a document runs. Its runnable snippets run in order in one bash session, so later ones
see what earlier ones started (README: a throwaway cluster, dblogd in the background, then
psql and curl against them). The session starts with PGDATABASE set to a fresh scratch
database docs_<document> on the test cluster (tests/cluster.sh: PGHOST, PGPORT, ...), created
empty. The first failing snippet ends its document's session; the ones after it are reported
as not reached. dblogd and the clients use their default ports (7654, 9187), as the docs do:
a lock file serialises runs of this test on one machine, and the ports must be free.

Cleanup, also on failure: the session's EXIT trap stops its background jobs (SIGTERM, then
SIGKILL) and a cluster it started (cluster_stop); then whatever is left in its process group
is killed, the scratch databases and their replication slots are dropped, and roles created and
ALTER SYSTEM settings made by snippets are removed from the test cluster.

Usage (tests/run.sh runs the first two, with the cluster environment):
  /usr/bin/python3 tests/docs/test_snippets.py --self-test   # the runner fails when it should
  /usr/bin/python3 tests/docs/test_snippets.py               # README.md and docs/*.md
  /usr/bin/python3 tests/docs/test_snippets.py --list [FILE.md ...]   # classify only, no cluster
  /usr/bin/python3 tests/docs/test_snippets.py docs/repairs.md        # some documents
"""

import argparse
import contextlib
import fcntl
import glob
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SETUP_DIR = os.path.join(ROOT, "tests", "docs", "setup")
LOCK_FILE = "/tmp/dblog-docs-snippets.lock"
DEFAULT_PORTS = (7654, 9187)      # dblogd's --listen and --metrics-listen defaults
SESSION_TIMEOUT = 150             # seconds for one document's session, a safety net
CONFIG_CHECK_SECONDS = 2          # how long dblogd must run with a dblogd-config snippet

FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
ANNOTATION_RE = re.compile(r"^\s*<!--\s*snippet:(.*?)-->\s*$")
RUNNABLE = ("sh", "sql", "dblogd-config")
LABEL = {"not run": "not-run", "covered": "covered", "output": "output"}
INFO_FOR_KIND = {"sh": ("sh", "bash", "shell"), "sql": ("sql",), "dblogd-config": ("ini", "")}


class Snippet:
    """One fenced block: where it is, its text, and what its annotation says."""

    def __init__(self, path, line, info, text, annotation):
        self.path = path              # as given (relative to ROOT for the real docs)
        self.line = line              # 1-based line of the opening fence
        self.info = info              # the fence's language, e.g. "sql"
        self.text = text
        self.annotation = annotation  # the comment's text, None when unannotated
        self.kind = None              # sh, sql, dblogd-config, output, covered, not run
        self.options = {}             # setup=, timeout=
        self.argument = ""            # the reason (not run) or the path (covered by)

    def where(self):
        return "%s:%d" % (self.path, self.line)

    def describe(self):
        if self.kind == "not run":
            return "not run: " + self.argument
        if self.kind == "covered":
            return "covered by " + self.argument
        opts = " ".join("%s=%s" % kv for kv in sorted(self.options.items()))
        return (self.kind + " " + opts).strip()


class Problem:
    """Something that makes the test fail; code is a short tag the self-test checks."""

    def __init__(self, where, code, message):
        self.where, self.code, self.message = where, code, message

    def __str__(self):
        return "%s: %s: %s" % (self.where, self.code, self.message)


# ---- parsing and static checks --------------------------------------------------------------

def parse_markdown(path, text):
    """Returns (snippets, problems) for one markdown text: every fenced block with the
    annotation on the last non-blank line before it."""
    lines = text.split("\n")
    snippets, problems = [], []
    pending = None                    # (line number, text) of an annotation not yet used
    i = 0
    while i < len(lines):
        line = lines[i]
        m = ANNOTATION_RE.match(line)
        if m:
            if pending:
                problems.append(Problem("%s:%d" % (path, pending[0]), "dangling",
                                        "annotation not followed by a fenced block"))
            pending = (i + 1, m.group(1).strip())
            i += 1
            continue
        m = FENCE_RE.match(line)
        if not m:
            if line.strip() and pending:
                problems.append(Problem("%s:%d" % (path, pending[0]), "dangling",
                                        "annotation not followed by a fenced block"))
                pending = None
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i
        body = []
        i += 1
        closed = False
        while i < len(lines):
            c = FENCE_RE.match(lines[i])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) \
                    and not c.group(3).strip():
                closed = True
                break
            # the block's lines lose up to the opening fence's indentation
            body.append(re.sub("^ {0,%d}" % len(indent), "", lines[i]))
            i += 1
        i += 1
        snippet = Snippet(path, start + 1, info.split()[0] if info else "", "\n".join(body) + "\n",
                          pending[1] if pending else None)
        pending = None
        if not closed:
            problems.append(Problem(snippet.where(), "unclosed", "fence never closed"))
        problems.extend(classify(snippet))
        snippets.append(snippet)
    if pending:
        problems.append(Problem("%s:%d" % (path, pending[0]), "dangling",
                                "annotation not followed by a fenced block"))
    return snippets, problems


def classify(snippet):
    """Fills in kind, options and argument from the annotation; returns its problems."""
    where = snippet.where()
    a = snippet.annotation
    if a is None:
        return [Problem(where, "unannotated",
                        "fenced block without a <!-- snippet: ... --> annotation on the line "
                        "before it (tests/docs/test_snippets.py explains them)")]
    if a.startswith("not run"):
        snippet.kind = "not run"
        reason = a[len("not run"):].lstrip(":").strip()
        snippet.argument = reason
        if not reason:
            return [Problem(where, "no-reason", "'not run' needs a reason: not run: REASON")]
        return []
    if a.startswith("covered by"):
        snippet.kind = "covered"
        snippet.argument = a[len("covered by"):].strip()
        return check_covered(snippet)
    words = a.split()
    kind = words[0] if words else ""
    if kind == "output" and len(words) == 1:
        snippet.kind = "output"
        return []
    if kind not in RUNNABLE:
        return [Problem(where, "unknown-kind", "unknown annotation %r (sh, sql, dblogd-config, "
                        "output, covered by PATH, not run: REASON)" % a)]
    snippet.kind = kind
    problems = []
    if snippet.info not in INFO_FOR_KIND[kind]:
        problems.append(Problem(where, "kind-mismatch", "a %s snippet in a ```%s block"
                                % (kind, snippet.info)))
    allowed = {"sh": ("setup", "timeout"), "sql": ("setup",), "dblogd-config": ()}[kind]
    for word in words[1:]:
        name, eq, value = word.partition("=")
        if not eq or name not in allowed or not value:
            problems.append(Problem(where, "bad-option", "option %r (allowed for %s: %s)"
                                    % (word, kind, ", ".join(allowed) or "none")))
            continue
        snippet.options[name] = value
    if "timeout" in snippet.options and not re.fullmatch(r"[0-9]+", snippet.options["timeout"]):
        problems.append(Problem(where, "bad-option", "timeout must be whole seconds"))
    if "setup" in snippet.options and not setup_file(snippet.options["setup"]):
        problems.append(Problem(where, "bad-option", "no fixture tests/docs/setup/%s.sql or .sh"
                                % snippet.options["setup"]))
    return problems


def setup_file(name):
    """The fixture file for setup=NAME, or None."""
    if not re.fullmatch(r"[a-z0-9_]+", name):
        return None
    for ext in (".sql", ".sh"):
        path = os.path.join(SETUP_DIR, name + ext)
        if os.path.isfile(path):
            return path
    return None


def check_covered(snippet):
    """'covered by PATH': PATH exists and holds every command of the block verbatim."""
    target = os.path.join(ROOT, snippet.argument)
    if not snippet.argument or not os.path.isfile(target):
        return [Problem(snippet.where(), "not-covered", "no such file %r" % snippet.argument)]
    with open(target) as f:
        content = f.read()
    problems = []
    for line in snippet.text.splitlines():
        command = re.sub(r"(^|\s)#.*$", "", line).strip()
        command = re.sub(r"^sudo\s+", "", command)
        if command and command not in content:
            problems.append(Problem(snippet.where(), "not-covered",
                                    "%r does not occur in %s" % (command, snippet.argument)))
    return problems


def load_documents(paths):
    """Parses the documents; returns {path: [snippets]} and the problems found."""
    documents, problems = {}, []
    for path in paths:
        with open(os.path.join(ROOT, path) if not os.path.isabs(path) else path) as f:
            snippets, found = parse_markdown(path, f.read())
        documents[path] = snippets
        problems += found
    return documents, problems


# ---- the test cluster -----------------------------------------------------------------------

def admin(sql, database="postgres"):
    """Runs SQL on the test cluster (tests/cluster.sh's environment); returns its rows."""
    out = subprocess.run(["psql", "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", database,
                          "-c", sql], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise RuntimeError("psql: %s\n%s" % (sql, out.stderr.strip()))
    return [l for l in out.stdout.splitlines() if l]


def quote_literal(s):
    return "'" + s.replace("'", "''") + "'"


def quote_ident(s):
    return '"' + s.replace('"', '""') + '"'


def scratch_name(path):
    stem = os.path.splitext(os.path.basename(path))[0].lower()
    return "docs_" + re.sub(r"[^a-z0-9]+", "_", stem)


def drop_scratch(db):
    """Drops a scratch database and the replication slots in it."""
    deadline = time.time() + 20
    while True:
        admin("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
              " WHERE database = %s AND active_pid IS NOT NULL" % quote_literal(db))
        try:
            admin("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                  " WHERE database = %s" % quote_literal(db))
            break
        except RuntimeError:
            # a walsender that was just terminated may hold its slot for a moment
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    admin("DROP DATABASE IF EXISTS %s WITH (FORCE)" % quote_ident(db))


class ClusterState:
    """What snippets may add to the test cluster outside their scratch database (roles,
    ALTER SYSTEM settings): recorded before, removed after."""

    def __init__(self):
        self.roles = set(admin("SELECT rolname FROM pg_roles"))
        self.settings = set(self.auto_conf())

    @staticmethod
    def auto_conf():
        return admin("SELECT name FROM pg_file_settings"
                     " WHERE sourcefile LIKE '%/postgresql.auto.conf'")

    def restore(self):
        problems = []
        for role in sorted(set(admin("SELECT rolname FROM pg_roles")) - self.roles):
            try:
                admin("DROP ROLE %s" % quote_ident(role))
            except RuntimeError as e:
                problems.append(Problem("cleanup", "cleanup", str(e)))
        added = sorted(set(self.auto_conf()) - self.settings)
        for name in added:
            admin("ALTER SYSTEM RESET %s" % quote_ident(name))
        if added:
            admin("SELECT pg_reload_conf()")
        return problems


def port_free(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_ports_free(seconds):
    deadline = time.time() + seconds
    while True:
        busy = [p for p in DEFAULT_PORTS if not port_free(p)]
        if not busy or time.time() > deadline:
            return busy
        time.sleep(0.2)


# ---- running one document -------------------------------------------------------------------

# The session's preamble. dblog_docs_for is the timeout=N mode; the EXIT trap is the cleanup.
PREAMBLE = r"""
set -eEo pipefail
trap 'echo "docs snippet: status $? from: $BASH_COMMAND" >&2' ERR
cd %(root)s
export PGDATABASE=%(db)s
dblog_docs_mark() { echo "$1" >>%(status)s; }
dblog_docs_cleanup() {
  local rc=$? p
  set +e
  for p in $(jobs -pr); do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 100); do [ -z "$(jobs -pr)" ] && break; sleep 0.1; done
  for p in $(jobs -pr); do kill -KILL "$p" 2>/dev/null; done
  if declare -F cluster_stop >/dev/null; then cluster_stop; fi
  exit $rc
}
trap 'exit 143' TERM INT HUP
trap dblog_docs_cleanup EXIT
# After every snippet: what it started in the background (cmd &) still runs or exited 0.
dblog_docs_check_jobs() {
  local p rc running
  running=" $(jobs -pr | tr '\n' ' ') "
  for p in $(jobs -p); do
    case "$running" in *" $p "*) continue ;; esac
    rc=0; wait "$p" || rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "docs snippet: a background command (pid $p) exited with status $rc" >&2
      return 1
    fi
  done
}
# dblog_docs_for SECONDS FILE: FILE is a command that runs until stopped. It passes if it was
# still running after SECONDS, or exited 0 before, and wrote no error on stderr meanwhile. Then
# it is stopped like Ctrl-C (SIGINT to its process group; SIGTERM, SIGKILL if it lingers); what
# it says while stopping is shown, not judged (pg_recvlogical 15 reports an "error" at SIGINT).
dblog_docs_for() {
  local secs=$1 file=$2 pid rc=0 tick=0
  setsid -w bash -e "$file" 2>"$file.stderr" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ "$tick" -lt "$((secs * 10))" ]; do
    sleep 0.1; tick=$((tick + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    cp "$file.stderr" "$file.judged"
    for sig in INT TERM KILL; do
      kill -"$sig" -- "-$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null || true
      for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null || break
    done
    wait "$pid" 2>/dev/null || true
  else
    wait "$pid" || rc=$?
    cp "$file.stderr" "$file.judged"
  fi
  cat "$file.stderr" >&2
  if [ "$rc" -ne 0 ]; then
    echo "docs snippet: exited with status $rc within $secs s" >&2
    return 1
  fi
  if grep -Eiq '\berror\b|\bfatal\b|\bpanic\b' "$file.judged"; then
    echo "docs snippet: it reported an error on stderr while running" >&2
    return 1
  fi
}
"""


def session_env():
    """The session's environment: the test cluster's, without settings that would change what
    a snippet does (dblogd reads every DBLOG_<NAME>; tests/cluster.sh reads CLUSTER_PORT and
    DBLOG_KEEP_CLUSTER)."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("DBLOG_") and not k.startswith("DBLOG_TEST_"))}
    env.pop("CLUSTER_PORT", None)
    env.pop("CLUSTER_DIR", None)
    return env


def write_session(workdir, db, snippets):
    """Writes the snippet files and the session script; returns the script's path."""
    status = os.path.join(workdir, "status")
    out = [PREAMBLE % {"root": shq(ROOT), "db": shq(db), "status": shq(status)}]
    for n, s in enumerate(snippets):
        out.append("\n# ---- %s (%s)" % (s.where(), s.describe()))
        out.append("dblog_docs_mark 'start %d'" % n)
        setup = s.options.get("setup")
        if setup:
            path = setup_file(setup)
            if path.endswith(".sql"):
                out.append("psql -X -q -v ON_ERROR_STOP=1 -f %s" % shq(path))
            else:
                out.append("source %s" % shq(path))
        base = os.path.join(workdir, "snippet_%d" % n)
        if s.kind == "sql":
            write(base + ".sql", s.text)
            out.append("psql -X -v ON_ERROR_STOP=1 -f %s" % shq(base + ".sql"))
        elif s.kind == "dblogd-config":
            write(base + ".conf", s.text)
            write(base + ".sh", "exec build/sidecar/dblogd --config %s\n" % shq(base + ".conf"))
            out.append("dblog_docs_for %d %s" % (CONFIG_CHECK_SECONDS, shq(base + ".sh")))
        elif "timeout" in s.options:
            write(base + ".sh", s.text)
            out.append("dblog_docs_for %s %s" % (s.options["timeout"], shq(base + ".sh")))
        else:
            write(base + ".sh", s.text)
            out.append("source %s" % shq(base + ".sh"))
        out.append("dblog_docs_check_jobs")
        out.append("dblog_docs_mark 'done %d'" % n)
    # a background command that failed just after its snippet ended
    out.append("sleep 0.5; dblog_docs_check_jobs")
    out.append("dblog_docs_mark end\n")
    script = os.path.join(workdir, "session.sh")
    write(script, "\n".join(out))
    return script


def run_document(path, snippets, verbose):
    """Runs a document's runnable snippets in one session; returns problems."""
    db = scratch_name(path)
    workdir = tempfile.mkdtemp(prefix="dblog-docs-")
    log_path = os.path.join(workdir, "session.log")
    problems = []
    drop_scratch(db)
    admin("CREATE DATABASE %s" % quote_ident(db))
    try:
        busy = wait_ports_free(10)
        if busy:
            return [Problem(path, "ports", "127.0.0.1 port(s) %s in use: the docs' dblogd uses "
                            "its defaults; stop what listens there" % busy)]
        script = write_session(workdir, db, [s for s in snippets if s.kind in RUNNABLE])
        started = time.time()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(["bash", script], cwd=ROOT, env=session_env(),
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=SESSION_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(Problem(path, "timeout", "session still running after %d s"
                                        % SESSION_TIMEOUT))
                kill_group(proc.pid, signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    kill_group(proc.pid, signal.SIGKILL)
                    rc = proc.wait()
        kill_group(proc.pid, signal.SIGTERM)   # anything a snippet left behind
        time.sleep(0.2)
        kill_group(proc.pid, signal.SIGKILL)
        elapsed = time.time() - started
        status = read_lines(os.path.join(workdir, "status"))
        problems += judge(path, snippets, status, rc, read_text(log_path), elapsed, verbose)
    finally:
        try:
            drop_scratch(db)
        except RuntimeError as e:
            problems.append(Problem(path, "cleanup", str(e)))
        subprocess.run(["rm", "-rf", workdir])
    return problems


def judge(path, snippets, status, rc, log, elapsed, verbose):
    """Turns the session's status marks into per-snippet results (in document order, with the
    snippets that do not run)."""
    problems = []
    started = {int(l.split()[1]) for l in status if l.startswith("start ")}
    done = {int(l.split()[1]) for l in status if l.startswith("done ")}
    failed = False
    runnable = [s for s in snippets if s.kind in RUNNABLE]
    for s in snippets:
        n = runnable.index(s) if s in runnable else None
        if n is None:
            print("  %-8s %s  %s" % (LABEL[s.kind], s.where(), s.describe()))
        elif n in done:
            print("  ok       %s  %s" % (s.where(), s.describe()))
        elif n in started:
            failed = True
            problems.append(Problem(s.where(), "failed", "%s snippet failed:\n%s" % (
                s.describe(), textwrap.indent(s.text.rstrip("\n"), "    | "))))
            print("  FAILED   %s  %s" % (s.where(), s.describe()))
        else:
            failed = True
            problems.append(Problem(s.where(), "not-reached", "not run: an earlier snippet "
                                    "of %s failed" % path))
            print("  skipped  %s  %s (an earlier snippet failed)" % (s.where(), s.describe()))
    if runnable and not failed and ("end" not in status or rc != 0):
        problems.append(Problem(path, "failed", "after its last snippet: a background command "
                                "failed, or the session ended with status %d (see the log)" % rc))
        failed = True
    if runnable:
        print("  %.1f s" % elapsed)
    if failed or verbose:
        tail = log.splitlines()[-80:]
        print("  ---- session log of %s (last %d lines)" % (path, len(tail)))
        print(textwrap.indent("\n".join(tail), "  | "))
    return problems


def kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ---- small helpers --------------------------------------------------------------------------

def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def read_lines(path):
    return [l.strip() for l in read_text(path).splitlines() if l.strip()]


class Lock:
    """One run of this test at a time on a machine: the docs' dblogd uses fixed ports."""

    def __enter__(self):
        # read-only, so that a lock file another user created serves too
        self.fd = os.open(LOCK_FILE, os.O_RDONLY | os.O_CREAT, 0o644)
        deadline = time.time() + 600
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.time() > deadline:
                    raise RuntimeError("another docs snippet run holds " + LOCK_FILE)
                time.sleep(1)

    def __exit__(self, *exc):
        os.close(self.fd)


# ---- the whole check ------------------------------------------------------------------------

def check(paths, run=True, verbose=False):
    """Parses and (with run) runs the documents; returns every problem."""
    documents, problems = load_documents(paths)
    if not run:
        for snippets in documents.values():
            for s in snippets:
                print("  %-8s %s  %s" % (LABEL.get(s.kind, s.kind or "?"), s.where(),
                                         s.describe() if s.kind else "unannotated"))
        return problems
    if not os.environ.get("DBLOG_TEST_CONNINFO"):
        return problems + [Problem("environment", "no-cluster",
                                   "DBLOG_TEST_CONNINFO is not set: run tests/run.sh, or "
                                   "source tests/cluster.sh && cluster_start first")]
    statically_bad = {p.where.rsplit(":", 1)[0] for p in problems}
    with Lock():
        state = ClusterState()
        try:
            for path, snippets in documents.items():
                print(path)
                if path in statically_bad:
                    print("  not run: fix its annotations first")
                elif any(s.kind in RUNNABLE for s in snippets):
                    problems += run_document(path, snippets, verbose)
                else:
                    judge(path, snippets, [], 0, "", 0, verbose)
        finally:
            problems += state.restore()
    return problems


def default_documents():
    return ["README.md"] + sorted(os.path.relpath(p, ROOT)
                                  for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


# ---- self-test: the runner fails when it should ---------------------------------------------

SELF_TEST_DOCS = {
    # static problems, then a passing and a failing SQL snippet and one never reached
    "sample_static.md": """\
# sample
```sh
echo unannotated
```

<!-- snippet: not run: -->
```
x
```

<!-- snippet: frobnicate -->
```
x
```

<!-- snippet: sql setup=no_such_fixture -->
```sql
SELECT 1;
```

<!-- snippet: covered by .ci/run -->
```sh
./tests/run.sh
./tests/no_such_script.sh
```

<!-- snippet: sql -->
```sh
SELECT 1;
```

<!-- snippet: output -->
text after an annotation that is not a fence
""",
    "sample_sql.md": """\
<!-- snippet: sql -->
```sql
CREATE TABLE t (id int PRIMARY KEY);
SELECT count(*) FROM t;
```

<!-- snippet: sql -->
```sql
SELECT 1;
SELECT no_such_column FROM t;
SELECT 2;
```

<!-- snippet: sql -->
```sql
SELECT 3;
```
""",
    # a flag dblogd does not have; a failing command in the middle of a block
    "sample_sh.md": """\
<!-- snippet: sh timeout=1 -->
```sh
sleep 30
```

<!-- snippet: sh -->
```sh
build/sidecar/dblogd --source "dbname=postgres" --no-such-flag
```
""",
    "sample_pipe.md": """\
<!-- snippet: sh -->
```sh
false | cat
echo not reached
```
""",
    # a long-running command that exits early with an error; a config dblogd refuses
    "sample_timeout.md": """\
<!-- snippet: sh timeout=5 -->
```sh
build/sidecar/dblogd --source "dbname=postgres" --listen 0.0.0.0:1 --consumer a='public.*'
```
""",
    "sample_config.md": """\
<!-- snippet: dblogd-config -->
```ini
source = dbname=postgres
chunk-size = 0
```
""",
    "sample_stderr.md": """\
<!-- snippet: sh timeout=1 -->
```sh
echo "ERROR: broken" >&2; sleep 30
```
""",
}

# (document, line, code) the runner must report; nothing else may be reported
SELF_TEST_EXPECTED = {
    ("sample_static.md", 2, "unannotated"),
    ("sample_static.md", 7, "no-reason"),
    ("sample_static.md", 12, "unknown-kind"),
    ("sample_static.md", 17, "bad-option"),
    ("sample_static.md", 22, "not-covered"),
    ("sample_static.md", 28, "kind-mismatch"),
    ("sample_static.md", 32, "dangling"),
    ("sample_sql.md", 8, "failed"),
    ("sample_sql.md", 15, "not-reached"),
    ("sample_sh.md", 7, "failed"),
    ("sample_pipe.md", 2, "failed"),
    ("sample_timeout.md", 2, "failed"),
    ("sample_config.md", 2, "failed"),
    ("sample_stderr.md", 2, "failed"),
}


def self_test():
    """Runs the checker on small samples with known defects; returns an exit status."""
    tmp = tempfile.mkdtemp(prefix="dblog-docs-selftest-")
    try:
        paths = []
        for name, text in SELF_TEST_DOCS.items():
            write(os.path.join(tmp, name), text)
            paths.append(os.path.join(tmp, name))
        # the expected failures' output only matters when the self-test fails
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            problems = check(paths)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    got = set()
    for p in problems:
        doc, _, line = p.where.rpartition(":")
        got.add((os.path.basename(doc), int(line) if line.isdigit() else 0, p.code))
    missing, unexpected = SELF_TEST_EXPECTED - got, got - SELF_TEST_EXPECTED
    for m in sorted(missing):
        print("self-test: NOT reported: %s:%d %s" % m)
    for u in sorted(unexpected):
        print("self-test: unexpected: %s:%d %s" % u)
    if missing or unexpected:
        print(printed.getvalue())
        for p in problems:
            print("  reported: " + str(p).splitlines()[0])
        print("docs snippets self-test: FAILED")
        return 1
    print("docs snippets self-test: ok (%d defects reported as expected)" % len(got))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("documents", nargs="*", help="markdown files (default README.md docs/*.md)")
    p.add_argument("--list", action="store_true", help="classify only; run nothing")
    p.add_argument("--self-test", action="store_true", help="check that the runner fails")
    p.add_argument("-v", "--verbose", action="store_true", help="print every session's log")
    a = p.parse_args()
    if a.self_test:
        return self_test()
    started = time.time()
    problems = check(a.documents or default_documents(), run=not a.list, verbose=a.verbose)
    for problem in problems:
        print(problem)
    print("docs snippets: %s (%.1f s)" % ("FAILED, %d problem(s)" % len(problems)
                                          if problems else "ok", time.time() - started))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
