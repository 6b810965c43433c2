"""An HTTP/3 client written with aioquic (an independent QUIC and HTTP/3
implementation), for tests/http3_aioquic.rs: one connection to
127.0.0.1:PORT as "localhost" trusting CAFILE, the requests read from
stdin as JSON ([{method, path, headers, body}]) all sent at once, each on
its own stream; prints one JSON object per request: status, headers,
body length, body SHA-256 and, when short, the body itself."""

import asyncio
import hashlib
import json
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.open = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamReset) and event.stream_id in self.open:
            fut, _ = self.open.pop(event.stream_id)
            fut.set_exception(RuntimeError("stream reset"))
            return
        for ev in self.h3.handle_event(event):
            if ev.stream_id not in self.open:
                continue
            fut, resp = self.open[ev.stream_id]
            if isinstance(ev, HeadersReceived):
                resp["headers"] += [(k.decode(), v.decode()) for k, v in ev.headers]
            elif isinstance(ev, DataReceived):
                resp["body"] += ev.data
            if ev.stream_ended:
                del self.open[ev.stream_id]
                fut.set_result(resp)

    async def request(self, method, path, headers, body):
        sid = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
        ] + [(k.encode(), v.encode()) for k, v in headers]
        data = body.encode()
        self.h3.send_headers(sid, fields, end_stream=not data)
        if data:
            self.h3.send_data(sid, data, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self.open[sid] = (fut, {"headers": [], "body": b""})
        self.transmit()
        return await asyncio.wait_for(fut, 30)


async def main(port, cafile):
    reqs = json.load(sys.stdin)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.load_verify_locations(cafile)
    config.server_name = "localhost"
    async with connect("127.0.0.1", port, configuration=config, create_protocol=Client) as c:
        resps = await asyncio.gather(
            *[c.request(r["method"], r["path"], r.get("headers", []), r.get("body", "")) for r in reqs]
        )
    for r in resps:
        headers = [(k, v) for k, v in r["headers"] if not k.startswith(":")]
        status = int(dict(r["headers"])[":status"])
        body = r["body"]
        out = {
            "status": status,
            "headers": headers,
            "len": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
            "body": body.decode("latin-1") if len(body) <= 4096 else None,
        }
        print(json.dumps(out))


asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
