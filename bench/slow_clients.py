#!/usr/bin/env python3
"""Slow-client attack, porter and Debian's nginx side by side (issue 12).

An attacker opens more connections than `worker_connections` allows and
trickles each request head one byte per `--pace` seconds, so no head ever
completes; meanwhile a normal client sends one request on a new connection
every `--probe-every` seconds. With `client_header_timeout` bounding the
whole head, the server closes the trickling connections when it runs out
and the normal client is served again. The script prints, per server, how
many probes succeeded before and after the timeout (plus a margin) and the
moment of the first success after the attack began.

Bounded and local: loopback only, a fixed duration, every process it starts
is stopped by PID. Run as: bench/slow_clients.py [--porter PATH]
(default: $CARGO_TARGET_DIR/release/porter, else target/release/porter).
`--reconnect` makes the attacker reopen every connection the server closes
(a persistent attacker), which no timeout alone can beat.
"""

import argparse
import os
import resource
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def server_conf(kind, prefix, port, root, a):
    http = (
        f"  access_log off;\n"
        f"  client_header_timeout {a.timeout}s;\n"
        f"  server {{\n    listen 127.0.0.1:{port};\n    root {root};\n"
        f"    location / {{ }}\n  }}\n"
    )
    if kind == "nginx":
        http = (
            f"  client_body_temp_path {prefix}/cb;\n  proxy_temp_path {prefix}/pt;\n"
            f"  fastcgi_temp_path {prefix}/ft;\n  uwsgi_temp_path {prefix}/ut;\n"
            f"  scgi_temp_path {prefix}/st;\n" + http
        )
    return (
        f"worker_processes 1;\npid {prefix}/server.pid;\n"
        f"error_log {prefix}/error.log {'info' if kind == 'porter' else 'warn'};\n"
        f"events {{ worker_connections {a.worker_connections}; }}\n"
        f"http {{\n{http}}}\n"
    )


