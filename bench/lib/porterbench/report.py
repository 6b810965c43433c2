"""Aggregation over repetitions, the Markdown report and the targets."""

from .common import NONE_WITHIN_RUN, ratio, summarize
from .servers import MODE_BY_ID, MODES

# (metric key, column header, lower is better)
COLUMNS = {
    "S1": [
        ("hot_alone_req_s", "hot alone req/s", False),
        ("hot_load_req_s", "hot under load req/s", False),
        ("hot_ratio", "under load ÷ alone", False),
        ("hot_load_mean_ms", "hot mean ms", True),
        ("hot_alone_p99_ms", "hot alone p99 ms", True),
        ("hot_load_p99_ms", "hot p99 ms", True),
        ("hot_p99_ratio", "p99 under load ÷ alone", True),
        ("hot_load_p999_ms", "hot p999 ms", True),
        ("cold_req_s", "cold req/s", False),
        ("cold_mb_s", "cold MB/s", False),
        ("cold_p99_ms", "cold p99 ms", True),
        ("cold_of_throttle", "cold MB/s ÷ throttle", False),
        ("disk_mb_s", "disk MB/s", False),
        ("disk_iops", "disk reads/s", False),
        ("disk_read_kib", "disk average read KiB", False),
        ("mem_peak_mib", "mem peak MiB", True),
        ("server_cpu_s", "server CPU s", True),
        ("other_cpu_cores", "other CPU (cores)", True),
        ("loop_busy_max_alone_ms", "porter loop busy max ms, hot alone", True),
        ("loop_busy_max_ms", "porter loop busy max ms", True),
        ("loop_poll_max_ms", "porter loop poll max ms", True),
        ("loop_lag_max_ms", "porter loop lag max ms", True),
        ("loop_blocked_max_ms", "porter loop blocked max ms", True),
        ("loop_blocked_ms", "porter loop blocked ms in all", True),
        ("bulk_allowed", "porter bulk gate at end", False),
        ("loop_over_100ms", "porter loop iterations > 100 ms", True),
    ],
    "S2": [
        ("hot_alone_p99_ms", "hot alone p99 ms", True),
        ("hot_load_p99_ms", "hot under load p99 ms", True),
        ("hot_p99_ratio", "p99 under load ÷ alone", True),
        ("hot_load_p999_ms", "hot under load p999 ms", True),
        ("hot_load_mean_ms", "hot mean ms", True),
        ("hot_alone_req_s", "hot alone req/s", False),
        ("hot_load_req_s", "hot under load req/s", False),
        ("hot_ratio", "under load ÷ alone", False),
        ("cold_req_s", "cold req/s", False),
        ("cold_mb_s", "cold MB/s", False),
        ("disk_mb_s", "disk MB/s", False),
        ("disk_iops", "disk reads/s", False),
        ("disk_read_kib", "disk average read KiB", False),
        ("mem_peak_mib", "mem peak MiB", True),
        ("other_cpu_cores", "other CPU (cores)", True),
        ("loop_busy_max_alone_ms", "porter loop busy max ms, hot alone", True),
        ("loop_busy_max_ms", "porter loop busy max ms", True),
        ("loop_poll_max_ms", "porter loop poll max ms", True),
        ("loop_lag_max_ms", "porter loop lag max ms", True),
        ("loop_blocked_max_ms", "porter loop blocked max ms", True),
        ("loop_blocked_ms", "porter loop blocked ms in all", True),
        ("bulk_allowed", "porter bulk gate at end", False),
        ("loop_over_100ms", "porter loop iterations > 100 ms", True),
    ],
    "S3": [  # per file: the key is prefixed with "<file>."
        ("req_s", "req/s", False),
        ("mb_s", "MB/s", False),
        ("mean_ms", "mean ms", True),
        ("p99_ms", "p99 ms", True),
        ("p999_ms", "p999 ms", True),
        ("cpu_us_per_req", "server CPU µs/req", True),
        ("cpu_util_pct", "server CPU %", True),
        ("other_server_core_pct", "other load on server core %", True),
        ("other_client_core_pct", "other load on wrk core %", True),
    ],
    "S4": {  # three tables, one per phase
        # A, per object: the key is prefixed with "hit.<object>."
        "hit": [
            ("req_s", "HIT req/s", False),
            ("mb_s", "MB/s", False),
            ("mean_ms", "mean ms", True),
            ("p99_ms", "p99 ms", True),
            ("p999_ms", "p999 ms", True),
            ("cpu_us_per_req", "server CPU µs/req", True),
            ("cpu_util_pct", "server CPU %", True),
            ("other_server_core_pct", "other load on server core %", True),
            ("other_client_core_pct", "other load on wrk core %", True),
        ],
        "miss": [
            ("miss_mean_ms", "MISS mean ms", True),
            ("miss_p50_ms", "MISS p50 ms", True),
            ("miss_p99_ms", "MISS p99 ms", True),
            ("miss_max_ms", "MISS max ms", True),
            ("miss_hit_mean_ms", "same keys again (HIT) mean ms", True),
            ("miss_hit_p50_ms", "HIT p50 ms", True),
        ],
        "large": [
            ("hot_alone_req_s", "hot alone req/s", False),
            ("hot_load_req_s", "hot under load req/s", False),
            ("hot_ratio", "under load ÷ alone", False),
            ("hot_load_mean_ms", "hot mean ms", True),
            ("hot_load_p99_ms", "hot p99 ms", True),
            ("hot_load_p999_ms", "hot p999 ms", True),
            ("cold_req_s", "cold req/s", False),
            ("cold_mb_s", "cold MB/s", False),
            ("disk_mb_s", "disk MB/s", False),
            ("disk_iops", "disk reads/s", False),
        ("disk_read_kib", "disk average read KiB", False),
            ("mem_peak_mib", "mem peak MiB", True),
            ("cache_mib", "cache on disk MiB", False),
            ("fill_s", "fill s", True),
            ("server_cpu_s", "server CPU s", True),
            ("other_cpu_cores", "other CPU (cores)", True),
        ],
    },
    "S5": [
        ("conns_ok", "connections", False),
        ("rss_base_mib", "RSS idle MiB", True),
        ("rss_mib", "RSS with conns MiB", True),
        ("pss_mib", "PSS with conns MiB", True),
        ("kb_per_conn", "RSS KiB/conn", True),
        ("cgroup_mem_mib", "cgroup memory MiB", True),
    ],
}

