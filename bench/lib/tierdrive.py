#!/usr/bin/env python3
"""The client of bench/tier: drives keys through a cache tier and records,
for each request, which cache node answered (the `X-Node` header the nodes
add), its cache status (`X-Cache`), the status code and the time taken.

Subcommands:
  pass    every key once (threads share the key list), JSON summary + the
          key -> node map to --out
  loop    passes over the keys until --stop-file exists (or --max-seconds),
          counting failures, for the time a node is removed or added
  latency sequential keep-alive requests on hot keys, through the edge and
          straight to the owning node: the edge's added latency
  probe   one key asked of one node until it answers HIT: the time from a
          node's start to its first HIT

Only the standard library: it runs inside a network namespace with the
system python3. Several --entry URLs are used in turn (self-routing mode,
standing in for an L4 balancer); a refused connection to one entry moves to
the next and is counted as `entry_retries`, not as a failure.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time


def parse_entry(url):
    """http://HOST:PORT -> (host, port)."""
    rest = url.split("://", 1)[1].rstrip("/")
    host, port = rest.rsplit(":", 1)
    return host, int(port)


class Client:
    """One keep-alive connection per entry, used by one thread."""

    def __init__(self, entries, timeout):
        self.entries = entries
        self.timeout = timeout
        self.conns = {}
        self.turn = 0
        self.entry_retries = 0
        # The entry of the last failed request ("host:port").
        self.failed_entry = ""

    def _conn(self, entry):
        c = self.conns.get(entry)
        if c is None:
            c = http.client.HTTPConnection(*entry, timeout=self.timeout)
            self.conns[entry] = c
        return c

    def _drop(self, entry):
        c = self.conns.pop(entry, None)
        if c is not None:
            c.close()

    def get(self, path):
        """(status, node, cache, seconds, error); status 0 on a failure."""
        start = time.monotonic()
        last_err = ""
        for attempt in range(len(self.entries)):
            entry = self.entries[(self.turn + attempt) % len(self.entries)]
            fresh = entry not in self.conns
            try:
                c = self._conn(entry)
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self._drop(entry)
                self.turn += 1
                return (r.status, r.getheader("X-Node", ""),
                        r.getheader("X-Cache", ""),
                        time.monotonic() - start, "")
            except ConnectionRefusedError as e:
                # The entry itself is gone: an L4 balancer would stop
                # sending to it; try the next one.
                self._drop(entry)
                self.entry_retries += 1
                last_err = repr(e)
                continue
            except (http.client.RemoteDisconnected, ConnectionResetError,
                    BrokenPipeError) as e:
                self._drop(entry)
                if not fresh:
                    # A kept-alive connection the server had closed: a
                    # client retries an idempotent GET once on a new one.
                    try:
                        c = self._conn(entry)
                        c.request("GET", path)
                        r = c.getresponse()
                        r.read()
                        self.turn += 1
                        return (r.status, r.getheader("X-Node", ""),
                                r.getheader("X-Cache", ""),
                                time.monotonic() - start, "")
                    except (OSError, http.client.HTTPException) as e2:
                        self._drop(entry)
                        last_err = repr(e2)
                        if isinstance(e2, ConnectionRefusedError):
                            self.entry_retries += 1
                            continue
                        break
                last_err = repr(e)
                break
            except (OSError, http.client.HTTPException) as e:
                self._drop(entry)
                last_err = repr(e)
                break
        self.turn += 1
        self.failed_entry = "%s:%d" % entry
        return (0, "", "", time.monotonic() - start, last_err)


def key_path(i):
    return "/k/%d" % i


def run_keys(entries, keys, threads, timeout, stop=None, max_seconds=None):
    """Requests `keys` split over `threads`; with `stop`, repeats until it
    is set. Returns the list of (key, status, node, cache, secs, err, t)."""
    results = []
    lock = threading.Lock()
    t0 = time.monotonic()
    retries = [0]

    def work(part):
        cl = Client(entries, timeout)
        mine = []
        while True:
            for k in part:
                st, node, cache, secs, err = cl.get(key_path(k))
                if st == 0:
                    # Which entry the request was lost at.
                    err = cl.failed_entry + " " + err
                mine.append((k, st, node, cache, secs, err, time.time()))
                if stop is not None and stop():
                    break
                if max_seconds and time.monotonic() - t0 > max_seconds:
                    break
            if stop is None or stop() or (
                    max_seconds and time.monotonic() - t0 > max_seconds):
                break
        with lock:
            results.extend(mine)
            retries[0] += cl.entry_retries

    parts = [keys[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=work, args=(p,)) for p in parts]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results, retries[0], time.monotonic() - t0


