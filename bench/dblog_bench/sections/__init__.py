"""The sections of a run, in the order they run; `--only` takes their names. Each module
measures one kind of thing and returns the section's raw data (what report.py renders and the
--json file holds):

  bulk       log throughput, 1M row changes in 3 transactions        (log_throughput.py)
  oltp       log throughput, 100k transactions of 1-5 rows            (log_throughput.py)
  memory     dblogd through one transaction of 1M rows (peak RSS), and (memory.py)
             through long values, in pieces and whole
  latency    commit-to-consumer latency at a fixed rate               (latency.py)
  bootstrap  initial copy of a 5M-row table                           (bootstrap.py)
  repair     whole-table repair of 1M rows under a pgbench-style load (repair.py)
  fanout     four consumers at 200 events/s, steady and with one dead then healed, dblog
             against pg_recvlogical + pgoutput (an independent CDC benchmark's scenarios)
                                                                      (fanout.py)
"""
from . import bootstrap, fanout, latency, log_throughput, memory, repair

RUNNERS = {
    "bulk": lambda ctx: log_throughput.section_log(ctx, "bulk"),
    "oltp": lambda ctx: log_throughput.section_log(ctx, "oltp"),
    "memory": memory.section_memory,
    "latency": latency.section_latency,
    "bootstrap": bootstrap.section_bootstrap,
    "repair": repair.section_repair,
    "fanout": fanout.section_fanout,
}
SECTIONS = list(RUNNERS)


def run(ctx, name):
    """Measures one section; returns its data."""
    return RUNNERS[name](ctx)
