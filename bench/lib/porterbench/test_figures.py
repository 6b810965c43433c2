"""Unit tests of the figures a run reports (python3 -m unittest discover -s
bench/lib): a mode that serves nothing within the run is a result — 0 req/s,
latencies "none within the run", latency targets not met — never a harness
error (issue 27: `measure_cold_hot` divided None by a float)."""

import unittest

from . import report
from .common import NONE_WITHIN_RUN
from .scenarios import cold_hot_figures


def wrk(requests, p99_ms=5.0, seconds=10.0):
    """A Wrk.result() as loadgen builds it."""
    none = requests == 0
    lat = NONE_WITHIN_RUN if none else p99_ms
    return {"requests": requests, "duration_s": seconds, "bytes": requests * 4 << 20,
            "req_s": requests / seconds, "mb_s": requests * 4.194304 / seconds,
            "errors": {"status": 0, "connect": 0}, "lat_mean_ms": lat, "lat_p50_ms": lat,
            "lat_p99_ms": lat, "lat_p999_ms": lat, "lat_max_ms": lat, "percentiles_ms": {},
            "cmd": "wrk"}


IO = {"cg_read_mb_s": 40.0, "cg_read_iops": 80.0, "disk_read_mb_s": 40.0}


def record(mode, rep, hot_requests):
    m = cold_hot_figures(wrk(3000, 2.0), wrk(hot_requests, 40.0), wrk(100, 9000.0), IO)
    return {"scenario": "S1", "mode": mode, "rep": rep, "status": "ok", "metrics": m,
            "notes": []}


class NothingServed(unittest.TestCase):
    def test_a_client_that_completed_nothing_is_zero_and_none_within_the_run(self):
        m = cold_hot_figures(wrk(3000, 2.0), wrk(0), wrk(0), IO)
        self.assertEqual(m["hot_load_req_s"], 0.0)
        self.assertEqual(m["hot_ratio"], 0.0)
        self.assertEqual(m["hot_load_p99_ms"], NONE_WITHIN_RUN)
        self.assertEqual(m["hot_p99_ratio"], NONE_WITHIN_RUN)
        self.assertEqual(m["cold_mb_s"], 0.0)
        self.assertEqual(report.fmt(m["hot_load_p99_ms"]), "none within the run")

    def test_nothing_alone_leaves_the_ratios_undefined_not_an_error(self):
        m = cold_hot_figures(wrk(0), wrk(0), wrk(0), IO)
        self.assertIsNone(m["hot_ratio"])
        self.assertIsNone(m["hot_p99_ratio"])

    def test_average_read_size_is_bytes_over_reads(self):
        m = cold_hot_figures(wrk(10), wrk(10), wrk(10), IO)
        self.assertAlmostEqual(m["disk_read_kib"], 40e6 / 1024 / 80)
        m = cold_hot_figures(wrk(10), wrk(10), wrk(10), dict(IO, cg_read_iops=0.0))
        self.assertIsNone(m["disk_read_kib"])

    def test_a_repetition_that_served_nothing_is_the_worst_and_misses_the_target(self):
        runs = [record("porter-threads", 1, 500), record("porter-threads", 2, 0),
                record("nginx-threads", 1, 80)]
        agg = report.aggregate(runs)
        p99 = agg["S1"]["porter-threads"]["metrics"]["hot_p99_ratio"]
        self.assertEqual(p99["n"], 2)
        self.assertEqual(p99["max"], NONE_WITHIN_RUN)
        by_text = {t[1]: t for t in report.targets(agg)}
        t = by_text["S1: porter aio threads (fast path on) hot p99 under load ≤ 2× hot alone "
                    "p99, every rep"]
        self.assertEqual(t[2], "NOT met")
        self.assertIn("none within the run", t[3])
        tables = "\n".join(tab for _, tab in report.scenario_tables(agg, "S1"))
        self.assertIn("none within the run", tables)


if __name__ == "__main__":
    unittest.main()
