"""PNG plots (matplotlib, Agg backend): latency distributions per mode and
throughput over time per mode. Returns {scenario: [file names]}."""

import os
import statistics

from .servers import MODE_BY_ID, MODES

COLORS = {
    "nginx-off": "#d62728", "nginx-threads": "#ff7f0e", "porter-off": "#1f77b4",
    "porter-threads-nofast": "#9467bd", "porter-threads": "#2ca02c", "porter-aio-on": "#8c564b",
}


def available():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ok(runs, scen):
    return [r for r in runs if r["scenario"] == scen and r["status"] == "ok"]


def _latency_axes(ax, recs, key, title):
    """Percentile on a log 'nines' axis against latency in ms."""
    drawn = False
    for r in recs:
        pc = r.get("latency", {}).get(key)
        if not pc:
            continue
        pts = sorted((float(p), v) for p, v in pc.items() if float(p) < 100)
        xs = [1 / (1 - p / 100) for p, _ in pts]
        ys = [max(v, 1e-3) for _, v in pts]
        ax.plot(xs, ys, color=COLORS.get(r["mode"]), linestyle="-" if r["rep"] == 1 else "--",
                marker=".", label=f"{MODE_BY_ID[r['mode']].label} (rep {r['rep']})")
        drawn = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [1, 2, 10, 100, 1000, 10000, 100000]
    labels = ["0", "50", "90", "99", "99.9", "99.99", "99.999"]
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency, ms (log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    return drawn


def make(runs, out_dir):
    plt = _plt()
    made = {}

    for scen in ("S1", "S2", "S4"):
        recs = _ok(runs, scen)
        if not recs:
            continue
        files = []
        if scen == "S4":
            panels = []
            for r in recs:
                for k in r.get("latency", {}):
                    if k.startswith("hit.") and (k, f"S4 A: {k[4:]} object, cache HIT") not in panels:
                        panels.append((k, f"S4 A: {k[4:]} object, cache HIT"))
            panels += [("miss", "S4 B: MISS, one request at a time"),
                       ("hot_load", "S4 C: hot key under cold load"),
                       ("hot_alone", "S4 C: hot key alone")]
            cols = 3
            rows = (len(panels) + cols - 1) // cols
            fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 5 * rows), squeeze=False)
            for ax, (k, title) in zip(axes.flat, panels):
                _latency_axes(ax, recs, k, title)
            for ax in list(axes.flat)[len(panels):]:
                ax.axis("off")
        else:
            fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
            _latency_axes(axes[0], recs, "hot_load", f"{scen}: hot file under cold load")
            _latency_axes(axes[1], recs, "hot_alone", f"{scen}: hot file alone")
        fig.tight_layout()
        fn = f"{scen.lower()}-latency.png"
        fig.savefig(os.path.join(out_dir, fn), dpi=90)
        plt.close(fig)
        files.append(fn)

        modes = [m for m in MODES if any(r["mode"] == m.id and r.get("series") for r in recs)]
        if not modes:
            made[scen] = files
            continue
        fig, axes = plt.subplots(len(modes), 1, figsize=(11, 2.4 * len(modes) + 0.6), sharex=True,
                                 squeeze=False)
        for ax, m in zip(axes[:, 0], modes):
            ax2 = ax.twinx()
            for r in [r for r in recs if r["mode"] == m.id]:
                s = r.get("series") or []
                t = [x["t"] for x in s]
                ls = "-" if r["rep"] == 1 else "--"
                ax.plot(t, [x["cg_read_mb_s"] for x in s], color="#1f77b4", linestyle=ls,
                        label=f"disk read by the server (rep {r['rep']})")
                ax2.plot(t, [x["lo_tx_mb_s"] for x in s], color="#2ca02c", linestyle=ls,
                         label=f"sent over loopback (rep {r['rep']})")
            ax.set_title(m.label, fontsize=9)
            ax.set_ylabel("disk MB/s", color="#1f77b4")
            ax2.set_ylabel("loopback MB/s", color="#2ca02c")
            ax.set_ylim(bottom=0)
            ax2.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower right")
        axes[-1, 0].set_xlabel("seconds into the cold load + hot run")
        fig.suptitle(f"{scen}: throughput over time (1 s samples)", fontsize=11)
        fig.tight_layout()
        fn = f"{scen.lower()}-throughput.png"
        fig.savefig(os.path.join(out_dir, fn), dpi=90)
        plt.close(fig)
        files.append(fn)
        made[scen] = files

    recs = _ok(runs, "S3")
    if recs:
        names = list(recs[0].get("latency", {}).keys())
        fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 5), squeeze=False)
        for ax, n in zip(axes[0], names):
            _latency_axes(ax, recs, n, f"S3: {n} file, all cached")
        fig.tight_layout()
        fn = "s3-latency.png"
        fig.savefig(os.path.join(out_dir, fn), dpi=90)
        plt.close(fig)
        made["S3"] = [fn]

        fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4.5), squeeze=False)
        modes = [m for m in MODES if any(r["mode"] == m.id for r in recs)]
        for ax, n in zip(axes[0], names):
            key = f"{n}.mb_s" if n.endswith("m") else f"{n}.req_s"
            for i, m in enumerate(modes):
                vals = [r["metrics"][key] for r in recs if r["mode"] == m.id]
                if vals:
                    ax.bar(i, statistics.median(vals), color=COLORS.get(m.id))
                    ax.plot([i] * len(vals), vals, "k.", markersize=6)
            ax.set_xticks(range(len(modes)))
            ax.set_xticklabels([m.id for m in modes], rotation=30, ha="right", fontsize=8)
            ax.set_title(f"S3 {n}: {'MB/s' if n.endswith('m') else 'req/s'} (dots: repetitions)",
                         fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        fn = "s3-throughput.png"
        fig.savefig(os.path.join(out_dir, fn), dpi=90)
        plt.close(fig)
        made["S3"].append(fn)

    recs = _ok(runs, "S5")
    if recs:
        modes = [m for m in MODES if any(r["mode"] == m.id for r in recs)]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for i, m in enumerate(modes):
            vals = [r["metrics"]["rss_mib"] for r in recs if r["mode"] == m.id]
            base = [r["metrics"]["rss_base_mib"] for r in recs if r["mode"] == m.id]
            ax.bar(i, statistics.median(vals), color=COLORS.get(m.id))
            ax.plot([i] * len(vals), vals, "k.", markersize=6)
            ax.plot([i - 0.4, i + 0.4], [statistics.median(base)] * 2, "k--", linewidth=1)
        ax.set_xticks(range(len(modes)))
        ax.set_xticklabels([m.id for m in modes], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("MiB")
        ax.set_title("S5: server RSS with idle keep-alive connections (dashed: before)", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        fn = "s5-rss.png"
        fig.savefig(os.path.join(out_dir, fn), dpi=90)
        plt.close(fig)
        made["S5"] = [fn]
    return made
