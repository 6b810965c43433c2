"""The scenarios. Each one runs one mode once (one repetition) and returns a
record: status ("ok" | "failed" | "skipped"), error, notes, metrics (flat
dict of numbers), verification (did the limits apply), series (per-second
samples) and latency percentiles for the plots.

Adding a scenario: subclass Scenario, give it id/title/what, implement
prepare() and run_mode() (and finish() if prepare() starts helpers, like S4's
origin), and add it to SCENARIOS (report.py then needs its table columns in
COLUMNS, and scenario_tables() when it has more than one table)."""

import http.client
import os
import pwd
import resource
import shutil
import statistics
import time

from . import datasets
from .cgroups import block_device_of, in_cgroup
from .common import HarnessError, log, ratio, run, sync_and_drop_caches
from .loadgen import (HttpClient, Sampler, Wrk, close_all, cpu_times, idle_connections,
                      percentiles_ms)
from .servers import (ProxySettings, porter_metrics, ServerSettings, ServerStartError, config_test,
                      origin_requests, process_memory, start, start_origin, stop, stop_origin)

MiB = 1 << 20


def resident_fraction(path):
    """Fraction of the file in the page cache (util-linux fincore), or None."""
    try:
        out = run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", path],
                  check=True, timeout=10).stdout.split()
        res, size = int(out[0]), int(out[1])
        return 1.0 if size == 0 else res / size
    except Exception:
        return None


def drop_caches_count():
    """How many times the page cache was dropped (drop_caches 1 or 3) since
    boot, from /proc/vmstat; None when the kernel does not say."""
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                if line.startswith("drop_pagecache "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_list(spec):
    """'0', '0-1', '0,2' -> [0], [0, 1], [0, 2]"""
    out = []
    for part in str(spec).split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


class Context:
    """What every scenario needs: parameters, binaries, cgroups, device, paths."""

    def __init__(self, params, bins, server_cg, warm_cg, dev, data_dir, out_dir):
        self.p = params
        self.bins = bins
        self.cg = server_cg
        self.warm_cg = warm_cg
        self.dev = dev
        self.data_dir = data_dir
        self.out_dir = out_dir
        self.configs = {}
        # open-files limit for the servers: as high as this process may go
        self.nofile = min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1])

    def settings(self, workers):
        return ServerSettings(workers=workers, threads_total=self.p["threads"],
                              nofile=self.nofile, worker_connections=min(20000, self.nofile - 64),
                              user=self.p["user"],
                              worker_priority=str(self.p["worker_priority"]),
                              sendfile_max_chunk=self.p["sendfile_max_chunk"])

    def prefix(self, scen, mode):
        d = os.path.join(self.out_dir, "servers", f"{scen}-{mode.id}")
        os.makedirs(d, exist_ok=True)
        return d

    def limit_server(self, mem_bytes=None, rbps=None, riops=None):
        """Set (or clear, with None) the server cgroup's limits, empty leftovers."""
        self.cg.empty_memory()
        self.cg.set_memory_limit(mem_bytes)
        maj, mnr, _ = self.dev
        self.cg.set_read_throttle(maj, mnr, rbps, riops)
        self.cg.reset_stats()

    def warm(self, *paths):
        """Read the files from the separate, unlimited 'warm' memory cgroup, so
        their pages (and dentries) are charged there and the server's limit
        cannot evict them."""
        from .common import CGEXEC
        r = run([CGEXEC] + self.warm_cg.procs_files() + ["--", "sh", "-c", 'cat "$@" >/dev/null',
                                                          "sh", *paths], check=False, timeout=120)
        if r.returncode != 0:
            raise HarnessError(f"warming {' '.join(paths)[:200]} failed: {r.stderr.strip()}")

    def start_server(self, scen, mode, workers, pin=None, proxy=None, tag=""):
        """`proxy`: servers.ProxySettings (S4); `tag` names the saved config
        when a scenario starts the same mode more than once."""
        prefix = self.prefix(scen, mode)
        srv = start(mode, self.settings(workers), self.data_dir, prefix, self.bins, self.cg,
                    pin_cpus=pin, nice=self.p["nice"], proxy=proxy)
        self.configs[f"{scen}-{mode.id}{tag}"] = open(os.path.join(prefix, "server.conf")).read()
        if not in_cgroup(srv.pid, self.cg):
            stop(srv)
            raise HarnessError(f"server pid {srv.pid} is not in cgroup {self.cg.name}")
        return srv

    def precheck(self, scen, mode, workers, proxy=None):
        """Config test before the expensive preparation (drop caches ...)."""
        config_test(mode, self.settings(workers), self.data_dir, self.prefix(scen, mode), self.bins,
                    proxy=proxy)


class Scenario:
    id = ""
    title = ""
    what = ""
    implemented = True

    def param_keys(self):
        return [k for k in PARAM_DOC if k.startswith(self.id.lower() + ".")]

    def prepare(self, ctx):
        pass

    def dataset_info(self):
        return {}

    def run_mode(self, ctx, mode, rep):
        raise NotImplementedError

    def finish(self, ctx):
        """After all repetitions and modes (also on errors): stop helpers."""


def _failed(e):
    return {"status": "skipped" if getattr(e, "skipped", False) else "failed", "error": str(e)}


class ColdHot(Scenario):
    """S1 and S2: random cold load plus one hot (cached) file, and the hot file alone."""

    drop_level = 3

    def make_dataset(self, ctx):
        raise NotImplementedError

    def prepare(self, ctx):
        self.ds = self.make_dataset(ctx)

    def dataset_info(self):
        return {k: v for k, v in self.ds.items() if k in ("files", "bytes", "hot_uri", "dir")}

    def run_mode(self, ctx, mode, rep):
        k = self.id.lower()
        P = ctx.p
        workers = P["workers"]
        try:
            ctx.precheck(self.id, mode, workers)
        except ServerStartError as e:
            return _failed(e)
        mem = P[f"{k}.mem_mb"] * MiB
        rbps = P[f"{k}.rbps_mb"] * 1_000_000
        riops = P[f"{k}.riops"]
        ctx.limit_server(mem, rbps, riops)
        sync_and_drop_caches(self.drop_level)
        in_server = P["hot_cgroup"] == "server"
        if not in_server:
            ctx.warm(self.ds["hot_path"])
        ctx.cg.reset_stats()
        try:
            srv = ctx.start_server(self.id, mode, workers)
        except ServerStartError as e:
            return _failed(e)
        if in_server:
            # Read through the server, so its pages are charged to the
            # server's own memory cgroup and compete with the cold load.
            _get_once(srv.port, self.ds["hot_uri"])
        hot_res_start = resident_fraction(self.ds["hot_path"])
        rec = {"status": "ok", "notes": list(srv.notes)}
        rec["notes"].append(f"hot file warmed in the {'server' if in_server else 'separate'} "
                            "memory cgroup")
        measure_cold_hot(ctx, srv, rec, k, self.ds["list"], self.ds["hot_uri"], self.ds["hot_path"],
                         mem, rbps, riops, rep, hot_res_start)
        return rec