def start(kind, binary, a, root):
    prefix = tempfile.mkdtemp(prefix=f"slowcli-{kind}-")
    port = free_port()
    conf = os.path.join(prefix, "server.conf")
    with open(conf, "w") as f:
        f.write(server_conf(kind, prefix, port, root, a))
    args = [binary, "-p", prefix, "-e", os.path.join(prefix, "error.log"), "-c", conf, "-g", "daemon off;"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_port(port):
        proc.kill()
        sys.exit(f"{kind} did not start (see {prefix}/error.log)")
    return proc, port, prefix


class Attacker:
    """`n` connections, each trickling one header byte per `pace`."""

    HEAD = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n"

    def __init__(self, port, n, pace, reconnect):
        self.port, self.n, self.pace, self.reconnect = port, n, pace, reconnect
        self.sel = selectors.DefaultSelector()
        self.socks = set()
        self.closed_by_server = 0
        self.refused = 0

    def open_one(self):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            self.refused += 1
            s.close()
            return
        self.sel.register(s, selectors.EVENT_READ)
        self.socks.add(s)
        self.pending_head = getattr(self, "pending_head", set())
        self.pending_head.add(s)

    def drop(self, s):
        self.sel.unregister(s)
        self.socks.discard(s)
        self.pending_head.discard(s)
        s.close()
        self.closed_by_server += 1
        if self.reconnect:
            self.open_one()

    def start(self):
        for _ in range(self.n):
            self.open_one()

    def tick(self):
        """Sends the head (once connected) or one more byte to each."""
        for s in list(self.socks):
            try:
                if s in self.pending_head:
                    s.send(self.HEAD)
                    self.pending_head.discard(s)
                else:
                    s.send(b"X")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.drop(s)

    def poll(self, timeout):
        for key, _ in self.sel.select(timeout):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                self.drop(s)

    def close(self):
        for s in list(self.socks):
            self.sel.unregister(s)
            s.close()
        self.socks.clear()


def probe(port, timeout):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            return got.startswith(b"HTTP/1.1 200") and got.endswith(b"hello\n")
    except OSError:
        return False


def run_one(kind, binary, a, root):
    proc, port, prefix = start(kind, binary, a, root)
    try:
        atk = Attacker(port, a.connections, a.pace, a.reconnect)
        t0 = time.time()
        atk.start()
        results = []
        next_tick = t0
        next_probe = t0 + a.probe_every
        end = t0 + a.duration
        while time.time() < end:
            now = time.time()
            if now >= next_tick:
                atk.tick()
                next_tick += a.pace
            if now >= next_probe:
                results.append((now - t0, probe(port, a.probe_timeout)))
                next_probe = time.time() + a.probe_every
            atk.poll(max(0.0, min(next_tick, next_probe) - time.time()))
        open_left = len(atk.socks)
        atk.close()
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if a.show_log:
            with open(os.path.join(prefix, "error.log"), errors="replace") as f:
                lines = f.read().splitlines()
            counts = {}
            for line in lines:
                # "2026/11/25 02:48:21 [level] pid#tid: *N message, client..."
                msg = line.split(": ", 1)[-1].split(", client")[0]
                msg = msg.split(" ", 1)[-1] if msg.startswith("*") else msg
                counts[msg] = counts.get(msg, 0) + 1
            for msg, n in sorted(counts.items(), key=lambda x: -x[1])[:6]:
                print(f"#   {kind} error.log: {n} x {msg}")
        shutil.rmtree(prefix, ignore_errors=True)
    after_at = a.timeout + a.margin
    before = [ok for t, ok in results if t < after_at]
    after = [ok for t, ok in results if t >= after_at]
    first_ok = next((t for t, ok in results if ok and t > 0.2), None)
    return {
        "server": kind,
        "probes_before": len(before),
        "ok_before": sum(before),
        "probes_after": len(after),
        "ok_after": sum(after),
        "share_after": (100.0 * sum(after) / len(after)) if after else 0.0,
        "first_ok_s": first_ok,
        "closed_by_server": atk.closed_by_server,
        "attacker_open_at_end": open_left,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "..", "target"))
    p.add_argument("--porter", default=os.path.join(target, "release", "porter"))
    p.add_argument("--nginx", default="/usr/sbin/nginx")
    p.add_argument("--connections", type=int, default=1100)
    p.add_argument("--worker-connections", type=int, default=1024)
    p.add_argument("--timeout", type=int, default=5, help="client_header_timeout, seconds")
    p.add_argument("--pace", type=float, default=1.0, help="seconds between trickled bytes")
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--probe-every", type=float, default=0.1)
    p.add_argument("--probe-timeout", type=float, default=1.0)
    p.add_argument("--margin", type=float, default=1.0, help="seconds after the timeout before 'after' counts")
    p.add_argument("--reconnect", action="store_true")
    p.add_argument("--only", choices=["porter", "nginx"])
    p.add_argument("--show-log", action="store_true", help="print each server's most frequent error.log lines")
    a = p.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * a.connections + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    root = tempfile.mkdtemp(prefix="slowcli-root-")
    os.chmod(root, 0o755)  # the workers may run as nobody
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("hello\n")
    os.chmod(os.path.join(root, "a.txt"), 0o644)
    print(
        f"# {a.connections} trickling connections (1 byte / {a.pace}s{', reconnecting' if a.reconnect else ''}) "
        f"vs worker_connections {a.worker_connections}, client_header_timeout {a.timeout}s, "
        f"{a.duration:.0f}s, a probe every {a.probe_every}s (timeout {a.probe_timeout}s); "
        f"'after' = from {a.timeout + a.margin:.0f}s"
    )
    print("server | probes before | ok before | probes after | ok after | share ok after | first ok (s) | closed by server | attacker open at end")
    print("---|---|---|---|---|---|---|---|---")
    kinds = [("porter", a.porter), ("nginx", a.nginx)]
    for kind, binary in kinds:
        if a.only and kind != a.only:
            continue
        if not os.path.exists(binary):
            print(f"{kind} | (not found: {binary})")
            continue
        r = run_one(kind, binary, a, root)
        first = "-" if r["first_ok_s"] is None else f"{r['first_ok_s']:.1f}"
        print(
            f"{kind} | {r['probes_before']} | {r['ok_before']} | {r['probes_after']} | {r['ok_after']} | "
            f"{r['share_after']:.1f} % | {first} | {r['closed_by_server']} | {r['attacker_open_at_end']}"
        )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
