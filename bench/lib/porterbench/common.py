"""Small helpers shared by the benchmark modules: progress log, commands,
machine description, statistics over repetitions."""

import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_DIR = os.path.dirname(BENCH_DIR)
LUA_DIR = os.path.join(BENCH_DIR, "lua")
CGEXEC = os.path.join(BENCH_DIR, "lib", "cgexec")

_t0 = time.monotonic()


def log(msg):
    """Progress line on stderr with the elapsed time."""
    el = time.monotonic() - _t0
    sys.stderr.write(f"[{int(el) // 60:3d}:{int(el) % 60:02d}] {msg}\n")
    sys.stderr.flush()


# `--set tls=1`: the servers listen with `ssl` (TLS 1.3, the certificate
# bench/run makes in the data directory) and every client speaks https.
TLS = {"on": False, "cert": None, "key": None}


def scheme():
    return "https" if TLS["on"] else "http"


def connect(port, timeout, tls=None):
    """A client socket to 127.0.0.1:`port`, TLS when the run is (or `tls`
    says so); the certificate is not checked."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if TLS["on"] if tls is None else tls:
        import ssl
        s = ssl._create_unverified_context().wrap_socket(s, server_hostname="bench")
    return s


def make_tls_cert(data_dir):
    """A self-signed ECDSA P-256 certificate for the run (made once)."""
    d = os.path.join(data_dir, "tls")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    if not (os.path.exists(cert) and os.path.exists(key)):
        run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-days", "3650", "-subj", "/CN=bench", "-keyout", key, "-out", cert])
    for f in (cert, key):
        os.chmod(f, 0o644)
    TLS.update(on=True, cert=cert, key=key)


class HarnessError(Exception):
    """The harness itself cannot go on (not a server failure)."""


def run(cmd, check=True, timeout=None, **kw):
    return subprocess.run(cmd, check=check, timeout=timeout, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def write_file(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def read_file(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        if default is not None:
            return default
        raise


def sync_and_drop_caches(level=3):
    """sync, then drop the page cache (1), dentries and inodes (2) or both (3)."""
    os.sync()
    write_file("/proc/sys/vm/drop_caches", level)


def port_is_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


_next_port = [20000 + (os.getpid() * 37) % 9000]


def free_port():
    """A port in 20000–29999 (below the ephemeral range) that nothing has bound."""
    for _ in range(2000):
        p = _next_port[0]
        _next_port[0] = 20000 + (p - 20000 + 1) % 10000
        if port_is_free(p):
            return p
    raise HarnessError("no free port found in 20000-29999")


def machine_info(data_dir):
    info = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "cores": os.cpu_count(),
        "cpu_model": "",
        "mem_total_gib": None,
    }
    for line in read_file("/proc/cpuinfo", "").splitlines():
        if line.startswith("model name"):
            info["cpu_model"] = line.split(":", 1)[1].strip()
            break
    for line in read_file("/proc/meminfo", "").splitlines():
        if line.startswith("MemTotal:"):
            info["mem_total_gib"] = round(int(line.split()[1]) / 1048576, 1)
    try:
        df = shutil.disk_usage(data_dir)
        info["data_fs_free_gib"] = round(df.free / 2**30, 1)
    except OSError:
        pass
    for line in read_file("/proc/mounts", "").splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1] == "/":
            info["root_fs"] = f"{parts[2]} on {parts[0]}"
    try:
        info["nginx"] = run(["nginx", "-v"]).stderr.strip()
    except (OSError, subprocess.CalledProcessError):
        info["nginx"] = "not installed"
    try:
        out = run(["wrk", "-v"], check=False)
        info["wrk"] = (out.stdout + out.stderr).splitlines()[0].strip()
    except OSError:
        info["wrk"] = "not installed"
    info["python"] = platform.python_version()
    return info


def porter_revision():
    try:
        rev = run(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"]).stdout.strip()
        dirty = run(["git", "-C", REPO_DIR, "status", "--porcelain", "--", "src", "Cargo.toml",
                     "Cargo.lock"]).stdout.strip()
        return rev + ("+uncommitted changes in src/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# A latency figure of a client none of whose requests completed within the
# run: every request took longer than the run. It sorts as the worst value,
# so a repetition that served nothing fails a latency target instead of
# dropping out of the worst-of-N (a None would), and prints as
# "none within the run" (report.fmt).
NONE_WITHIN_RUN = float("inf")


def ratio(a, b):
    """a ÷ b, or None where it means nothing (a figure missing, b zero or
    none within the run); a latency none within the run over a finite one
    stays NONE_WITHIN_RUN (worse than any)."""
    if a is None or b is None or b == 0 or b == NONE_WITHIN_RUN:
        return None
    return a / b


def summarize(values):
    """median, min, max, n of the non-None values (None when there are none)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "values": vals}


def dump_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
