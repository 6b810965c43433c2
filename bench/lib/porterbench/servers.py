"""The servers under test: modes, equivalent nginx/porter configurations,
start inside the cgroup (through lib/cgexec), readiness, stop.

Only processes this module started are ever signalled: the Popen child and,
at the end, whatever is left in this run's own cgroup (its descendants)."""

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from .common import CGEXEC, TLS, connect, free_port, log, port_is_free, read_file, run


@dataclass
class Mode:
    id: str            # short id used in tables, JSON and file names
    label: str         # what the report prints
    server: str        # "nginx" | "porter"
    aio: str           # "off" | "threads" | "on"
    fast_path: object = None   # porter only: None (not set), True, False
    # when the config test fails, the mode is "skipped" (known missing
    # feature) instead of "failed"
    skip_if_unsupported: bool = False


MODES = [
    Mode("nginx-off", "nginx aio off", "nginx", "off"),
    Mode("nginx-threads", "nginx aio threads", "nginx", "threads"),
    Mode("porter-off", "porter aio off", "porter", "off"),
    Mode("porter-threads-nofast", "porter aio threads, aio_fast_path off", "porter", "threads",
         fast_path=False),
    Mode("porter-threads", "porter aio threads (fast path on)", "porter", "threads",
         fast_path=True),
    Mode("porter-aio-on", "porter aio on (io_uring)", "porter", "on", skip_if_unsupported=True),
]
MODE_BY_ID = {m.id: m for m in MODES}


@dataclass
class ServerSettings:
    workers: int
    threads_total: int          # porter's pool size; nginx gets threads_total / workers per worker
    max_queue: int = 65536
    worker_connections: int = 20000
    nofile: int = 65536
    keepalive_timeout: int = 300
    keepalive_requests: int = 100000
    sendfile_max_chunk: str = "512k"
    nginx_reuseport: bool = True
    user: str = ""              # `user` directive for both; "" = their default (nobody as root)
    worker_priority: str = ""   # `worker_priority` for both; "" = not set (the process's nice)


@dataclass
class ProxySettings:
    """S4: the server under test as a caching reverse proxy in front of
    127.0.0.1:origin_port. Everything else (workers, pools, sendfile,
    keep-alive) stays as for the other scenarios."""
    origin_port: int
    cache_dir: str
    keys_zone: str = "bench:64m"
    max_size: str = "10g"
    inactive: str = "1d"
    upstream_keepalive: int = 32
    valid: str = "200 1d"
    # explicit, so that the harness can compute a key's cache file
    # (levels=1:2: <md5[-1]>/<md5[-3:-1]>/<md5>)
    key: str = "$request_uri"

    @property
    def zone_name(self):
        return self.keys_zone.split(":")[0]


@dataclass
class Directive:
    text: str
    # if the server says "unknown directive" for it, drop it and note why
    # (used only where the directive restates the server's default)
    droppable_note: str = ""


