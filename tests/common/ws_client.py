"""A WebSocket client for tests/websocket.rs (Python `websockets`).

Usage: ws_client.py URL SCENARIO [CA]. Prints one "ok ..." line per check
passed and exits 0, or prints what failed and exits 1. With CA, a wss://
URL is verified against it.

Scenarios:
  frames   text and binary messages of 1 B to 1 MiB, echoed back intact
  ping     a ping is answered with its pong
  close    the close handshake completes with the code sent
  many N   N sockets open at once, each echoes a message, then all close
"""
import asyncio
import os
import ssl
import sys

import websockets

# A thousand sockets at once need more than a default 1024 descriptors.
import resource
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
_want = 8192 if _hard == resource.RLIM_INFINITY else min(_hard, 8192)
if _soft != resource.RLIM_INFINITY and _soft < _want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (_want, _hard))

SIZES = [1, 2, 125, 126, 127, 65535, 65536, 100000, 1 << 20]


def connect(url, ca):
    ctx = None
    if url.startswith("wss://"):
        ctx = ssl.create_default_context(cafile=ca)
    return websockets.connect(url, ssl=ctx, max_size=None, ping_interval=None,
                              compression=None, open_timeout=30, close_timeout=10)


async def frames(url, ca):
    async with connect(url, ca) as ws:
        for n in SIZES:
            data = os.urandom(n)
            await ws.send(data)
            got = await ws.recv()
            assert got == data, f"binary {n}: got {len(got)} bytes back"
            text = ("é" * n)[: max(1, n // 2)]
            await ws.send(text)
            got = await ws.recv()
            assert got == text, f"text {n}: differs"
        print("ok frames", flush=True)


async def ping(url, ca):
    async with connect(url, ca) as ws:
        for i in range(3):
            pong = await ws.ping(b"p%d" % i)
            await asyncio.wait_for(pong, 10)
        print("ok ping", flush=True)


async def close(url, ca):
    ws = await connect(url, ca)
    await ws.send("bye")
    assert await ws.recv() == "bye"
    await ws.close(code=4001, reason="done")
    assert ws.close_code == 4001, f"close code {ws.close_code}"
    print("ok close", ws.close_code, flush=True)


async def many(url, ca, n):
    async def one(i):
        ws = await connect(url, ca)
        return ws
    socks = await asyncio.gather(*(one(i) for i in range(n)))
    print("ok open", len(socks), flush=True)

    async def talk(i, ws):
        msg = f"m{i}"
        await ws.send(msg)
        assert await ws.recv() == msg
        await ws.close()
    await asyncio.gather(*(talk(i, ws) for i, ws in enumerate(socks)))
    print("ok many", n, flush=True)


async def main():
    url, scenario = sys.argv[1], sys.argv[2]
    ca = None
    if scenario == "many":
        n = int(sys.argv[3])
        ca = sys.argv[4] if len(sys.argv) > 4 else None
        await many(url, ca, n)
        return
    ca = sys.argv[3] if len(sys.argv) > 3 else None
    await {"frames": frames, "ping": ping, "close": close}[scenario](url, ca)


try:
    asyncio.run(main())
except Exception as e:  # the test prints it
    print("failed:", repr(e), flush=True)
    sys.exit(1)
