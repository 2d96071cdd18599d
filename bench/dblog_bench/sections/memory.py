"""Section memory: dblogd through one transaction of a million rows (its peak RSS), and through
long values: rows of one 10 MB value each, with the values in pieces (dblogd's default
--value-piece-bytes, the bench consumer asking for them) and whole (--value-piece-bytes=0), the
two alternating in each repetition (docs/protocol.md, "Long values")."""
from ..harness import alternated, log, measure_dblogd_stream, sql
from ..workloads import TABLE_DDL, next_marker, row_expr

LONG_ARMS = {"pieces": [], "whole": ["--value-piece-bytes=0"]}


def section_memory(ctx):
    """dblogd through one transaction of N rows (peak RSS); one run per repetition. Then the
    long values (long_values)."""
    a = ctx.args
    n = a.memory_rows
    sql("DROP TABLE IF EXISTS bench.m;" + TABLE_DDL.format(name="bench.m"))
    reps = max(1, min(a.reps_log, 3))
    sql("\n".join(f"SELECT 1 FROM pg_create_logical_replication_slot('dblog_mem_r{r}', 'dblog');"
                  for r in range(reps)))
    sql(f"INSERT INTO bench.m SELECT {row_expr('i')} FROM generate_series(1::bigint, {n}) i;")
    next_marker()
    runs, errors = [], {}
    for rep in range(reps):
        try:
            r = measure_dblogd_stream(ctx, f"mem_r{rep}", f"mem_r{rep}",
                                      [f"--consumer=mem_r{rep}=bench.*", "--bootstrap=false"],
                                      "bench.marker", n)
            log(f"memory: rep {rep}: {r['wall_s']:.2f} s, peak RSS {r['rss_kb'] / 1024:.1f} MB")
            runs.append(r)
        except Exception as e:
            log(f"memory: rep {rep} FAILED: {e}")
            errors["dblogd"] = str(e)
    sql("SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
        " WHERE slot_name LIKE 'dblog\\_mem\\_%' AND NOT active;")
    sql("DROP TABLE bench.m;")
    return {"rows": n, "runs": runs, "errors": errors, "long": long_values(ctx, reps)}


def long_values(ctx, reps):
    """long_rows transactions of one row each whose text value is long_mb MB (stored EXTERNAL:
    uncompressed, so the server's cost is decoding, not decompressing), streamed by dblogd to the
    bench consumer once per arm and repetition from slots made before the rows."""
    a = ctx.args
    rows, size = a.long_rows, a.long_mb * 1024 * 1024
    sql("DROP TABLE IF EXISTS bench.lv; CREATE TABLE bench.lv (id int PRIMARY KEY, v text);"
        " ALTER TABLE bench.lv ALTER COLUMN v SET STORAGE EXTERNAL;")
    names = [f"lv_{arm}_r{rep}" for rep in range(reps) for arm in LONG_ARMS]
    sql("\n".join(f"SELECT 1 FROM pg_create_logical_replication_slot('dblog_{c}', 'dblog');"
                  for c in names))
    # one transaction per row; md5 text so that no two pieces are alike
    sql("\n".join(f"INSERT INTO bench.lv SELECT {i}, string_agg(md5(g::text || '-{i}'), '')"
                  f" FROM generate_series(1, {size // 32}) g;" for i in range(rows)))
    next_marker()
    runs, errors = {arm: [] for arm in LONG_ARMS}, {}
    for rep in range(reps):
        order = alternated(LONG_ARMS, rep)
        for arm in order:
            c = f"lv_{arm}_r{rep}"
            try:
                r = measure_dblogd_stream(ctx, c, c, [f"--consumer={c}=bench.lv,bench.marker",
                                                      "--bootstrap=false"] + LONG_ARMS[arm],
                                          "bench.marker", rows)
                log(f"memory: long values {arm}, rep {rep}: {r['wall_s']:.2f} s, dblogd CPU "
                    f"{r['dblogd_cpu_s']:.2f} s, peak RSS {r['rss_kb'] / 1024:.1f} MB")
                runs[arm].append(r)
            except Exception as e:
                log(f"memory: long values {arm}, rep {rep} FAILED: {e}")
                errors[arm] = str(e)
    sql("SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots"
        " WHERE slot_name LIKE 'dblog\\_lv\\_%' AND NOT active;")
    sql("DROP TABLE bench.lv;")
    return {"rows": rows, "mb": a.long_mb, "runs": runs, "errors": errors}
