"""Load generators: wrk with the Lua scripts in bench/lua, the idle
keep-alive connection client for S5, and a 1-second sampler of disk and
loopback throughput."""

import errno
import http.client
import json
import math
import os
import resource
import selectors
import socket
import struct
import subprocess
import threading
import time

from .cgroups import diskstats, lo_tx_bytes
from .common import CGEXEC, LUA_DIR, NONE_WITHIN_RUN, TLS, HarnessError, scheme


class Wrk:
    """One wrk process, started now, bounded in time (duration + grace)."""

    def __init__(self, port, uri, conns, threads, duration, timeout_s, list_file=None, seed=1,
                 cpus=None, label="", nice=0, delay_ms=0):
        self.label = label
        duration = max(1, int(round(duration)))  # wrk takes whole seconds
        self.duration = duration
        threads = max(1, min(threads, conns))
        url = f"{scheme()}://127.0.0.1:{port}{uri}"
        cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s",
               "--timeout", f"{timeout_s}s"]
        if list_file:
            cmd += ["-s", os.path.join(LUA_DIR, "random.lua"), url, "--", list_file, str(seed)]
        elif delay_ms:
            # paced: a bounded offered rate, so latency is not the queue of a saturated CPU
            cmd += ["-s", os.path.join(LUA_DIR, "paced.lua"), url, "--", str(delay_ms)]
        else:
            cmd += ["-s", os.path.join(LUA_DIR, "fixed.lua"), url]
        if cpus is not None:
            cmd = ["taskset", "-c", cpus] + cmd
        self.cmd = cmd
        if nice:
            # own session, so cgexec's autogroup nice applies to this wrk only
            cmd = [CGEXEC, "-p", str(nice), "--"] + cmd
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL, start_new_session=True)

    def result(self):
        try:
            out, err = self.p.communicate(timeout=self.duration + 60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            out, err = self.p.communicate()
            raise HarnessError(f"wrk ({self.label}) did not finish within its duration + 60 s")
        for line in out.splitlines():
            if line.startswith("BENCHJSON "):
                r = json.loads(line[len("BENCHJSON "):])
                d = r["duration_us"] / 1e6 or self.duration
                lat = r["latency_us"]
                pc = lat["percentiles"]
                return {
                    "requests": r["requests"],
                    "duration_s": d,
                    "bytes": r["bytes"],
                    "req_s": r["requests"] / d,
                    "mb_s": r["bytes"] / d / 1e6,
                    "errors": r["errors"],
                    # no request completed: a result (0 req/s, every
                    # latency "none within the run"), not a harness error
                    "lat_mean_ms": lat["mean"] / 1000 if r["requests"] else NONE_WITHIN_RUN,
                    "lat_p50_ms": pc["50"] / 1000 if r["requests"] else NONE_WITHIN_RUN,
                    "lat_p99_ms": pc["99"] / 1000 if r["requests"] else NONE_WITHIN_RUN,
                    "lat_p999_ms": pc["99.9"] / 1000 if r["requests"] else NONE_WITHIN_RUN,
                    "lat_max_ms": lat["max"] / 1000 if r["requests"] else NONE_WITHIN_RUN,
                    "percentiles_ms": {k: v / 1000 for k, v in pc.items()} if r["requests"] else {},
                    "cmd": " ".join(self.cmd),
                }
        raise HarnessError(f"wrk ({self.label}) printed no BENCHJSON line; exit {self.p.returncode}; "
                           f"stderr: {err.strip()[:300]}; stdout: {out.strip()[-300:]}")


def cpu_times():
    """Busy CPU seconds per CPU (index) and for all CPUs (key "all"), from
    /proc/stat, plus the CPU seconds of this process's waited-for children
    (wrk, ...) as key "children"."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            p = line.split()
            v = [int(x) for x in p[1:9]]
            busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick  # user nice system irq softirq steal
            out["all" if p[0] == "cpu" else int(p[0][3:])] = busy
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["children"] = ru.ru_utime + ru.ru_stime
    return out


class Sampler:
    """Every second: the server cgroup's throttled read bytes and requests on
    the data device, the device's reads from /proc/diskstats (whole machine),
    and bytes sent over loopback (everything the servers sent)."""

    def __init__(self, cgroup, dev):
        self.cg, self.dev = cgroup, dev
        self.samples = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _snap(self):
        maj, mnr, name = self.dev
        ios, byts = self.cg.blkio_reads(maj, mnr)
        d_ios, d_bytes = diskstats(name)
        return (time.monotonic(), ios, byts, d_ios, d_bytes, lo_tx_bytes())

    def start(self):
        self._t0 = self._snap()
        self._t.start()
        return self

    def _loop(self):
        prev = self._t0
        self._snaps = [prev]
        nxt = prev[0] + 1.0
        while not self._stop.wait(max(0.0, nxt - time.monotonic())):
            cur = self._snap()
            self._snaps.append(cur)
            dt = cur[0] - prev[0]
            self.samples.append({
                "t": round(cur[0] - self._t0[0], 2),
                "cg_read_mb_s": (cur[2] - prev[2]) / dt / 1e6,
                "cg_read_iops": (cur[1] - prev[1]) / dt,
                "disk_read_mb_s": (cur[4] - prev[4]) / dt / 1e6,
                "lo_tx_mb_s": (cur[5] - prev[5]) / dt / 1e6,
            })
            prev = cur
            nxt += 1.0

    def stop(self, skip_s=2.0):
        """Totals over the whole run, and 'steady' rates that leave out the
        first skip_s seconds: the throttle counts a read when it is submitted,
        so the burst of requests queued at the start shows up there as reads
        far above the limit that the disk never delivered at that rate."""
        self._stop.set()
        self._t.join()
        end = self._snap()
        t0 = self._t0
        dt = end[0] - t0[0]
        base = next((x for x in getattr(self, "_snaps", []) if x[0] - t0[0] >= skip_s - 0.01), None)
        if base is None or end[0] - base[0] < 1.0:
            base = t0
        sdt = end[0] - base[0]
        return {
            "seconds": dt,
            "cg_read_requests": end[1] - t0[1],
            "cg_read_bytes": end[2] - t0[2],
            "disk_reads": end[3] - t0[3],
            "disk_read_bytes": end[4] - t0[4],
            "cg_read_mb_s_all": (end[2] - t0[2]) / dt / 1e6,
            "cg_read_iops_all": (end[1] - t0[1]) / dt,
            "steady_from_s": round(base[0] - t0[0], 2),
            "cg_read_mb_s": (end[2] - base[2]) / sdt / 1e6,
            "cg_read_iops": (end[1] - base[1]) / sdt,
            "disk_read_mb_s": (end[4] - base[4]) / sdt / 1e6,
            "series": self.samples,
        }


def raise_nofile(n):
    """Raise the soft open-files limit to n; above the hard limit only with
    CAP_SYS_RESOURCE (tried, then the hard limit is taken). Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, max(hard, n)))
        return n
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


