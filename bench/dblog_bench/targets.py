"""The targets the report marks met or missed (issue 7): every threshold, in one place.

A target compares one number from the medians of this run with its limit. `check` returns the
row of the report's Targets table: what the target says, what was measured, "met" or "missed".
The wording takes the limit where it states it as a number ({limit}); where it states it in
words ("about 3×", "at least half"), the words and the limit are side by side here.
"""
import operator


class Target:
    def __init__(self, text, holds, limit, shown):
        self.text = text      # str.format template: {limit} and the names check() is given
        self.holds = holds    # (measured, limit) -> bool: the target is met
        self.limit = limit
        self.shown = shown    # measured -> the text shown in the report

    def check(self, measured, **names):
        return (self.text.format(limit=self.limit, **names), self.shown(measured),
                "met" if self.holds(measured, self.limit) else "missed")


def times(v):
    return f"{v:.2f}×"


# Log throughput: median wall time of dblogd end to end / of the pgoutput SQL peek.
LOG_VS_PGOUTPUT_PEEK = {
    "bulk": Target("bulk: dblogd end to end within {limit}× of pgoutput peek",
                   operator.le, 1.25, times),
    "oltp": Target("oltp: dblogd end to end within {limit}× of pgoutput peek",
                   operator.le, 2.0, times),
}
# Bulk: median wall time of decoderbufs streamed / of dblogd ("about 3×": at least 2.9).
BULK_VS_DECODERBUFS = Target(
    "bulk: about 3× faster than decoderbufs streamed (follows from the above)",
    operator.ge, 2.9, lambda v: f"{v:.2f}× faster")
# Every section that runs dblogd: the highest peak RSS (VmHWM) of its runs, in MB.
PEAK_RSS_MB = Target("{what}: dblogd peak RSS under {limit} MB", operator.lt, 100,
                     lambda v: f"{v:.1f} MB")
# Bootstrap: median wall time with 2 copy workers / of one COPY text ("at least as fast").
BOOTSTRAP_VS_COPY_TEXT = Target("bootstrap: 2 workers at least as fast as one COPY text",
                                operator.le, 1.0, lambda v: f"{v:.2f}× COPY text's time")
# Latency: median p99 of dblogd / of pg_recvlogical with test_decoding.
LATENCY_P99_VS_RECVLOGICAL = Target("latency: p99 within {limit}× of pg_recvlogical's",
                                    operator.le, 1.5, times)
# Repair: its rows/s / the bootstrap's with 2 workers ("at least half").
REPAIR_VS_BOOTSTRAP_RATE = Target(
    "repair ({label}): at least half the bootstrap rate (2 workers)",
    operator.ge, 0.5, lambda v: f"{v:.2f}× the bootstrap rate")
# Repair: the share of the workload's tps lost while the repair runs.
REPAIR_WORKLOAD_COST = Target("repair ({label}): costs the workload at most {limit:.0%} of its tps",
                              operator.le, 0.10, lambda v: f"{v * 100:.0f}%")