def _get_once(port, uri):
    """One GET of `uri` from the server on `port`, body read and dropped."""
    import ssl
    import urllib.request

    from . import common
    with urllib.request.urlopen(f"{common.scheme()}://127.0.0.1:{port}{uri}", timeout=120,
                                context=ssl._create_unverified_context()) as r:
        while r.read(1 << 20):
            pass


def measure_cold_hot(ctx, srv, rec, k, list_file, hot_uri, hot_path, mem, rbps, riops, rep,
                     hot_res_start):
    """S1/S2 (and S4's phase C): the hot URI alone, then a random cold client
    over `list_file` plus the hot URI at once; stops `srv`. Fills rec's
    metrics, errors, verification, series and latency (parameters `k`.*)."""
    P = ctx.p
    drops0 = drop_caches_count()
    try:
        cpu0 = ctx.cg.cpu_ns()
        pace = P.get(f"{k}.hot_delay_ms", 0)
        alone = Wrk(srv.port, hot_uri, P[f"{k}.hot_conns"], 1, P[f"{k}.alone_s"],
                    P["wrk_timeout_s"], label="hot alone", nice=P["nice"], delay_ms=pace).result()
        cpu_mid = ctx.cg.cpu_ns()
        pm0 = porter_metrics(srv)
        ct0 = cpu_times()
        sampler = Sampler(ctx.cg, ctx.dev).start()
        cold = Wrk(srv.port, "/", P[f"{k}.cold_conns"], P[f"{k}.cold_threads"], P[f"{k}.load_s"],
                   P["wrk_timeout_s"], list_file=list_file, seed=1000 + rep,
                   label="cold load", nice=P["nice"])
        hot = Wrk(srv.port, hot_uri, P[f"{k}.hot_conns"], 1, P[f"{k}.load_s"],
                  P["wrk_timeout_s"], label="hot under load", nice=P["nice"], delay_ms=pace)
        hot_r = hot.result()
        cold_r = cold.result()
        io = sampler.stop(P["steady_skip_s"])
        ct1 = cpu_times()
        cpu1 = ctx.cg.cpu_ns()
        memst = ctx.cg.memory()
        alive = srv.popen.poll() is None
        drops1 = drop_caches_count()
        pm1 = porter_metrics(srv)
    finally:
        stop(srv)
    hot_res_end = resident_fraction(hot_path) if hot_path else None
    secs = io["seconds"]
    m = cold_hot_figures(alone, hot_r, cold_r, io)
    m.update({
        # the cold clients' throughput as a share of the disk's byte limit
        "cold_of_throttle": ratio(cold_r["mb_s"], rbps / 1e6),
        "mem_peak_mib": memst["max_usage"] / MiB,
        "server_cpu_s": (cpu1 - cpu0) / 1e9,
        # CPU used by neither the server nor wrk during the mixed run, in cores
        "other_cpu_cores": ((ct1["all"] - ct0["all"]) - (cpu1 - cpu_mid) / 1e9
                            - (ct1["children"] - ct0["children"])) / secs,
    })
    errs = {"hot_alone": alone["errors"], "hot_load": hot_r["errors"], "cold": cold_r["errors"]}
    rec.setdefault("errors", {}).update(errs)
    for name, e in errs.items():
        if e["status"] or e["connect"]:
            rec["notes"].append(f"{name}: {e['status']} non-2xx responses, "
                                f"{e['connect']} connect errors")
    if not alive:
        rec["status"] = "failed"
        rec["error"] = "server exited during the run"
    # Did the emulated slow disk and small memory really apply?
    ver = {
        "in_cgroup": True,
        "memory_limit_mib": mem / MiB,
        "memory_peak_mib": memst["max_usage"] / MiB,
        "memory_failcnt": memst["failcnt"],
        "memory_applied": memst["max_usage"] <= mem,
        "memory_exercised": memst["failcnt"] > 0 or memst["max_usage"] >= 0.9 * mem,
        "blkio_limit_mb_s": rbps / 1e6,
        "blkio_limit_iops": riops,
        "blkio_read_bytes": io["cg_read_bytes"],
        "blkio_read_requests": io["cg_read_requests"],
        "blkio_mb_s": io["cg_read_mb_s"],
        "blkio_iops": io["cg_read_iops"],
        "blkio_mb_s_incl_start": io["cg_read_mb_s_all"],
        "blkio_steady_from_s": io["steady_from_s"],
        "blkio_seen": io["cg_read_requests"] > 0,
        # the throttle lets through a little more than set (about +20 %)
        "blkio_applied": (io["cg_read_requests"] > 0
                          and io["cg_read_mb_s"] <= rbps / 1e6 * 1.35
                          and io["cg_read_iops"] <= riops * 1.35),
        "throttle_files": ctx.cg.read_throttle(),
        "hot_resident_start": hot_res_start,
        "hot_resident_end": hot_res_end,
        # page-cache drops (drop_caches) by other processes on the machine
        # during the loads: they evict the hot file too
        "foreign_drop_caches": (drops1 - drops0 if drops0 is not None and drops1 is not None
                                else None),
        "wrk_cmds": [alone["cmd"], cold_r["cmd"], hot_r["cmd"]],
    }
    m.update(loop_figures(pm0, pm1))
    rec.setdefault("metrics", {}).update(m)
    rec.setdefault("verification", {}).update(ver)
    rec["server_metrics"] = {"before_load": pm0, "after_load": pm1}
    rec.setdefault("latency", {}).update(hot_load=hot_r["percentiles_ms"],
                                         hot_alone=alone["percentiles_ms"])
    rec["series"] = io["series"]
    return rec




