"""WebSocket load client for bench/ws/run: opens N sockets through a
proxy, then sends M echo round trips spread over them (one at a time per
socket, all sockets at once), and prints the p50/p99 round trip in ms.
Bounded: every step has a timeout. Usage: client.py PORT N M HOLD_FILE
(HOLD_FILE is created once all N are open, and the client waits until it
is removed, so the runner can read the server's memory meanwhile)."""
import asyncio
import os
import resource
import sys
import time

import websockets

resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))


async def main():
    port, n, m, hold = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    url = f"ws://127.0.0.1:{port}/ws"
    socks = []
    for i in range(0, n, 100):
        batch = [websockets.connect(url, max_size=None, ping_interval=None,
                                    compression=None, open_timeout=20)
                 for _ in range(min(100, n - i))]
        socks += await asyncio.wait_for(asyncio.gather(*batch), 60)
    open(hold, "w").close()
    while os.path.exists(hold):
        await asyncio.sleep(0.1)
    times = []
    msg = b"x" * 64

    async def one(ws, k):
        for _ in range(k):
            t = time.perf_counter()
            await ws.send(msg)
            got = await ws.recv()
            times.append((time.perf_counter() - t) * 1000)
            assert got == msg

    per = max(1, m // n)
    await asyncio.wait_for(asyncio.gather(*(one(ws, per) for ws in socks)), 120)
    times.sort()
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"open={len(socks)} round_trips={len(times)} p50_ms={p(0.5):.2f} p99_ms={p(0.99):.2f}")
    await asyncio.wait_for(asyncio.gather(*(ws.close() for ws in socks)), 60)


asyncio.run(main())
