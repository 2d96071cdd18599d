"""Sections bulk and oltp: log throughput. Every contender (dblogd end to end, the dblog plugin
and pgoutput through SQL peeks, pg_recvlogical with pgoutput, test_decoding, decoderbufs and
wal2json; with --baseline-dblogd, an older dblogd end to end too) consumes the same WAL from its
own slot, the order rotating over the repetitions."""
import os
import time

from ..harness import (baseline_ident, log, measure_dblogd_stream, measure_peek,
                       measure_process, sql, tool)
from ..workloads import OLTP_PROC, TABLE_DDL, gen_bulk, gen_oltp, next_marker, row_expr

# Log throughput contenders: (key, label, plugin, kind, plugin options)
PUB_OPTS = [("proto_version", "1"), ("publication_names", "bench_pub")]
LOG_CONTENDERS = [
    ("dblogd", "dblogd → TCP consumer (parses every frame, acks when caught up)", "dblog", "dblogd",
     []),
    ("dblogd_pgoutput", "dblogd --source-plugin pgoutput → TCP consumer (same consumer)",
     "pgoutput", "dblogd", []),
    ("dblog_peek", "dblog plugin, SQL peek (binary)", "dblog", "peek",
     [("include_tables", "bench.*")]),
    ("pgoutput_peek", "pgoutput (binary, proto 1), SQL peek", "pgoutput", "peek", PUB_OPTS),
    ("pgoutput_stream", "pg_recvlogical pgoutput (proto 1) → /dev/null", "pgoutput", "recv",
     PUB_OPTS),
    ("test_decoding", "pg_recvlogical test_decoding → /dev/null", "test_decoding", "recv", []),
    ("decoderbufs", "pg_recvlogical decoderbufs → /dev/null", "decoderbufs", "recv", []),
    ("wal2json", "pg_recvlogical wal2json format 2 → /dev/null", "wal2json", "recv",
     [("format-version", "2")]),
    # The decode floor: PostgreSQL decodes every change (WAL read, reorder buffer, tuples
    # rebuilt, the relation looked up) and wal2json drops it before formatting anything; no
    # output, read through a SQL peek (no walsender, no client). No plugin's peek can be faster
    # on this server, and a stream adds its transport to that.
    ("decode_floor", "decode floor: wal2json, every change filtered before formatting, SQL peek",
     "wal2json", "peek", [("format-version", "2"), ("filter-tables", "bench.*"),
                          ("include-transaction", "false")]),
]
BINARY_PLUGINS = {"dblog", "pgoutput", "decoderbufs"}
# With --baseline-dblogd: the older dblogd, measured as dblogd is, right after it in the list.
BASELINE_KEY = "dblogd_baseline"


def baseline_contender(ctx):
    return (BASELINE_KEY, f"dblogd baseline ({baseline_ident(ctx.baseline_dblogd)}) → TCP "
            "consumer", "dblog", "dblogd", [])


def log_contenders(ctx):
    """The contenders of this run: LOG_CONTENDERS, the baseline after dblogd if there is one,
    those --contenders names if given."""
    contenders = list(LOG_CONTENDERS)
    if ctx.baseline_dblogd:
        contenders.insert(1, baseline_contender(ctx))
    if ctx.args.contenders:
        keep = ctx.args.contenders.split(",")
        contenders = [c for c in contenders if c[0] in keep]
    return contenders


def consumer_name(workload, key, rep):
    """The dblog consumer a dblogd contender serves (its slot is dblog_<consumer>)."""
    if key == BASELINE_KEY:
        return f"{workload}_base_r{rep}"
    if key == PGOUTPUT_KEY:
        return f"{workload}_po_r{rep}"
    return f"{workload}_r{rep}"


# dblogd in pgoutput mode: its slot is made here like the others (so that it reads the same
# WAL), after the publication dblogd would make, FOR TABLE of every table of the scope bench.*.
PGOUTPUT_KEY = "dblogd_pgoutput"


def slot_name(workload, key, rep):
    if key in ("dblogd", BASELINE_KEY, PGOUTPUT_KEY):
        return f"dblog_{consumer_name(workload, key, rep)}"
    return f"b_{workload}_{key}_r{rep}"

def run_log_workload(ctx, workload, reps, generate, expect_check=True):
    """Creates one slot per contender and repetition, generates the workload once, then lets
    every contender consume its own slots, rotating the order each repetition."""
    contenders = log_contenders(ctx)
    stmts = []
    bench_tables = sql("SELECT string_agg(format('%I.%I', schemaname, tablename), ', ') "
                       "FROM pg_tables WHERE schemaname = 'bench'")
    for rep in range(reps):
        for key, _, plugin, _, _ in contenders:
            if key == PGOUTPUT_KEY:
                pub = slot_name(workload, key, rep)
                stmts.append(f"DROP PUBLICATION IF EXISTS {pub}; "
                             f"CREATE PUBLICATION {pub} FOR TABLE {bench_tables};")
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
                    name = consumer_name(workload, key, rep)
                    r = measure_dblogd_stream(
                        ctx, name, name,
                        # named by --consumer: an unnamed consumer's series are dropped
                        # when it disconnects, before its output bytes are read
                        [f"--consumer={name}=bench.*", "--bootstrap=false",
                         "--status-interval=1"]
                        + (["--source-plugin=pgoutput"] if key == PGOUTPUT_KEY else []),
                        "bench.marker", changes if expect_check else None,
                        baseline=key == BASELINE_KEY)
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
    if any(c[0] == PGOUTPUT_KEY for c in contenders):
        sql("".join(f"DROP PUBLICATION IF EXISTS {slot_name(workload, PGOUTPUT_KEY, rep)};"
                    for rep in range(reps)))
    return {"workload": workload, "changes": changes, "generate_s": gen_s, "wal_bytes": wal_bytes,
            "results": results, "errors": errors, "contenders": contenders}

def section_log(ctx, name):
    a = ctx.args
    if name == "bulk":
        sql("DROP TABLE IF EXISTS bench.t;" + TABLE_DDL.format(name="bench.t"))
        return run_log_workload(ctx, "bulk", a.reps_log, gen_bulk(a.bulk_changes))
    sql(f"DROP TABLE IF EXISTS bench.o;{TABLE_DDL.format(name='bench.o')}"
        f" INSERT INTO bench.o SELECT {row_expr('i')} FROM generate_series(1::bigint, {a.oltp_pre}) i;"
        f" VACUUM ANALYZE bench.o; CHECKPOINT;" + OLTP_PROC)
    return run_log_workload(ctx, "oltp", a.reps_log, gen_oltp(a.oltp_tx, a.oltp_pre))
