"""A gRPC server for tests/grpc.rs, without generated code: generic
handlers with raw-bytes (de)serializers, so no protoc is needed.

    grpc_server.py ADDR [--tls CERT KEY [CLIENT_CA]]

ADDR is host:port or unix:/path. Prints "ready" once serving. Methods of
service test.T:
  Unary         echoes the request; metadata "x-fail: CODE" aborts with
                that status and a grpc-message; "x-sleep: S" sleeps first.
                Trailers carry "x-trailer: unary" and "x-len: N".
  ServerStream  request "N SIZE": N messages of SIZE bytes (byte i%251);
                metadata "x-progress: FILE" keeps the count sent so far there.
  ClientStream  answers the total length of the messages received, as text.
  Bidi          echoes each message as it comes.
"""
import sys
import time
from concurrent import futures

import grpc

ident = lambda b: b


def unary(request, context):
    md = dict(context.invocation_metadata())
    if "x-sleep" in md:
        time.sleep(float(md["x-sleep"]))
    context.set_trailing_metadata((("x-trailer", "unary"), ("x-len", str(len(request)))))
    if "x-fail" in md:
        context.abort(grpc.StatusCode(_code(int(md["x-fail"]))), "failed on purpose")
    return request


def _code(n):
    for c in grpc.StatusCode:
        if c.value[0] == n:
            return c.value
    raise ValueError(n)


def server_stream(request, context):
    n, size = (int(x) for x in request.decode().split())
    chunk = bytes(i % 251 for i in range(size))
    progress = dict(context.invocation_metadata()).get("x-progress")
    for k in range(n):
        yield chunk
        if progress:
            with open(progress, "w") as f:
                f.write(str(k + 1))
    context.set_trailing_metadata((("x-trailer", "stream"),))


def client_stream(request_iterator, context):
    total = 0
    count = 0
    for m in request_iterator:
        total += len(m)
        count += 1
    context.set_trailing_metadata((("x-count", str(count)),))
    return str(total).encode()


def bidi(request_iterator, context):
    for m in request_iterator:
        yield m


def main():
    addr = sys.argv[1]
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, ident, ident),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, ident, ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, ident, ident),
    }
    opts = [
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.max_send_message_length", 64 << 20),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=opts)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.T", handlers),))
    if len(sys.argv) > 2 and sys.argv[2] == "--tls":
        cert = open(sys.argv[3], "rb").read()
        key = open(sys.argv[4], "rb").read()
        # With CLIENT_CA, a client certificate signed by it is required.
        ca = open(sys.argv[5], "rb").read() if len(sys.argv) > 5 else None
        creds = grpc.ssl_server_credentials(
            ((key, cert),), root_certificates=ca, require_client_auth=ca is not None
        )
        server.add_secure_port(addr, creds)
    else:
        server.add_insecure_port(addr)
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