# Headline metric per scenario for the porter/nginx ratio tables.
RATIO_KEYS = {
    "S1": [("hot_load_req_s", "hot req/s under load"), ("cold_mb_s", "cold MB/s")],
    "S2": [("hot_load_p99_ms", "hot p99 under load (lower is better)"),
           ("hot_load_req_s", "hot req/s under load")],
    "S4": [("miss_mean_ms", "MISS mean (lower is better)"),
           ("miss_p99_ms", "MISS p99 (lower is better)"),
           ("hot_load_req_s", "C: hot req/s under load"),
           ("hot_load_p99_ms", "C: hot p99 under load (lower is better)"),
           ("hot_ratio", "C: hot under load ÷ alone"),
           ("cold_mb_s", "C: cold MB/s")],  # + HIT req/s and CPU/req per object (s4_objects)
    "S5": [("rss_mib", "RSS (lower is better)")],
}

S4_PHASES = {"miss": "B — MISS latency (one request at a time)",
             "large": "C — large objects through the cache, cache > memory limit, throttled disk: "
                      "hot key under random cold load"}

PAIRS = [("porter-off", "nginx-off"), ("porter-threads-nofast", "nginx-threads"),
         ("porter-threads", "nginx-threads"), ("porter-threads", "nginx-off"),
         ("porter-aio-on", "nginx-threads")]


