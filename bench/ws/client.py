"""WebSocket load client for bench/ws/run: opens N sockets through a
proxy, then sends M echo round trips of 64 B spread over them (one at a
time per socket, all sockets at once), then L round trips of 64 KiB
spread over the first 100 sockets (one at a time per socket), and prints
p50/p99/max round trip in ms for each size. Bounded: every step has a
timeout, and the client stops by itself. Usage: client.py PORT N M
HOLD_FILE [L] (HOLD_FILE is created once all N are open, and the client
waits until it is removed, so the runner can read the server's memory
meanwhile)."""
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
    large = int(sys.argv[5]) if len(sys.argv) > 5 else 2000

    async def one(ws, k, msg, times):
        for _ in range(k):
            t = time.perf_counter()
            await ws.send(msg)
            got = await ws.recv()
            times.append((time.perf_counter() - t) * 1000)
            assert got == msg

    def summary(name, times):
        times.sort()
        p = lambda q: times[min(len(times) - 1, int(q * len(times)))]
        return (f"{name}_round_trips={len(times)} {name}_p50_ms={p(0.5):.2f} "
                f"{name}_p99_ms={p(0.99):.2f} {name}_max_ms={times[-1]:.2f}")

    small = []
    per = max(1, m // n)
    await asyncio.wait_for(asyncio.gather(*(one(ws, per, b"x" * 64, small) for ws in socks)), 120)
    big = []
    some = socks[:100]
    per = max(1, large // len(some))
    await asyncio.wait_for(
        asyncio.gather(*(one(ws, per, b"y" * 65536, big) for ws in some)), 120)
    print(f"open={len(socks)} {summary('small', small)} {summary('64k', big)}")
    await asyncio.wait_for(asyncio.gather(*(ws.close() for ws in socks)), 60)


asyncio.run(main())
