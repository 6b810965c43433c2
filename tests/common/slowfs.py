#!/usr/bin/python3
"""slowfs: a read-only FUSE passthrough of a backing directory whose
operations are slow, to test porter against a genuinely slow disk.

Every lookup, stat, fstat, open and read sleeps for a configurable
time before doing the real operation on the backing directory, so a process
calling open(), fstat(), read() or sendfile() on the mount really blocks in
the kernel for that long (in D state, as on a cold spinning disk).

Kernel caching must not hide the delay, so the mount uses
entry_timeout=0,attr_timeout=0,negative_timeout=0 (every path walk and every
fstat goes to this daemon) and, by default, direct_io (no page cache: every
read goes to this daemon too; even a second open of the same file is slow).
With --page-cache the kernel page cache is used instead, without keep_cache,
so each open still drops the file's cached pages.

Optionally --eio REL:OFFSET makes reads of REL (path relative to the mount)
fail with EIO when they touch byte OFFSET or later, for read-error tests.

The daemon runs in the foreground, multithreaded (libfuse2 serves up to 10
requests at once, each sleeping independently). One limit: libfuse2 does
not negotiate parallel directory operations, so the kernel serialises
lookups within one directory; concurrent first opens of files in the same
directory queue behind each other's lookup (like one disk head), while
their opens, stats and reads overlap. It unmounts itself when it
gets SIGTERM/SIGINT, or when its parent process dies (the test binary was
killed), so a mount never outlives the tests.

Usage: slowfs.py BACKING MOUNTPOINT [--delay-ms N] [--getattr-ms N]
       [--open-ms N] [--read-ms N] [--page-cache] [--max-readahead BYTES]
       [--eio REL:OFFSET]... [--trace FILE]
"""

import argparse
import errno
import os
import subprocess
import sys
import threading
import time

try:
    from fusepy import FUSE, FuseOSError, Operations
except ImportError:  # upstream's module name
    from fuse import FUSE, FuseOSError, Operations


class SlowFS(Operations):
    """Read-only passthrough with per-operation delays."""

    use_ns = True

    def __init__(self, root, delays, eio, trace):
        self.root = os.path.realpath(root)
        self.delays = delays
        self.eio = eio
        self.trace = trace
        self.trace_lock = threading.Lock()

    def _real(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def _slow(self, op, path, detail=""):
        seconds = self.delays[op] / 1000.0
        if seconds > 0:
            time.sleep(seconds)
        if self.trace:
            with self.trace_lock:
                self.trace.write(
                    "%.3f %s %s %s\n" % (time.time(), op, path, detail))
                self.trace.flush()

    # The high-level libfuse API serves both LOOKUP (a path walk) and
    # GETATTR (stat, and fstat: the kernel sends no file handle) here.
    def getattr(self, path, fh=None):
        self._slow("getattr", path)
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        attrs = {
            key: getattr(st, key)
            for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                        "st_ino", "st_blocks")
        }
        attrs["st_atime"] = st.st_atime_ns
        attrs["st_mtime"] = st.st_mtime_ns
        attrs["st_ctime"] = st.st_ctime_ns
        return attrs

    def access(self, path, amode):
        return 0

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._real(path))

    def readlink(self, path):
        return os.readlink(self._real(path))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
            raise FuseOSError(errno.EROFS)
        self._slow("open", path)
        return os.open(self._real(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        self._slow("read", path, "%d+%d" % (offset, size))
        limit = self.eio.get(path)
        if limit is not None and offset + size > limit:
            raise FuseOSError(errno.EIO)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0

    def statfs(self, path):
        st = os.statvfs(self._real(path))
        return {
            key: getattr(st, key)
            for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                        "f_favail", "f_ffree", "f_files", "f_flag",
                        "f_frsize", "f_namemax")
        }


def unmount(mountpoint):
    for cmd in (["fusermount", "-u", "-z", mountpoint],
                ["umount", "-l", mountpoint]):
        try:
            if subprocess.call(cmd, stderr=subprocess.DEVNULL) == 0:
                return
        except OSError:
            pass


def watch_parent(mountpoint):
    """Unmounts (which ends the FUSE loop) when the parent process dies."""
    parent = os.getppid()
    while True:
        time.sleep(0.2)
        if os.getppid() != parent:
            unmount(mountpoint)
            time.sleep(2)
            os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    ap.add_argument("--delay-ms", type=float, default=200,
                    help="default delay of every operation")
    for op in ("getattr", "open", "read"):
        ap.add_argument("--%s-ms" % op, type=float, default=None)
    ap.add_argument("--page-cache", action="store_true",
                    help="use the page cache instead of direct_io")
    ap.add_argument("--max-readahead", type=int, default=None,
                    help="the kernel's readahead for the mount, in bytes "
                    "(0: read exactly the pages touched)")
    ap.add_argument("--eio", action="append", default=[],
                    metavar="REL:OFFSET")
    ap.add_argument("--trace", help="append one line per operation here")
    args = ap.parse_args()

    delays = {}
    for op in ("getattr", "open", "read"):
        v = getattr(args, "%s_ms" % op)
        delays[op] = args.delay_ms if v is None else v
    eio = {}
    for spec in args.eio:
        rel, _, offset = spec.rpartition(":")
        eio["/" + rel.lstrip("/")] = int(offset)
    trace = open(args.trace, "a") if args.trace else None

    threading.Thread(target=watch_parent, args=(args.mountpoint,),
                     daemon=True).start()

    options = dict(
        foreground=True,
        ro=True,
        # porter's workers run as "nobody". No default_permissions: the
        # kernel would then re-stat every directory on every path walk (the
        # attributes never stay valid), slowing lookups beyond one delay.
        allow_other=True,
        fsname="slowfs",
        entry_timeout=0,
        attr_timeout=0,
        negative_timeout=0,
    )
    if not args.page_cache:
        options["direct_io"] = True
    if args.max_readahead is not None:
        options["max_readahead"] = args.max_readahead
    FUSE(SlowFS(args.backing, delays, eio, trace), args.mountpoint,
         **options)


if __name__ == "__main__":
    sys.exit(main())