def cold_hot_figures(alone, hot_r, cold_r, io):
    """S1/S2/S4 C figures from the three wrk results (Wrk.result) and the
    disk sampler's (Sampler.stop). A client that completed no request gives
    0 req/s and latencies NONE_WITHIN_RUN: a result, never an exception."""
    return {
        "hot_alone_req_s": alone["req_s"],
        "hot_alone_mean_ms": alone["lat_mean_ms"],
        "hot_alone_p99_ms": alone["lat_p99_ms"],
        "hot_alone_p999_ms": alone["lat_p999_ms"],
        "hot_load_req_s": hot_r["req_s"],
        "hot_load_mean_ms": hot_r["lat_mean_ms"],
        "hot_load_p99_ms": hot_r["lat_p99_ms"],
        "hot_load_p999_ms": hot_r["lat_p999_ms"],
        "hot_load_max_ms": hot_r["lat_max_ms"],
        "hot_ratio": ratio(hot_r["req_s"], alone["req_s"]),
        "hot_p99_ratio": ratio(hot_r["lat_p99_ms"], alone["lat_p99_ms"]),
        "cold_req_s": cold_r["req_s"],
        "cold_mb_s": cold_r["mb_s"],
        "cold_p99_ms": cold_r["lat_p99_ms"],
        "disk_mb_s": io["cg_read_mb_s"],
        "disk_iops": io["cg_read_iops"],
        "disk_read_kib": ratio(io["cg_read_mb_s"] * 1e6 / 1024, io["cg_read_iops"]),
        "device_mb_s": io["disk_read_mb_s"],
    }


def loop_figures(pm0, pm1):
    """porter's own evidence from two scrapes of its metrics (before and
    after the mixed load): the longest event-loop iteration since start,
    the longest time a busy loop slept in the kernel since start and the
    sum of such sleeps during the load (runtime::loop_watch), the bulk
    gate's opening at the end, loop iterations longer than 100 ms during the load, and the fast path's
    sendfile/read hits and misses during the load. {} for nginx."""
    if not pm1:
        return {}

    def delta(name):
        return pm1.get(name, 0.0) - pm0.get(name, 0.0)

    def total(prefix, suffix=""):
        return sum(v for k, v in pm1.items() if k.startswith(prefix) and k.endswith(suffix)) - sum(
            v for k, v in pm0.items() if k.startswith(prefix) and k.endswith(suffix))

    out = {
        "loop_busy_max_ms": 1000 * max((v for k, v in pm1.items()
                                        if k.startswith("porter_loop_busy_max_seconds")),
                                       default=0.0),
        # the same gauge read after the hot file alone: what the hot client's
        # own saturation gives, with no cold load and no disk read
        "loop_busy_max_alone_ms": 1000 * max((v for k, v in pm0.items()
                                              if k.startswith("porter_loop_busy_max_seconds")),
                                             default=0.0),
        "loop_poll_max_ms": 1000 * max((v for k, v in pm1.items()
                                        if k.startswith("porter_loop_poll_max_seconds")),
                                       default=float("nan")),
        "loop_lag_max_ms": 1000 * max((v for k, v in pm1.items()
                                       if k.startswith("porter_loop_lag_max_seconds")),
                                      default=float("nan")),
        "loop_blocked_max_ms": 1000 * max((v for k, v in pm1.items()
                                           if k.startswith("porter_loop_blocked_max_seconds")),
                                          default=0.0),
        "loop_blocked_ms": 1000 * total("porter_loop_blocked_seconds_total"),
        "bulk_allowed": sum(v for k, v in pm1.items() if k.startswith("porter_pool_bulk_allowed")),
        "loop_over_100ms": (total("porter_loop_busy_seconds_count")
                            - total("porter_loop_busy_seconds_bucket", 'le="0.1"}')),
    }
    for op in ("read", "sendfile"):
        for res in ("hit", "miss"):
            out[f"fast_{op}_{res}"] = delta(f'porter_fastpath_total{{op="{op}",result="{res}"}}')
    return out


class S1(ColdHot):
    id = "S1"
    title = "S1 large files: one hot file under random cold load (NGINX thread-pool post)"
    what = ("Random requests over 4 MB files that do not fit in the server's memory (cold, read "
            "from the throttled disk) on many connections, plus one hot, cached 4 MB file on fewer "
            "connections. Measures the hot file's req/s and latency under the cold load and alone, "
            "the cold throughput and the disk throughput reached.")
    drop_level = 3

    def make_dataset(self, ctx):
        P = ctx.p
        return datasets.s1(ctx.data_dir, P["s1.files"], int(P["s1.file_mb"] * MiB))


class S2(ColdHot):
    id = "S2"
    title = "S2 small files: hot-file TTFB among cold small files (Cloudflare 2018)"
    what = ("Random requests over small files (90 % under 60 KB) in a levels=1:2 hashed tree, "
            "with page cache, dentries and inodes dropped (drop_caches 3, which includes 2), plus "
            "one hot cached small file. Measures the hot file's p99/p999 latency (wrk measures to "
            "the last byte; for a small cached file that is the TTFB) under the cold load and alone.")
    drop_level = 3

    def make_dataset(self, ctx):
        P = ctx.p
        return datasets.s2(ctx.data_dir, P["s2.files"], P["s2.small_frac"], P["s2.small_max_kb"] * 1024,
                           P["s2.large_max_kb"] * 1024, P["s2.hot_kb"] * 1024)


def _s3_sizes(P):
    return {
        f"{P['s3.small_kb']}k": P["s3.small_kb"] * 1024,
        f"{P['s3.medium_kb']}k": P["s3.medium_kb"] * 1024,
        f"{P['s3.large_mb']}m": P["s3.large_mb"] * MiB,
    }


