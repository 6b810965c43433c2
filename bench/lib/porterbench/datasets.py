"""Deterministic datasets. Each lives in its own directory under the data
dir with a .stamp holding the parameters it was made with; a directory whose
stamp differs is made again, so a run never uses data of another shape.

Layout (the servers' root is the data dir, URIs are the paths below it):
  ready.txt                          readiness probe
  s1/files/00000.bin ...             S1 cold files (s1_size bytes each)
  s1/hot.bin                         S1 hot file (same size, not in the cold list)
  s1/list.txt                        URIs of the cold files
  s2/tree/c/ab/<md5>                 S2 small files, NGINX proxy-cache levels=1:2
  s2/list.txt                        URIs of the cold files
  s2/hot.txt                         URI of the hot file (in the tree, not in the list)
  s3/1k.bin s3/64k.bin s3/100m.bin   S3 files (sizes are parameters)
  s4/hit/1k.bin s4/hit/64k.bin       S4 objects for the HIT loads (the origin serves them)
  s4/miss/00000.bin ...              S4 objects each requested once (MISS latency)
  (S4's large-object phase uses the S1 files through the proxy)
"""

import hashlib
import json
import math
import os
import random
import shutil

from .common import log, write_file

GEN_VERSION = 1
_BLOCK = None


def _block():
    """8 MiB of seeded pseudo-random bytes; files are slices of it."""
    global _BLOCK
    if _BLOCK is None:
        _BLOCK = random.Random(20150619).randbytes(8 << 20)
    return _BLOCK


def _write(path, size, salt):
    blk = _block()
    off = (salt * 4099 * 64) % (1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(blk) - off)
            f.write(memoryview(blk)[off:off + n])
            left -= n
            off = 0


def _stamped(d, params):
    want = dict(params, gen_version=GEN_VERSION)
    try:
        with open(os.path.join(d, ".stamp")) as f:
            if json.load(f) == want:
                return True
    except (OSError, ValueError):
        pass
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return False


def _stamp(d, params):
    with open(os.path.join(d, ".stamp"), "w") as f:
        json.dump(dict(params, gen_version=GEN_VERSION), f)


def ensure_root(data_dir):
    os.makedirs(data_dir, exist_ok=True)
    os.chmod(data_dir, 0o755)
    write_file(os.path.join(data_dir, "ready.txt"), "ok\n")