def summarize(results, retries, wall):
    results.sort(key=lambda r: r[6])
    t0 = results[0][6] if results else 0.0
    n = len(results)
    ok = [r for r in results if r[1] == 200]
    hits = [r for r in ok if r[3] == "HIT"]
    failed = [r for r in results if r[1] != 200]
    by_node = {}
    for r in ok:
        by_node[r[2]] = by_node.get(r[2], 0) + 1
    errors = {}
    failed_by_entry = {}
    for r in failed:
        e = r[5] or ("status %d" % r[1])
        errors[e] = errors.get(e, 0) + 1
        if r[1] == 0:
            ent = r[5].split(" ", 1)[0]
            failed_by_entry[ent] = failed_by_entry.get(ent, 0) + 1
    return {
        "requests": n,
        "ok": len(ok),
        "failed": len(failed),
        "failed_at_s": [round(r[6] - t0, 3) for r in failed][:50],
        "errors": errors,
        "failed_by_entry": failed_by_entry,
        "hits": len(hits),
        "hit_ratio": (len(hits) / len(ok)) if ok else 0.0,
        "by_node": by_node,
        "entry_retries": retries,
        "seconds": round(wall, 3),
    }


def cmd_pass(a):
    keys = list(range(a.keys))
    res, retries, wall = run_keys(a.entry, keys, a.threads, a.timeout)
    out = summarize(res, retries, wall)
    out["map"] = {str(r[0]): r[2] for r in res if r[1] == 200}
    json.dump(out, open(a.out, "w"))
    del out["map"]
    print(json.dumps(out))


def after_mark(results, mark, keys):
    """What followed the change (its time.time() in the file `mark`): the
    hit ratio of the first `keys` requests after it (about one pass over
    the keys) and, per node, how long after it that node's first HIT came."""
    after = [r for r in results if r[6] >= mark]
    first = after[:keys]
    ok = [r for r in first if r[1] == 200]
    first_hit = {}
    for r in after:
        if r[1] == 200 and r[3] == "HIT" and r[2] not in first_hit:
            first_hit[r[2]] = round(r[6] - mark, 3)
    return {
        "requests": len(first),
        "failed": len(first) - len(ok),
        "hit_ratio": (sum(1 for r in ok if r[3] == "HIT") / len(ok)) if ok else 0.0,
        "first_hit_s": first_hit,
    }


def cmd_loop(a):
    keys = list(range(a.keys))

    def stop():
        return os.path.exists(a.stop_file)

    res, retries, wall = run_keys(a.entry, keys, a.threads, a.timeout,
                                  stop=stop, max_seconds=a.max_seconds)
    out = summarize(res, retries, wall)
    if a.mark and os.path.exists(a.mark):
        out["after_change"] = after_mark(res, float(open(a.mark).read()), a.keys)
    json.dump(out, open(a.out, "w"))
    print(json.dumps(out))


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * len(s)))]


def cmd_latency(a):
    """`--map` gives each key's node; `--direct` maps node -> URL. For each
    of --requests requests on hot keys, one through the edge and one straight
    to the key's node, interleaved, on keep-alive connections."""
    m = json.load(open(a.map))["map"]
    direct = dict(d.split("=", 1) for d in a.direct)
    edge = Client(a.entry, a.timeout)
    straight = {n: Client([parse_entry(u)], a.timeout)
                for n, u in direct.items()}
    keys = [int(k) for k in sorted(m, key=int) if m[k] in straight]
    keys = keys[: a.requests]
    te, td, bad = [], [], 0
    for k in keys:
        for cl, acc in ((edge, te), (straight[m[str(k)]], td)):
            st, _node, cache, secs, _err = cl.get(key_path(k))
            if st != 200 or cache != "HIT":
                bad += 1
            acc.append(secs * 1e6)
    out = {
        "requests": len(keys),
        "not_hit": bad,
        "edge_us_median": round(pct(te, 0.5), 1),
        "edge_us_p99": round(pct(te, 0.99), 1),
        "direct_us_median": round(pct(td, 0.5), 1),
        "direct_us_p99": round(pct(td, 0.99), 1),
    }
    out["ratio_median"] = round(out["edge_us_median"] / out["direct_us_median"], 2)
    out["added_us_median"] = round(out["edge_us_median"] - out["direct_us_median"], 1)
    json.dump(out, open(a.out, "w"))
    print(json.dumps(out))


def cmd_probe(a):
    """Asks --entry (one node, directly) for key --probe-key until it answers
    HIT; prints the seconds since the time in --mark."""
    mark = float(open(a.mark).read())
    cl = Client(a.entry, a.timeout)
    deadline = time.time() + a.max_seconds
    tries = 0
    while time.time() < deadline:
        tries += 1
        st, _node, cache, _secs, _err = cl.get(key_path(a.probe_key))
        if st == 200 and cache == "HIT":
            out = {"first_hit_s": round(time.time() - mark, 4), "tries": tries}
            break
        time.sleep(0.002)
    else:
        out = {"first_hit_s": None, "tries": tries}
    json.dump(out, open(a.out, "w"))
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("cmd", choices=["pass", "loop", "latency", "probe"])
    p.add_argument("--entry", action="append", required=True, type=parse_entry)
    p.add_argument("--keys", type=int, default=3000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--out", required=True)
    p.add_argument("--stop-file")
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--mark", help="file holding the change's time.time()")
    p.add_argument("--map")
    p.add_argument("--direct", action="append", default=[])
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--probe-key", type=int, default=0)
    a = p.parse_args()
    {"pass": cmd_pass, "loop": cmd_loop, "latency": cmd_latency,
     "probe": cmd_probe}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