class S3(Scenario):
    id = "S3"
    title = "S3 everything cached: req/s, MB/s and CPU per request"
    what = ("Three files held in the page cache (small, medium, one large). The server runs one "
            "worker pinned to core 0, wrk one thread pinned to core 1, keep-alive. Measures req/s, "
            "MB/s, latency and the server's CPU time per request (cpuacct of its cgroup).")

    def prepare(self, ctx):
        self.files = datasets.s3(ctx.data_dir, _s3_sizes(ctx.p))

    def dataset_info(self):
        return {k: v["size"] for k, v in self.files.items()}

    def run_mode(self, ctx, mode, rep):
        P = ctx.p
        workers = P["s3.workers"]
        try:
            ctx.precheck(self.id, mode, workers)
        except ServerStartError as e:
            return _failed(e)
        ctx.limit_server(None, None, None)
        for f in self.files.values():
            ctx.warm(f["path"])
        try:
            srv = ctx.start_server(self.id, mode, workers, pin=P["s3.server_cpus"])
        except ServerStartError as e:
            return _failed(e)
        rec = {"status": "ok", "notes": list(srv.notes), "metrics": {}, "latency": {}, "errors": {}}
        ver = {"in_cgroup": True, "resident": {}, "wrk_cmds": []}
        srv_cpus = cpu_list(P["s3.server_cpus"])
        cli_cpus = cpu_list(P["s3.client_cpus"])
        try:
            for name, f in self.files.items():
                large = name.endswith("m")
                conns = P["s3.large_conns"] if large else P["s3.conns"]
                if P["s3.warmup_s"] > 0:
                    Wrk(srv.port, f["uri"], conns, 1, P["s3.warmup_s"], P["wrk_timeout_s"],
                        cpus=P["s3.client_cpus"], label="warm-up", nice=P["nice"]).result()
                ct0 = cpu_times()
                cpu0 = ctx.cg.cpu_ns()
                r = Wrk(srv.port, f["uri"], conns, 1, P["s3.seconds"], P["wrk_timeout_s"],
                        cpus=P["s3.client_cpus"], label=f"S3 {name}", nice=P["nice"]).result()
                cpu1 = ctx.cg.cpu_ns()
                ct1 = cpu_times()
                cpu_s = (cpu1 - cpu0) / 1e9
                wrk_s = ct1["children"] - ct0["children"]
                busy_srv = sum(ct1[c] - ct0[c] for c in srv_cpus)
                busy_cli = sum(ct1[c] - ct0[c] for c in cli_cpus)
                m = rec["metrics"]
                m[f"{name}.req_s"] = r["req_s"]
                m[f"{name}.mb_s"] = r["mb_s"]
                m[f"{name}.mean_ms"] = r["lat_mean_ms"]
                m[f"{name}.p99_ms"] = r["lat_p99_ms"]
                m[f"{name}.p999_ms"] = r["lat_p999_ms"]
                m[f"{name}.cpu_us_per_req"] = cpu_s / r["requests"] * 1e6 if r["requests"] else None
                m[f"{name}.cpu_util_pct"] = cpu_s / r["duration_s"] * 100
                # busy time on the pinned cores not used by the server / by wrk
                m[f"{name}.other_server_core_pct"] = max(0.0, busy_srv - cpu_s) / r["duration_s"] * 100
                m[f"{name}.other_client_core_pct"] = max(0.0, busy_cli - wrk_s) / r["duration_s"] * 100
                rec["latency"][name] = r["percentiles_ms"]
                rec["errors"][name] = r["errors"]
                ver["wrk_cmds"].append(r["cmd"])
                per_req = r["bytes"] / r["requests"] if r["requests"] else 0
                if r["errors"]["status"] or per_req < f["size"]:
                    rec["notes"].append(f"{name}: {r['errors']['status']} non-2xx responses, "
                                        f"{per_req:.0f} bytes read per request for a "
                                        f"{f['size']}-byte file")
                ver["resident"][name] = resident_fraction(f["path"])
            if srv.popen.poll() is not None:
                rec["status"] = "failed"
                rec["error"] = "server exited during the run"
        finally:
            stop(srv)
        ver["affinity"] = P["s3.server_cpus"]
        rec["verification"] = ver
        return rec


def _s4_sizes(P):
    return {f"{P['s4.small_kb']}k": P["s4.small_kb"] * 1024,
            f"{P['s4.medium_kb']}k": P["s4.medium_kb"] * 1024}


def _tree_bytes(d):
    """Bytes allocated on disk under d (st_blocks), and the number of files."""
    total = n = 0
    for root, _, files in os.walk(d):
        for fn in files:
            try:
                total += os.lstat(os.path.join(root, fn)).st_blocks * 512
                n += 1
            except OSError:
                pass
    return total, n


def _get(client, uri):
    """client.get(), with a failed request (connection refused or reset, bad
    response) as status None instead of an exception: the server's failure,
    not the harness's."""
    try:
        return client.get(uri)
    except (OSError, http.client.HTTPException) as e:
        client.close()
        return {"status": None, "x_cache": None, "bytes": 0, "seconds": 0.0, "error": str(e)}


def _evict_tree(d):
    """Drops the (clean, synced) page cache of every file under d
    (POSIX_FADV_DONTNEED); returns the paths."""
    paths = []
    for root, _, files in os.walk(d):
        for fn in files:
            p = os.path.join(root, fn)
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            paths.append(p)
    return paths


def _resident_bytes(paths):
    """Bytes of these files in the page cache (fincore), None if unknown."""
    total = 0
    for i in range(0, len(paths), 200):
        try:
            out = run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES"]
                      + paths[i:i + 200], check=True, timeout=30).stdout.split()
            total += sum(int(x) for x in out)
        except Exception:
            return None
    return total


