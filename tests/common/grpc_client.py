"""A gRPC client for tests/grpc.rs (generic stubs, raw bytes).

    grpc_client.py HOST:PORT CALL [ARGS...] [--tls CA NAME] [--timeout S]
        [--md KEY=VALUE]...

Prints "code CODE", "details TEXT", "result R", then "trailer K V" and
"initial K V" lines (sorted; `server`, `date` left out), one a line. CALLs:
  unary SIZE              a message of SIZE bytes, echoed; result: equal
  server N SIZE           N messages of SIZE bytes; result: [count, bytes, ok]
  client N SIZE           sends N messages; result: the server's total
  bidi N SIZE             N round trips, one at a time; result: count echoed
  stall N SIZE SECONDS    starts a server stream, reads one message, then
                          sleeps without reading; result: messages read
"""
import json
import sys
import time

import grpc

ident = lambda b: b


def payload(size, seed=0):
    return bytes((i + seed) % 251 for i in range(size))


def main():
    args = sys.argv[1:]
    target, call = args[0], args[1]
    rest = args[2:]
    tls = None
    timeout = 20.0
    md = []
    pos = []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--tls":
            tls = (rest[i + 1], rest[i + 2])
            i += 3
        elif a == "--timeout":
            timeout = float(rest[i + 1])
            i += 2
        elif a == "--md":
            k, v = rest[i + 1].split("=", 1)
            md.append((k, v))
            i += 2
        else:
            pos.append(a)
            i += 1
    opts = [
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.max_send_message_length", 64 << 20),
    ]
    if tls:
        ca = open(tls[0], "rb").read()
        opts.append(("grpc.ssl_target_name_override", tls[1]))
        ch = grpc.secure_channel(target, grpc.ssl_channel_credentials(ca), options=opts)
    else:
        ch = grpc.insecure_channel(target, options=opts)
    out = {"code": "OK", "details": "", "trailers": {}, "initial": {}, "result": None}
    try:
        if call == "unary":
            req = payload(int(pos[0]))
            f = ch.unary_unary("/test.T/Unary", ident, ident)
            resp, c = f.with_call(req, timeout=timeout, metadata=md)
            out["result"] = resp == req
            fill(out, c)
        elif call == "server":
            n, size = int(pos[0]), int(pos[1])
            f = ch.unary_stream("/test.T/ServerStream", ident, ident)
            it = f(f"{n} {size}".encode(), timeout=timeout, metadata=md)
            want = payload(size)
            count = total = 0
            ok = True
            for m in it:
                count += 1
                total += len(m)
                ok = ok and m == want
            out["result"] = [count, total, ok]
            fill(out, it)
        elif call == "client":
            n, size = int(pos[0]), int(pos[1])
            f = ch.stream_unary("/test.T/ClientStream", ident, ident)
            resp, c = f.with_call((payload(size, k) for k in range(n)), timeout=timeout, metadata=md)
            out["result"] = int(resp.decode())
            fill(out, c)
        elif call == "bidi":
            n, size = int(pos[0]), int(pos[1])
            f = ch.stream_stream("/test.T/Bidi", ident, ident)
            import queue
            q = queue.Queue()

            def gen():
                for k in range(n):
                    m = payload(size, k)
                    yield m
                    q.get()  # the echo arrived: one at a time

            it = f(gen(), timeout=timeout, metadata=md)
            count = 0
            ok = True
            for m in it:
                ok = ok and m == payload(size, count)
                count += 1
                q.put(1)
            out["result"] = [count, ok]
            fill(out, it)
        elif call == "stall":
            n, size, secs = int(pos[0]), int(pos[1]), float(pos[2])
            f = ch.unary_stream("/test.T/ServerStream", ident, ident)
            it = f(f"{n} {size}".encode(), timeout=timeout, metadata=md)
            next(it)
            print("stalled", flush=True)
            time.sleep(secs)
            it.cancel()
            out["result"] = 1
        else:
            raise SystemExit("unknown call " + call)
    except grpc.RpcError as e:
        out["code"] = e.code().name
        out["details"] = e.details()
        try:
            out["trailers"] = dict(e.trailing_metadata() or ())
            out["initial"] = dict(e.initial_metadata() or ())
        except Exception:
            pass
    print("code", out["code"])
    print("details", out["details"])
    print("result", json.dumps(out["result"]))
    for kind in ("trailers", "initial"):
        for k, v in sorted(out[kind].items()):
            if k not in ("server", "date"):
                print(kind[:-1] if kind == "trailers" else kind, k, v)
    sys.stdout.flush()


def fill(out, c):
    out["trailers"] = dict(c.trailing_metadata() or ())
    out["initial"] = dict(c.initial_metadata() or ())


if __name__ == "__main__":
    main()
