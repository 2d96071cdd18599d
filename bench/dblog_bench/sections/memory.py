"""Section memory: dblogd through one transaction of a million rows (its peak RSS)."""
from ..harness import log, measure_dblogd_stream, sql
from ..workloads import TABLE_DDL, next_marker, row_expr

def section_memory(ctx):
    """dblogd through one transaction of N rows (peak RSS); one run per repetition."""
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
    return {"rows": n, "runs": runs, "errors": errors}