def idle_connections(port, uri, count, batch=500, timeout=60.0):
    """Open `count` connections; each sends one keep-alive GET and reads the
    whole response, then stays open. Over TLS (`--set tls=1`) each first
    completes a TLS 1.3 handshake (non-blocking, no session resumption) and
    reads the session tickets the server sends with its answer. Returns
    (sockets, number that got a complete 200 response, number that failed,
    seconds taken). The caller closes the sockets."""
    got = raise_nofile(count + 64)
    if got < count + 64:
        raise HarnessError(f"{count} connections need an open-files limit of {count + 64}; "
                           f"this process may only raise it to {got} (hard limit, no "
                           "CAP_SYS_RESOURCE): use --set s5.conns=N with a smaller N")
    req = f"GET {uri} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
    tls = None
    if TLS["on"]:
        import ssl
        tls = ssl._create_unverified_context()
        tls.minimum_version = ssl.TLSVersion.TLSv1_3
    sel = selectors.DefaultSelector()
    socks, ok, failed = [], 0, 0
    state = {}
    t0 = time.monotonic()
    deadline = t0 + timeout
    opened = 0
    while (opened < count or state) and time.monotonic() < deadline:
        while opened < count and len(state) < batch:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.setblocking(False)
            rc = s.connect_ex(("127.0.0.1", port))
            if rc not in (0, errno.EINPROGRESS):
                s.close()
                failed += 1
                opened += 1
                continue
            st = {"step": "connect", "buf": b"", "sock": s}
            state[id(st)] = st
            sel.register(s, selectors.EVENT_WRITE, st)
            opened += 1
        for key, ev in sel.select(timeout=0.5):
            st = key.data
            try:
                done = _idle_step(st["sock"], st, req, tls, sel)
            except OSError:
                done = "failed"
            if done is None:
                continue
            c = st.get("ssl", st["sock"])
            try:
                sel.unregister(c)
            except (KeyError, ValueError):
                pass
            del state[id(st)]
            if done == "ok":
                ok += 1
                socks.append(c)
            else:
                failed += 1
                c.close()
    sel.close()
    socks += [st.get("ssl", st["sock"]) for st in state.values()]
    return socks, ok, failed, time.monotonic() - t0


