#!/usr/bin/env python3
"""Seeds fuzz/corpus/<target>/ from real traffic on loopback.

Starts Debian's nginx as an origin (static files, gzip for chunked
responses, a redirect, a 404) and porter in front of it as a caching
proxy, plus a listener that records the raw bytes clients send. Then:

- request_head, uri, range: requests as curl, Python's http.client, nginx's
  and porter's proxies send them (recorded by the listener); the targets
  and Range values of those requests;
- upstream_response, chunked: raw responses of nginx and porter read off
  the socket; the chunked bodies among them and chunked request bodies
  (chunked seeds start with the piece size byte the target reads);
- cache_header: the entry files porter's cache wrote for those responses
  (and tests/common/cache_v1_entry, a version 1 entry);
- config: the repository's configuration files and the two used here.

usage: fuzz/seeds.py PORTER_BINARY   (from the repository root; replaces
the files it names, leaves others)
"""

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
NGINX = "/usr/sbin/nginx"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def save(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def wait_port(port):
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


class Recorder:
    """Accepts connections, records what each sends until it pauses, and
    answers a short 200 (Connection: close)."""

    def __init__(self):
        self.port = free_port()
        self.got = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(64)
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.one, args=(c,), daemon=True).start()

    def one(self, c):
        c.settimeout(0.4)
        data = b""
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                data += b
                if b"\r\n\r\n" in data and b"100-continue" in data.lower() and b"HTTP/1.1 100" not in data:
                    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        except socket.timeout:
            pass
        self.got.append(data)
        try:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n"
                      b"Cache-Control: max-age=60\r\nConnection: close\r\n\r\nok")
        except OSError:
            pass
        c.close()

    def take(self):
        time.sleep(0.6)
        out, self.got = self.got, []
        return out


def raw_exchange(port, req):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(req)
    out = b""
    s.settimeout(3)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out


def main():
    porter = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="porter-seeds-")
    os.chmod(tmp, 0o755)  # porter's workers (nobody) reach the cache
    www = os.path.join(tmp, "www")
    os.makedirs(os.path.join(www, "dir"))
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("<html><body>" + "porter seeds " * 200 + "</body></html>\n")
    with open(os.path.join(www, "a.txt"), "w") as f:
        f.write("".join(f"line {i}\n" for i in range(300)))
    with open(os.path.join(www, "dir", "b.css"), "w") as f:
        f.write("body { color: #333; }\n" * 40)
    os.makedirs(os.path.join(tmp, "logs"))
    os.makedirs(os.path.join(tmp, "cache"))
    shutil.chown(os.path.join(tmp, "cache"), "nobody") if os.geteuid() == 0 else None
    rec = Recorder()
    o_port, p_port, np_port = free_port(), free_port(), free_port()
    origin_conf = f"""daemon off; master_process off; pid {tmp}/nginx.pid;
error_log {tmp}/logs/nginx.err warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  gzip on; gzip_types text/plain text/css; gzip_min_length 10;
  server {{
    listen 127.0.0.1:{o_port};
    location / {{ root {www}; etag on; }}
    location = /moved {{ return 301 /a.txt; }}
  }}
  server {{
    listen 127.0.0.1:{np_port};
    location / {{ proxy_pass http://127.0.0.1:{rec.port}; proxy_set_header X-Real-IP $remote_addr; }}
  }}
}}
"""
    porter_conf = f"""daemon off;
worker_processes 1;
pid {tmp}/porter.pid;
error_log {tmp}/logs/porter.err info;
events {{ worker_connections 64; }}
http {{
  access_log off;
  proxy_cache_path {tmp}/cache levels=1:2 keys_zone=seeds:1m;
  server {{
    listen 127.0.0.1:{p_port};
    location / {{
      proxy_pass http://127.0.0.1:{o_port};
      proxy_cache seeds;
      proxy_cache_valid 200 301 404 10m;
      add_header X-Cache $upstream_cache_status;
    }}
    location /nocache/ {{
      proxy_pass http://127.0.0.1:{o_port}/;
      proxy_buffering off;
      proxy_http_version 1.1;
    }}
    location /rec/ {{
      proxy_pass http://127.0.0.1:{rec.port};
      proxy_cache seeds;
      proxy_cache_revalidate on;
    }}
  }}
}}
"""
    with open(os.path.join(tmp, "origin.conf"), "w") as f:
        f.write(origin_conf)
    with open(os.path.join(tmp, "porter.conf"), "w") as f:
        f.write(porter_conf)
    ng = subprocess.Popen([NGINX, "-p", tmp, "-c", os.path.join(tmp, "origin.conf")])
    po = subprocess.Popen([porter, "-p", tmp, "-c", os.path.join(tmp, "porter.conf")])
    try:
        wait_port(o_port)
        wait_port(p_port)
        seed_requests(rec, np_port, p_port)
        seed_responses(o_port, p_port)
        time.sleep(0.5)
        seed_cache(os.path.join(tmp, "cache"))
        seed_configs(origin_conf, porter_conf)
    finally:
        po.terminate()
        ng.terminate()
        po.wait()
        ng.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def curl(*args):
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "3", *args], check=False)


