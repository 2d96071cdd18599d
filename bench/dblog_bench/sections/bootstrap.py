"""Section bootstrap: the initial copy of a big table, dblogd with one and two copy workers
(and, with --baseline-dblogd, the older dblogd likewise) against COPY (text, binary) and
pg_dump."""
import os
import time

from ..harness import (baseline_ident, count_output, log, measure_dblogd_stream,
                       measure_process, sql, tool)
from ..workloads import TABLE_DDL, row_expr

def section_bootstrap(ctx):
    a = ctx.args
    n = a.bootstrap_rows
    log(f"bootstrap: loading {n} rows")
    t0 = time.monotonic()
    sql("DROP TABLE IF EXISTS bench.big;" + TABLE_DDL.format(name="bench.big") +
        f"INSERT INTO bench.big SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;"
        " VACUUM ANALYZE bench.big; CHECKPOINT;")
    heap = int(sql("SELECT pg_relation_size('bench.big')"))
    total = int(sql("SELECT pg_total_relation_size('bench.big')"))
    log(f"bootstrap: loaded in {time.monotonic() - t0:.1f} s, heap {heap / 1e6:.0f} MB")
    q = "SELECT * FROM bench.big"
    sizes = {
        "copy_text": count_output([tool("psql"), "-XAtq", "-c", f"COPY ({q}) TO STDOUT"]),
        "copy_binary": count_output([tool("psql"), "-XAtq", "-c",
                                     f"COPY ({q}) TO STDOUT (FORMAT binary)"]),
        "pg_dump": count_output([tool("pg_dump"), "--data-only", "-t", "bench.big",
                                 os.environ["PGDATABASE"]]),
    }
    contenders = [
        ("dblogd_w1", "dblogd bootstrap, --copy-workers=1 → consumer"),
        ("dblogd_w2", "dblogd bootstrap, --copy-workers=2 → consumer"),
    ] + ([
        (f"dblogd_baseline_w{w}", f"dblogd baseline ({baseline_ident(ctx.baseline_dblogd)}) "
         f"bootstrap, --copy-workers={w} → consumer") for w in (1, 2)
    ] if ctx.baseline_dblogd else []) + [
        ("copy_text", "psql \\copy (SELECT * FROM t) TO /dev/null (text)"),
        ("copy_binary", "psql \\copy (SELECT * FROM t) TO /dev/null (FORMAT binary)"),
        ("pg_dump", "pg_dump --data-only -t t > /dev/null"),
    ]
    results = {c[0]: [] for c in contenders}
    errors = {}
    for rep in range(a.reps_bootstrap):
        order = contenders[rep % len(contenders):] + contenders[:rep % len(contenders)]
        for key, _ in order:
            try:
                if key.startswith("dblogd"):
                    workers = key[-1]
                    baseline = key.startswith("dblogd_baseline")
                    name = f"boot_{'base_' if baseline else ''}w{workers}_r{rep}"
                    r = measure_dblogd_stream(
                        ctx, name, name, [f"--consumer={name}=bench.big",
                                          f"--copy-workers={workers}"], "bootstrap", n,
                        baseline=baseline)
                    sql(f"SELECT count(pg_drop_replication_slot(slot_name)) FROM "
                        f"pg_replication_slots WHERE slot_name = 'dblog_{name}' AND NOT active;"
                        f" DELETE FROM dblog.consumers WHERE name = '{name}';")
                elif key == "pg_dump":
                    r = measure_process(ctx, [tool("pg_dump"), "--data-only", "-t", "bench.big",
                                              "-f", "/dev/null", os.environ["PGDATABASE"]])
                    r["out_bytes"] = sizes[key]
                else:
                    fmt = " (FORMAT binary)" if key == "copy_binary" else ""
                    r = measure_process(ctx, [tool("psql"), "-XAtq", "-c",
                                              f"\\copy ({q}) TO '/dev/null'{fmt}"])
                    r["out_bytes"] = sizes[key]
            except Exception as e:
                log(f"bootstrap: rep {rep} {key} FAILED: {e}")
                errors.setdefault(key, str(e))
                continue
            log(f"bootstrap: rep {rep} {key}: {r['wall_s']:.2f} s, server CPU "
                f"{r['server_cpu_s']:.2f} s, client CPU {r['client_cpu_s']:.2f} s"
                + (f", RSS {r['rss_kb'] / 1024:.0f} MB" if "rss_kb" in r else ""))
            results[key].append(r)
    return {"rows": n, "heap_bytes": heap, "total_bytes": total, "results": results,
            "errors": errors, "contenders": contenders}