def aggregate(runs):
    """runs: list of records with scenario, mode, rep → {scen: {mode: agg}}."""
    out = {}
    for r in runs:
        out.setdefault(r["scenario"], {}).setdefault(r["mode"], []).append(r)
    agg = {}
    for scen, by_mode in out.items():
        agg[scen] = {}
        for mode, recs in by_mode.items():
            ok = [r for r in recs if r["status"] == "ok"]
            keys = []
            for r in ok:
                for k in r.get("metrics", {}):
                    if k not in keys:
                        keys.append(k)
            status = ("ok" if len(ok) == len(recs) else
                      "partial" if ok else recs[0]["status"])
            agg[scen][mode] = {
                "status": status,
                "reps": len(recs),
                "ok_reps": len(ok),
                "errors": sorted({r.get("error") for r in recs if r.get("error")}),
                "notes": sorted({n for r in recs for n in r.get("notes", [])}),
                "metrics": {k: summarize([r["metrics"].get(k) for r in ok]) for k in keys},
            }
    return agg


def fmt(v):
    if v is None:
        return "–"
    if v == NONE_WITHIN_RUN:
        return "none within the run"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def cell(s):
    if not s:
        return "–"
    if s["n"] > 1 and fmt(s["min"]) != fmt(s["max"]):
        return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"
    return fmt(s["median"])


def med(agg, scen, mode, key):
    m = agg.get(scen, {}).get(mode)
    if not m or m["status"] not in ("ok", "partial"):
        return None
    s = m["metrics"].get(key)
    return s["median"] if s else None


def status_cell(m):
    if m["status"] == "ok":
        return "ok"
    if m["status"] == "partial":
        return f"ok in {m['ok_reps']}/{m['reps']} reps"
    return m["status"] + (f": {m['errors'][0]}" if m["errors"] else "")