class S4(Scenario):
    id = "S4"
    title = "S4 proxy cache: HIT throughput, MISS latency, hot key under cold load"
    what = ("The server as a caching reverse proxy (`proxy_pass` to an upstream with keepalive, "
            "`proxy_cache_path levels=1:2 use_temp_path=off`, `proxy_cache_key $request_uri`) in "
            "front of one origin for every mode: a plain nginx on the same data, started by the "
            "harness outside the server's cgroup. **A** — HIT throughput: a small and a medium "
            "object, filled once and checked to come back with `X-Cache: HIT`, then S3-style "
            "loads (1 worker pinned to s4.server_cpus, wrk 1 thread pinned to s4.client_cpus, "
            "keep-alive): req/s, latency, server CPU per request. **B** — MISS latency: "
            "s4.misses distinct objects requested once each, one at a time on one keep-alive "
            "connection (checked `X-Cache: MISS`), then once more (HIT) for comparison. **C** — "
            "the large-file case of S1 through the cache: s4.files of S1's 4 MiB files plus its "
            "hot file filled into the cache (more than the memory limit), then sync, the cache "
            "files evicted from the page cache (fadvise DONTNEED; the origin's files stay "
            "cached), drop_caches 2, the memory limit and the disk throttle on the running "
            "server, the hot key's cache file kept resident, and S1's loads: hot key alone, then "
            "hot key + random cold keys; the same figures as S1.")

    def prepare(self, ctx):
        P = ctx.p
        self.objs = datasets.s4(ctx.data_dir, _s4_sizes(P), P["s4.misses"], P["s4.miss_kb"] * 1024)
        # phase C uses S1's files (with S1's parameters: the same dataset, not a rebuild)
        self.s1 = datasets.s1(ctx.data_dir, P["s1.files"], int(P["s1.file_mb"] * MiB))
        self.nfiles = max(1, min(P["s4.files"], P["s1.files"]))
        with open(self.s1["list"]) as f:
            self.cold_uris = [ln.strip() for ln in f if ln.strip()][:self.nfiles]
        self.list_file = os.path.join(ctx.out_dir, "s4-cold-list.txt")
        with open(self.list_file, "w") as f:
            f.write("\n".join(self.cold_uris) + "\n")
        self.origin = None
        self._start_origin(ctx)

    def _start_origin(self, ctx):
        prefix = os.path.join(ctx.out_dir, "servers", "S4-origin")
        try:
            self.origin = start_origin(ctx.bins["nginx"], ctx.data_dir, prefix, ctx.nofile,
                                       ctx.p["user"], nice=ctx.p["nice"])
        except ServerStartError as e:
            raise HarnessError(f"S4 origin: {e}") from e
        ctx.configs["S4-origin"] = open(os.path.join(prefix, "origin.conf")).read()
        log(f"  S4 origin: nginx pid {self.origin.pid} on 127.0.0.1:{self.origin.port} "
            "(outside the server's cgroup)")

    def finish(self, ctx):
        if getattr(self, "origin", None) is not None:
            stop_origin(self.origin)
            log(f"  S4 origin stopped (pid {self.origin.pid})")
            self.origin = None

    def dataset_info(self):
        return {**{f"hit {k}": v["size"] for k, v in self.objs["hit"].items()},
                "miss objects": len(self.objs["miss_uris"]), "miss bytes": self.objs["miss_size"],
                "phase C keys": f"{self.nfiles} of S1's files + its hot file",
                "phase C bytes": (self.nfiles + 1) * int(self.s1["bytes"] / (self.s1["files"] + 1)),
                "origin": f"nginx on 127.0.0.1:{self.origin.port}" if self.origin else "?"}

    def _cache_dir(self, ctx, prefix):
        """PREFIX/cache when it is on the throttled device, else under the data
        dir; made beforehand (empty) for the worker user, as nginx would."""
        d = os.path.join(prefix, "cache")
        try:
            if block_device_of(prefix)[:2] != ctx.dev[:2]:
                d = os.path.join(ctx.data_dir, f"s4-cache-{os.getpid()}")
        except HarnessError:
            d = os.path.join(ctx.data_dir, f"s4-cache-{os.getpid()}")
        clean_dir(d)
        os.makedirs(d, mode=0o700)
        try:
            pw = pwd.getpwnam(ctx.p["user"] or "nobody")
            os.chown(d, pw.pw_uid, pw.pw_gid)
        except (KeyError, OSError):
            pass
        return d

    def cache_file(self, cache_dir, uri):
        """The cache file of `uri` (key $request_uri, levels=1:2)."""
        return os.path.join(cache_dir, datasets.levels_path(uri))

    def run_mode(self, ctx, mode, rep):
        P = ctx.p
        prefix = ctx.prefix(self.id, mode)
        if self.origin is None or self.origin.popen.poll() is not None:
            log("  S4 origin is not running: starting it again")
            self._start_origin(ctx)
        cache_dir = self._cache_dir(ctx, prefix)
        size_c = int(self.s1["bytes"] / (self.s1["files"] + 1))
        proxy = ProxySettings(self.origin.port, cache_dir,
                              max_size=f"{max(1024, 4 * (self.nfiles + 64) * size_c // MiB)}m")
        try:
            ctx.precheck(self.id, mode, P["s4.workers"], proxy=proxy)
        except ServerStartError as e:
            clean_dir(cache_dir)
            return _failed(e)
        rec = {"status": "ok", "notes": [], "metrics": {}, "latency": {}, "errors": {},
               "verification": {"in_cgroup": True, "cache_dir": cache_dir,
                                "origin_pid": self.origin.pid, "origin_port": self.origin.port}}
        try:
            r = self._hit_and_miss(ctx, mode, proxy, rec)
            if r is not None:
                return r
            r = self._large(ctx, mode, rep, proxy, rec)
            if r is not None:
                return r
        finally:
            clean_dir(cache_dir)
        if rec["status"] == "ok" and not rec["metrics"]:
            rec["status"] = "failed"
            rec["error"] = "nothing measured: " + "; ".join(rec["notes"][:3])
        return rec

    # -------------------------------------------------------- phases A, B
    def _hit_and_miss(self, ctx, mode, proxy, rec):
        P = ctx.p
        ver = rec["verification"]
        ctx.limit_server(None, None, None)
        # the origin's files in the page cache (charged outside the server's cgroup)
        ctx.warm(*[f["path"] for f in self.objs["hit"].values()], *self.objs["miss_paths"])
        try:
            srv = ctx.start_server(self.id, mode, P["s4.workers"], pin=P["s4.server_cpus"],
                                   proxy=proxy)
        except ServerStartError as e:
            return _failed(e)
        rec["notes"] += srv.notes
        srv_cpus = cpu_list(P["s4.server_cpus"])
        cli_cpus = cpu_list(P["s4.client_cpus"])
        ver["hit"], ver["origin_requests_hit_runs"], ver["wrk_cmds"] = {}, {}, []
        ver["affinity"] = P["s4.server_cpus"]
        client = HttpClient(srv.port)
        try:
            # A: HIT throughput
            for name, f in self.objs["hit"].items():
                key = f"hit.{name}"
                first = _get(client, f["uri"])
                # a cache may commit the entry just after the response: up to
                # 5 tries over 0.4 s (nginx: the first one; the count is recorded)
                for tries in range(1, 6):
                    second = _get(client, f["uri"])
                    ok = (second["status"] == 200 and second["x_cache"] == "HIT"
                          and second["bytes"] == f["size"])
                    if ok or second["status"] != 200:
                        break
                    time.sleep(0.1)
                ver["hit"][name] = {"first_status": first["status"], "first_x_cache": first["x_cache"],
                                    "second_status": second["status"],
                                    "second_x_cache": second["x_cache"],
                                    "second_bytes": second["bytes"], "size": f["size"], "ok": ok,
                                    "tries": tries}
                if not ok:
                    rec["notes"].append(
                        f"{name}: no cache HIT (second response {second['status']}, X-Cache "
                        f"{second['x_cache']!r}, {second['bytes']} of {f['size']} bytes): "
                        "HIT throughput not measured")
                    continue
                client.close()
                if P["s4.warmup_s"] > 0:
                    Wrk(srv.port, f["uri"], P["s4.conns"], 1, P["s4.warmup_s"], P["wrk_timeout_s"],
                        cpus=P["s4.client_cpus"], label="S4 warm-up", nice=P["nice"]).result()
                o0 = origin_requests(self.origin)
                ct0 = cpu_times()
                cpu0 = ctx.cg.cpu_ns()
                r = Wrk(srv.port, f["uri"], P["s4.conns"], 1, P["s4.seconds"], P["wrk_timeout_s"],
                        cpus=P["s4.client_cpus"], label=f"S4 HIT {name}", nice=P["nice"]).result()
                cpu1 = ctx.cg.cpu_ns()
                ct1 = cpu_times()
                o1 = origin_requests(self.origin)
                ver["origin_requests_hit_runs"][name] = (o1 - o0 if o0 is not None and o1 is not None
                                                         else None)
                cpu_s = (cpu1 - cpu0) / 1e9
                busy_srv = sum(ct1[c] - ct0[c] for c in srv_cpus)
                busy_cli = sum(ct1[c] - ct0[c] for c in cli_cpus)
                wrk_s = ct1["children"] - ct0["children"]
                m = rec["metrics"]
                m[f"{key}.req_s"] = r["req_s"]
                m[f"{key}.mb_s"] = r["mb_s"]
                m[f"{key}.mean_ms"] = r["lat_mean_ms"]
                m[f"{key}.p99_ms"] = r["lat_p99_ms"]
                m[f"{key}.p999_ms"] = r["lat_p999_ms"]
                m[f"{key}.cpu_us_per_req"] = cpu_s / r["requests"] * 1e6 if r["requests"] else None
                m[f"{key}.cpu_util_pct"] = cpu_s / r["duration_s"] * 100
                m[f"{key}.other_server_core_pct"] = max(0.0, busy_srv - cpu_s) / r["duration_s"] * 100
                m[f"{key}.other_client_core_pct"] = max(0.0, busy_cli - wrk_s) / r["duration_s"] * 100
                rec["latency"][key] = r["percentiles_ms"]
                rec["errors"][key] = r["errors"]
                ver["wrk_cmds"].append(r["cmd"])
                per_req = r["bytes"] / r["requests"] if r["requests"] else 0
                if r["errors"]["status"] or per_req < f["size"]:
                    rec["notes"].append(f"HIT {name}: {r['errors']['status']} non-2xx responses, "
                                        f"{per_req:.0f} bytes read per request for a "
                                        f"{f['size']}-byte object")

            # B: MISS latency, one request at a time, the client on the client CPUs
            old_aff = os.sched_getaffinity(0)
            o0 = origin_requests(self.origin)
            try:
                os.sched_setaffinity(0, cli_cpus)
                miss = [_get(client, u) for u in self.objs["miss_uris"]]
                again = [_get(client, u) for u in self.objs["miss_uris"]]
            finally:
                os.sched_setaffinity(0, old_aff)
                client.close()
            o1 = origin_requests(self.origin)
            size = self.objs["miss_size"]
            n = len(miss)
            good = [x for x in miss if x["status"] == 200 and x["bytes"] == size]
            n_miss = sum(1 for x in miss if x["x_cache"] == "MISS")
            n_hit = sum(1 for x in again if x["x_cache"] == "HIT")
            ver["miss"] = {"requests": n, "ok_200_full": len(good), "x_cache_miss": n_miss,
                           "again_x_cache_hit": n_hit,
                           "x_cache_values": sorted({str(x["x_cache"]) for x in miss}),
                           "origin_requests": o1 - o0 if o0 is not None and o1 is not None else None,
                           "ok": n_miss == n and len(good) == n}
            if not ver["miss"]["ok"]:
                rec["notes"].append(f"MISS: {n_miss} of {n} responses had X-Cache: MISS, "
                                    f"{len(good)} were complete 200s")
            lat = [x["seconds"] for x in miss]
            lat2 = [x["seconds"] for x in again]
            if n and len(good) == n:      # error responses: no figures
                m = rec["metrics"]
                m["miss_mean_ms"] = statistics.mean(lat) * 1000
                m["miss_p50_ms"] = statistics.median(lat) * 1000
                pm = percentiles_ms(lat)
                m["miss_p99_ms"] = pm.get("99")
                m["miss_max_ms"] = max(lat) * 1000
                m["miss_hit_mean_ms"] = statistics.mean(lat2) * 1000
                m["miss_hit_p50_ms"] = statistics.median(lat2) * 1000
                rec["latency"]["miss"] = pm
                rec["latency"]["miss_hit"] = percentiles_ms(lat2)
            if srv.popen.poll() is not None:
                rec["status"] = "failed"
                rec["error"] = "server exited during phases A/B"
        finally:
            client.close()
            stop(srv)
        return None

    # -------------------------------------------------------- phase C
    def _large(self, ctx, mode, rep, proxy, rec):
        if rec["status"] != "ok":
            return None
        P = ctx.p
        ver = rec["verification"]
        mem = P["s4.mem_mb"] * MiB
        rbps = P["s4.rbps_mb"] * 1_000_000
        riops = P["s4.riops"]
        hot_uri = self.s1["hot_uri"]
        ctx.limit_server(None, None, None)   # no limits while filling; leftovers freed
        try:
            srv = ctx.start_server(self.id, mode, P["workers"], proxy=proxy, tag="-phaseC")
        except ServerStartError as e:
            return _failed(e)
        try:
            # fill: every key once through the proxy (the origin reads S1's files)
            t0 = time.monotonic()
            client = HttpClient(srv.port)
            size = int(self.s1["bytes"] / (self.s1["files"] + 1))
            bad, xc = 0, {}
            try:
                for u in self.cold_uris + [hot_uri]:
                    r = _get(client, u)
                    xc[str(r["x_cache"])] = xc.get(str(r["x_cache"]), 0) + 1
                    if r["status"] != 200 or r["bytes"] != size:
                        bad += 1
            finally:
                client.close()
            fill_s = time.monotonic() - t0
            # the cache files where NGINX's layout puts them (the hot one is warmed below)
            want = [self.cache_file(proxy.cache_dir, u) for u in self.cold_uris + [hot_uri]]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not all(os.path.exists(p) for p in want):
                time.sleep(0.1)
            found = sum(1 for p in want if os.path.exists(p))
            cache_bytes, cache_files = _tree_bytes(proxy.cache_dir)
            hot_path = self.cache_file(proxy.cache_dir, hot_uri)
            if not os.path.exists(hot_path):
                rec["notes"].append(f"phase C: the hot key's cache file is not at {hot_path} "
                                    "(levels=1:2, md5 of $request_uri): not kept resident")
                hot_path = None
            ver["fill"] = {"keys": len(want), "bad_responses": bad, "x_cache": xc,
                           "seconds": round(fill_s, 2), "cache_files_expected_found": found,
                           "cache_files": cache_files, "cache_mib": cache_bytes / MiB,
                           "memory_limit_mib": mem / MiB,
                           "cache_larger_than_limit": cache_bytes > mem}
            if bad:
                rec["notes"].append(f"phase C fill: {bad} of {len(want)} responses were not "
                                    f"complete 200s: phase C not measured")
                stop(srv)
                return None
            if cache_bytes <= mem:
                rec["notes"].append(f"phase C: the cache on disk ({cache_bytes / MiB:.0f} MiB) is "
                                    f"not larger than the memory limit ({mem / MiB:.0f} MiB)")
            # cold start on the running server: write the cache out, evict its
            # pages (only the cache's: the origin's files stay cached, so the
            # next mode's fill does not read them from the disk again), drop
            # dentries and inodes; then the limits
            t1 = time.monotonic()
            os.sync()
            sync_s = time.monotonic() - t1
            cache_paths = _evict_tree(proxy.cache_dir)
            sync_and_drop_caches(2)
            ctx.limit_server(mem, rbps, riops)
            res_bytes = _resident_bytes(cache_paths)
            ver["fill"].update(sync_s=round(sync_s, 2), resident_after_evict_mib=(
                res_bytes / MiB if res_bytes is not None else None))
            if hot_path:
                ctx.warm(hot_path)
            hot_res_start = resident_fraction(hot_path) if hot_path else None
            client = HttpClient(srv.port)
            try:
                ver["hot_x_cache"] = _get(client, hot_uri)["x_cache"]
            finally:
                client.close()
            ctx.cg.reset_stats()
            o0 = origin_requests(self.origin)
        except BaseException:
            stop(srv)
            raise
        wrk_a = ver.pop("wrk_cmds", [])
        measure_cold_hot(ctx, srv, rec, "s4", self.list_file, hot_uri, hot_path, mem, rbps, riops,
                         rep, hot_res_start)
        o1 = origin_requests(self.origin)
        ver["origin_requests_phase_c"] = o1 - o0 if o0 is not None and o1 is not None else None
        ver["wrk_cmds"] = wrk_a + ver.get("wrk_cmds", [])
        rec["metrics"]["fill_s"] = fill_s
        rec["metrics"]["cache_mib"] = cache_bytes / MiB
        ctx.limit_server(None, None, None)
        return None


