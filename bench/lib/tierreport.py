#!/usr/bin/env python3
"""bench/tier's report: reads the JSON files tierdrive.py wrote for each
pass and load window, and prints the figures as Markdown, ending with a
`Targets:` line (all met, or which were missed)."""

import argparse
import json
import os


def load(d, name):
    return json.load(open(os.path.join(d, name + ".json")))


def moved(a, b):
    """Keys whose node differs between the maps of passes a and b."""
    return sorted(k for k in a["map"] if b["map"].get(k) != a["map"][k])


def pct(x):
    return "%.1f %%" % (100.0 * x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--porter", default="")
    p.add_argument("--restart-log", default="")
    p.add_argument("--killed-entry", default="",
                   help="host:port of the killed node as the client's entry")
    a = p.parse_args()
    d = a.dir
    hot = load(d, "hot")
    n = a.keys
    c2_keys = {k for k, v in hot["map"].items() if v == "c2"}
    missed = []
    notes = []
    lines = []
    out = lines.append

    out("| pass | requests | failed | hit ratio | keys per node (c1/c2/c3) |")
    out("| --- | ---: | ---: | ---: | --- |")
    for name in ["warm", "hot", "after-kill", "after-kill2", "after-restart",
                 "after-down", "after-up"]:
        r = load(d, name)
        bn = r["by_node"]
        out("| %s | %d | %d | %s | %d/%d/%d |" % (
            name, r["requests"], r["failed"], pct(r["hit_ratio"]),
            bn.get("c1", 0), bn.get("c2", 0), bn.get("c3", 0)))
        if r["failed"]:
            missed.append("%s: %d failed" % (name, r["failed"]))
    out("")

    out("| change (load running through it) | requests | failed | errors "
        "| hit ratio, first %d requests after the change |" % n)
    out("| --- | ---: | ---: | --- | ---: |")
    for name, what in [("kill", "c2 killed (SIGKILL)"),
                       ("restart", "c2 started again"),
                       ("down", "c2 `down` + reload"),
                       ("up", "c2 back + reload")]:
        r = load(d, name)
        errs = ", ".join("%s × %d" % (e, c) for e, c in r["errors"].items())
        ac = r.get("after_change", {})
        out("| %s | %d | %d | %s | %s |" % (what, r["requests"], r["failed"], errs or "none",
                                          pct(ac["hit_ratio"]) if ac else "?"))
        # In self mode the client's own connections to the killed node's
        # front are lost with it (no balancer in between retries them): the
        # requests in flight on the killed node, which the target allows.
        lost_at_killed = 0
        if name == "kill" and a.killed_entry:
            lost_at_killed = r.get("failed_by_entry", {}).get(a.killed_entry, 0)
        if r["failed"] - lost_at_killed:
            missed.append("%s window: %d failed" % (name, r["failed"] - lost_at_killed))
        if lost_at_killed:
            notes.append("- Of the kill window's failures, %d: requests the client "
                         "had in flight on c2's own front port (%s) when it was killed."
                         % (lost_at_killed, a.killed_entry))
    out("")

    lines.extend(notes)
    after_kill = load(d, "after-kill")
    after_down = load(d, "after-down")
    for label, r in [("kill", after_kill), ("down + reload", after_down)]:
        m = moved(hot, r)
        share = len(m) / n
        foreign = [k for k in m if k not in c2_keys]
        out("- Removal by %s: %d of %d keys moved (%s; c2 held %d = %s); "
            "keys moved that were not c2's: %d." % (
                label, len(m), n, pct(share), len(c2_keys),
                pct(len(c2_keys) / n), len(foreign)))
        if share > 1 / 3 + 0.05:
            missed.append("%s: %s moved" % (label, pct(share)))
        if foreign:
            missed.append("%s: %d keys of other nodes moved" % (label, len(foreign)))
        if set(m) != c2_keys:
            missed.append("%s: not every key of c2 moved" % label)
    out("- The kill came first: when c2 is marked `down` later, its keys are "
        "already cached on c1 and c3, so that change's hit ratio stays high.")
    same = moved(after_kill, after_down)
    out("- Kill and `down` send c2's keys to the same nodes: %s (%d keys differ)."
        % ("yes" if not same else "no", len(same)))
    for label, name in [("restart", "after-restart"), ("up + reload", "after-up")]:
        r = load(d, name)
        back = moved(hot, r)
        out("- After c2's %s: %d keys differ from before the removal; hit ratio %s." % (
            label, len(back), pct(r["hit_ratio"])))
        if back:
            missed.append("%s: %d keys did not return" % (label, len(back)))
    lat = load(d, "latency")
    via = "the edge" if a.mode == "edge" else "a front (one hop to the owner)"
    out("- Added latency of %s, %d sequential keep-alive requests on HIT keys, "
        "interleaved: median %.0f µs vs %.0f µs direct to the owning node "
        "(ratio %.2f, +%.0f µs); p99 %.0f µs vs %.0f µs; %d not HIT." % (
            via, lat["requests"], lat["edge_us_median"], lat["direct_us_median"],
            lat["ratio_median"], lat["added_us_median"], lat["edge_us_p99"],
            lat["direct_us_p99"], lat["not_hit"]))
    probe = load(d, "probe")
    first = load(d, "restart").get("after_change", {}).get("first_hit_s", {})
    out("- c2 started again on its cache directory: a key it held answered HIT "
        "%s s after the start command, asked directly; through the tier c2's "
        "first HIT came %s s after it (a server that failed is tried again after "
        "fail_timeout=3s)." % (probe["first_hit_s"], first.get("c2")))
    if probe["first_hit_s"] is None:
        missed.append("c2 served no HIT within 10 s of its restart")
    if a.restart_log and os.path.exists(a.restart_log):
        loader = [l.rstrip() for l in open(a.restart_log)
                  if "cache loader" in l or "loaded" in l]
        if loader:
            out("- c2's loader after its restart (its count leaves out entries that "
                "requests brought into the index first): `%s`"
                % loader[-1].split("] ", 1)[-1])
    out("")
    out("Targets: " + ("all met" if not missed else "missed: " + "; ".join(missed)))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