def seed_requests(rec, np_port, p_port):
    base = f"http://127.0.0.1:{rec.port}"
    curl(base + "/")
    curl("-I", base + "/index.html?x=1&y=%20z")
    curl("-r", "0-99", base + "/a.txt")
    curl("-r", "100-", base + "/a.txt")
    curl("-r", "-500", base + "/a.txt")
    curl("-r", "0-1,5-9,20-", base + "/a.txt")
    curl("--path-as-is", base + "/dir/../a.txt")
    curl("--path-as-is", base + "/./dir//b.css%3Fq?a=%2e%2e")
    curl("-H", "If-None-Match: \"abc\"", "-H", "If-Modified-Since: Mon, 02 Jan 2023 00:00:00 GMT",
         base + "/a.txt")
    curl("-H", "Accept-Encoding: gzip, deflate", "-H", "Cookie: a=b; c=d", "-A",
         "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0", base + "/%E2%82%AC/caf%C3%A9")
    curl("-d", "a=1&b=2", base + "/form")
    curl("-H", "Transfer-Encoding: chunked", "--data-binary", "hello chunked body", base + "/up")
    curl("-X", "PUT", "-H", "Expect: 100-continue", "--data-binary", "x" * 2000, base + "/put")
    curl("-H", "Range: bytes=0-", "-H", "If-Range: \"6b06cebf-a1e\"", base + "/video.mp4")
    curl("-H", "Range: bytes=1024-2047", base + "/video.mp4")
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "3", "-T", "-", base + "/stdin"],
                   input=b"chunk of stdin\n" * 5000, check=False)
    curl("--http1.0", base + "/old")
    curl("-x", base, "http://example.com/absolute?q=1")
    curl(f"http://127.0.0.1:{np_port}/via-nginx?p=1")
    curl("-H", "Range: bytes=5-", f"http://127.0.0.1:{p_port}/rec/via-porter")
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", rec.port, timeout=3)
    try:
        c.request("GET", "/python?a=b", headers={"X-Long": "v" * 300})
        c.getresponse().read()
    except OSError:
        pass
    c = http.client.HTTPConnection("127.0.0.1", rec.port, timeout=3)
    try:
        c.request("POST", "/python-chunked", body=iter([b"first", b"second piece", b"x" * 300]),
                  encode_chunked=True)
        c.getresponse().read()
    except OSError:
        pass
    reqs = [r for r in rec.take() if r]
    for i, r in enumerate(reqs):
        save("request_head", f"captured-{i:02}", r[:8192])
        head = r.split(b"\r\n\r\n", 1)
        line = head[0].split(b"\r\n", 1)[0].split(b" ")
        if len(line) >= 2:
            save("uri", f"captured-{i:02}", line[1])
        for h in head[0].split(b"\r\n")[1:]:
            if h.lower().startswith(b"range:"):
                value = h.split(b":", 1)[1].strip()
                # length 4000 (little endian u16), max_ranges unset; and
                # length 4000 << 24 with max_ranges 1
                save("range", f"captured-{i:02}", b"\xa0\x0f\x00" + value)
                save("range", f"captured-{i:02}-max1", b"\xa0\x0f\xc1" + value)
        if len(head) == 2 and b"chunked" in head[0].lower() and head[1]:
            save("chunked", f"request-{i:02}", b"\x05" + head[1][:8192])


def seed_responses(o_port, p_port):
    reqs = [
        ("nginx-200", o_port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("nginx-gzip-chunked", o_port,
         b"GET /dir/b.css HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"),
        ("nginx-206", o_port, b"GET /a.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9,20-29\r\nConnection: close\r\n\r\n"),
        ("nginx-301", o_port, b"GET /dir HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("nginx-404", o_port, b"GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("nginx-head", o_port, b"HEAD /index.html HTTP/1.0\r\n\r\n"),
        ("nginx-400", o_port, b"GET / HTTP/1.1\r\n\r\n"),
        ("porter-miss", p_port, b"GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("porter-hit", p_port, b"GET /index.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("porter-gzip", p_port,
         b"GET /a.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"),
        ("porter-moved", p_port, b"GET /moved HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("porter-404", p_port, b"GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("porter-chunked", p_port,
         b"GET /nocache/dir/b.css HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"),
        ("porter-304", p_port,
         b"GET /index.html HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\nConnection: close\r\n\r\n"),
    ]
    for name, port, req in reqs:
        resp = raw_exchange(port, req)
        if not resp:
            continue
        save("upstream_response", name, resp[:8192])
        head, _, body = resp.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            save("chunked", name, b"\x03" + body[:8192])


def seed_cache(cache):
    n = 0
    for d, _, files in os.walk(cache):
        for f in sorted(files):
            with open(os.path.join(d, f), "rb") as fh:
                data = fh.read()
            save("cache_header", f"fill-{hashlib.md5(data).hexdigest()[:8]}", data[:16384])
            n += 1
    v1 = os.path.join(ROOT, "tests", "common", "cache_v1_entry")
    with open(v1, "rb") as fh:
        save("cache_header", "version-1", fh.read())
    if n == 0:
        raise SystemExit("the fill left no cache file")


def seed_configs(origin_conf, porter_conf):
    for rel in ["conf/porter.conf", "conf/mime.types", "pkg/debian/porter.conf"]:
        with open(os.path.join(ROOT, rel), "rb") as fh:
            data = fh.read()
        if rel.endswith("mime.types"):
            data = b"events {}\nhttp {\n" + data + b"\n}\n"
        save("config", rel.replace("/", "-"), data)
    save("config", "seeds-origin.conf", origin_conf.encode())
    save("config", "seeds-porter.conf", porter_conf.encode())


if __name__ == "__main__":
    main()