class S5(Scenario):
    id = "S5"
    title = "S5 memory for idle keep-alive connections"
    what = ("Opens N connections that each make one keep-alive request for a 1 KB file and then "
            "stay open; reports the server's total RSS (sum over its processes; PSS too, which "
            "does not count shared pages twice) before and after, and the growth per connection.")

    def prepare(self, ctx):
        self.files = datasets.s3(ctx.data_dir, _s3_sizes(ctx.p))
        self.small = next(iter(self.files.values()))

    def dataset_info(self):
        return {"uri": self.small["uri"], "size": self.small["size"]}

    def run_mode(self, ctx, mode, rep):
        P = ctx.p
        workers = P["workers"]
        try:
            ctx.precheck(self.id, mode, workers)
        except ServerStartError as e:
            return _failed(e)
        ctx.limit_server(None, None, None)
        try:
            srv = ctx.start_server(self.id, mode, workers)
        except ServerStartError as e:
            return _failed(e)
        rec = {"status": "ok", "notes": list(srv.notes)}
        socks = []
        try:
            time.sleep(0.5)
            base = process_memory(ctx.cg)
            n = P["s5.conns"]
            socks, ok, failed, secs = idle_connections(srv.port, self.small["uri"], n)
            time.sleep(P["s5.settle_s"])
            after = process_memory(ctx.cg)
            memst = ctx.cg.memory()
            alive = srv.popen.poll() is None
        finally:
            close_all(socks)
            stop(srv)
        rec["metrics"] = {
            "conns_ok": ok,
            "rss_base_mib": base["rss_kb"] / 1024,
            "rss_mib": after["rss_kb"] / 1024,
            "pss_mib": after["pss_kb"] / 1024,
            "kb_per_conn": (after["rss_kb"] - base["rss_kb"]) / ok if ok else None,
            "cgroup_mem_mib": memst["usage"] / MiB,
            "open_s": secs,
        }
        rec["verification"] = {"in_cgroup": True, "processes": after["processes"],
                               "connections_requested": n, "connections_failed": failed}
        if ok < n:
            rec["notes"].append(f"only {ok} of {n} connections completed their request "
                                f"({failed} failed)")
        if ok < 0.9 * n:
            rec["status"] = "failed"
            rec["error"] = f"only {ok} of {n} connections completed their request"
        if not alive:
            rec["status"] = "failed"
            rec["error"] = "server exited during the run"
        return rec