def mode_table(agg, scen, cols, prefix=""):
    modes = [m for m in MODES if m.id in agg.get(scen, {})]
    head = ["mode"] + [c[1] for c in cols] + ["status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in modes:
        a = agg[scen][m.id]
        if a["status"] in ("ok", "partial"):
            vals = [cell(a["metrics"].get(prefix + c[0])) for c in cols]
        else:
            vals = [a["status"]] + [""] * (len(cols) - 1)
        lines.append("| " + " | ".join([m.label] + vals + [status_cell(a).replace("|", "/")]) + " |")
    return "\n".join(lines)


def ratio_table(agg, scen, keys):
    lines = []
    have = agg.get(scen, {})
    pairs = [(p, n) for p, n in PAIRS if p in have and n in have]
    if not pairs:
        return ""
    head = ["porter mode ÷ nginx mode"] + [k[1] for k in keys]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p, n in pairs:
        row = [f"{MODE_BY_ID[p].label} ÷ {MODE_BY_ID[n].label}"]
        for k, _ in keys:
            r = ratio(med(agg, scen, p, k), med(agg, scen, n, k))
            row.append("n/a" if r is None else "∞" if r == NONE_WITHIN_RUN else f"{r:.2f}×")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def s3_files(agg):
    files = []
    for mode in agg.get("S3", {}).values():
        for k in mode["metrics"]:
            f = k.split(".", 1)[0]
            if f not in files:
                files.append(f)
    return files


def s4_objects(agg):
    """The HIT objects of S4's phase A ("1k", "64k"), from the metric keys."""
    objs = []
    for mode in agg.get("S4", {}).values():
        for k in mode["metrics"]:
            if k.startswith("hit."):
                f = k.split(".")[1]
                if f not in objs:
                    objs.append(f)
    return objs


def scenario_tables(agg, sid):
    """[(heading, Markdown table)] for a scenario ("" heading: just one table)."""
    if sid == "S3":
        return [(f"{f} file", mode_table(agg, sid, COLUMNS["S3"], prefix=f + "."))
                for f in s3_files(agg)]
    if sid == "S4":
        out = [(f"A — cache HIT, {f} object", mode_table(agg, sid, COLUMNS["S4"]["hit"],
                                                         prefix=f"hit.{f}."))
               for f in s4_objects(agg)]
        have = {k for m in agg.get("S4", {}).values() for k in m["metrics"]}
        for phase in ("miss", "large"):
            if any(c[0] in have for c in COLUMNS["S4"][phase]) or not out:
                out.append((S4_PHASES[phase], mode_table(agg, sid, COLUMNS["S4"][phase])))
        return out
    return [("", mode_table(agg, sid, COLUMNS[sid]))]


def scenario_ratio_keys(agg, sid):
    if sid == "S3":
        keys = [(f + (".mb_s" if f.endswith("m") else ".req_s"),
                 f"{f} {'MB/s' if f.endswith('m') else 'req/s'}") for f in s3_files(agg)]
        return keys + [(f + ".cpu_us_per_req", f"{f} CPU/req (lower is better)")
                       for f in s3_files(agg)]
    if sid == "S4":
        objs = s4_objects(agg)
        return ([(f"hit.{f}.req_s", f"HIT {f} req/s") for f in objs]
                + [(f"hit.{f}.cpu_us_per_req", f"HIT {f} CPU/req (lower is better)") for f in objs]
                + RATIO_KEYS["S4"])
    return RATIO_KEYS.get(sid, [])


# ---------------------------------------------------------------- targets
def targets(agg):
    """Each target: (scenario, text, status, detail)."""
    out = []

    def ratio_target(scen, text, num, den, key, want, lower_better=False):
        a, b = med(agg, scen, num, key), med(agg, scen, den, key)
        if scen not in agg:
            out.append((scen, text, "not run", ""))
            return
        r = ratio(a, b)
        if r is None:
            miss = [MODE_BY_ID[x].label for x, v in ((num, a), (den, b)) if v is None]
            out.append((scen, text, "n/a", "no result for " + ", ".join(miss) if miss
                        else f"{MODE_BY_ID[den].label}: {fmt(b)}"))
            return
        ok = r <= want if lower_better else r >= want
        out.append((scen, text, "met" if ok else "NOT met",
                    f"{fmt(a)} / {fmt(b)} = {r:.2f}× (want {'≤' if lower_better else '≥'} {want}×)"))

    for f in s3_files(agg):
        key = f + (".mb_s" if f.endswith("m") else ".req_s")
        want = 1.0 if f.endswith("m") else 1.1
        unit = "MB/s" if f.endswith("m") else "req/s"
        ratio_target("S3", f"S3 {f}: porter aio off ≥ {want}× nginx aio off ({unit})",
                     "porter-off", "nginx-off", key, want)
        ratio_target("S3", f"S3 {f}: porter aio threads ≥ {want}× nginx aio threads ({unit})",
                     "porter-threads", "nginx-threads", key, want)
        ratio_target("S3", f"S3 {f} (all cached): porter fast path on ≥ 1.2× fast path off ({unit})",
                     "porter-threads", "porter-threads-nofast", key, 1.2)
        ratio_target("S3", f"S3 {f} (all cached): porter fast path on ≥ 1.3× nginx aio threads ({unit})",
                     "porter-threads", "nginx-threads", key, 1.3)
    if "S4" in agg:
        for f in s4_objects(agg) or ["1k", "64k"]:
            ratio_target("S4", f"S4 {f}: porter aio off cache HIT req/s ≥ 1.2× nginx aio off",
                         "porter-off", "nginx-off", f"hit.{f}.req_s", 1.2)
            ratio_target("S4", f"S4 {f}: porter aio threads cache HIT req/s ≥ 1.2× nginx aio "
                         "threads", "porter-threads", "nginx-threads", f"hit.{f}.req_s", 1.2)
    ratio_target("S5", "S5: porter aio off RSS ≤ nginx aio off RSS", "porter-off", "nginx-off",
                 "rss_mib", 1.0, lower_better=True)
    ratio_target("S5", "S5: porter aio threads RSS ≤ nginx aio threads RSS", "porter-threads",
                 "nginx-threads", "rss_mib", 1.0, lower_better=True)
    # Within one mode, judged by the worst repetition (issue 11): met only
    # if every repetition meets it.
    def every_rep(scen, mode, text, key, bound, lower_better):
        if scen not in agg:
            out.append((scen, text, "not run", ""))
            return
        m = agg[scen].get(mode)
        s = m["metrics"].get(key) if m and m["status"] in ("ok", "partial") else None
        if not s:
            out.append((scen, text, "n/a", f"no result for {MODE_BY_ID[mode].label}"))
            return
        worst = s["max"] if lower_better else s["min"]
        ok = worst <= bound if lower_better else worst >= bound
        out.append((scen, text, "met" if ok else "NOT met",
                    f"worst of {s['n']} reps {fmt(worst)}, median {fmt(s['median'])} "
                    f"(want {'≤' if lower_better else '≥'} {bound})"))

    for mode in ("porter-threads", "porter-aio-on"):
        if mode != "porter-threads" and not any(mode in agg.get(sc, {}) for sc in ("S1", "S2")):
            continue
        label = MODE_BY_ID[mode].label
        every_rep("S1", mode, f"S1: {label} hot req/s under load ≥ 0.8× hot alone, every rep",
                  "hot_ratio", 0.8, False)
        every_rep("S1", mode, f"S1: {label} hot p99 under load ≤ 2× hot alone p99, every rep",
                  "hot_p99_ratio", 2.0, True)
        every_rep("S1", mode, f"S1: {label} loop busy max ≤ 20 ms, every rep",
                  "loop_busy_max_ms", 20.0, True)
        every_rep("S1", mode, f"S1: {label} loop poll max ≤ 20 ms, every rep",
                  "loop_poll_max_ms", 20.0, True)
        every_rep("S1", mode, f"S1: {label} loop lag max ≤ 20 ms, every rep",
                  "loop_lag_max_ms", 20.0, True)
        every_rep("S1", mode, f"S1: {label} loop blocked max ≤ 20 ms, every rep",
                  "loop_blocked_max_ms", 20.0, True)
        if "S2" in agg:
            every_rep("S2", mode, f"S2: {label} hot p99 under load ≤ 5× hot alone p99, every rep",
                      "hot_p99_ratio", 5.0, True)
    # Cold throughput (issue 27), judged by porter's worst repetition
    # against nginx's median in the same run.
    def worst_vs(scen, mode, den, text, key, want, lower_better=False):
        m = agg.get(scen, {}).get(mode)
        s = m["metrics"].get(key) if m and m["status"] in ("ok", "partial") else None
        b = med(agg, scen, den, key)
        if scen not in agg or s is None or b is None:
            return
        worst = s["max"] if lower_better else s["min"]
        r = ratio(worst, b)
        if r is None:
            out.append((scen, text, "n/a", f"{MODE_BY_ID[den].label}: {fmt(b)}"))
            return
        ok = r <= want if lower_better else r >= want
        out.append((scen, text, "met" if ok else "NOT met",
                    f"worst of {s['n']} reps {fmt(worst)} / {fmt(b)} = {r:.2f}× "
                    f"(want {'≤' if lower_better else '≥'} {want}×)"))

    for mode in ("porter-threads", "porter-aio-on"):
        if mode not in agg.get("S1", {}):
            continue
        label = MODE_BY_ID[mode].label
        worst_vs("S1", mode, "nginx-threads",
                 f"S1: {label} cold MB/s ≥ 0.95× nginx aio threads, worst rep", "cold_mb_s", 0.95)
        worst_vs("S1", mode, "nginx-threads",
                 f"S1: {label} cold p99 ≤ nginx aio threads, worst rep", "cold_p99_ms", 1.0,
                 lower_better=True)
        every_rep("S1", mode, f"S1: {label} cold MB/s ≥ 0.9× the disk's byte limit, every rep",
                  "cold_of_throttle", 0.9, False)
    ratio_target("S1", "S1: porter aio threads hot req/s under load ≥ nginx aio threads",
                 "porter-threads", "nginx-threads", "hot_load_req_s", 1.0)
    ratio_target("S2", "S2: porter aio threads hot p99 under load ≤ 0.1× nginx aio threads",
                 "porter-threads", "nginx-threads", "hot_load_p99_ms", 0.1, lower_better=True)
    return out


# ---------------------------------------------------------------- report
def _limits_text(v):
    """S1/S2/S4 C: did the memory limit and the disk throttle apply."""
    mem = (f"memory peak {v['memory_peak_mib']:.1f} MiB of {v['memory_limit_mib']:.0f} MiB "
           f"limit, limit reached {v['memory_failcnt']}× → "
           + ("applied" if v["memory_applied"] else "NOT applied")
           + ("" if v["memory_exercised"] else " (not exercised: usage stayed under 90 %)"))
    blk = (f"disk reads from the server's cgroup {v['blkio_mb_s']:.1f} MB/s, "
           f"{v['blkio_iops']:.0f} IOPS after the first {v.get('blkio_steady_from_s', 0):.0f} s "
           f"({v.get('blkio_mb_s_incl_start', 0):.1f} MB/s including them; "
           f"{v['blkio_read_requests']} requests) under a "
           f"throttle of {v['blkio_limit_mb_s']:.0f} MB/s, {v['blkio_limit_iops']} IOPS → "
           + ("throttled" if v["blkio_applied"] else
              "no disk reads seen" if not v["blkio_seen"] else "OVER the limit"))
    hot = ""
    if v.get("hot_resident_start") is not None:
        hot = (f"; hot file resident {v['hot_resident_start'] * 100:.0f} % → "
               f"{(v.get('hot_resident_end') or 0) * 100:.0f} %")
    if v.get("foreign_drop_caches"):
        hot += (f"; **the page cache was dropped {v['foreign_drop_caches']}× by another process "
                "during the loads** (hot file evicted: figures disturbed)")
    return f"{mem}; {blk}{hot}"


def _s4_verification(v):
    parts = ["in cgroup ✓"]
    origin = (f"origin nginx pid {v.get('origin_pid')} on :{v.get('origin_port')} outside the "
              "server's cgroup")
    parts.append(origin)
    for name, h in (v.get("hit") or {}).items():
        o = (v.get("origin_requests_hit_runs") or {}).get(name)
        parts.append(f"A {name}: first response {h['first_status']} X-Cache {h['first_x_cache']}, "
                     f"{'second' if h.get('tries', 1) == 1 else 'request %d after it' % h['tries']} "
                     f"{h['second_status']} X-Cache {h['second_x_cache']} "
                     + ("→ HIT ✓" if h["ok"] else "→ NOT a HIT ✗")
                     + (f", origin requests during the timed run: {o}" if o is not None else ""))
    if v.get("affinity") is not None:
        parts.append(f"A/B server pinned to CPU {v['affinity']}")
    mi = v.get("miss")
    if mi:
        parts.append(f"B: {mi['x_cache_miss']} of {mi['requests']} X-Cache MISS "
                     f"({mi['ok_200_full']} complete 200s), again: {mi['again_x_cache_hit']} HIT"
                     + (f", origin requests {mi['origin_requests']}"
                        if mi.get("origin_requests") is not None else "")
                     + (" ✓" if mi["ok"] else " ✗"))
    fi = v.get("fill")
    if fi:
        parts.append(f"C fill: {fi['keys']} keys in {fi['seconds']:.1f} s (X-Cache "
                     + ", ".join(f"{k} {n}" for k, n in fi["x_cache"].items())
                     + f"; {fi['bad_responses']} bad), {fi['cache_files_expected_found']} cache "
                     f"files at their levels=1:2 md5 paths, cache on disk {fi['cache_mib']:.0f} MiB "
                     f"vs limit {fi['memory_limit_mib']:.0f} MiB → "
                     + ("larger ✓" if fi["cache_larger_than_limit"] else "NOT larger ✗")
                     + (f"; sync {fi['sync_s']:.1f} s" if fi.get("sync_s") is not None else "")
                     + (f", cache resident after eviction {fi['resident_after_evict_mib']:.1f} MiB"
                        if fi.get("resident_after_evict_mib") is not None else ""))
    if "memory_limit_mib" in v:
        parts.append("C: " + _limits_text(v))
        if "hot_x_cache" in v:
            parts.append(f"C: hot key X-Cache before the loads {v.get('hot_x_cache')}"
                         + (" ✓" if v.get("hot_x_cache") == "HIT" else " ✗"))
        if v.get("origin_requests_phase_c") is not None:
            parts.append(f"C: origin requests during the loads {v['origin_requests_phase_c']}")
    return "; ".join(parts)


def verification_lines(runs):
    lines = []
    for r in runs:
        v = r.get("verification")
        if not v or r["status"] == "skipped":
            continue
        tag = f"{r['scenario']} rep {r['rep']} {MODE_BY_ID[r['mode']].label}"
        if r["scenario"] == "S4":
            lines.append(f"- {tag}: " + _s4_verification(v))
        elif "memory_limit_mib" in v:
            lines.append(f"- {tag}: in cgroup ✓; {_limits_text(v)}")
        elif "resident" in v:
            res = ", ".join(f"{k} {x * 100:.0f} %" if x is not None else f"{k} ?"
                            for k, x in v["resident"].items())
            lines.append(f"- {tag}: in cgroup ✓, pinned to CPU {v['affinity']}; files resident: {res}")
        elif "processes" in v:
            lines.append(f"- {tag}: in cgroup ✓, {v['processes']} server process(es), "
                         f"{v['connections_requested'] - v['connections_failed']} of "
                         f"{v['connections_requested']} connections opened")
    return lines


def render(meta, params, param_doc, scenarios, runs, agg, plots, plot_note):
    L = []
    L.append(f"# porter benchmark — {meta['date']}")
    L.append("")
    L.append(f"Command: `{meta['command']}`  ")
    L.append(f"porter: `{meta['porter_binary']}` (revision {meta['porter_revision']})  ")
    L.append(f"Results: `{meta['out_dir']}`  ")
    L.append(f"Wall time: {meta.get('elapsed_s', 0) / 60:.1f} min")
    L.append("")
    mi = meta["machine"]
    L.append("## Machine")
    L.append("")
    L.append(f"- {mi['cores']} cores ({mi['cpu_model']}), {mi['mem_total_gib']} GiB memory, "
             f"kernel {mi['kernel']}, host {mi['hostname']}")
    L.append(f"- data dir `{meta['data_dir']}` on block device {meta['device']} "
             f"({mi.get('root_fs', '')}), {mi.get('data_fs_free_gib')} GiB free")
    L.append(f"- {mi['nginx']}; {mi['wrk']}; Python {mi['python']}")
    L.append("")
    L.append("## Settings")
    L.append("")
    L.append("Figures are the median over repetitions, with the spread (min–max) in "
             "parentheses when the repetitions differ. Modes run interleaved within each "
             "repetition. Latencies are wrk's (request sent → last byte received).")
    if params["reps"] < 2:
        L.append("")
        L.append(f"**{params['reps']} repetition only: no spread is shown; use --reps 2 or more "
                 "for figures to quote.**")
    L.append("")
    L.append("| parameter | value | meaning |")
    L.append("|---|---|---|")
    for k, v in params.items():
        L.append(f"| `{k}` | {v} | {param_doc.get(k, ('', '', '', ''))[3]} |")
    L.append("")
    L.append("Servers: the same configuration for both (shown in full in `configs/`): "
             "`daemon off`, `access_log off`, `sendfile on`, `sendfile_max_chunk "
             f"{meta['server']['sendfile_max_chunk']}`, `keepalive_timeout "
             f"{meta['server']['keepalive_timeout']}`, `keepalive_requests "
             f"{meta['server']['keepalive_requests']}`, `worker_connections "
             f"{meta['server']['worker_connections']}`, `worker_rlimit_nofile "
             f"{meta['server']['nofile']}`, `listen 127.0.0.1:PORT reuseport` (porter always "
             "binds one SO_REUSEPORT socket per worker, so nginx gets `reuseport` too). Thread "
             f"pools: porter `thread_pool bench threads={params['threads']} max_queue="
             f"{meta['server']['max_queue']}` shared by all workers; nginx `thread_pool bench "
             f"threads={params['threads']}/workers` per worker (same total). Each server runs "
             "in its own cgroup v1 (memory, blkio, cpuacct), entered by the exec wrapper "
             "`bench/lib/cgexec` before exec, so every worker and pool thread inherits it. "
             "Caches are dropped (sync; drop_caches 3) before each S1/S2 run (S4 phase C: "
             "after the fill, sync, the cache files' pages evicted, drop_caches 2); the hot file is "
             "then read once from a separate, unlimited memory cgroup so that the server's "
             "limit cannot evict it.")
    L.append("")
    L.append("Modes: " + "; ".join(f"`{m.id}` = {m.label}" for m in MODES if m.id in meta["modes"]))
    L.append("")

    L.append("## Targets")
    L.append("")
    L.append("| scenario | target | result | figures (medians) |")
    L.append("|---|---|---|---|")
    for scen, text, st, detail in targets(agg):
        if scen in agg:
            L.append(f"| {scen} | {text} | **{st}** | {detail} |")
    L.append("")
    L.append("Targets of scenarios not run here are not listed.")
    L.append("")

    for sid, sc in scenarios.items():
        L.append(f"## {sc.title}")
        L.append("")
        L.append(sc.what)
        L.append("")
        ds = meta["datasets"].get(sid)
        if ds:
            L.append("Dataset: " + ", ".join(f"{k} = {v}" for k, v in ds.items()))
            L.append("")
        if sid not in agg:
            L.append("_not run_")
            L.append("")
            continue
        if not sc.implemented:
            L.append("**Skipped: not implemented**; every mode: "
                     + ", ".join(f"{m} {a['status']}" for m, a in agg[sid].items()))
            L.append("")
            continue
        for heading, table in scenario_tables(agg, sid):
            if heading:
                L.append(f"### {heading}")
                L.append("")
            L.append(table)
            L.append("")
        rt = ratio_table(agg, sid, scenario_ratio_keys(agg, sid))
        if rt:
            L.append("Ratios of medians, porter ÷ nginx:")
            L.append("")
            L.append(rt)
            L.append("")
        for p in plots.get(sid, []):
            L.append(f"![{p}]({p})")
            L.append("")

    L.append("## Did the limits apply?")
    L.append("")
    L += verification_lines(runs) or ["(no runs with limits)"]
    L.append("")
    notes = []
    for sid, by_mode in agg.items():
        for mid, a in by_mode.items():
            for e in a["errors"]:
                notes.append(f"- {sid} {MODE_BY_ID[mid].label}: {a['status']}: {e}")
            for n in a["notes"]:
                notes.append(f"- {sid} {MODE_BY_ID[mid].label}: {n}")
    L.append("## Failures, skips and notes")
    L.append("")
    L += notes or ["(none)"]
    if plot_note:
        L.append(f"- plots: {plot_note}")
    L.append("")
    return "\n".join(L)