def _lines(mode, s, port, root, prefix):
    """Directive lists (main, location) for a mode; the rest is shared."""
    main, loc = [], []
    if mode.server == "nginx":
        per_worker = max(1, s.threads_total // s.workers)
        if mode.aio == "threads":
            main.append(Directive(f"thread_pool bench threads={per_worker} max_queue={s.max_queue};"))
            loc.append(Directive("aio threads=bench;"))
        elif mode.aio == "off":
            loc.append(Directive("aio off;"))
        else:
            loc.append(Directive(f"aio {mode.aio};"))
    else:
        if mode.aio == "threads":
            main.append(Directive(f"thread_pool bench threads={s.threads_total} max_queue={s.max_queue};"))
            loc.append(Directive("aio threads=bench;"))
            if mode.fast_path is False:
                loc.append(Directive("aio_fast_path off;"))
            elif mode.fast_path is True:
                loc.append(Directive(
                    "aio_fast_path on;",
                    "porter does not know `aio_fast_path` yet: its default (on) applies"))
        elif mode.aio == "off":
            loc.append(Directive(
                "aio off;",
                "porter does not know `aio` yet: it ran with its default, blocking inline "
                "file I/O (= aio off)"))
        else:
            loc.append(Directive(f"aio {mode.aio};"))
    return main, loc


def _http_extra(proxy):
    """Lines at http{} level and the body of `location /` (without the aio
    lines): serve files from the root, or proxy and cache when `proxy`."""
    if proxy is None:
        return [], None
    http = [
        "upstream origin {",
        f"    server 127.0.0.1:{proxy.origin_port};",
        f"    keepalive {proxy.upstream_keepalive};",
        "}",
        f"proxy_cache_path {proxy.cache_dir} levels=1:2 keys_zone={proxy.keys_zone} "
        f"max_size={proxy.max_size} inactive={proxy.inactive} use_temp_path=off;",
        "",
    ]
    loc = [
        "proxy_pass http://origin;",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        f"proxy_cache {proxy.zone_name};",
        f"proxy_cache_key {proxy.key};",
        f"proxy_cache_valid {proxy.valid};",
        "add_header X-Cache $upstream_cache_status;",
    ]
    return http, loc


def render_conf(mode, s, port, root, prefix, dropped=(), proxy=None):
    """The server's configuration. With `proxy` (ProxySettings), `location /`
    proxies to the origin through the cache instead of serving `root`; the
    readiness probe /ready.txt is still served from `root` (exact location),
    so it never touches the cache."""
    main, loc = _lines(mode, s, port, root, prefix)
    main = [d.text for d in main if d.text not in dropped]
    loc = [d.text for d in loc if d.text not in dropped]
    reuse = " reuseport" if (mode.server == "porter" or s.nginx_reuseport) else ""
    http_extra, proxy_loc = _http_extra(proxy)
    if proxy is None:
        loc_body, ready = [f"root {root};"], []
    else:
        loc_body = proxy_loc
        ready = ["        location = /ready.txt {", f"            root {root};", "        }"]
    server_specific = ""
    if mode.server == "nginx":
        server_specific = "master_process on;\n"
    else:
        # porter's own counters (loop busy time, pool, fast path), read by
        # the harness after the loads; no request of the loads matches it
        ready = ready + [f"        location = {METRICS_URI} {{", "            porter_metrics;",
                         "        }"]
    out = [
        f"# {mode.label} — generated by bench/run",
        "daemon off;",
        server_specific.rstrip("\n"),
        f"user {s.user};" if s.user else None,
        f"worker_priority {s.worker_priority};" if s.worker_priority != "" else None,
        f"worker_processes {s.workers};",
        f"worker_rlimit_nofile {s.nofile};",
        f"pid {prefix}/server.pid;",
        f"error_log {prefix}/error.log warn;",
        *main,
        "",
        "events {",
        f"    worker_connections {s.worker_connections};",
        "}",
        "",
        "http {",
        "    access_log off;",
        "    default_type application/octet-stream;",
        "    sendfile on;",
        f"    sendfile_max_chunk {s.sendfile_max_chunk};",
        f"    keepalive_timeout {s.keepalive_timeout};",
        f"    keepalive_requests {s.keepalive_requests};",
        "",
        *[f"    {x}" if x else "" for x in http_extra],
        "    server {",
        f"        listen 127.0.0.1:{port}{reuse}{' ssl' if TLS['on'] else ''};",
        *([f"        ssl_certificate {TLS['cert']};", f"        ssl_certificate_key {TLS['key']};",
           "        ssl_protocols TLSv1.3;"] if TLS["on"] else []),
        *ready,
        "        location / {",
        *[f"            {x}" for x in loc_body],
        *[f"            {x}" for x in loc],
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(line for line in out if line is not None) + "\n"


@dataclass
class Server:
    mode: Mode
    popen: subprocess.Popen
    port: int
    prefix: str
    cgroup: object
    notes: list = field(default_factory=list)

    @property
    def pid(self):
        return self.popen.pid


class ServerStartError(Exception):
    def __init__(self, msg, skipped=False):
        super().__init__(msg)
        self.skipped = skipped


def binary_of(mode, bins):
    return bins["nginx"] if mode.server == "nginx" else bins["porter"]


def _cmd(mode, binary, prefix, conf):
    return [binary, "-p", prefix + "/", "-c", conf]


def config_test(mode, s, root, prefix, bins, port=None, proxy=None):
    """Writes the config and runs `-t`. Returns (config text, dropped directives,
    notes). Raises ServerStartError when the config is rejected."""
    binary = binary_of(mode, bins)
    if isinstance(binary, Exception):
        raise ServerStartError(f"{mode.server} unavailable: {binary}")
    os.makedirs(prefix, exist_ok=True)
    conf = os.path.join(prefix, "server.conf")
    port = port or free_port()
    dropped, notes = [], []
    main, loc = _lines(mode, s, port, root, prefix)
    droppable = {d.text: d.droppable_note for d in main + loc if d.droppable_note}
    for _ in range(4):
        text = render_conf(mode, s, port, root, prefix, dropped, proxy=proxy)
        with open(conf, "w") as f:
            f.write(text)
        r = run(_cmd(mode, binary, prefix, conf) + ["-t"], check=False, timeout=30)
        if r.returncode == 0:
            return text, dropped, notes
        err = (r.stderr + r.stdout).strip()
        m = re.search(r'unknown directive "([^"]+)"', err)
        drop = None
        if m:
            for t in droppable:
                if t.split()[0].rstrip(";") == m.group(1) and t not in dropped:
                    drop = t
        if drop is None:
            first = next((ln for ln in err.splitlines() if "emerg" in ln or "error" in ln.lower()),
                         err.splitlines()[0] if err else f"exit status {r.returncode}")
            first = re.sub(r" in /\S*/(server\.conf:\d+)", r" in \1", first.strip())
            raise ServerStartError(f"config rejected: {first}",
                                   skipped=mode.skip_if_unsupported)
        dropped.append(drop)
        notes.append(droppable[drop])
    raise ServerStartError("config rejected repeatedly")


def start(mode, s, root, prefix, bins, cgroup, pin_cpus=None, ready_uri="/ready.txt", nice=0,
          proxy=None):
    """Start the server inside `cgroup`; returns a ready Server or raises ServerStartError.
    `proxy` (ProxySettings): a caching reverse proxy instead of a file server."""
    port = free_port()
    text, dropped, notes = config_test(mode, s, root, prefix, bins, port, proxy=proxy)
    conf = os.path.join(prefix, "server.conf")
    if not port_is_free(port):
        port = free_port()
        text, dropped, notes = config_test(mode, s, root, prefix, bins, port, proxy=proxy)
    for stale in ("error.log", "server.pid"):
        try:
            os.unlink(os.path.join(prefix, stale))
        except OSError:
            pass
    wrapper = [CGEXEC, "-n", str(s.nofile)]
    if pin_cpus is not None:
        wrapper += ["-c", pin_cpus]
    if nice:
        wrapper += ["-p", str(nice)]
    wrapper += cgroup.procs_files() + ["--"]
    out = open(os.path.join(prefix, "stdout-stderr.log"), "w")
    p = subprocess.Popen(wrapper + _cmd(mode, binary_of(mode, bins), prefix, conf),
                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    out.close()
    srv = Server(mode, p, port, prefix, cgroup, notes)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if p.poll() is not None:
            err = _tail(prefix)
            raise ServerStartError(f"exited with status {p.returncode} at start: {err}")
        if http_ok(port, ready_uri):
            return srv
        time.sleep(0.05)
    stop(srv)
    raise ServerStartError(f"not answering on 127.0.0.1:{port} after 20 s: {_tail(prefix)}")


def _tail(prefix, n=3):
    lines = []
    for fn in ("stdout-stderr.log", "error.log"):
        lines += read_file(os.path.join(prefix, fn), "").strip().splitlines()
    return " | ".join(lines[-n:]) or "(no output)"


METRICS_URI = "/.porter-bench-metrics"


def porter_metrics(srv, timeout=5.0):
    """porter's Prometheus text from METRICS_URI as {name{labels}: value};
    {} for nginx or when the scrape fails (it is evidence, not a result)."""
    if srv.mode.server != "porter":
        return {}
    try:
        with connect(srv.port, timeout) as c:
            c.sendall(f"GET {METRICS_URI} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while chunk := c.recv(65536):
                data += chunk
    except OSError:
        return {}
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return {}
    out = {}
    for line in body.decode(errors="replace").splitlines():
        name, _, value = line.rpartition(" ")
        if line.startswith("#") or not name:
            continue
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def http_ok(port, uri, timeout=2.0, tls=None):
    try:
        with connect(port, timeout, tls) as c:
            c.sendall(f"GET {uri} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
            data = c.recv(64)
            return data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200")
    except OSError:
        return False


def stop(srv, grace=10.0):
    """SIGTERM (fast shutdown) to the process we started; then SIGKILL anything
    of ours still in the run's cgroup."""
    p = srv.popen
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log(f"  {srv.mode.id}: still running {grace:.0f} s after SIGTERM, sending SIGKILL")
            p.kill()
            p.wait(timeout=10)
    for _ in range(50):
        left = srv.cgroup.pids()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def process_memory(cgroup):
    """Sum of VmRSS and of Pss (kB) over the server's processes (all in its cgroup)."""
    rss = pss = 0
    nproc = 0
    for pid in cgroup.pids():
        st = read_file(f"/proc/{pid}/status", "")
        m = re.search(r"^VmRSS:\s+(\d+) kB", st, re.M)
        if m:
            rss += int(m.group(1))
            nproc += 1
        sm = read_file(f"/proc/{pid}/smaps_rollup", "")
        m = re.search(r"^Pss:\s+(\d+) kB", sm, re.M)
        if m:
            pss += int(m.group(1))
    return {"rss_kb": rss, "pss_kb": pss, "processes": nproc}


# ---------------------------------------------------------------- origin
@dataclass
class Origin:
    """S4's origin: a plain nginx serving the data dir, started by the harness
    outside the server's cgroup (no limits, not counted in its CPU/memory)."""
    popen: subprocess.Popen
    port: int
    prefix: str
    status_uri: str = ""        # stub_status location, "" when not available
    workers: list = field(default_factory=list)

    @property
    def pid(self):
        return self.popen.pid


def render_origin_conf(root, prefix, port, nofile, user="", status_uri="/origin-status"):
    status = ([f"        location = {status_uri} {{", "            stub_status;", "        }"]
              if status_uri else [])
    out = [
        "# S4 origin (plain nginx, outside the server's cgroup) — generated by bench/run",
        "daemon off;",
        "master_process on;",
        f"user {user};" if user else None,
        "worker_processes 1;",
        f"worker_rlimit_nofile {nofile};",
        f"pid {prefix}/origin.pid;",
        f"error_log {prefix}/error.log warn;",
        "events {",
        "    worker_connections 4096;",
        "}",
        "http {",
        "    access_log off;",
        "    default_type application/octet-stream;",
        "    sendfile on;",
        "    sendfile_max_chunk 512k;",
        "    keepalive_timeout 300;",
        "    keepalive_requests 100000;",
        "    server {",
        f"        listen 127.0.0.1:{port};",
        *status,
        "        location / {",
        f"            root {root};",
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(line for line in out if line is not None) + "\n"


def _children(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        out += [int(x) for x in read_file(f"/proc/{pid}/task/{tid}/children", "").split()]
    return out


def start_origin(nginx_bin, root, prefix, nofile=65536, user="", nice=0):
    """Starts the origin nginx (as its own session, in the harness's cgroup);
    returns a ready Origin or raises ServerStartError."""
    if isinstance(nginx_bin, Exception):
        raise ServerStartError(f"nginx unavailable for the origin: {nginx_bin}")
    os.makedirs(prefix, exist_ok=True)
    conf = os.path.join(prefix, "origin.conf")
    port = free_port()
    status_uri = "/origin-status"
    for _ in range(2):
        with open(conf, "w") as f:
            f.write(render_origin_conf(root, prefix, port, nofile, user, status_uri))
        r = run([nginx_bin, "-p", prefix + "/", "-c", conf, "-t"], check=False, timeout=30)
        if r.returncode == 0:
            break
        if status_uri and "stub_status" in r.stderr:
            status_uri = ""     # nginx built without the stub_status module
            continue
        raise ServerStartError(f"origin config rejected: {r.stderr.strip()[:300]}")
    wrapper = [CGEXEC, "-n", str(nofile)] + (["-p", str(nice)] if nice else []) + ["--"]
    out = open(os.path.join(prefix, "stdout-stderr.log"), "w")
    p = subprocess.Popen(wrapper + [nginx_bin, "-p", prefix + "/", "-c", conf], stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    out.close()
    o = Origin(p, port, prefix, status_uri)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise ServerStartError(f"origin exited with status {p.returncode} at start: {_tail(prefix)}")
        if http_ok(port, "/ready.txt", tls=False):
            o.workers = _children(p.pid)
            return o
        time.sleep(0.05)
    stop_origin(o)
    raise ServerStartError(f"origin not answering on 127.0.0.1:{port} after 20 s: {_tail(prefix)}")


def origin_requests(o):
    """Requests the origin has handled so far (stub_status), minus the status
    requests themselves; None without stub_status."""
    if not o.status_uri:
        return None
    try:
        with socket.create_connection(("127.0.0.1", o.port), timeout=5) as c:
            c.sendall(f"GET {o.status_uri} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while True:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
        m = re.search(rb"\n\s*(\d+)\s+(\d+)\s+(\d+)\s*\n", data)
        if not m:
            return None
        o.status_calls = getattr(o, "status_calls", 0) + 1
        return int(m.group(3)) - o.status_calls
    except OSError:
        return None


def stop_origin(o, grace=10.0):
    """SIGTERM to the origin's master (which we started); SIGKILL it and the
    workers it had at start if it does not exit."""
    p = o.popen
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=grace)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            log("  origin: still running after SIGTERM, sending SIGKILL")
            p.kill()
            p.wait(timeout=10)
            for pid in o.workers:   # its workers, if they are still nginx processes
                if "nginx" in read_file(f"/proc/{pid}/cmdline", ""):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
