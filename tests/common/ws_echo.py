"""A WebSocket echo server for tests/websocket.rs (Python `websockets`).

Usage: ws_echo.py PORT [CERT KEY]. Echoes every message, text or binary,
as it came; answers pings (the library does); closes when the client
closes. Prints "ready" once it listens. With CERT and KEY it speaks TLS
(wss), for `proxy_pass https://`.
"""
import asyncio
import ssl
import sys

import websockets

# A thousand sockets at once need more than a default 1024 descriptors.
import resource
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
_want = 8192 if _hard == resource.RLIM_INFINITY else min(_hard, 8192)
if _soft != resource.RLIM_INFINITY and _soft < _want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (_want, _hard))


async def echo(ws, path=None):
    try:
        async for msg in ws:
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass


async def main():
    port = int(sys.argv[1])
    ctx = None
    if len(sys.argv) > 3:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
    async with websockets.serve(echo, "127.0.0.1", port, ssl=ctx,
                                max_size=None, ping_interval=None,
                                compression=None, backlog=2048):
        print("ready", flush=True)
        await asyncio.Future()


asyncio.run(main())
