"""The report: the markdown tables of a run's medians (min–max), the ratios to the anchors, the
current dblogd against a baseline dblogd when the run has one (--baseline-dblogd), and the table
of targets met or missed (their thresholds are in targets.py). Rendered from the
sections' data alone, so that --rerender gives the same text from a saved --json file."""
import statistics

from . import targets as T


def med(values):
    return statistics.median(values) if values else None


def fmt_range(values, digits=2):
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{med(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def fmt_num(v, digits=0):
    if v is None:
        return "—"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


def report_vs_baseline(out, results, pairs):
    """The same-run ratios current / baseline dblogd for (label, current key, baseline key) pairs
    whose both sides have runs: ratio of the medians, and in parentheses the range of the ratios
    of the runs of one repetition (paired in order when neither side lost a run)."""
    pairs = [p for p in pairs if results.get(p[1]) and results.get(p[2])]
    if not pairs:
        return
    cols = [("wall time", lambda r: r["wall_s"]), ("dblogd CPU", lambda r: r["dblogd_cpu_s"]),
            ("dblogd peak RSS", lambda r: r["rss_kb"])]
    out.append("Current dblogd / baseline dblogd, same run (ratio of the medians, and min–max of "
               "the ratios within one repetition; below 1 means the current one is faster or "
               "smaller):")
    out.append("")
    out.append("| | " + " | ".join(c[0] for c in cols) + " |")
    out.append("|---|" + "---|" * len(cols))
    for label, cur_key, base_key in pairs:
        cur, base = results[cur_key], results[base_key]
        cells = []
        for _, get in cols:
            cell = ratio(med([get(r) for r in cur]), med([get(r) for r in base]))
            if len(cur) == len(base) > 1 and all(get(b) for b in base):
                paired = [get(c) / get(b) for c, b in zip(cur, base)]
                cell += f" ({min(paired):.2f}–{max(paired):.2f})"
            cells.append(cell)
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")


def peak_rss(runs, what):
    """The peak-RSS target's row for the dblogd runs of one section."""
    return T.PEAK_RSS_MB.check(max(r["rss_kb"] for r in runs) / 1024, what=what)


def report_log(w):
    """Markdown for one log-throughput workload."""
    res, n = w["results"], w["changes"]
    lines = []
    lines.append("| contender | wall s, median (min–max) | changes/s | output MB | output MB/s "
                 "| plugin msgs | server CPU s | client CPU s | dblogd peak RSS MB "
                 "| others' load, cores |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    walls = {}
    peek_msgs = None
    if res.get("dblog_peek"):
        peek_msgs = res["dblog_peek"][0].get("messages")
    for key, label, _, kind, _ in w["contenders"]:
        runs = res.get(key, [])
        if not runs:
            err = w["errors"].get(key, "no runs")
            lines.append(f"| {label} | FAILED: {err[:160]} | | | | | | | | |")
            continue
        wall = [r["wall_s"] for r in runs]
        walls[key] = med(wall)
        out = med([r["out_bytes"] for r in runs if r.get("out_bytes") is not None])
        msgs = runs[0].get("messages", peek_msgs if kind == "dblogd" else None)
        client = fmt_range([r["client_cpu_s"] for r in runs])
        if kind == "dblogd":
            client += (f" (dblogd {med([r['dblogd_cpu_s'] for r in runs]):.2f}, consumer "
                       f"{med([r['consumer_cpu_s'] for r in runs]):.2f})")
        rss = fmt_num(med([r["rss_kb"] / 1024 for r in runs]), 1) if kind == "dblogd" else ""
        lines.append(
            f"| {label} | {fmt_range(wall)} | {fmt_num(n / walls[key])} | "
            f"{fmt_num(out / 1e6 if out else None, 1)} | "
            f"{fmt_num(out / 1e6 / walls[key] if out else None, 1)} | {fmt_num(msgs)} | "
            f"{fmt_range([r['server_cpu_s'] for r in runs])} | {client} | {rss} | "
            f"{fmt_range([r['others_load'] for r in runs], 1)} |")
    lines.append("")
    anchors = [("pgoutput_peek", "pgoutput peek"), ("pgoutput_stream", "pgoutput streamed"),
               ("test_decoding", "test_decoding"), ("decoderbufs", "decoderbufs"),
               ("wal2json", "wal2json v2"), ("decode_floor", "decode floor")]
    lines.append("Wall-time ratios (median dblog / median anchor; below 1 means dblog is faster; "
                 "the decode floor is the limit, nothing streams the log faster):")
    lines.append("")
    lines.append("| | " + " | ".join(a[1] for a in anchors) + " |")
    lines.append("|---|" + "---|" * len(anchors))
    rows = [("dblogd", "dblogd → consumer"), ("dblog_peek", "dblog plugin peek")]
    if any(c[0] == "dblogd_baseline" for c in w["contenders"]):
        rows.insert(1, ("dblogd_baseline", "dblogd baseline → consumer"))
    if any(c[0] == "dblogd_pgoutput" for c in w["contenders"]):
        rows.insert(1, ("dblogd_pgoutput", "dblogd pgoutput mode → consumer"))
    for key, label in rows:
        lines.append(f"| {label} | " + " | ".join(ratio(walls.get(key), walls.get(a[0]))
                                                   for a in anchors) + " |")
    return "\n".join(lines), walls


def report_log_section(out, targets, w, d, oltp_tx):
    """Section 1a (bulk) or 1b (oltp)."""
    title = {"bulk": f"### 1a. Log throughput, bulk: {d['changes']:,} row changes in 3 "
                     f"transactions ({d['wal_bytes'] / 1e6:.0f} MB of WAL)",
             "oltp": f"### 1b. Log throughput, OLTP: {oltp_tx:,} transactions of 1–5 rows"
                     f" ({d['changes']:,} row changes, {d['wal_bytes'] / 1e6:.0f} MB of WAL)"
             }[w]
    out.append(title)
    out.append("")
    out.append(f"{len(d['results'].get('dblogd', []))} repetition(s) per contender.")
    out.append("")
    text, walls = report_log(d)
    out.append(text)
    out.append("")
    report_vs_baseline(out, d["results"], [("dblogd → consumer", "dblogd", "dblogd_baseline")])
    if d["results"].get("dblogd_pgoutput") and d["results"].get("dblogd"):
        # issue 23's target: pgoutput mode at most 1.3x the extension mode's wall time
        out.append("")
        out.append("pgoutput mode / extension mode, same run (wall time, dblogd CPU): " +
                   ratio(med([r["wall_s"] for r in d["results"]["dblogd_pgoutput"]]),
                         med([r["wall_s"] for r in d["results"]["dblogd"]])) + ", " +
                   ratio(med([r["dblogd_cpu_s"] for r in d["results"]["dblogd_pgoutput"]]),
                         med([r["dblogd_cpu_s"] for r in d["results"]["dblogd"]])) + ".")
    if walls.get("dblogd") and walls.get("pgoutput_peek"):
        targets.append(T.LOG_VS_PGOUTPUT_PEEK[w].check(walls["dblogd"] / walls["pgoutput_peek"]))
    if w == "bulk" and walls.get("dblogd") and walls.get("decoderbufs"):
        targets.append(T.BULK_VS_DECODERBUFS.check(walls["decoderbufs"] / walls["dblogd"]))
    if d["results"].get("dblogd"):
        targets.append(peak_rss(d["results"]["dblogd"], w))


def report_bootstrap(out, targets, d):
    """Section 2."""
    out.append(f"### 2. Bootstrap: {d['rows']:,} rows, heap {d['heap_bytes'] / 1e6:.0f} MB "
               f"({d['total_bytes'] / 1e6:.0f} MB with its index)")
    out.append("")
    out.append("| contender | wall s, median (min–max) | rows/s | heap MB/s | output MB "
               "| output MB/s | server CPU s | client CPU s | dblogd peak RSS MB "
               "| others' load, cores |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    walls = {}
    for key, label in d["contenders"]:
        runs = d["results"].get(key, [])
        if not runs:
            out.append(f"| {label} | FAILED: {d['errors'].get(key, 'no runs')[:160]} "
                       "| | | | | | | | |")
            continue
        wall = [r["wall_s"] for r in runs]
        m = walls[key] = med(wall)
        ob = med([r["out_bytes"] for r in runs if r.get("out_bytes") is not None])
        client = fmt_range([r["client_cpu_s"] for r in runs])
        rss = ""
        if key.startswith("dblogd"):
            client += (f" (dblogd {med([r['dblogd_cpu_s'] for r in runs]):.2f}, consumer "
                       f"{med([r['consumer_cpu_s'] for r in runs]):.2f})")
            rss = fmt_num(med([r["rss_kb"] / 1024 for r in runs]), 1)
        out.append(f"| {label} | {fmt_range(wall)} | {fmt_num(d['rows'] / m)} | "
                   f"{fmt_num(d['heap_bytes'] / 1e6 / m, 1)} | "
                   f"{fmt_num(ob / 1e6 if ob else None, 1)} | "
                   f"{fmt_num(ob / 1e6 / m if ob else None, 1)} | "
                   f"{fmt_range([r['server_cpu_s'] for r in runs])} | {client} | {rss} | "
                   f"{fmt_range([r['others_load'] for r in runs], 1)} |")
    out.append("")
    anchors = [("copy_text", "COPY text"), ("copy_binary", "COPY binary"),
               ("pg_dump", "pg_dump")]
    out.append("Wall-time ratios (median dblogd / median anchor; below 1 means dblogd is "
               "faster):")
    out.append("")
    out.append("| | " + " | ".join(x[1] for x in anchors) + " |")
    out.append("|---|" + "---|" * len(anchors))
    keys = ["dblogd_w1", "dblogd_w2"]
    baseline = [f"dblogd_baseline_w{w}" for w in (1, 2)]
    if any(c[0] in baseline for c in d["contenders"]):
        keys += baseline
    for key in keys:
        out.append(f"| {key.replace('_baseline', ' baseline').replace('_w', ', workers=')} | " +
                   " | ".join(ratio(walls.get(key), walls.get(x[0])) for x in anchors) + " |")
    out.append("")
    report_vs_baseline(out, d["results"], [(f"bootstrap, workers={w}", f"dblogd_w{w}",
                                            f"dblogd_baseline_w{w}") for w in (1, 2)])
    if walls.get("dblogd_w2") and walls.get("copy_text"):
        targets.append(T.BOOTSTRAP_VS_COPY_TEXT.check(walls["dblogd_w2"] / walls["copy_text"]))
    for key in ("dblogd_w1", "dblogd_w2"):
        if d["results"].get(key):
            targets.append(peak_rss(d["results"][key], f"bootstrap ({key[-2:]})"))


def report_memory(out, targets, d):
    """Section 3."""
    out.append(f"### 3. Memory: dblogd through one transaction of {d['rows']:,} rows")
    out.append("")
    out.append("| | wall s | peak RSS MB (VmHWM) | dblogd CPU s | server CPU s |")
    out.append("|---|---|---|---|---|")
    if d["runs"]:
        runs = d["runs"]
        out.append(f"| dblogd → consumer | {fmt_range([r['wall_s'] for r in runs])} | "
                   f"{fmt_range([r['rss_kb'] / 1024 for r in runs], 1)} | "
                   f"{fmt_range([r['dblogd_cpu_s'] for r in runs])} | "
                   f"{fmt_range([r['server_cpu_s'] for r in runs])} |")
        targets.append(peak_rss(runs, "one 1M-row transaction"))
    else:
        out.append(f"| dblogd → consumer | FAILED: {d['errors'].get('dblogd', '')[:160]} "
                   "| | | |")
    out.append("")
    out.append("Peak RSS of dblogd in the other sections is in their tables.")
    out.append("")
    if d.get("long"):
        report_long_values(out, d["long"])


def report_long_values(out, d):
    """Section 3's long values: in pieces against whole, same run."""
    out.append(f"#### Long values: {d['rows']} transactions of one {d['mb']} MB text value each")
    out.append("")
    out.append("| values | wall s | dblogd CPU s | peak RSS MB (VmHWM) | server CPU s |")
    out.append("|---|---|---|---|---|")
    labels = {"pieces": "in pieces (`--value-piece-bytes` default)",
              "whole": "whole (`--value-piece-bytes=0`)"}
    runs = d["runs"]
    for arm, label in labels.items():
        rs = runs.get(arm) or []
        if rs:
            out.append(f"| {label} | {fmt_range([r['wall_s'] for r in rs])} | "
                       f"{fmt_range([r['dblogd_cpu_s'] for r in rs])} | "
                       f"{fmt_range([r['rss_kb'] / 1024 for r in rs], 1)} | "
                       f"{fmt_range([r['server_cpu_s'] for r in rs])} |")
        else:
            out.append(f"| {label} | FAILED: {d['errors'].get(arm, '')[:160]} | | | |")
    pieces, whole = runs.get("pieces") or [], runs.get("whole") or []
    if pieces and whole:
        cells = []
        for get in (lambda r: r["wall_s"], lambda r: r["dblogd_cpu_s"], lambda r: r["rss_kb"],
                    lambda r: r["server_cpu_s"]):
            cell = ratio(med([get(r) for r in pieces]), med([get(r) for r in whole]))
            if len(pieces) == len(whole) > 1 and all(get(r) for r in whole):
                paired = [get(p) / get(w) for p, w in zip(pieces, whole)]
                cell += f" ({min(paired):.2f}–{max(paired):.2f})"
            cells.append(cell)
        out.append(f"| pieces / whole | {' | '.join(cells)} |")
    out.append("")


def report_latency(out, targets, d):
    """Section 4."""
    out.append(f"### 4. Latency: single-row transactions at {d['rate']}/s for "
               f"{d['seconds']} s, commit time to the consumer holding the Commit")
    out.append("")
    out.append("| contender | transactions | p50 ms | p99 ms | max ms |")
    out.append("|---|---|---|---|---|")
    p99 = {}
    for key, label in [("dblogd", "dblogd → consumer"),
                       ("test_decoding", "pg_recvlogical test_decoding → pipe")]:
        runs = d["results"][key]
        if not runs:
            out.append(f"| {label} | FAILED: {d['errors'].get(key, '')[:160]} | | | |")
            continue
        p99[key] = med([r["p99_ms"] for r in runs])
        out.append(f"| {label} | {fmt_num(med([r['n'] for r in runs]))} | "
                   f"{fmt_range([r['p50_ms'] for r in runs])} | "
                   f"{fmt_range([r['p99_ms'] for r in runs])} | "
                   f"{fmt_range([r['max_ms'] for r in runs])} |")
    out.append("")
    if p99.get("dblogd") and p99.get("test_decoding"):
        targets.append(T.LATENCY_P99_VS_RECVLOGICAL.check(p99["dblogd"] / p99["test_decoding"]))


def report_repair(out, targets, d, bootstrap, repair_chunk_size):
    """Section 5; bootstrap: the bootstrap section's data (its rate is a target's yardstick)."""
    out.append(f"### 5. Repair: whole table of {d['rows']:,} rows under a pgbench-style "
               "update load (2 clients)")
    out.append("")
    out.append("| | repair s | repair rows/s | chunks | workload tps without repair "
               "| workload tps during repair | workload cost | workload latency ms, without "
               "→ during | dblogd peak RSS MB |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    # dblogd's windows start at --chunk-size and grow up to --max-chunk-size (32000 by default);
    # --chunk-size given alone keeps them at that size
    chunk = (f"`--chunk-size` {repair_chunk_size} (fixed)" if repair_chunk_size
             else "windows of 2000 growing to 32000 rows")

    def repair_row(label, runs, loaded=True):
        if not runs:
            return None
        cost = [1 - r["tps_with"] / r["tps_without"] for r in runs if r["tps_without"]]
        load_cols = (f"{fmt_range([r['tps_without'] for r in runs], 0)} | "
                     f"{fmt_range([r['tps_with'] for r in runs], 0)} | "
                     f"{med(cost) * 100:.0f}% | "
                     f"{med([r['lat_without_ms'] for r in runs]):.2f} → "
                     f"{med([r['lat_with_ms'] for r in runs]):.2f}") if loaded else " | | "
        out.append(f"| {label} | {fmt_range([r['duration_s'] for r in runs])} | "
                   f"{fmt_num(med([r['rows_per_s'] for r in runs]))} | "
                   f"{fmt_num(med([r['chunks'] for r in runs]))} | {load_cols} | "
                   f"{fmt_num(med([r['rss_kb'] / 1024 for r in runs]), 1)} |")
        return med(cost) if loaded else None

    repair_row(f"{chunk}, no load", d.get("idle", []), loaded=False)
    cost_full = repair_row(f"{chunk}, workload unthrottled", d.get("runs", []))
    cost_rate = repair_row(f"{chunk}, workload at {fmt_num(d.get('fixed_rate'))}"
                           " tps (half its unthrottled rate)", d.get("rate_runs", []))
    cost_paced = repair_row(f"{chunk}, `--repair-rows-per-second` "
                            f"{fmt_num(d.get('cap'))}, workload unthrottled",
                            d.get("paced_runs", []))
    for kind, msg in sorted(d.get("errors", {}).items()):
        out.append(f"| {kind} | FAILED: {msg[:160]} | | | | | | | |")
    out.append("")
    boot = (bootstrap or {}).get("results", {}).get("dblogd_w2")
    brate = (bootstrap["rows"] / med([r["wall_s"] for r in boot])) if boot else None
    for label, runs, cost in (("unthrottled workload", d.get("runs", []), cost_full),
                              ("workload at a fixed rate", d.get("rate_runs", []), cost_rate),
                              ("unthrottled workload, paced repair", d.get("paced_runs", []),
                               cost_paced)):
        if not runs:
            continue
        rate = med([r["rows_per_s"] for r in runs])
        if brate:
            targets.append(T.REPAIR_VS_BOOTSTRAP_RATE.check(rate / brate, label=label))
        targets.append(T.REPAIR_WORKLOAD_COST.check(cost, label=label))
    all_runs = d.get("runs", []) + d.get("rate_runs", []) + d.get("paced_runs", [])
    if all_runs:
        targets.append(peak_rss(all_runs, "repair"))
    out.append("Repair s: from the request (`dblog.repair(...)`) to the consumer holding the "
               "last chunk. Workload tps and mean latency from pgbench's per-second progress "
               "(`-P 1 --progress-timestamp`), each second weighted by how much of it lies "
               "outside the repair (before the request, after the end; first 2 s excluded) "
               "or inside it. dblogd streams the workload's changes to the consumer "
               "throughout. The fixed rate is half the tps the unthrottled workload reached "
               "in this run's first loaded run; the pace is a quarter of the unloaded "
               "repair's rate in its first run.")
    out.append("")


def report_fanout(out, d):
    """Section 6: fanout's two scenarios, beside the figures published for them."""
    from .sections.fanout import PUBLISHED, PUBLISHED_HOST, PHASES, DRAIN_S, phase_s
    scale = d["scale"]

    def length(scenario):
        lengths = [(name, phase_s(secs, scale)) for name, secs in PHASES[scenario]]
        return " + ".join(f"{s / 60:.1f} min {name}" if s >= 60 else f"{s:.0f} s {name}"
                          for name, s in lengths)

    def rng(runs, key):  # fmt_range of a number a run may lack
        values = [r.get(key) for r in runs]
        return "—" if any(v is None for v in values) else fmt_range(values)

    def verdict(runs):
        lost = sum(r["lost"] for r in runs)
        late = "" if all(r.get("drained", True) for r in runs) else " (not drained in time)"
        return (f"{lost}{late} / {sum(r['dup'] for r in runs)} / "
                f"{sum(r['reordered'] for r in runs)}")

    def fmt(v, digits=1, unit=""):
        return "—" if v is None else f"{v:,.{digits}f}{unit}"

    def mdn(runs, key):  # the median of a number some runs may lack (None)
        return med([r[key] for r in runs if r.get(key) is not None])

    labels = {"dblog": "dblog (dblogd, 4 consumers over TCP)",
              "pgoutput": "pg_recvlogical pgoutput ×4 → pipe"}

    def converged(runs):
        return "yes" if all(r["converged"] for r in runs) else "NO"

    def rss(runs):
        return f"{fmt_num(med([r['sut_rss_mb'] for r in runs]), 1)} MB"

    def arm_rows(scenario, columns, cells):
        """One row per arm: its label and cells(runs), or FAILED and the error."""
        for arm in ("dblog", "pgoutput"):
            runs = d["results"].get(f"{scenario}/{arm}", [])
            if runs:
                out.append(f"| {labels[arm]} | " + " | ".join(cells(runs)) + " |")
            else:
                err = " ".join(d["errors"].get(f"{scenario}/{arm}", "").split())
                err = err[:160].replace("|", "\\|")
                out.append(f"| {labels[arm]} | FAILED: {err} |" + " |" * (columns - 2))
    out.append(f"### 6. Fan-out: {d['consumers']} consumers at {d['rate']:.0f} events/s, "
               f"slot per consumer (an independent CDC benchmark's scenarios at {scale:g}× "
               "their length)")
    out.append("")
    out.append(f"fanout_steady: {length('fanout_steady')}.")
    out.append("")
    out.append("| arm | worst-consumer median rolling p99 | median delivery rate / consumer "
               "| lost / dup / reordered (all consumers) | final state converged "
               "| system under test peak RSS |")
    out.append("|---|---|---|---|---|---|")
    arm_rows("fanout_steady", 6, lambda runs: [
        f"{rng(runs, 'worst_p99_clean_ms')} ms",
        f"{fmt_num(med([r['clean_rate'] for r in runs]))}/s",
        verdict(runs), converged(runs), rss(runs)])
    out.append("")
    out.append(f"dead_consumer: {length('dead_consumer')}; consumer 1 killed for the outage, "
               "restarted at the heal.")
    out.append("")
    out.append("| arm | worst-consumer p99, clean | healthy consumers' worst p99, outage "
               "| dead slot's WAL, clean → peak | backlog | catch-up | replay rate "
               "| lost / dup / reordered | converged | system under test peak RSS |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    arm_rows("dead_consumer", 10, lambda runs: [
        f"{rng(runs, 'worst_p99_clean_ms')} ms",
        f"{rng(runs, 'healthy_worst_p99_outage_ms')} ms",
        f"{fmt(mdn(runs, 'slot_wal_clean_mb'))} → {fmt(mdn(runs, 'slot_wal_dead_mb'))} MB",
        f"{fmt_num(med([r['backlog'] for r in runs]))} events",
        fmt(mdn(runs, 'catchup_s'), 2, ' s'),
        f"{fmt_num(mdn(runs, 'replay_per_s'))}/s",
        verdict(runs), converged(runs), rss(runs)])
    out.append("")
    out.append("Latency: from the writer's clock before the write (`emitted_us`, in the row) to "
               "the receiver holding the transaction's Commit; DELETEs carry no timestamp and "
               "are left out. Rolling p99: over 30 s windows one second apart, the median of "
               "their p99s; the worst of the four consumers (the dead one before its outage). "
               "Backlog: the changes a healthy consumer had before the dead one was restarted and "
               "the restarted one got after; catch-up: from the restart (the process started) "
               "to the restarted consumer holding all of them; replay rate: the backlog over "
               "the catch-up. Lost, dup, reordered: "
               "each consumer's log against the writer's ledger (a change never received, "
               "received twice, or received after a later change of its key); converged: "
               "replaying each log gives the table's final state. Slot WAL: "
               "`pg_current_wal_lsn() - restart_lsn` of the slot of consumer 1, sampled each "
               "second (pg_recvlogical runs with `-s 1 -F 1`: it confirms its position each "
               "second, where dblogd confirms within 100 ms of an acknowledgement). Peak RSS: "
               "dblogd; the four pg_recvlogical (the receivers are the harness, not counted). "
               f"Drain after the load: up to {max(30, DRAIN_S * scale):.0f} s.")
    out.append("")
    out.append(f"Published for the same scenarios at full length ({PUBLISHED_HOST}):")
    out.append("")
    out.append("| system | steady worst-consumer p99 ms | dead slot's WAL, clean → peak MB "
               "| catch-up (peak replay) | lost / dup / reordered | summed RSS peaks MB |")
    out.append("|---|---|---|---|---|---|")
    for row in PUBLISHED:
        out.append("| " + " | ".join(row) + " |")
    out.append("")


def report(ctx, data, mach):
    a = ctx.args
    out = []
    out.append(f"Machine: {mach['nproc']} CPUs ({mach['cpu']}), {mach['ram_gb']:.1f} GB RAM, "
               f"PostgreSQL {mach['pg']}, Linux {mach['kernel']}; dblog {mach['commit']}; "
               f"{mach['date']}; load average before the run {mach['load_before']}.")
    out.append("")
    targets = []
    for w in ("bulk", "oltp"):
        if w in data:
            report_log_section(out, targets, w, data[w], a.oltp_tx)
    if "bootstrap" in data:
        report_bootstrap(out, targets, data["bootstrap"])
    if "memory" in data:
        report_memory(out, targets, data["memory"])
    if "latency" in data:
        report_latency(out, targets, data["latency"])
    if "repair" in data:
        report_repair(out, targets, data["repair"], data.get("bootstrap"), a.repair_chunk_size)
    if "fanout" in data:
        report_fanout(out, data["fanout"])
    if targets:
        out.append("### Targets (issue 7), from the medians above")
        out.append("")
        out.append("| target | measured | |")
        out.append("|---|---|---|")
        for t in targets:
            out.append(f"| {t[0]} | {t[1]} | {t[2]} |")
        out.append("")
    return "\n".join(out)