def set_owner(data_dir, owner):
    """Every file and directory of the datasets belongs to `owner` (a user
    name), or to root when it is empty. Ownership matters to porter only:
    Linux (6.14+) answers `cachestat()` for a file only to its owner or to
    whoever may write it, so with root's files and workers running as
    nobody, porter's fast path falls back to copying (preadv2 + send)."""
    import pwd
    if owner:
        pw = pwd.getpwnam(owner)
        uid, gid = pw.pw_uid, pw.pw_gid
    else:
        uid, gid = 0, 0
    for root, dirs, files in os.walk(data_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if (st.st_uid, st.st_gid) != (uid, gid):
                os.lchown(path, uid, gid)


def s1(data_dir, files, size):
    d = os.path.join(data_dir, "s1")
    params = {"files": files, "size": size}
    if not _stamped(d, params):
        log(f"generating S1 dataset: {files} files of {size >> 20} MiB in {d}")
        os.makedirs(os.path.join(d, "files"))
        uris = []
        for i in range(files):
            name = f"{i:05d}.bin"
            _write(os.path.join(d, "files", name), size, i)
            uris.append(f"/s1/files/{name}")
        _write(os.path.join(d, "hot.bin"), size, 999_983)
        with open(os.path.join(d, "list.txt"), "w") as f:
            f.write("\n".join(uris) + "\n")
        _stamp(d, params)
    return {
        "dir": d,
        "list": os.path.join(d, "list.txt"),
        "hot_uri": "/s1/hot.bin",
        "hot_path": os.path.join(d, "hot.bin"),
        "bytes": (files + 1) * size,
        "files": files,
    }


def _s2_size(rng, small_frac, small_max, large_max):
    """90 % (small_frac) log-uniform in 1 KiB–small_max, the rest up to large_max."""
    if rng.random() < small_frac:
        lo, hi = 1024, small_max
    else:
        lo, hi = small_max, large_max
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def levels_path(key):
    """Where NGINX's proxy cache keeps `key` with levels=1:2: md5 hex h as
    h[-1]/h[-3:-1]/h (S2's tree uses the same layout)."""
    h = hashlib.md5(key.encode()).hexdigest()
    return f"{h[-1]}/{h[-3:-1]}/{h}"


def s2(data_dir, files, small_frac, small_max, large_max, hot_size):
    d = os.path.join(data_dir, "s2")
    params = {"files": files, "small_frac": small_frac, "small_max": small_max,
              "large_max": large_max, "hot_size": hot_size}
    hot_rel = levels_path("hot")
    if not _stamped(d, params):
        log(f"generating S2 dataset: {files} small files in a levels=1:2 tree in {d}")
        rng = random.Random(2018)
        tree = os.path.join(d, "tree")
        uris = []
        total = 0
        made = set()
        for i in range(files):
            rel = levels_path(f"file-{i}")
            sub = os.path.dirname(rel)
            if sub not in made:
                os.makedirs(os.path.join(tree, sub), exist_ok=True)
                made.add(sub)
            size = _s2_size(rng, small_frac, small_max, large_max)
            total += size
            _write(os.path.join(tree, rel), size, i)
            uris.append(f"/s2/tree/{rel}")
        os.makedirs(os.path.join(tree, os.path.dirname(hot_rel)), exist_ok=True)
        _write(os.path.join(tree, hot_rel), hot_size, 424242)
        with open(os.path.join(d, "list.txt"), "w") as f:
            f.write("\n".join(uris) + "\n")
        write_file(os.path.join(d, "bytes.txt"), total)
        _stamp(d, params)
    sizes = int(open(os.path.join(d, "bytes.txt")).read())
    return {
        "dir": d,
        "list": os.path.join(d, "list.txt"),
        "hot_uri": f"/s2/tree/{hot_rel}",
        "hot_path": os.path.join(d, "tree", hot_rel),
        "bytes": sizes + hot_size,
        "files": files,
    }


def s3(data_dir, sizes):
    """sizes: dict name -> bytes, e.g. {"1k": 1024, ...}."""
    d = os.path.join(data_dir, "s3")
    params = {"sizes": sizes}
    if not _stamped(d, params):
        log(f"generating S3 dataset in {d}: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
        for i, (name, size) in enumerate(sizes.items()):
            _write(os.path.join(d, f"{name}.bin"), size, 7 + i)
        _stamp(d, params)
    return {name: {"uri": f"/s3/{name}.bin", "path": os.path.join(d, f"{name}.bin"), "size": size}
            for name, size in sizes.items()}


def s4(data_dir, sizes, miss_count, miss_size):
    """sizes: dict name -> bytes for the HIT objects; miss_count objects of
    miss_size bytes, each requested once through the proxy."""
    d = os.path.join(data_dir, "s4")
    params = {"sizes": sizes, "miss_count": miss_count, "miss_size": miss_size}
    if not _stamped(d, params):
        log(f"generating S4 dataset in {d}: " + ", ".join(f"{k}={v}" for k, v in sizes.items())
            + f", {miss_count} MISS objects of {miss_size} bytes")
        os.makedirs(os.path.join(d, "hit"))
        os.makedirs(os.path.join(d, "miss"))
        for i, (name, size) in enumerate(sizes.items()):
            _write(os.path.join(d, "hit", f"{name}.bin"), size, 31 + i)
        for i in range(miss_count):
            _write(os.path.join(d, "miss", f"{i:05d}.bin"), miss_size, 5000 + i)
        _stamp(d, params)
    return {
        "hit": {name: {"uri": f"/s4/hit/{name}.bin", "path": os.path.join(d, "hit", f"{name}.bin"),
                       "size": size} for name, size in sizes.items()},
        "miss_uris": [f"/s4/miss/{i:05d}.bin" for i in range(miss_count)],
        "miss_paths": [os.path.join(d, "miss", f"{i:05d}.bin") for i in range(miss_count)],
        "miss_size": miss_size,
    }
