"""cgroup v1 control for the server under test: memory limit (page cache
included), blkio read throttle on the data's block device, CPU accounting."""

import os
import time

from .common import HarnessError, read_file, write_file

CG_ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "blkio", "cpuacct")


def check_cgroup_v1():
    missing = [c for c in CONTROLLERS
               if not os.path.exists(os.path.join(CG_ROOT, c, "cgroup.procs"))]
    if missing:
        raise HarnessError(
            "cgroup v1 hierarchies missing under /sys/fs/cgroup: " + ", ".join(missing)
            + " (the benchmark needs cgroup v1 memory, blkio and cpuacct)")


def block_device_of(path):
    """(major, minor, name) of the whole disk holding `path`; throttles must be
    set on the disk, not on a partition."""
    st = os.stat(path)
    maj, mnr = os.major(st.st_dev), os.minor(st.st_dev)
    sysdir = f"/sys/dev/block/{maj}:{mnr}"
    if not os.path.exists(sysdir):
        raise HarnessError(f"{path} is on device {maj}:{mnr}, which is not a block device "
                           "(tmpfs/overlay?): the blkio throttle cannot apply; use --data-dir "
                           "on a disk-backed file system")
    real = os.path.realpath(sysdir)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
        maj, mnr = (int(x) for x in read_file(os.path.join(real, "dev")).split(":"))
    return maj, mnr, os.path.basename(real)


def diskstats(devname):
    """(reads completed, bytes read) for a device from /proc/diskstats."""
    for line in read_file("/proc/diskstats").splitlines():
        p = line.split()
        if len(p) > 6 and p[2] == devname:
            return int(p[3]), int(p[5]) * 512
    return 0, 0


def lo_tx_bytes():
    for line in read_file("/proc/net/dev").splitlines():
        line = line.strip()
        if line.startswith("lo:"):
            return int(line.split(":", 1)[1].split()[8])
    return 0


class Cgroup:
    """One cgroup named `name` in each of the memory, blkio and cpuacct hierarchies."""

    def __init__(self, name):
        self.name = name
        self.path = {c: os.path.join(CG_ROOT, c, name) for c in CONTROLLERS}

    def create(self):
        for p in self.path.values():
            os.makedirs(p, exist_ok=True)
        return self

    def f(self, ctl, fname):
        return os.path.join(self.path[ctl], fname)

    def procs_files(self):
        return [self.f(c, "cgroup.procs") for c in CONTROLLERS]

    def pids(self):
        out = read_file(self.f("memory", "cgroup.procs"), "")
        return [int(x) for x in out.split()]

    def tasks(self):
        out = read_file(self.f("memory", "tasks"), "")
        return [int(x) for x in out.split()]

    # memory -------------------------------------------------------------
    def set_memory_limit(self, limit_bytes):
        write_file(self.f("memory", "memory.limit_in_bytes"),
                   -1 if limit_bytes is None else int(limit_bytes))

    def empty_memory(self):
        """Reclaim pages still charged from an earlier run (only with no tasks)."""
        if not self.pids():
            try:
                write_file(self.f("memory", "memory.force_empty"), 0)
            except OSError:
                pass

    def reset_stats(self):
        write_file(self.f("memory", "memory.max_usage_in_bytes"), 0)
        write_file(self.f("memory", "memory.failcnt"), 0)
        write_file(self.f("blkio", "blkio.reset_stats"), 1)

    def memory(self):
        def num(fn):
            return int(read_file(self.f("memory", fn)).strip())
        stat = {}
        for line in read_file(self.f("memory", "memory.stat"), "").splitlines():
            k, _, v = line.partition(" ")
            if k in ("cache", "rss", "mapped_file", "total_cache", "total_rss"):
                stat[k] = int(v)
        limit = num("memory.limit_in_bytes")
        return {
            "limit": None if limit >= 2**60 else limit,
            "usage": num("memory.usage_in_bytes"),
            "max_usage": num("memory.max_usage_in_bytes"),
            "failcnt": num("memory.failcnt"),
            "cache": stat.get("cache"),
            "rss": stat.get("rss"),
        }

    # blkio --------------------------------------------------------------
    def set_read_throttle(self, maj, mnr, bps, iops):
        """bps / iops of 0 or None remove that limit."""
        write_file(self.f("blkio", "blkio.throttle.read_bps_device"), f"{maj}:{mnr} {int(bps or 0)}")
        write_file(self.f("blkio", "blkio.throttle.read_iops_device"), f"{maj}:{mnr} {int(iops or 0)}")

    def read_throttle(self):
        return {
            "read_bps_device": read_file(self.f("blkio", "blkio.throttle.read_bps_device"), "").strip(),
            "read_iops_device": read_file(self.f("blkio", "blkio.throttle.read_iops_device"), "").strip(),
        }

    def blkio_reads(self, maj, mnr):
        """(read requests, read bytes) the throttle layer saw from this cgroup."""
        def val(fn):
            for line in read_file(self.f("blkio", fn), "").splitlines():
                p = line.split()
                if len(p) == 3 and p[0] == f"{maj}:{mnr}" and p[1] == "Read":
                    return int(p[2])
            return 0
        return val("blkio.throttle.io_serviced"), val("blkio.throttle.io_service_bytes")

    # cpu ----------------------------------------------------------------
    def cpu_ns(self):
        return int(read_file(self.f("cpuacct", "cpuacct.usage")).strip())

    def remove(self):
        for c in reversed(CONTROLLERS):
            p = self.path[c]
            for _ in range(20):
                try:
                    if os.path.isdir(p):
                        os.rmdir(p)
                    break
                except OSError:
                    time.sleep(0.1)


def in_cgroup(pid, cg):
    """True when process `pid` sits in cgroup `cg` for every controller."""
    text = read_file(f"/proc/{pid}/cgroup", "")
    found = {}
    for line in text.splitlines():
        _, ctls, path = line.split(":", 2)
        for c in ctls.split(","):
            found[c] = path
    return all(found.get(c) == "/" + cg.name for c in CONTROLLERS)