SCENARIOS = {s.id: s for s in (S1(), S2(), S3(), S4(), S5())}

# Every parameter: default, --quick value, --smoke value, description.
PARAM_DOC = {
    "reps": (2, 1, 1, "repetitions of every scenario and mode (modes interleaved per repetition)"),
    "threads": (64, 64, 64, "thread-pool threads in total (porter: one pool shared by all workers; "
                           "nginx: threads/workers per worker)"),
    "workers": (2, 2, 2, "worker_processes for S1, S2, S5"),
    "data_owner": ("", "", "", "owner of the dataset files (a user name); empty: root. porter's "
                               "fast path can use cachestat() only on files its workers' user "
                               "owns or may write (Linux 6.14+); nginx does not care"),
    "hot_cgroup": ("separate", "separate", "separate",
                   "S1/S2: where the hot file is warmed: `separate` (read from an unlimited "
                   "memory cgroup of its own, so the server's limit cannot evict it) or `server` "
                   "(read once through the server, so its pages live in the server's cgroup "
                   "and compete with the cold load)"),
    "user": ("", "", "", "`user` directive for both servers; empty: their default (nobody when "
                         "started as root). The data files belong to root, mode 644"),
    "worker_priority": ("", "", "", "`worker_priority` for both servers' workers (a nice value, "
                                    "absolute); empty: not set, the workers keep the servers' "
                                    "`nice`"),
    "sendfile_max_chunk": ("512k", "512k", "512k", "`sendfile_max_chunk` for both servers"),
    "quiet_wait_s": (5, 2, 0, "before each run, wait up to this long for the machine to be "
                               "quiet (other work under quiet_pct of all CPUs over 1 s)"),
    "quiet_pct": (25, 25, 25, "see quiet_wait_s"),
    "nice": (-10, -10, -10, "niceness of the servers and wrk (same for every mode; lessens the "
                            "effect of other work on the machine)"),
    "steady_skip_s": (2, 2, 1, "S1/S2 disk rates leave out the first seconds of the cold load "
                               "(reads are counted when queued, so the start shows a burst)"),
    "wrk_timeout_s": (60, 60, 30, "wrk --timeout (responses slower than this are errors)"),
    "tls": (0, 0, 0, "1: the servers listen with `ssl` (TLS 1.3, a self-signed ECDSA P-256 "
                     "certificate made in the data directory) and wrk speaks https"),
    "disk": ("", "", "", "the emulated disk of S1, S2 and S4 C: empty, each scenario's own "
                         "throttle (bytes/s and a high requests/s limit: an SSD-like disk "
                         "limited by bandwidth); `hdd`, a seek-bound disk: the same bytes/s "
                         "and at most `hdd_riops` read requests/s (a hard disk, a cloud "
                         "volume's operation quota), so small reads meet the operation limit "
                         "before the bandwidth (issue 27)"),
    "hdd_riops": (200, 200, 200, "read requests/s of `--set disk=hdd` (replaces s1/s2/s4.riops "
                                 "not set on the command line)"),
    "s1.files": (512, 512, 12, "S1 cold files"),
    "s1.file_mb": (4, 4, 4, "S1 file size, MiB"),
    "s1.mem_mb": (256, 256, 32, "S1 server memory cgroup limit, MiB (page cache included)"),
    "s1.rbps_mb": (40, 40, 40, "S1 blkio read throttle, MB/s"),
    "s1.riops": (1000, 1000, 1000, "S1 blkio read throttle, requests/s"),
    "s1.cold_conns": (100, 100, 8, "S1 connections of the random cold client"),
    "s1.cold_threads": (2, 2, 1, "S1 wrk threads of the cold client"),
    "s1.hot_conns": (25, 25, 4, "S1 connections of the hot-file client"),
    "s1.hot_delay_ms": (0, 0, 0, "S1 hot client's pause after each response, ms (0: none, the "
                                 "client saturates; N: a paced client, see s2.hot_delay_ms)"),
    "s1.alone_s": (5, 2, 1, "S1 seconds of the hot file alone"),
    "s1.load_s": (20, 6, 3, "S1 seconds of cold load + hot file"),
    "s2.files": (50000, 50000, 300, "S2 small files"),
    "s2.small_frac": (0.9, 0.9, 0.9, "S2 fraction of files under s2.small_max_kb"),
    "s2.small_max_kb": (60, 60, 60, "S2 small-file bound, KiB (log-uniform from 1 KiB)"),
    "s2.large_max_kb": (1024, 1024, 1024, "S2 largest file, KiB"),
    "s2.hot_kb": (16, 16, 16, "S2 hot file size, KiB"),
    "s2.mem_mb": (128, 128, 32, "S2 server memory cgroup limit, MiB"),
    "s2.rbps_mb": (40, 40, 40, "S2 blkio read throttle, MB/s"),
    "s2.riops": (2000, 2000, 2000, "S2 blkio read throttle, requests/s"),
    "s2.cold_conns": (100, 100, 8, "S2 connections of the random cold client"),
    "s2.cold_threads": (2, 2, 1, "S2 wrk threads of the cold client"),
    "s2.hot_conns": (10, 10, 4, "S2 connections of the hot-file client"),
    "s2.hot_delay_ms": (0, 0, 0, "S2 hot client's pause after each response, ms (0: none, the "
                                 "client saturates two cores and its p99 is the CPU's queue; "
                                 "N: each connection offers at most 1000/N req/s, so the p99 is "
                                 "the latency of a request that finds the server idle or busy)"),
    "s2.alone_s": (5, 2, 1, "S2 seconds of the hot file alone"),
    "s2.load_s": (20, 6, 3, "S2 seconds of cold load + hot file"),
    "s3.small_kb": (1, 1, 1, "S3 small file, KiB"),
    "s3.medium_kb": (64, 64, 64, "S3 medium file, KiB"),
    "s3.large_mb": (100, 100, 8, "S3 large file, MiB"),
    "s3.workers": (1, 1, 1, "S3 worker_processes"),
    "s3.server_cpus": ("0", "0", "0", "S3 CPU list the server is pinned to (taskset -c)"),
    "s3.client_cpus": ("1", "1", "1", "S3 CPU list wrk is pinned to"),
    "s3.conns": (50, 50, 10, "S3 wrk connections for the small and medium files"),
    "s3.large_conns": (16, 16, 4, "S3 wrk connections for the large file"),
    "s3.seconds": (6, 2, 1, "S3 seconds per file"),
    "s3.warmup_s": (1, 1, 0, "S3 unrecorded warm-up seconds per file (0: none)"),
    "s4.small_kb": (1, 1, 1, "S4 A: small cached object, KiB"),
    "s4.medium_kb": (64, 64, 64, "S4 A: medium cached object, KiB"),
    "s4.workers": (1, 1, 1, "S4 A/B: worker_processes (C uses `workers`)"),
    "s4.server_cpus": ("0", "0", "0", "S4 A/B: CPU list the server is pinned to"),
    "s4.client_cpus": ("1", "1", "1", "S4 A/B: CPU list wrk and the MISS client are pinned to"),
    "s4.conns": (50, 50, 10, "S4 A: wrk connections on a cached object"),
    "s4.seconds": (3, 1, 1, "S4 A: seconds per object"),
    "s4.warmup_s": (1, 1, 0, "S4 A: unrecorded warm-up seconds per object (0: none)"),
    "s4.misses": (200, 100, 20, "S4 B: distinct objects each requested once (MISS), sequentially"),
    "s4.miss_kb": (16, 16, 16, "S4 B: size of the MISS objects, KiB"),
    "s4.files": (192, 64, 12, "S4 C: how many of S1's files (s1.file_mb each) are filled into "
                              "the cache and requested at random (capped at s1.files)"),
    "s4.mem_mb": (256, 128, 32, "S4 C: server memory cgroup limit, MiB (keep it well under "
                                "s4.files × s1.file_mb)"),
    "s4.rbps_mb": (40, 40, 40, "S4 C: blkio read throttle on the cache's device, MB/s"),
    "s4.riops": (1000, 1000, 1000, "S4 C: blkio read throttle, requests/s"),
    "s4.cold_conns": (100, 100, 8, "S4 C: connections of the random cold client"),
    "s4.cold_threads": (2, 2, 1, "S4 C: wrk threads of the cold client"),
    "s4.hot_conns": (25, 25, 4, "S4 C: connections of the hot-key client"),
    "s4.alone_s": (2, 1, 1, "S4 C: seconds of the hot key alone"),
    "s4.load_s": (10, 4, 3, "S4 C: seconds of cold load + hot key"),
    "s5.conns": (10000, 10000, 500, "S5 idle keep-alive connections"),
    "s5.settle_s": (1.0, 0.5, 0.2, "S5 seconds between the last response and the RSS reading"),
}


def wait_for_quiet(max_wait_s, quiet_pct):
    """Waits (up to max_wait_s) until the CPUs are less than quiet_pct busy
    over one second; returns (last busy %, seconds waited). Our own servers
    are stopped between runs, so what is busy here is other work."""
    t0 = time.monotonic()
    while True:
        a = cpu_times()
        time.sleep(1.0)
        b = cpu_times()
        ncpu = len([k for k in a if isinstance(k, int)]) or 1
        busy = (b["all"] - a["all"]) / ncpu * 100
        waited = time.monotonic() - t0
        if busy < quiet_pct or waited >= max_wait_s:
            return busy, waited


def default_params(quick=False, smoke=False):
    col = 2 if smoke else (1 if quick else 0)
    return {k: v[col] for k, v in PARAM_DOC.items()}


def clean_dir(d):
    if os.path.isdir(d):
        shutil.rmtree(d)


def note_skipped_log(scen, mode, rec):
    if rec["status"] != "ok":
        log(f"  {scen} {mode.label}: {rec['status'].upper()} — {rec.get('error')}")
