#!/usr/bin/env python3
"""Seeds fuzz/corpus/h3_request/ and fuzz/corpus/h3_frame_scan/.

Written by hand from RFC 9114 and RFC 9204 (no capture: the HTTP/3
clients at hand encrypt what they send): control streams with SETTINGS
(QPACK table settings, field-section size, GREASE), GOAWAY and reserved
frames; request streams with GET and POST, DATA, trailers, reserved
frames between them, Huffman-coded and literal fields, references to a
dynamic table, a frame cut short, a frame longer than its stream.
h3_request inputs start with the control stream's length byte.

usage: fuzz/h3_seeds.py   (from the repository root; rewrites its files)
"""

import hashlib
import os


def varint(v):
    if v < 1 << 6:
        return bytes([v])
    if v < 1 << 14:
        return (v | 0x4000).to_bytes(2, "big")
    if v < 1 << 30:
        return (v | 0x80000000).to_bytes(4, "big")
    return (v | 0xC000000000000000).to_bytes(8, "big")


def frame(ty, payload):
    return varint(ty) + varint(len(payload)) + payload


def pint(flags, bits, v):
    top = (1 << bits) - 1
    if v < top:
        return bytes([flags | v])
    out = [flags | top]
    v -= top
    while v >= 128:
        out.append(v % 128 | 0x80)
        v //= 128
    out.append(v)
    return bytes(out)


def lit(s):
    return pint(0, 7, len(s)) + s


def fields(method_idx=17, path=b"/index.html", extra=(), prefix=b"\x00\x00"):
    out = prefix + pint(0xC0, 6, method_idx) + pint(0xC0, 6, 23)
    out += pint(0x50, 4, 0) + lit(b"localhost") + pint(0x50, 4, 1) + lit(path)
    for name, value in extra:
        out += pint(0x20, 3, len(name)) + name + lit(value)
    return out


SETTINGS = 0x4
HEADERS, DATA, GOAWAY = 0x1, 0x0, 0x7

controls = {
    "empty_settings": frame(SETTINGS, b""),
    "settings": frame(SETTINGS, varint(0x1) + varint(4096) + varint(0x6) + varint(16384)
                      + varint(0x7) + varint(100) + varint(0x1F * 3 + 0x21) + varint(7)),
    "settings_goaway": frame(SETTINGS, b"") + frame(GOAWAY, varint(0)),
    "settings_reserved": frame(SETTINGS, b"") + frame(0x21, b"grease"),
    "reserved_first": frame(0x21, b"x") + frame(SETTINGS, b""),
    "two_settings": frame(SETTINGS, b"") + frame(SETTINGS, b""),
}

get = frame(HEADERS, fields())
requests = {
    "get": get,
    "get_huffman_path": frame(HEADERS, b"\x00\x00\xd1\xd7\x50" + lit(b"localhost")
                              + b"\x51\x86\x62\x4f\x55\x3d\x7f\x3f"),
    "get_headers": frame(HEADERS, fields(extra=[(b"user-agent", b"seed/1"),
                                                (b"accept-encoding", b"gzip"),
                                                (b"cookie", b"a=1"), (b"cookie", b"b=2")])),
    "post_body_trailers": frame(HEADERS, fields(method_idx=20, path=b"/upload",
                                                extra=[(b"content-length", b"5")]))
    + frame(DATA, b"hel") + frame(0x21, b"") + frame(DATA, b"lo")
    + frame(HEADERS, b"\x00\x00" + pint(0x20, 3, 7) + b"x-trail" + lit(b"1")),
    "reserved_before_headers": frame(0x21, b"abc") + get,
    "data_first": frame(DATA, b"x") + get,
    "dynamic_ref": frame(HEADERS, fields() + b"\x80"),
    "insert_count": frame(HEADERS, fields(prefix=b"\x02\x00")),
    "cut_short": get[:-3],
    "long_headers": varint(HEADERS) + varint(1 << 30) + b"\x00" * 64,
    "connect": frame(HEADERS, b"\x00\x00" + pint(0xC0, 6, 15) + pint(0x50, 4, 0) + lit(b"a:1")),
    "uppercase_name": frame(HEADERS, fields(extra=[(b"X-Upper", b"v")])),
    "push_promise": get + frame(0x5, varint(0) + b"\x00\x00"),
}


def write(target, name, data):
    d = os.path.join("fuzz/corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


for cname, c in controls.items():
    for rname, r in requests.items():
        if cname != "settings" and rname not in ("get", "post_body_trailers"):
            continue
        write("h3_request", f"{cname}-{rname}", bytes([len(c)]) + c + r)
for name, data in list(requests.items()) + list(controls.items()):
    # The first byte is the length limit in units of 64 bytes.
    write("h3_frame_scan", name, b"\x01" + data)
    write("h3_frame_scan", name + "-unlimited", b"\xff" + data)
print(hashlib.sha256(b"".join(requests.values())).hexdigest()[:12])