def _idle_step(s, st, req, tls, sel):
    """One readiness event of an S5 connection: connect, (TLS handshake),
    send the request, read the answer. Returns None while not finished,
    "ok" after a complete 200, "failed" otherwise."""
    import ssl
    if st["step"] == "connect":
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            raise OSError("connect failed")
        if tls is not None:
            sel.unregister(s)  # wrap_socket detaches s: the selector follows its fd
            st["ssl"] = tls.wrap_socket(s, server_hostname="bench",
                                        do_handshake_on_connect=False)
            sel.register(st["ssl"], selectors.EVENT_WRITE, st)
            st["step"] = "handshake"
        else:
            st["step"] = "send"
    c = st.get("ssl", s)
    if st["step"] == "handshake":
        try:
            c.do_handshake()
        except ssl.SSLWantReadError:
            sel.modify(c, selectors.EVENT_READ, st)
            return None
        except ssl.SSLWantWriteError:
            sel.modify(c, selectors.EVENT_WRITE, st)
            return None
        st["step"] = "send"
    if st["step"] == "send":
        c.sendall(req)
        st["step"] = "read"
        sel.modify(c, selectors.EVENT_READ, st)
        return None
    while True:
        try:
            data = c.recv(65536)
        except ssl.SSLWantReadError:
            return None
        if not data:
            raise OSError("closed by server")
        st["buf"] += data
        head, sep, body = st["buf"].partition(b"\r\n\r\n")
        if sep:
            clen = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    clen = int(v)
            if len(body) >= clen:
                return "ok" if head.startswith(b"HTTP/1.1 200") else "failed"
        if tls is None:
            return None


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


class HttpClient:
    """One keep-alive HTTP/1.1 connection for sequential requests (S4: cache
    fills and MISS latency). get() returns status, the X-Cache header, the body
    length and the seconds from sending the request to the last body byte."""

    def __init__(self, port, timeout=60.0):
        self.port, self.timeout = port, timeout
        self.c = None

    def get(self, uri):
        for attempt in (0, 1):
            if self.c is None:
                if TLS["on"]:
                    import ssl
                    self.c = http.client.HTTPSConnection(
                        "127.0.0.1", self.port, timeout=self.timeout,
                        context=ssl._create_unverified_context())
                else:
                    self.c = http.client.HTTPConnection("127.0.0.1", self.port,
                                                        timeout=self.timeout)
            try:
                t0 = time.perf_counter()
                self.c.request("GET", uri, headers={"Host": "bench"})
                r = self.c.getresponse()
                n = 0
                while True:
                    chunk = r.read(1 << 20)
                    if not chunk:
                        break
                    n += len(chunk)
                dt = time.perf_counter() - t0
                if r.will_close:
                    self.close()
                return {"status": r.status, "x_cache": r.getheader("X-Cache"), "bytes": n,
                        "seconds": dt}
            except (OSError, http.client.HTTPException):
                # a keep-alive connection the server closed: retry once on a new one
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None


PCTS = (1, 5, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95, 97.5, 99, 99.5, 99.9)


def percentiles_ms(seconds):
    """Latency percentiles (nearest rank, ms) of a list of durations in seconds,
    keyed like summary.lua's, up to what the sample size supports."""
    xs = sorted(seconds)
    n = len(xs)
    out = {}
    for q in PCTS:
        if n < 100 / (100 - q):     # p99 needs ≥ 100 samples, p99.9 ≥ 1000
            continue
        i = min(n - 1, max(0, int(math.ceil(q / 100 * n)) - 1))
        out[f"{q:g}"] = xs[i] * 1000
    return out
